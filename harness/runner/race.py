"""``harness race``: compare agent B with agent A judging only as many pairs as the decision needs.

Transcripts of A and B are paired by id and put in a seeded random order. Each round judges the
next ``round_size`` pairs with the ordinary run (:func:`run_evaluation`, same cache, same keys), and
updates an anytime-valid confidence sequence for the mean difference B − A of one rubric or
composite (:mod:`harness.stats.sequential`). It stops at the first of:

- ``decided``: the sequence excludes 0 (B is better, or worse, with confidence 1 − α);
- ``within_margin``: the sequence is narrower than ``margin`` (any difference is smaller than
  matters);
- ``budget``: ``max_pairs`` pairs were judged; ``exhausted``: every pair was judged.

The sequence is valid at every look, so stopping on it keeps the error rate at α. A pair where
either side is not scored (unscored or failed) does not enter the sequence; such pairs are counted
and reported, since leaving them out is valid only if they are missing at random.

Every round is an ordinary run, so judgments are cached: a rerun, or ``offline=True``, replays the
same order and the same judgments, and reaches the same decision for nothing. At the end the judged
transcripts of each side are written as normal run directories (``OUT/a``, ``OUT/b``, from the
cache), with the sequence after every round in ``OUT/sequence.jsonl`` and the decision in
``OUT/race.json``.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import UserInputError
from ..outputs.files import atomic_write_text
from ..planning import RunOptions, build_plan
from ..stats.sequential import PairedDifferenceCS
from .session import RunOutcome
from .subset import judge_subset, records_by_id

Stop = Literal["decided", "within_margin", "budget", "exhausted"]


@dataclass(slots=True)
class RaceOptions:
    a: Path
    b: Path
    out: Path
    #: the rubric or composite compared
    metric: str
    config: Path | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    prompts: list[Path] = field(default_factory=list)
    cache: Path | str | None = None
    offline: bool = False
    alpha: float = 0.05
    margin: float | None = None
    round_size: int = 20
    max_pairs: int | None = None
    seed: int = 0
    concurrency: int | None = None


@dataclass(slots=True)
class Look:
    """The sequence after one round."""

    round: int
    pairs_judged: int
    pairs_used: int
    lo: float
    hi: float
    mean: float | None
    cost_usd: float | None


@dataclass(slots=True)
class RaceResult:
    metric: str
    judge: str
    alpha: float
    margin: float | None
    stop: Stop
    #: "B > A", "B < A", "no difference larger than the margin", or "undecided"
    verdict: str
    pairs_total: int
    pairs_judged: int
    #: pairs left out of the sequence because a side was unscored or failed, by reason
    pairs_not_scored: dict[str, int]
    judgments: int
    #: None when the judge has no price
    cost_usd: float | None
    #: what judging every pair would have cost more, at this race's mean cost per judgment
    saved_usd: float | None
    looks: list[Look]
    exit_code: int = 0

    @property
    def interval(self) -> tuple[float, float]:
        last = self.looks[-1]
        return last.lo, last.hi

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval"] = list(self.interval)
        return data


def _scale(options: RaceOptions) -> tuple[str, float, float, list[str] | None]:
    """The judge's name, the metric's scale (lo, hi), and a composite's rubrics (None for a rubric)."""
    plan = build_plan(
        RunOptions(
            input=options.a,
            config=options.config,
            model=options.model,
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            prompts=list(options.prompts),
            offline=options.offline,
        )
    )
    # A jury is one judge; its members are its parts, not judges of their own here.
    members = {m for jury in plan.juries for m in jury.members}
    judges = [j.name for j in plan.judges if j.name not in members] + [jury.name for jury in plan.juries]
    if len(judges) != 1:
        raise UserInputError(f"race compares with one judge (a jury counts as one); the config has {len(judges)} ({', '.join(judges)})")
    judge = judges[0]
    if options.metric in plan.composites:
        weights = plan.composites[options.metric]
        return judge, 0.0, float(sum(weights.values())), list(weights)
    rubric = plan.available_rubrics.get(options.metric)
    if rubric is None:
        known = sorted(plan.available_rubrics) + sorted(plan.composites)
        raise UserInputError(f"--metric {options.metric!r}: no such rubric or composite (known: {', '.join(known)})")
    if rubric.labels is not None:
        raise UserInputError(f"--metric {options.metric!r}: a label rubric has no mean to compare; choose a scored rubric")
    return judge, float(rubric.lo), float(rubric.hi), None


async def _judge(options: RaceOptions, records: dict[str, bytes], ids: list[str], work: Path, side: str, rubrics: list[str], out: Path) -> RunOutcome:
    run = RunOptions(
        input=work / f"{side}.jsonl",
        out=out,
        config=options.config,
        model=options.model,
        base_url=options.base_url,
        api_key_env=options.api_key_env,
        prompts=list(options.prompts),
        rubrics=rubrics,
        cache=options.cache,
        offline=options.offline,
        concurrency=options.concurrency,
        progress=False,
    )
    return await judge_subset(records, ids, work / f"{side}.jsonl", run, f"race stopped: judging {side.upper()}")


def _values(out: Path, judge: str, metric: str, composite: bool) -> dict[str, tuple[float | None, str]]:
    """transcript id -> (value, why not scored) from a run directory's results.jsonl."""
    values: dict[str, tuple[float | None, str]] = {}
    with (out / "results.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            group = "composites" if composite else "scores"
            value = row[group].get(judge, {}).get(metric)
            why = row["composites_unscored" if composite else "unscored"].get(judge, {}).get(metric, "")
            values[row["transcript_id"]] = (value, why)
    return values


def _cost(outcome: RunOutcome) -> tuple[float | None, int]:
    """The round's cost (None when a judge has no price) and how many judgments it made."""
    counts = outcome.summary.get("judgments") or {}
    cost = outcome.summary.get("cost_usd")
    return (None if cost is None else float(cost)), int(sum(counts.values()))


def _check(options: RaceOptions) -> None:
    if options.round_size < 1:
        raise UserInputError("--round must be at least 1")
    if not 0 < options.alpha < 1:
        raise UserInputError("--alpha must be between 0 and 1")
    if options.margin is not None and not options.margin > 0:
        raise UserInputError("--margin must be a positive number")


@dataclass(slots=True)
class _Tally:
    """What the rounds so far spent and found."""

    judged: list[str] = field(default_factory=list)
    diffs: list[float] = field(default_factory=list)
    not_scored: dict[str, int] = field(default_factory=dict)
    spent: float | None = 0.0
    judgments: int = 0
    exit_code: int = 0

    def paid(self, outcome: RunOutcome) -> None:
        cost, count = _cost(outcome)
        self.spent = None if self.spent is None or cost is None else self.spent + cost
        self.judgments += count
        self.exit_code = max(self.exit_code, outcome.exit_code)

    def pairs(
        self, batch: list[str], va: dict[str, tuple[float | None, str]], vb: dict[str, tuple[float | None, str]]
    ) -> tuple[list[float], list[float]]:
        """The round's scored pairs (A's and B's values); the others counted by reason."""
        xs_a, xs_b = [], []
        for tid in batch:
            (sa, why_a), (sb, why_b) = va[tid], vb[tid]
            if sa is None or sb is None:
                reason = (why_a or why_b or "not scored").split(":")[0]
                self.not_scored[reason] = self.not_scored.get(reason, 0) + 1
                continue
            xs_a.append(sa)
            xs_b.append(sb)
            self.diffs.append(sb - sa)
        self.judged += batch
        return xs_a, xs_b


def _verdict(stop: Stop, last: Look, margin: float | None) -> str:
    if stop == "decided":
        return "B > A" if last.lo > 0 else "B < A"
    if stop == "within_margin":
        return f"no difference larger than the margin ({margin:g})"
    return "undecided"


async def race(options: RaceOptions, on_look: Callable[[Look], None] | None = None) -> RaceResult:
    _check(options)
    judge, lo, hi, parts = _scale(options)
    composite = parts is not None
    rubrics = parts if parts is not None else [options.metric]
    a, b = records_by_id(options.a), records_by_id(options.b)
    paired = sorted(set(a) & set(b))
    if not paired:
        raise UserInputError(f"{options.a} and {options.b} share no transcript id: nothing to pair")
    random.Random(options.seed).shuffle(paired)
    limit = len(paired) if options.max_pairs is None else min(options.max_pairs, len(paired))
    cs = PairedDifferenceCS(lo, hi, options.alpha)
    work = options.out / ".race"
    looks: list[Look] = []
    tally = _Tally()
    stop: Stop = "exhausted" if limit == len(paired) else "budget"
    while len(tally.judged) < limit:
        batch = paired[len(tally.judged) : min(len(tally.judged) + options.round_size, limit)]
        tally.paid(await _judge(options, a, batch, work, "a", rubrics, work / "round-a"))
        tally.paid(await _judge(options, b, batch, work, "b", rubrics, work / "round-b"))
        va = _values(work / "round-a", judge, options.metric, composite)
        vb = _values(work / "round-b", judge, options.metric, composite)
        xs_a, xs_b = tally.pairs(batch, va, vb)
        interval = cs.update(xs_a, xs_b) if xs_a else cs.interval()
        mean = sum(tally.diffs) / len(tally.diffs) if tally.diffs else None
        looks.append(Look(len(looks) + 1, len(tally.judged), cs.n, interval.lo, interval.hi, mean, tally.spent))
        if on_look is not None:
            on_look(looks[-1])
        if interval.excludes(0.0):
            stop = "decided"
            break
        if options.margin is not None and interval.width < options.margin:
            stop = "within_margin"
            break
    per_judgment = tally.spent / tally.judgments if tally.spent is not None and tally.judgments else None
    remaining = 2 * len(rubrics) * (len(paired) - len(tally.judged))
    saved = None if per_judgment is None else per_judgment * remaining
    # The judged transcripts of each side as normal run directories: from the cache, no new calls.
    await _judge(options, a, tally.judged, work, "a", rubrics, options.out / "a")
    await _judge(options, b, tally.judged, work, "b", rubrics, options.out / "b")
    shutil.rmtree(work, ignore_errors=True)
    result = RaceResult(
        options.metric,
        judge,
        options.alpha,
        options.margin,
        stop,
        _verdict(stop, looks[-1], options.margin),
        len(paired),
        len(tally.judged),
        tally.not_scored,
        tally.judgments,
        tally.spent,
        saved,
        looks,
        tally.exit_code,
    )
    atomic_write_text(options.out / "sequence.jsonl", "".join(json.dumps(asdict(look)) + "\n" for look in looks))
    atomic_write_text(options.out / "race.json", json.dumps(result.as_dict(), indent=2) + "\n")
    return result
