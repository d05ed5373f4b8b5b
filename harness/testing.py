"""Judging inside a test suite: :func:`judge` and :func:`assert_judged`, through the harness's cache.

A test hands transcripts (a dict, a list of dicts or :class:`~harness.Transcript` s, a path) and a
rubric; they are judged by one judge exactly as ``harness run`` would judge them (the same plan,
prompts, cache keys and cache), so a rerun of an unchanged test is answered by the cache and costs
nothing, and with ``offline`` nothing is sent at all (what is not in the cache is unscored with
``cache_miss``, and the assertion says so). Two processes judging the same transcript at once (pytest
-n) pay for it once: the second waits on the first's claim in the cache and reads its judgment.

:class:`Judged` is the outcome, one :class:`Verdict` per transcript with the judge's reply;
``assert_judged`` raises :class:`JudgedBelow` (an ``AssertionError``) naming every transcript that
missed the bar, with its score and the judge's words. ``harness.pytest_plugin`` supplies the
settings (``--harness-config``, ``--harness-offline``, ``--harness-cache``), the fixtures and the
comparison ``assert judged >= 0.7``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import HarnessError, UserInputError
from .rows import iter_judgment_rows, judgments_path

if TYPE_CHECKING:  # the config is read when a test judges, not when pytest loads the plugin
    from .config import JudgeConfig

__all__ = ["JudgedBelow", "Judged", "Settings", "Verdict", "assert_judged", "configure", "judge", "settings"]

#: Where a setting comes from when no plugin or caller gave it.
ENV_CONFIG = "HARNESS_CONFIG"
ENV_OFFLINE = "HARNESS_OFFLINE"
ENV_CACHE = "HARNESS_CACHE"
#: A judge's reply is quoted up to this many characters in a failure.
REPLY_CHARS = 400


@dataclass(frozen=True, slots=True)
class Settings:
    """Where judgments come from: the config (its judges and cache), the cache, and offline."""

    config: Path | None = None
    cache: str | Path | None = None
    offline: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        config = env.get(ENV_CONFIG) or None
        if config is None and Path("harness.toml").is_file():
            config = "harness.toml"
        return cls(Path(config) if config else None, env.get(ENV_CACHE) or None, env.get(ENV_OFFLINE, "").lower() in ("1", "true", "yes"))


_settings: Settings | None = None


def configure(value: Settings | None) -> None:
    """Set the settings :func:`judge` uses by default (the pytest plugin does, at start); None: from the environment."""
    global _settings
    _settings = value


def settings() -> Settings:
    return _settings if _settings is not None else Settings.from_env()


@dataclass(frozen=True, slots=True)
class Verdict:
    """One transcript's judgment: ``status`` scored / unscored / failed, the score, and the judge's reply."""

    transcript_id: str
    status: str
    score: float | None
    reason: str | None
    reply: str | None
    cached: bool

    def meets(self, at_least: float | None, at_most: float | None) -> bool:
        if self.status != "scored" or self.score is None:
            return False
        return (at_least is None or self.score >= at_least) and (at_most is None or self.score <= at_most)


@dataclass(frozen=True, slots=True)
class Judged:
    """What :func:`judge` found: a verdict per transcript, in order. ``judged >= 0.7`` is true when
    every transcript scored at least 0.7 (``<=`` at most); unscored and failed ones never pass."""

    rubric: str
    judge: str
    model: str | None
    offline: bool
    verdicts: tuple[Verdict, ...] = field(default=())

    @property
    def scores(self) -> dict[str, float | None]:
        return {v.transcript_id: v.score for v in self.verdicts}

    @property
    def cached(self) -> int:
        """Verdicts the cache answered (nothing was paid for them)."""
        return sum(v.cached for v in self.verdicts)

    def missed(self, at_least: float | None = None, at_most: float | None = None) -> list[Verdict]:
        return [v for v in self.verdicts if not v.meets(at_least, at_most)]

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, int | float):
            return NotImplemented
        return not self.missed(at_least=float(other))

    def __le__(self, other: object) -> bool:
        if not isinstance(other, int | float):
            return NotImplemented
        return not self.missed(at_most=float(other))

    def explain(self, at_least: float | None = None, at_most: float | None = None) -> list[str]:
        """The lines of a failure: the bar, each transcript that missed it with its score and the
        judge's words (one line each, misses first: pytest shows a comparison's first lines), then
        the others with their scores."""
        bar = " and ".join(t for t in (f">= {at_least:g}" if at_least is not None else "", f"<= {at_most:g}" if at_most is not None else "") if t)
        missed = self.missed(at_least, at_most)
        model = f", model {self.model}" if self.model else ""
        lines = [f"{len(missed)} of {len(self.verdicts)} transcript(s) missed {self.rubric} {bar} (judge {self.judge}{model})"]
        for v in missed:
            if v.reason == "cache_miss":
                lines.append(f"MISS {v.transcript_id}: not in the cache, and judging is offline (--harness-offline): run this test once online")
                continue
            shown = f"{v.score:g}" if v.score is not None else f"{v.status} ({v.reason or 'unknown'})"
            said = ""
            if v.reply:
                text = " ".join(v.reply.split())
                said = f"; judge said: {text[:REPLY_CHARS]}{'…' if len(text) > REPLY_CHARS else ''}"
            lines.append(f"MISS {v.transcript_id}: {shown}{said}")
        passed = [v for v in self.verdicts if v not in missed]
        if passed:
            lines.append("ok: " + ", ".join(f"{v.transcript_id} {v.score:g}" for v in passed if v.score is not None))
        return lines


class JudgedBelow(AssertionError):
    """A transcript missed the bar of :func:`assert_judged`; the message lists every transcript,
    its score, and for those that missed, the judge's reply."""

    def __init__(self, judged: Judged, at_least: float | None, at_most: float | None) -> None:
        self.judged, self.at_least, self.at_most = judged, at_least, at_most
        super().__init__("\n".join(judged.explain(at_least, at_most)))


def _run_sync(make: Any) -> Any:
    """Run the coroutine ``make()`` to completion, also from inside a running event loop (an async test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="harness-judge")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _judge_name(given: str | JudgeConfig | Mapping[str, Any] | None, config: Path | None) -> tuple[str, list[Any]]:
    """The judge's name and the judges to add to the config's (a judge given as a table)."""
    from .config import JudgeConfig, load_config

    if isinstance(given, JudgeConfig | Mapping):
        table = given if isinstance(given, JudgeConfig) else dict(given)
        name = table.name if isinstance(table, JudgeConfig) else str(table.get("name", ""))
        if not name:
            raise UserInputError("judge=: a judge given as a table needs its name")
        return name, [table]
    if given is not None:
        return given, []
    judges = load_config(config).judges if config is not None else []
    if not judges:
        where = f"{config} has no [[judges]]" if config is not None else "no harness.toml (--harness-config, $HARNESS_CONFIG)"
        raise UserInputError(f"no judge to ask: {where}; name one with judge=")
    return judges[0].name, []


def judge(
    transcripts: Any,
    *,
    rubric: str,
    judge: str | JudgeConfig | Mapping[str, Any] | None = None,
    prompts: Sequence[str | Path] = (),
    using: Settings | None = None,
) -> Judged:
    """Judge ``transcripts`` on ``rubric`` by one judge (a name in the config, a judge table, or
    the config's first judge), through the cache; ``using`` overrides the settings."""
    return _judged(transcripts, rubric, judge, prompts, using)


def _judged(
    transcripts: Any, rubric: str, given: str | JudgeConfig | Mapping[str, Any] | None, prompts: Sequence[str | Path], using: Settings | None
) -> Judged:
    from .notebook import _input_path
    from .planning import RunOptions
    from .runner import RunOutcome, run_evaluation

    s = using or settings()
    name, extra = _judge_name(given, s.config)
    folder = Path(tempfile.mkdtemp(prefix="harness-test-"))
    try:
        try:
            source = _input_path(transcripts, folder)
        except HarnessError as exc:
            raise UserInputError(f"transcripts: {exc}") from None
        options = RunOptions(
            input=source,
            out=folder / "run",
            config=s.config,
            rubrics=[rubric],
            prompts=[Path(p) for p in prompts],
            judges=extra,
            judges_only=[name],
            cache=s.cache,
            offline=s.offline,
            progress=False,
        )
        outcome: RunOutcome = _run_sync(lambda: run_evaluation(options))
        rows = list(iter_judgment_rows(judgments_path(folder / "run")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    recorded = outcome.summary.judge_models.get(name)
    verdicts = tuple(
        Verdict(r.transcript_id, r.status, r.score, r.reason, r.raw_output or r.error, r.cached)
        for r in rows
        if r.rubric == rubric and r.judge == name
    )
    return Judged(rubric, name, recorded.model if recorded is not None else None, s.offline, verdicts)


def assert_judged(
    transcripts: Any,
    *,
    rubric: str,
    at_least: float | None = None,
    at_most: float | None = None,
    judge: str | JudgeConfig | Mapping[str, Any] | None = None,
    prompts: Sequence[str | Path] = (),
    using: Settings | None = None,
) -> Judged:
    """Judge ``transcripts`` and raise :class:`JudgedBelow` unless every one scored at least
    ``at_least`` (at most ``at_most``; give one or both). Returns the :class:`Judged`."""
    __tracebackhide__ = True  # pytest shows the failure at the test's line
    if at_least is None and at_most is None:
        raise UserInputError("assert_judged: give at_least=X or at_most=X")
    found = _judged(transcripts, rubric, judge, prompts, using)
    if found.missed(at_least, at_most):
        raise JudgedBelow(found, at_least, at_most)
    return found
