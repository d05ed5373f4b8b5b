"""``harness race``: compare agent B with agent A judging only as many pairs as the decision needs.

Transcripts of A and B are paired by id and put in a seeded random order. Each round judges the
next ``round_size`` pairs with the ordinary run (:func:`run_evaluation`, same cache, same keys), and
updates an anytime-valid confidence sequence for the mean difference B − A of one rubric or
composite (:mod:`harness.stats.sequential`). It stops at the first of:

- ``decided``: the sequence excludes 0 (B is better, or worse, with confidence 1 − α; "better"
  follows the metric's direction: a lower hallucination score is better);
- ``within_margin``: the sequence is narrower than ``margin`` (any difference is smaller than
  matters);
- ``budget``: ``max_pairs`` pairs were judged; ``exhausted``: every pair was judged.

The metric may also be a bounded agent metric (``trajectory_f1``, ...: :data:`harness.agent.specs.BOUNDED`),
computed from each transcript's steps with no judge: each round is then an agent-only run
(``RunOptions.agent_only``), which makes no judge, opens no cache and sends nothing, so the race
costs $0 and offline is the same race. A count (``steps``, ...) has no upper bound, which the
sequence needs, and is refused.

The sequence is valid at every look, so stopping on it keeps the error rate at α. A pair where
either side is not scored (unscored, failed, or offline not in the cache) does not enter the
sequence; such pairs are counted and reported, since leaving them out is valid only if they are
missing at random. Ids of one file with no partner in the other are counted and reported too.

Every option and input is checked before the first round, so a mistake costs nothing and leaves
nothing behind. Every round is an ordinary run, so judgments are cached and a failed call is
recorded: a rerun, or ``offline=True``, replays the same order and the same judgments, and reaches
the same decision with the same exit code for nothing. At the end the judged transcripts of each
side are written as normal run directories (``OUT/a``, ``OUT/b``, of ``OUT/a.jsonl``, ``OUT/b.jsonl``)
by an offline replay of exactly the judgments the rounds made (nothing is asked again), with the
sequence after every round in ``OUT/sequence.jsonl`` and the decision in ``OUT/race.json``.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..agent.metrics import TRAJECTORY
from ..agent.specs import BOUNDED
from ..agent.specs import SPECS as AGENT_METRICS
from ..capabilities import check_supported
from ..errors import ConfigError, OutputError, UserInputError
from ..exit_codes import EXIT_CACHE_MISSES, EXIT_FAILED_JUDGMENTS, EXIT_OK, combined_exit
from ..outputs.files import OutDirLock, atomic_write_text, prepare_out_dir
from ..planning import JudgeOptions, RunOptions, build_plan
from ..planning.turns import TurnFlags
from ..rows import iter_result_rows, results_path
from ..runner.session import RunOutcome
from ..stats.sequential import PairedDifferenceCS
from .subset import judge_subset, records_by_id

Stop = Literal["decided", "within_margin", "budget", "exhausted"]
#: What a round or the final replay may end with and the race still go on: judgments failed, or
#: (offline) were not in the cache. Anything else stops the race with that run's code.
GOES_ON = (EXIT_OK, EXIT_FAILED_JUDGMENTS, EXIT_CACHE_MISSES)


@dataclass(kw_only=True, slots=True)
class RaceOptions(JudgeOptions):
    """A race: the judge options (:class:`JudgeOptions`, carried into every round), the two
    transcript files and what decides."""

    a: Path
    b: Path
    out: Path
    #: the rubric, composite or bounded agent metric compared
    metric: str
    alpha: float = 0.05
    margin: float | None = None
    round_size: int = 20
    max_pairs: int | None = None
    seed: int = 0
    #: judged per turn (``--turns``): each round's runs are; a pair is two conversations' scores
    #: (results.jsonl's, by the rule of ``planning.turns``), never two turns'
    turns: TurnFlags = field(default_factory=TurnFlags)


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
    #: None for an agent metric: no judge was asked
    judge: str | None
    #: "higher" or "lower": which way the metric is better (a composite is higher-is-better)
    direction: Literal["higher", "lower"]
    alpha: float
    margin: float | None
    stop: Stop
    #: "B is better than A", "B is worse than A", "no difference larger than the margin (M)", or "undecided"
    verdict: str
    #: "A" or "B" when decided, else None
    better: Literal["A", "B"] | None
    pairs_total: int
    pairs_judged: int
    #: pairs left out of the sequence because a side was unscored or failed, by reason
    pairs_not_scored: dict[str, int]
    #: ids of each file ("a", "b") with no partner in the other file: never judged
    unpaired: dict[str, int]
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

    @property
    def completeness(self) -> dict[str, Any]:
        """What the race judged of the pairs it was given: the sequence holds the pairs both of
        whose sides were scored; the others judged are left out by reason, the rest never judged
        (the race stopped first, by its rule)."""
        used = self.looks[-1].pairs_used if self.looks else 0
        return {
            "pairs_total": self.pairs_total,
            "pairs_judged": self.pairs_judged,
            "pairs_in_sequence": used,
            "pairs_not_scored": sum(self.pairs_not_scored.values()),
            "pairs_never_judged": self.pairs_total - self.pairs_judged,
            "ids_without_partner": dict(self.unpaired),
        }

    def subset_line(self) -> str | None:
        """One line when the sequence is on fewer pairs than were judged; None when it holds them all."""
        c = self.completeness
        if not c["pairs_not_scored"]:
            return None
        return (
            f"the sequence is on {c['pairs_in_sequence']:,} of the {c['pairs_judged']:,} pairs judged ({c['pairs_not_scored']:,} with a side "
            f"not scored left out); {c['pairs_never_judged']:,} of {c['pairs_total']:,} pairs never judged (the race stopped: {self.stop})"
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval"] = list(self.interval)
        data["completeness"] = self.completeness
        return data


@dataclass(frozen=True, slots=True)
class _Metric:
    #: None for an agent metric
    judge: str | None
    lo: float
    hi: float
    direction: Literal["higher", "lower"]
    #: the rubrics judged: the metric itself, or a composite's (none for an agent metric)
    rubrics: list[str]
    kind: Literal["rubric", "composite", "agent"]


def _run_options(
    options: RaceOptions,
    input: Path,
    out: Path | None = None,
    metric: _Metric | None = None,
    *,
    offline: bool | None = None,
) -> RunOptions:
    """The run a round (or the final replay) is: the race's judge options, one home for all; for
    an agent metric, an agent-only run (nothing judged)."""
    return RunOptions.from_judge(
        options,
        input=input,
        out=out,
        rubrics=list(metric.rubrics) if metric is not None else [],
        agent_only=metric is not None and metric.kind == "agent",
        offline=options.offline if offline is None else offline,
        progress=False,
        **options.turns.as_options(),
    )


def _agent_metric(name: str) -> _Metric:
    """A bounded agent metric as the race compares it; a count is refused in one line."""
    spec = AGENT_METRICS[name]
    if spec.scale is None:
        raise UserInputError(
            f"--metric {name!r}: an agent metric that counts ({spec.description}) has no upper bound, which the "
            f"race's confidence sequence needs; race a bounded one ({', '.join(BOUNDED)})"
        )
    lo, hi = spec.scale
    return _Metric(None, lo, hi, spec.direction, [], "agent")


def _metric(options: RaceOptions) -> _Metric:
    """The judge, the metric's scale and direction, and the rubrics to judge: the plan a round will
    make, checked (judges, cache location, --concurrency, the path) before anything is judged. An
    agent metric (a name no rubric or composite takes) needs no judge: nothing of one is checked."""
    names = build_plan(_run_options(options, options.a), require_keys=False)
    if options.metric not in names.composites and options.metric not in names.available_rubrics and options.metric in AGENT_METRICS:
        return _agent_metric(options.metric)
    plan = build_plan(_run_options(options, options.a))
    # A jury is one judge; its members are its parts, not judges of their own here.
    members = {m for jury in plan.juries for m in jury.members}
    judges = [j.name for j in plan.judges if j.name not in members] + [jury.name for jury in plan.juries]
    if len(judges) != 1:
        raise UserInputError(f"race compares with one judge (a jury counts as one); the config has {len(judges)} ({', '.join(judges)})")
    check_supported(plan.judges, "offline" if options.offline else "live")
    judge = judges[0]
    if options.metric in plan.composites:
        weights = plan.composites[options.metric]
        # the rubrics it weighs are judged; the agent metrics it weighs come with every run
        rubrics = [name for name in weights if name in plan.available_rubrics]
        if not rubrics:
            raise UserInputError(
                f"--metric {options.metric!r}: the composite weighs only agent metrics ({', '.join(weights)}), which a race "
                "compares with no judge one at a time; race one of them"
            )
        # a composite weighs each rubric's normalised score, where 1 is best: higher is better
        return _Metric(judge, 0.0, float(sum(weights.values())), "higher", rubrics, "composite")
    rubric = plan.available_rubrics.get(options.metric)
    if rubric is None:
        known = sorted(plan.available_rubrics) + sorted(plan.composites) + list(BOUNDED)
        raise UserInputError(f"--metric {options.metric!r}: no such rubric, composite or agent metric (known: {', '.join(known)})")
    if rubric.labels is not None:
        raise UserInputError(f"--metric {options.metric!r}: a label rubric has no mean to compare; choose a scored rubric")
    return _Metric(judge, float(rubric.lo), float(rubric.hi), rubric.direction, [options.metric], "rubric")


def _check(options: RaceOptions) -> None:
    if options.round_size < 1:
        raise ConfigError("--round must be at least 1")
    if options.max_pairs is not None and options.max_pairs < 1:
        raise ConfigError("--max-pairs must be at least 1")
    if not 0 < options.alpha < 1:
        raise ConfigError("--alpha must be between 0 and 1")
    if options.margin is not None and not (options.margin > 0 and math.isfinite(options.margin)):
        raise ConfigError("--margin must be a positive finite number")
    if options.no_cache:
        raise ConfigError("a race replays its rounds from the cache: no_cache cannot be set")


def _check_out(out: Path) -> None:
    """--out as a directory the race can write (created), with room for what it writes: refused
    now, not after the rounds were paid for."""
    prepare_out_dir(out)
    for name in ("a", "b"):
        if (out / name).exists() and not (out / name).is_dir():
            raise OutputError(f"--out {out}: {out / name} exists and is not a directory (the race writes run directory {name}/ there)")
    for name in ("a.jsonl", "b.jsonl", "race.json", "sequence.jsonl"):
        if (out / name).is_dir():
            raise OutputError(f"--out {out}: {out / name} is a directory (the race writes the file {name} there)")


async def _judge(
    options: RaceOptions,
    records: dict[str, bytes],
    ids: list[str],
    source: Path,
    out: Path,
    metric: _Metric,
    what: str,
    *,
    offline: bool | None = None,
) -> RunOutcome:
    run = _run_options(options, source, out, metric, offline=offline)
    return await judge_subset(records, ids, source, run, what, accept=GOES_ON)


def _values(out: Path, metric: _Metric, name: str) -> dict[str, tuple[float | None, str]]:
    """transcript id -> (value, why not scored, as the race counts it) from a run directory's results.jsonl."""
    values: dict[str, tuple[float | None, str]] = {}
    for row in iter_result_rows(results_path(out)):
        if metric.kind == "agent":
            agent = row.agent or {}
            if name in agent:
                value, why = agent[name], f"unscored ({(row.agent_unscored or {}).get(name, '')})"
            else:  # results.jsonl leaves out a metric that does not apply to the transcript
                value, why = None, "does not apply (no reference_trajectory)" if name in TRAJECTORY else "does not apply (no steps)"
            values[row.transcript_id] = (value, why)
            continue
        assert metric.judge is not None
        composite = metric.kind == "composite"
        value = (row.composites if composite else row.scores).get(metric.judge, {}).get(name)
        why = (row.composites_unscored if composite else row.unscored).get(metric.judge, {}).get(name, "")
        values[row.transcript_id] = (value, _reason(why))
    return values


def _reason(why: str) -> str:
    """A results.jsonl reason as the race counts it: "failed: transient" -> "failed (transient)"; a
    composite's ("relevance failed (transient)") as it is."""
    status, sep, reason = why.partition(": ")
    return f"{status} ({reason})" if sep else why or "not scored"


def _cost(outcome: RunOutcome) -> tuple[float | None, int]:
    """The round's cost (None when a judge has no price) and how many judgments it made."""
    return outcome.summary.cost_usd, sum(outcome.summary.judgments.values())


@dataclass(slots=True)
class _Tally:
    """What the rounds so far spent and found."""

    judged: list[str] = field(default_factory=list)
    diffs: list[float] = field(default_factory=list)
    not_scored: dict[str, int] = field(default_factory=dict)
    spent: float | None = 0.0
    judgments: int = 0
    codes: list[int] = field(default_factory=list)

    def paid(self, outcome: RunOutcome) -> None:
        cost, count = _cost(outcome)
        self.spent = None if self.spent is None or cost is None else self.spent + cost
        self.judgments += count
        self.codes.append(outcome.exit_code)

    def pairs(
        self, batch: list[str], va: dict[str, tuple[float | None, str]], vb: dict[str, tuple[float | None, str]]
    ) -> tuple[list[float], list[float]]:
        """The round's scored pairs (A's and B's values); the others counted by reason."""
        xs_a, xs_b = [], []
        for tid in batch:
            (sa, why_a), (sb, why_b) = va[tid], vb[tid]
            if sa is None or sb is None:
                reason = why_a if sa is None else why_b
                self.not_scored[reason] = self.not_scored.get(reason, 0) + 1
                continue
            xs_a.append(sa)
            xs_b.append(sb)
            self.diffs.append(sb - sa)
        self.judged += batch
        return xs_a, xs_b


def _verdict(stop: Stop, last: Look, margin: float | None, direction: str) -> tuple[str, Literal["A", "B"] | None]:
    """The decision in words, by the metric's direction, and which side is better."""
    if stop == "decided":
        b_higher = last.lo > 0
        better: Literal["A", "B"] = "B" if b_higher == (direction == "higher") else "A"
        return ("B is better than A" if better == "B" else "B is worse than A"), better
    if stop == "within_margin":
        return f"no difference larger than the margin ({margin:g})", None
    return "undecided", None


async def race(options: RaceOptions, on_look: Callable[[Look], None] | None = None) -> RaceResult:
    _check(options)
    metric = _metric(options)
    a, b = records_by_id(options.a), records_by_id(options.b)
    paired = [tid for tid in a if tid in b]
    if not paired:
        raise UserInputError(f"{options.a} and {options.b} share no transcript id: nothing to pair")
    unpaired = {"a": len(a) - len(paired), "b": len(b) - len(paired)}
    _check_out(options.out)
    lock = OutDirLock(options.out)  # held to the end: a second race on this --out is refused
    work = options.out / ".race"
    try:
        return await _race(options, metric, a, b, paired, unpaired, work, on_look)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        lock.release()


async def _race(
    options: RaceOptions,
    metric: _Metric,
    a: dict[str, bytes],
    b: dict[str, bytes],
    paired: list[str],
    unpaired: dict[str, int],
    work: Path,
    on_look: Callable[[Look], None] | None,
) -> RaceResult:
    order = sorted(paired)
    random.Random(options.seed).shuffle(order)
    limit = len(order) if options.max_pairs is None else min(options.max_pairs, len(order))
    cs = PairedDifferenceCS(metric.lo, metric.hi, options.alpha)
    looks: list[Look] = []
    tally = _Tally()
    stop: Stop = "exhausted" if limit == len(order) else "budget"
    while len(tally.judged) < limit:
        batch = order[len(tally.judged) : min(len(tally.judged) + options.round_size, limit)]
        what = f"race stopped in round {len(looks) + 1}: judging"
        tally.paid(await _judge(options, a, batch, work / "a.jsonl", work / "round-a", metric, f"{what} A"))
        tally.paid(await _judge(options, b, batch, work / "b.jsonl", work / "round-b", metric, f"{what} B"))
        va = _values(work / "round-a", metric, options.metric)
        vb = _values(work / "round-b", metric, options.metric)
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
    remaining = 2 * len(metric.rubrics) * (len(order) - len(tally.judged))
    saved = None if per_judgment is None else per_judgment * remaining
    # The judged transcripts of each side as normal run directories, in the file's order: an
    # offline replay of what the rounds judged (a failed call replays as failed), so they hold
    # exactly the judgments the decision used and no judge can be asked again.
    judged = set(tally.judged)
    for side, records in (("a", a), ("b", b)):
        ids = [tid for tid in records if tid in judged]
        source = options.out / f"{side}.jsonl"
        await _judge(options, records, ids, source, options.out / side, metric, f"race stopped writing {side}/", offline=True)
    verdict, better = _verdict(stop, looks[-1], options.margin, metric.direction)
    result = RaceResult(
        metric=options.metric,
        judge=metric.judge,
        direction=metric.direction,
        alpha=options.alpha,
        margin=options.margin,
        stop=stop,
        verdict=verdict,
        better=better,
        pairs_total=len(order),
        pairs_judged=len(tally.judged),
        pairs_not_scored=tally.not_scored,
        unpaired=unpaired,
        judgments=tally.judgments,
        cost_usd=tally.spent,
        saved_usd=saved,
        looks=looks,
        exit_code=combined_exit(tally.codes),
    )
    atomic_write_text(options.out / "sequence.jsonl", "".join(json.dumps(asdict(look)) + "\n" for look in looks))
    atomic_write_text(options.out / "race.json", json.dumps(result.as_dict(), indent=2) + "\n")
    return result
