"""From a config file and command-line options to a checked :class:`RunPlan`: the one "plan" of a run.

Everything a user can get wrong is checked here, before a transcript is read or a judge called:
the config, the rubrics asked for, judges' API-key variables, and option combinations.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import ValidationError

from ..agent.specs import BOUNDED, TrajectorySettings
from ..agent.specs import SPECS as AGENT_METRICS
from ..cache.base import DEFAULT_LEASE_S
from ..cache.location import CacheLocation, is_postgres_url, parse_location
from ..config import DEFAULT_CACHE, HarnessConfig, JudgeConfig, JuryConfig, check_key, check_weights, load_config, local_judge_config
from ..cost.prices import PriceTable, load_price_table, with_batch_prices, with_prices
from ..errors import ConfigError, UserInputError
from ..rubrics.logprob_score import integer_scale
from ..rubrics.rubric import Rubric, find_rubric, load_rubrics, with_layout
from ..validation import first_problem
from .options import JudgeOptions
from .shard import Shard, parse_shard
from .turns import TurnOptions, parse_turns

if TYPE_CHECKING:
    from ..traces.loader import ScanResult
    from ..traces.sessions import Sessions

CacheMode = Literal["read-write", "refresh", "off", "offline"]


@dataclass(kw_only=True, slots=True)
class RunOptions(JudgeOptions):
    """What ``harness run`` takes: the judge options (:class:`JudgeOptions`), and what to judge and
    how; every field has the CLI's default."""

    input: Path
    out: Path | None = None
    rubrics: list[str] = field(default_factory=list)
    #: ignore cache hits and overwrite them
    refresh: bool = False
    limit: int | None = None
    on_bad_record: Literal["fail", "skip"] = "fail"
    progress: bool = True
    max_cost: float | None = None
    #: input format: auto (by content), jsonl, or a trace format (harness.traces)
    format: str = "auto"
    #: "on": a trace file's sessions are read as conversations; "off": one transcript per trace
    #: (``traces.sessions``)
    sessions: str = "on"
    #: priced at the providers' batch rates (``harness batch``, ``estimate --batch``)
    batch: bool = False
    #: "i/n": judge only the i-th of n deterministic slices of the transcripts (see ``planning.shard``)
    shard: str | None = None
    #: judges given in code (``harness.evaluate(judges=...)``): config entries as dicts or JudgeConfig,
    #: validated as the config file's are and added after them
    judges: list[Any] = field(default_factory=list)
    #: run only the judges (or juries, with their members) of these names (a cascade's stage); empty: every judge
    judges_only: list[str] = field(default_factory=list)
    #: human labels for every jury of the config (``--jury-labels``): over each jury's ``labels``
    jury_labels: Path | None = None
    #: judge no rubric: only the deterministic agent metrics are computed (``harness race`` on an
    #: agent metric). No judge is made, keyed or asked and no cache is opened: nothing is sent, it
    #: costs nothing, and offline is the same run.
    agent_only: bool = False
    #: overrides the config's ``injection`` (``harness injection probe`` judges attacks as they are)
    injection: Literal["off", "flag", "unscored", "fail"] | None = None
    #: judge each turn of a conversation on its own (``planning.turns``): "all", "last" or turn
    #: numbers such as "1,3"; None: each transcript judged whole (first question, last answer)
    turns: str | None = None
    #: how a conversation's score is made of its turns' (``turns.AGGREGATES``)
    turn_aggregate: str = "mean"
    #: the history window: turns kept whole and its budget in tokens (None: the defaults)
    history_turns: int | None = None
    history_tokens: int | None = None
    #: pass-share: the normalised score a turn needs to pass
    pass_threshold: float = 0.5


@dataclass(slots=True)
class RunPlan:
    input: Path
    out: Path | None
    judges: list[JudgeConfig]
    rubrics: list[Rubric] | None  # None: every rubric the transcripts can feed (decided after the scan)
    available_rubrics: dict[str, Rubric]
    composites: dict[str, dict[str, float]]
    #: a SQLite file path or a PostgreSQL URL (``cache.location``)
    cache_path: CacheLocation | None
    cache_mode: CacheMode
    limit: int | None
    on_bad_record: Literal["fail", "skip"]
    max_cost: float | None = None
    format: str = "auto"
    cache_lease_s: float = DEFAULT_LEASE_S
    shard: Shard | None = None
    #: the user's price table (config ``price_table``), for the staleness warnings (``cost/staleness.py``)
    price_table: PriceTable | None = None
    #: how steps are matched with a reference trajectory (config ``[trajectory]``)
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    #: panels of ``judges`` that are judges of their own (``[[juries]]``; harness/jury)
    juries: list[JuryConfig] = field(default_factory=list)
    #: where the config came from, for messages ("harness.toml", "command line")
    source: str = "command line"
    #: the config's ``rubric_layout``: "data" puts the built-in rubrics in the data layout
    rubric_layout: Literal["inline", "data"] = "data"
    #: the config's ``injection``: what a transcript with judge-directed text does (harness/injection)
    injection: Literal["off", "flag", "unscored", "fail"] = "off"
    #: judged per turn (``--turns``; ``planning.turns``); None: each transcript judged whole
    turns: TurnOptions | None = None
    #: judges nothing (``RunOptions.agent_only``): no judge, no rubric, no cache
    agent_only: bool = False
    #: a trace file's sessions read as conversations (``traces.sessions``), or one transcript per trace
    sessions: Sessions = "on"

    def scan(self, *, detect: bool = False) -> tuple[ScanResult, list[Rubric], frozenset[str]]:
        """Validate the input before any judge is called and choose the rubrics: the scan, the
        rubrics, and the inputs every record must supply because a chosen rubric reads them (a
        ``response``, ``traces.loader.REQUIRED_WHEN_READ``; the judging pass reads with it).
        ``detect``: scan the judged inputs for judge-directed text too (``injection.detect``)."""
        from ..traces.loader import required_inputs, scan, scan_required

        scanned = scan(self.input, self.on_bad_record, self.limit, self.format, detect=detect, sessions=self.sessions)
        rubrics = self.select_rubrics(scanned.inputs_seen)
        require = required_inputs(r.inputs for r in rubrics)
        readers = {name: next(r.name for r in rubrics if name in r.inputs) for name in require}
        checked = scan_required(
            self.input, scanned, require, readers, self.on_bad_record, self.limit, self.format, detect=detect, sessions=self.sessions
        )
        # (a rescan that passed over records keeps the first scan's inputs, so every later choice
        # of rubrics from them, the estimate's, is this one)
        checked.inputs_seen = scanned.inputs_seen
        return checked, rubrics, require

    def select_rubrics(self, inputs_seen: set[str]) -> list[Rubric]:
        """The rubrics asked for, or by default every rubric at least one transcript can feed,
        except those whose header says ``default = false`` (the trajectory rubrics: named only)."""
        if self.rubrics is not None:
            chosen = self.rubrics
            if not chosen:  # an agent-only run: none asked for, none judged
                return []
        else:
            chosen = [r for _, r in sorted(self.available_rubrics.items()) if r.default and set(r.inputs) <= inputs_seen]
        if not chosen:
            raise UserInputError("no rubric can be fed by these transcripts (they lack the inputs every rubric needs)")
        check_logprob_rubrics(self.judges, chosen)
        if self.turns is not None:
            for rubric in chosen:
                if rubric.labels is not None:
                    raise ConfigError(
                        f"--turns: rubric {rubric.name!r} has labels; a conversation's score is made of its turns' numbers (choose --rubric)"
                    )
                if "conversation" in rubric.inputs:
                    raise ConfigError(f"--turns: rubric {rubric.name!r} judges the whole conversation; run it without --turns (or choose --rubric)")
        return chosen


def check_logprob_rubrics(judges: list[JudgeConfig], rubrics: list[Rubric]) -> None:
    """A logprob-weighted judge needs score tokens: every rubric it judges must have a whole-number
    scale (1..5, 0..10), and no label rubric."""
    for judge in judges:
        if not judge.logprobs:
            continue
        for rubric in rubrics:
            if rubric.labels is not None or not integer_scale(rubric.lo, rubric.hi):
                raise ConfigError(
                    f"{rubric.source}: scale: judge {judge.name!r} has logprobs = true, which needs a whole-number scale "
                    f"such as [1, 5], but rubric {rubric.name!r} has "
                    + ("labels" if rubric.labels is not None else f"{[rubric.lo, rubric.hi]}")
                    + " (choose its rubrics with --rubric)"
                )


def is_loopback(url: str) -> bool:
    """Whether ``url`` is on this machine: local servers (vLLM, Ollama, llama.cpp) usually take no key."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _adhoc_judge(options: RunOptions) -> JudgeConfig:
    assert options.model is not None
    name = re.sub(r"[^A-Za-z0-9_.:-]", "-", options.model).strip("-") or "judge"
    fields = {
        "name": name,
        "model": options.model,
        "base_url": options.base_url,
        "api_key_env": options.api_key_env if options.api_key_env is not None else "OPENAI_API_KEY",
    }
    return _validated(fields, "command line")


def _validated(fields: Mapping[str, object], source: str) -> JudgeConfig:
    """A JudgeConfig through the same validation as the config file, whatever the source."""
    try:
        return JudgeConfig.model_validate(fields)
    except ValidationError as exc:
        problem = first_problem(exc, noun="option", whole="judge")
        raise ConfigError(f"{source}: {problem}") from None


def _check_endpoint(judge: JudgeConfig, index: int, source: str) -> None:
    """A base URL (configured, or the provider's variable such as $OPENAI_BASE_URL) must be http(s)
    with a host, before any call."""
    profile = judge.profile
    if profile.in_process:
        return
    url = judge.endpoint
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        origin = "base_url" if judge.base_url or not profile.base_url_env else f"${profile.base_url_env}"
        raise ConfigError(f"{source}: judges[{index}].base_url: {origin} {url!r} is not an http:// or https:// URL (judge {judge.name!r})")


def _check_keys(judges: list[JudgeConfig], source: str) -> None:
    for index, judge in enumerate(judges):
        if judge.profile.key_env is None or not judge.api_key_env:
            continue
        if key := os.environ.get(judge.api_key_env):
            if (problem := check_key(key, judge.api_key_env)) is not None:
                raise ConfigError(f"{source}: judges[{index}].api_key_env: {problem} (judge {judge.name!r})")
            continue
        if is_loopback(judge.endpoint):
            continue  # local servers (vLLM, Ollama, llama.cpp) usually take no key
        raise ConfigError(
            f"{source}: judges[{index}].api_key_env: environment variable {judge.api_key_env} is not set (judge {judge.name!r} at {judge.endpoint})"
        )


def build_plan(options: RunOptions, *, require_keys: bool = True) -> RunPlan:
    """Check everything; ``require_keys=False`` for commands that never call a judge (estimate)."""
    if options.refresh and options.no_cache:
        raise ConfigError("--refresh and --no-cache cannot be used together")
    if options.offline and (options.refresh or options.no_cache):
        raise ConfigError("--offline replays from the cache; it cannot be combined with --refresh or --no-cache")
    if options.limit is not None and options.limit < 1:
        raise ConfigError("--limit must be at least 1")
    if options.max_cost is not None and not options.max_cost >= 0:
        raise ConfigError("--max-cost must be a non-negative number of USD")
    if options.concurrency is not None and options.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if options.out is not None and options.out.exists() and not options.out.is_dir():
        raise ConfigError(f"--out {options.out}: exists and is not a directory")
    if options.cache is not None and not is_postgres_url(options.cache) and Path(options.cache).is_dir():
        raise ConfigError(f"--cache {options.cache}: is a directory; --cache names the cache file")
    if options.config is None and (options.base_url or options.api_key_env) and not options.model:
        raise ConfigError("--base-url and --api-key-env describe an ad-hoc judge: give --model too")

    if options.agent_only and options.rubrics:
        raise ConfigError(f"an agent-only run judges no rubric; it was given --rubric {options.rubrics[0]}")

    turns = _turn_options(options)
    config: HarnessConfig = load_config(options.config)
    source = str(options.config) if options.config else "command line"
    if turns is not None and config.juries:
        raise ConfigError(f"--turns: the config's [[juries]] are not judged per turn yet ({source}); run the juries without --turns")
    if options.agent_only:
        return _agent_only_plan(options, config, source)
    judges = list(config.judges)
    for index, given in enumerate(options.judges):
        fields = given.model_dump() if isinstance(given, JudgeConfig) else given
        judges.append(_validated(fields, f"judges[{index}]"))
    if options.model:
        judges.append(_adhoc_judge(options))
    if not judges:
        judges = [local_judge_config()]
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: two judges share the name {next(n for n in names if names.count(n) > 1)!r}")
    juries = _juries(config, options, names, source)
    if options.judges_only:
        panels = {j.name: j for j in juries}
        unknown = [n for n in options.judges_only if n not in names and n not in panels]
        if unknown:
            raise ConfigError(f"{source}: no judge named {unknown[0]!r} (judges: {', '.join([*names, *panels])})")
        juries = [j for j in juries if j.name in options.judges_only]
        kept = {*options.judges_only, *(m for j in juries for m in j.members)}
        judges = [j for j in judges if j.name in kept]
    user_prices = load_price_table(config.price_table) if config.price_table else None
    judges = [(with_batch_prices if options.batch else with_prices)(j, user_prices) for j in judges]
    if options.concurrency is not None:
        judges = [_validated({**j.model_dump(), "max_concurrency": options.concurrency}, "--concurrency") for j in judges]
    for index, judge in enumerate(judges):
        _check_endpoint(judge, index, source)
    if require_keys and not options.offline:
        _check_keys(judges, source)

    available = with_layout(load_rubrics([*config.prompts, *options.prompts]), config.rubric_layout)
    wanted = options.rubrics or config.rubrics
    rubrics = None
    if wanted:
        agent = next((name for name in wanted if name not in available and name in AGENT_METRICS), None)
        if agent is not None:
            raise UserInputError(
                f"{agent!r} is an agent metric, not a rubric: every run computes the agent metrics; --agent-only computes them alone, with no judge"
            )
        rubrics = [find_rubric(available, name) for name in dict.fromkeys(wanted)]
        rubric_names = [r.name for r in rubrics]
        twice = next((n for n in rubric_names if rubric_names.count(n) > 1), None)
        if twice is not None:
            raise UserInputError(f"--rubric: two versions of rubric {twice!r} in one run; name one")
        available = {**available, **{r.name: r for r in rubrics}}

    composites = config.all_composites()
    for name, weights in composites.items():
        try:
            check_weights(name, weights)
        except ValueError as exc:
            raise ConfigError(f"{source}: composites.{name}: {exc}") from None
        unknown = [r for r in weights if r not in available and r not in AGENT_METRICS]
        if unknown:
            raise ConfigError(f"{source}: composites.{name}: unknown rubric or agent metric {unknown[0]!r}")
        counts = [r for r in weights if r not in available and AGENT_METRICS[r].scale is None]
        if counts:
            raise ConfigError(
                f"{source}: composites.{name}: {counts[0]!r} is a count, not a score on a scale; "
                f"a composite weighs rubrics and the bounded agent metrics ({', '.join(BOUNDED)})"
            )

    if options.no_cache:
        mode: CacheMode = "off"
    elif options.offline:
        mode = "offline"
    elif options.refresh:
        mode = "refresh"
    else:
        mode = "read-write"
    cache_path = None if mode == "off" else parse_location(options.cache or config.cache or DEFAULT_CACHE)
    shard = parse_shard(options.shard) if options.shard is not None else None
    return RunPlan(
        input=options.input,
        out=options.out,
        judges=judges,
        rubrics=rubrics,
        available_rubrics=available,
        composites=composites,
        cache_path=cache_path,
        cache_mode=mode,
        limit=options.limit,
        on_bad_record=options.on_bad_record,
        max_cost=options.max_cost,
        format=_check_format(options.format),
        sessions=_check_sessions(options.sessions),
        cache_lease_s=config.cache_lease_s,
        shard=shard,
        price_table=user_prices,
        trajectory=TrajectorySettings(config.trajectory.mode, config.trajectory.arguments, config.trajectory.default),
        juries=juries,
        source=source,
        rubric_layout=config.rubric_layout,
        injection=options.injection or config.injection,
        turns=turns,
    )


def _turn_options(options: RunOptions) -> TurnOptions | None:
    """``--turns`` and its companions checked, and the paths that cannot judge per turn refused,
    each in one line before anything is read or sent."""
    companions = options.turn_aggregate != "mean" or options.history_turns is not None or options.history_tokens is not None
    if options.turns is None:
        if companions or options.pass_threshold != 0.5:
            raise ConfigError("--turn-aggregate, --history-turns, --history-tokens and --pass-threshold apply to --turns; give --turns too")
        return None
    if options.agent_only:
        raise ConfigError("--turns: an agent-only run judges no rubric, so no turn")
    return parse_turns(options.turns, options.turn_aggregate, options.history_turns, options.history_tokens, options.pass_threshold)


def _agent_only_plan(options: RunOptions, config: HarnessConfig, source: str) -> RunPlan:
    """The plan of a run that judges nothing: no judge, no rubric, no cache; the transcripts'
    agent metrics with the config's ``[trajectory]`` settings."""
    return RunPlan(
        input=options.input,
        out=options.out,
        judges=[],
        rubrics=[],
        available_rubrics=load_rubrics([*config.prompts, *options.prompts]),
        composites={},
        cache_path=None,
        cache_mode="offline" if options.offline else "off",
        limit=options.limit,
        on_bad_record=options.on_bad_record,
        format=_check_format(options.format),
        sessions=_check_sessions(options.sessions),
        shard=parse_shard(options.shard) if options.shard is not None else None,
        trajectory=TrajectorySettings(config.trajectory.mode, config.trajectory.arguments, config.trajectory.default),
        source=source,
        agent_only=True,
    )


def _juries(config: HarnessConfig, options: RunOptions, judges: list[str], source: str) -> list[JuryConfig]:
    """The config's juries, checked against its judges: every member a judge, no jury named as a
    judge, a sequential jury's members on no other jury; ``--jury-labels`` over each one's labels."""
    juries = list(config.juries)
    if options.jury_labels is not None:
        if not juries:
            raise ConfigError(f"--jury-labels {options.jury_labels}: the config has no [[juries]]")
        juries = [j.model_copy(update={"labels": options.jury_labels}) for j in juries]
    for index, jury in enumerate(juries):
        if jury.name in judges:
            raise ConfigError(f"{source}: juries[{index}].name: {jury.name!r} is also a judge's name")
        unknown = [m for m in jury.members if m not in judges]
        if unknown:
            raise ConfigError(f"{source}: juries[{index}].members: no judge named {unknown[0]!r} (judges: {', '.join(judges)})")
        if jury.sequential:
            for other in juries:
                shared = [m for m in jury.members if other is not jury and m in other.members]
                if shared:
                    raise ConfigError(
                        f"{source}: juries[{index}].members: judge {shared[0]!r} of the sequential jury {jury.name!r} sits on jury {other.name!r} too "
                        "(a sequential jury leaves members unasked; give it judges of its own)"
                    )
    return juries


def _check_sessions(value: str) -> Sessions:
    from ..traces.sessions import SESSIONS

    if value not in SESSIONS:
        raise ConfigError(f"--sessions must be one of {', '.join(SESSIONS)}")
    return value  # type: ignore[return-value]


def _check_format(fmt: str) -> str:
    from ..traces import FORMATS

    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
    return fmt
