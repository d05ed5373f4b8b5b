"""A run's aggregates, for summary.json: score series, composite series, cost, judge and agent figures.

Each judgment and each transcript's composites are added as they are written, and only what the
summary needs is kept: one float per score, latency and performance value. ``summary()`` turns
them into the document, a :class:`~harness.metrics.schema.RunSummary` (means with t-intervals,
percentiles: ``metrics.summary``).
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.specs import SPECS as AGENT_SPECS
from ..config import JudgeConfig
from ..cost.prices import prompt_cache_saving
from ..planning import Judgment
from ..planning.judgment import missing_inputs_of
from ..planning.turns import TurnOptions
from ..stats.noise import noise_share
from ..transcripts.performance import PERFORMANCE_FIELDS, Performance
from .composites import CompositeResult
from .schema import (
    AgentMetricSummary,
    ConversationSummary,
    CostFigures,
    CostSummary,
    JudgeSummary,
    NoiseSummary,
    Percentiles,
    PerformanceSummary,
    RunRecord,
    RunSummary,
    ScoreSummary,
    TurnScoreSummary,
)
from .summary import describe, percentiles


@dataclass(slots=True)
class _Series:
    values: array = field(default_factory=lambda: array("d"))
    unscored: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    clamped: int = 0

    def described(self, bounds: tuple[float, float] | None = None) -> dict[str, Any]:
        described = describe(self.values)
        ci = described.get("ci95")
        if bounds is not None and isinstance(ci, list):
            # A mean of values on a bounded scale cannot lie outside it: neither can its interval.
            described["ci95"] = [min(max(ci[0], bounds[0]), bounds[1]), min(max(ci[1], bounds[0]), bounds[1])]
        return described

    def as_summary(self, bounds: tuple[float, float] | None = None) -> ScoreSummary:
        return ScoreSummary(
            **self.described(bounds),
            unscored=sum(self.unscored.values()),
            unscored_reasons=dict(sorted(self.unscored.items())),
            failed=sum(self.failed.values()),
            failed_reasons=dict(sorted(self.failed.items())),
            clamped=self.clamped,
        )


@dataclass(slots=True)
class _Cost:
    """Money for one judge (or one judge × rubric): paid calls, billed retries, cache savings."""

    paid: float = 0.0
    retried_billed: float = 0.0  # estimated: each billed retry priced like the call that followed it
    billed_retries: int = 0
    saved: float = 0.0
    #: answered calls whose cost is unknown (no price, or no usable usage): their sum is unknown
    unknown: int = 0
    unknown_saved: int = 0
    #: answered calls whose reply carried no usage, or usage that could not be true (usage.py)
    usage_unknown: int = 0

    def add(self, j: Judgment) -> None:
        if j.cached:
            if j.status == "failed":  # a failed call replayed offline: it saved nothing
                return
            if j.cost_usd is None:
                self.unknown_saved += 1
            self.saved += j.cost_usd or 0.0
            return
        self.billed_retries += j.billed_retries
        if j.cost_usd is not None:
            self.paid += j.cost_usd
            self.retried_billed += j.retries_cost_usd or 0.0
        elif j.status != "failed":
            self.unknown += 1
        if j.status != "failed" and (j.prompt_tokens is None or j.completion_tokens is None):
            self.usage_unknown += 1

    def merge(self, other: _Cost) -> None:
        self.paid += other.paid
        self.retried_billed += other.retried_billed
        self.billed_retries += other.billed_retries
        self.saved += other.saved
        self.unknown += other.unknown
        self.unknown_saved += other.unknown_saved
        self.usage_unknown += other.usage_unknown

    def figures(self, priced: bool) -> CostFigures:
        # Unknown is never zero: one call of unknown cost makes the sum unknown (null), and counted.
        known = priced and not self.unknown
        return CostFigures(
            paid_usd=self.paid if known else None,
            retried_billed_usd=self.retried_billed if known else None,
            billed_retries=self.billed_retries,
            saved_by_cache_usd=self.saved if priced and not self.unknown_saved else None,
            total_usd=self.paid + self.retried_billed if known else None,
            unknown_cost_calls=self.unknown,
            usage_unknown_calls=self.usage_unknown,
        )


@dataclass(slots=True)
class _JudgeStats:
    requests: int = 0  # attempts sent over the wire
    calls: int = 0  # judgments that needed the judge
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_unknown: int = 0  # judgments whose cost could not be computed (no price or no usage)
    failed: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    prompt_cache_saved: float = 0.0
    truncated_input: int = 0
    compacted_input: int = 0
    unscored: Counter[str] = field(default_factory=Counter)
    #: missing_input judgments by the inputs they lacked
    missing: Counter[str] = field(default_factory=Counter)
    latencies: array = field(default_factory=lambda: array("d"))

    def as_summary(self, cost: CostFigures, priced: bool) -> JudgeSummary:
        return JudgeSummary(
            requests=self.requests,
            calls=self.calls,
            cache_hits=self.cache_hits,
            failed=self.failed,
            unscored=sum(self.unscored.values()),
            unscored_reasons=dict(sorted(self.unscored.items())),
            missing_inputs=dict(sorted(self.missing.items())),
            truncated_input=self.truncated_input,
            compacted_input=self.compacted_input,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cached_prompt_tokens=self.cached_tokens,
            prompt_cache_saved_usd=self.prompt_cache_saved if cost.total_usd is not None else None,
            cost_usd=cost.total_usd,
            cost_saved_usd=cost.saved_by_cache_usd,
            cost_note=None if cost.total_usd is not None else cost_note(priced, cost.usage_unknown_calls),
            usage_unknown=cost.usage_unknown_calls,
            cost_unknown_judgments=self.cost_unknown,
            latency_ms=Percentiles(**percentiles(self.latencies)),
        )


def cost_note(priced: bool, usage_unknown: int) -> str:
    """Why a cost is unknown (null, not 0): no price, replies without usable usage, or both."""
    why = [] if priced else ["no price configured"]
    if usage_unknown:
        why.append(f"usage unknown: {usage_unknown} repl(ies) carried no usage, or usage that cannot be true")
    return "; ".join(why or ["unknown"]) + ": cost unknown (null), not 0"


class RunTotals:
    """Everything summary.json reports, accumulated judgment by judgment. A jury's verdicts
    (``add_jury``) have score and composite series like a judge's; its calls, tokens and cost are
    its members', counted once, as theirs."""

    def __init__(
        self,
        scales: Mapping[str, tuple[float, float]],
        judges: list[JudgeConfig],
        composites: Mapping[str, Mapping[str, float]],
        juries: Sequence[str] = (),
    ) -> None:
        """``scales``: each rubric's scale, in the run's order (all a summary needs of a rubric: a
        merge reads them back from summary.json's ``rubric_scales``); ``juries``: the juries' names,
        whose series follow the judges'."""
        self.rubrics = list(scales)
        self.bounds = {name: (float(lo), float(hi)) for name, (lo, hi) in scales.items()}
        self.judges = judges
        self.juries = list(juries)
        self.composites = list(composites)
        self.transcripts = 0
        self.scores: dict[tuple[str, str], _Series] = defaultdict(_Series)
        self.composite_scores: dict[tuple[str, str], _Series] = defaultdict(_Series)
        self.judge_stats: dict[str, _JudgeStats] = {j.name: _JudgeStats() for j in judges}
        self._judge = {j.name: j for j in judges}
        self.costs: dict[tuple[str, str], _Cost] = defaultdict(_Cost)
        self.performance: dict[str, array] = {name: array("d") for name in PERFORMANCE_FIELDS}
        self.status_counts: Counter[str] = Counter()
        #: (status, reason) -> judgments
        self.reason_counts: Counter[tuple[str, str]] = Counter()
        #: agent metrics (harness/agent/specs.py): name -> values and unscored reasons
        self.agent: dict[str, _Series] = {}
        #: repeated samples: (rubric, judge) -> (n scored, mean, variance) per judgment
        self.sample_groups: dict[tuple[str, str], list[tuple[int, float, float]]] = defaultdict(list)
        #: transcripts of several user turns (``Resolved.turns``)
        self.multi_turn = 0
        #: judged per turn (``planning.turns``): the options, the turns judged and absent, and
        #: (rubric, judge) -> (conversation number, score) of each scored turn
        self.turn_options: TurnOptions | None = None
        self.judged_turns = 0
        self.turns_absent = 0
        self.turn_scores: dict[tuple[str, str], tuple[array, array]] = defaultdict(lambda: (array("q"), array("d")))

    def add_transcript(self, performance: Performance) -> None:
        self.transcripts += 1
        for name in PERFORMANCE_FIELDS:
            value = getattr(performance, name)
            if value is not None:
                self.performance[name].append(float(value))

    def add_agent(self, values: Mapping[str, float | None], reasons: Mapping[str, str]) -> None:
        """A transcript's agent metrics (``results.jsonl``'s ``agent`` and ``agent_unscored``)."""
        for name, value in values.items():
            series = self.agent.get(name)
            if series is None:
                series = self.agent[name] = _Series()
            if value is not None:
                series.values.append(float(value))  # a count is an int in the row; its aggregates as before
            else:
                series.unscored[reasons.get(name) or "unknown"] += 1

    def add_composite(self, judge: str, result: CompositeResult) -> None:
        series = self.composite_scores[(result.name, judge)]
        if result.value is not None:
            series.values.append(result.value)
        else:
            series.unscored[result.missing.cause if result.missing is not None else "unknown"] += 1

    def add_jury(self, j: Judgment) -> None:
        """A jury's verdict: its score series only (its members' judgments carry the calls and cost)."""
        series = self.scores[(j.rubric, j.judge)]
        if j.status == "scored":
            if j.score is not None:
                series.values.append(j.score)
        elif j.status == "unscored":
            series.unscored[j.reason or "unknown"] += 1
        else:
            series.failed[j.reason or "unknown"] += 1

    def add_conversation(self, rubric: str, judge: str, value: float | None, reason: str | None) -> None:
        """A conversation's score of its judged turns (``planning.turns.aggregate``), or why it has none."""
        series = self.scores[(rubric, judge)]
        if value is not None:
            series.values.append(value)
        else:
            series.unscored[reason or "unknown"] += 1

    def add_turn_score(self, rubric: str, judge: str, conversation: int, score: float) -> None:
        clusters, values = self.turn_scores[(rubric, judge)]
        clusters.append(conversation)
        values.append(score)

    def _conversations(self) -> ConversationSummary | None:
        options = self.turn_options
        if options is None:
            return ConversationSummary(multi_turn=self.multi_turn) if self.multi_turn else None
        from ..stats.cluster import cluster_bootstrap_ci, cluster_mean_se  # numpy: only a run judged per turn loads it

        turn_scores: dict[str, dict[str, TurnScoreSummary]] = {}
        for (rubric, judge), (clusters, values) in self.turn_scores.items():
            ci = cluster_bootstrap_ci(values, clusters) if len(values) else None
            turn_scores.setdefault(rubric, {})[judge] = TurnScoreSummary(
                turns=len(values),
                conversations=len(set(clusters)),
                mean=statistics.fmean(values) if len(values) else None,
                se_clustered=cluster_mean_se(values, clusters) if len(values) else None,
                ci95_clustered=list(ci) if ci is not None else None,
            )
        return ConversationSummary(
            multi_turn=self.multi_turn,
            judged_as="per turn",
            turns=options.describe(),
            aggregate=options.aggregate,
            aggregate_rule=options.rule(),
            pass_threshold=options.pass_threshold,
            history_window={"turns": options.window.turns, "tokens": options.window.tokens},
            judged_turns=self.judged_turns,
            turns_absent=self.turns_absent,
            turn_scores={rubric: dict(sorted(by.items())) for rubric, by in sorted(turn_scores.items())},
        )

    def add(self, j: Judgment, to_series: bool = True) -> None:
        """One judgment; ``to_series=False``: a turn's, whose score goes to its conversation's
        (``add_conversation``) and to the turn scores, not to the rubric's series."""
        self.status_counts[j.status] += 1
        if j.sample_scores is not None:
            values = [v for v in j.sample_scores if v is not None]
            if values:
                mean = statistics.fmean(values)
                variance = statistics.variance(values) if len(values) > 1 else 0.0
                self.sample_groups[(j.rubric, j.judge)].append((len(values), mean, variance))
        series = self.scores[(j.rubric, j.judge)] if to_series else _Series()
        stats = self.judge_stats[j.judge]
        if j.status == "scored":
            if j.score is not None:  # a categorical rubric's label is not a number: no numeric series
                series.values.append(j.score)
            series.clamped += j.clamped
        elif j.status == "unscored":
            series.unscored[j.reason or "unknown"] += 1
            stats.unscored[j.reason or "unknown"] += 1
            if j.reason == "missing_input" and (lacked := missing_inputs_of(j.error)) is not None:
                stats.missing[", ".join(lacked)] += 1
        else:
            series.failed[j.reason or "unknown"] += 1
            stats.failed += 1
        if j.reason:
            self.reason_counts[(j.status, j.reason)] += 1
        if not j.called:
            return
        # what the prompt was made of: a cache hit's prompt was cut or compacted the same way
        stats.truncated_input += j.truncated_input
        stats.compacted_input += j.compacted_input
        self.costs[(j.judge, j.rubric)].add(j)
        if j.cached:
            stats.cache_hits += 1
            return
        stats.calls += 1
        stats.requests += j.attempts
        stats.prompt_tokens += j.prompt_tokens or 0
        stats.completion_tokens += j.completion_tokens or 0
        stats.reasoning_tokens += j.reasoning_tokens or 0
        if j.cached_tokens:
            stats.cached_tokens += j.cached_tokens
            stats.prompt_cache_saved += prompt_cache_saving(self._judge[j.judge], j.cached_tokens)
        if j.status != "failed" and j.cost_usd is None:
            stats.cost_unknown += 1
        if j.latency_ms is not None and j.status != "failed":
            stats.latencies.append(j.latency_ms)

    def _cost_section(self) -> CostSummary:
        priced = {j.name: j.has_prices for j in self.judges}
        by_judge: dict[str, _Cost] = defaultdict(_Cost)
        for (judge, _), cost in self.costs.items():
            by_judge[judge].merge(cost)
        total = _Cost()
        for cost in by_judge.values():
            total.merge(cost)
        return CostSummary(
            total=total.figures(all(priced.values())),
            by_judge={j.name: by_judge[j.name].figures(priced[j.name]) for j in self.judges},
            by_rubric={rubric: {j.name: self.costs[(j.name, rubric)].figures(priced[j.name]) for j in self.judges} for rubric in self.rubrics},
            note=None if all(priced.values()) and not total.unknown else cost_note(all(priced.values()), total.usage_unknown),
            unpriced_models=sorted({j.model for j in self.judges if not j.has_prices}),
        )

    def summary(self, *, wall_time_s: float, record: RunRecord) -> RunSummary:
        """summary.json: ``record`` (what the run was, as it set it), then the aggregates."""
        cost = self._cost_section()
        judges = {j.name: self.judge_stats[j.name].as_summary(cost.by_judge[j.name], j.has_prices) for j in self.judges}
        computed = set(RunSummary.model_fields) - set(RunRecord.model_fields)
        names = [j.name for j in self.judges] + self.juries
        return RunSummary.model_validate(
            {
                **record.model_dump(exclude_unset=True, exclude=computed),
                "transcripts": self.transcripts,
                "judgments": dict(sorted(self.status_counts.items())),
                "rubrics": {rubric: {name: self.scores[(rubric, name)].as_summary(self.bounds[rubric]) for name in names} for rubric in self.rubrics},
                "composites": {
                    composite: {name: self.composite_scores[(composite, name)].as_summary((0.0, 1.0)) for name in names}
                    for composite in self.composites
                },
                "judges": judges,
                "judge_noise": {
                    rubric: {judge: NoiseSummary(**noise_share(groups)) for (r, judge), groups in sorted(self.sample_groups.items()) if r == rubric}
                    for rubric in sorted({r for r, _ in self.sample_groups})
                },
                "cost_usd": cost.total.total_usd,
                "cost": cost,
                "performance": {
                    name: PerformanceSummary.model_validate(describe(values) | percentiles(values)) for name, values in self.performance.items()
                },
                "agent": {name: _agent_summary(name, series) for name, series in self.agent.items()},
                **({"conversations": conversations} if (conversations := self._conversations()) is not None else {}),
                "wall_time_s": round(wall_time_s, 3),
            }
        )


def _agent_summary(name: str, series: _Series) -> AgentMetricSummary:
    spec = AGENT_SPECS[name]
    # an unbounded metric (a count, a time) has percentiles; a bounded one, a scale. A count's
    # interval is cut at 0 as a bounded mean's is at its scale
    spread = percentiles(series.values) if spec.scale is None else {}
    return AgentMetricSummary.model_validate(
        {
            "scale": list(spec.scale) if spec.scale is not None else None,
            "direction": spec.direction,
            **series.described(spec.scale if spec.scale is not None else (0.0, math.inf)),
            "unscored": sum(series.unscored.values()),
            "unscored_reasons": dict(sorted(series.unscored.items())),
            **spread,
        }
    )
