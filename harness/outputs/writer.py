"""What a run writes to ``--out``: judgments.jsonl, results.jsonl and summary.json.

Rows are written as each transcript finishes, in input order, so outputs are deterministic and a
run of any size streams. The aggregates kept for summary.json are one float per judgment.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..config import JudgeConfig
from ..metrics.composites import Component, weighted_composite
from ..metrics.summary import describe, percentiles
from ..rubrics.rubric import Rubric
from ..runner.jobs import Entry
from ..runner.judgment import Judgment
from ..transcripts import PERFORMANCE_FIELDS


@dataclass(slots=True)
class _Series:
    values: array = field(default_factory=lambda: array("d"))
    unscored: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    clamped: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            **describe(self.values),
            "unscored": sum(self.unscored.values()),
            "unscored_reasons": dict(sorted(self.unscored.items())),
            "failed": sum(self.failed.values()),
            "failed_reasons": dict(sorted(self.failed.items())),
            "clamped": self.clamped,
        }


@dataclass(slots=True)
class _Cost:
    """Money for one judge (or one judge × rubric): paid calls, billed retries, cache savings."""

    paid: float = 0.0
    retried_billed: float = 0.0  # estimated: each billed retry priced like the call that followed it
    billed_retries: int = 0
    saved: float = 0.0

    def add(self, j: Judgment) -> None:
        if j.cached:
            self.saved += j.cost_usd or 0.0
            return
        self.billed_retries += j.billed_retries
        if j.cost_usd is not None:
            self.paid += j.cost_usd
            self.retried_billed += j.billed_retries * j.cost_usd

    def as_dict(self, priced: bool) -> dict[str, Any]:
        return {
            "paid_usd": self.paid if priced else None,
            "retried_billed_usd": self.retried_billed if priced else None,
            "billed_retries": self.billed_retries,
            "saved_by_cache_usd": self.saved if priced else None,
            "total_usd": self.paid + self.retried_billed if priced else None,
        }


@dataclass(slots=True)
class _JudgeStats:
    requests: int = 0  # attempts sent over the wire
    calls: int = 0  # judgments that needed the judge
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_unknown: int = 0  # judgments whose cost could not be computed (no price or no usage)
    failed: int = 0
    latencies: array = field(default_factory=lambda: array("d"))

    def as_dict(self, cost: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failed": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": cost["total_usd"],
            "cost_saved_usd": cost["saved_by_cache_usd"],
            "cost_note": None if cost["total_usd"] is not None else "no price configured for this judge: cost unknown",
            "cost_unknown_judgments": self.cost_unknown,
            "latency_ms": percentiles(self.latencies),
        }


class OutputSink:
    def __init__(self, out: Path, rubrics: list[Rubric], judges: list[JudgeConfig], composites: Mapping[str, Mapping[str, float]]) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.rubrics = {r.name: r for r in rubrics}
        self.judges = judges
        # A composite is computed when every rubric it weighs is part of the run.
        self.composites = {n: dict(w) for n, w in composites.items() if all(r in self.rubrics for r in w)}
        self._judgments: IO[str] = (out / "judgments.jsonl").open("w", encoding="utf-8")
        self._results: IO[str] = (out / "results.jsonl").open("w", encoding="utf-8")
        self.transcripts = 0
        self.scores: dict[tuple[str, str], _Series] = defaultdict(_Series)
        self.composite_scores: dict[tuple[str, str], _Series] = defaultdict(_Series)
        self.judge_stats: dict[str, _JudgeStats] = {j.name: _JudgeStats() for j in judges}
        self.costs: dict[tuple[str, str], _Cost] = defaultdict(_Cost)
        self.performance: dict[str, array] = {name: array("d") for name in PERFORMANCE_FIELDS}
        self.status_counts: Counter[str] = Counter()
        self.reason_counts: Counter[str] = Counter()

    def write_entry(self, entry: Entry) -> None:
        transcript = entry.transcript
        self.transcripts += 1
        scores: dict[str, dict[str, float | None]] = defaultdict(dict)
        reasons: dict[str, dict[str, str]] = defaultdict(dict)
        components: dict[str, dict[str, Component]] = defaultdict(dict)
        for job in entry.jobs:
            j = job.result
            assert j is not None
            self._judgments.write(json.dumps(j.as_dict(), ensure_ascii=False) + "\n")
            self._count(j)
            scores[j.judge][j.rubric] = j.score
            if j.status != "scored":
                reasons[j.judge][j.rubric] = f"{j.status}: {j.reason}"
            components[j.judge][j.rubric] = Component(j.status, j.score, j.reason)
        composites: dict[str, dict[str, float | None]] = defaultdict(dict)
        composite_reasons: dict[str, dict[str, str]] = defaultdict(dict)
        for judge in self.judges:
            for name, weights in self.composites.items():
                result = weighted_composite(name, weights, components[judge.name], self.rubrics)
                composites[judge.name][name] = result.value
                series = self.composite_scores[(name, judge.name)]
                if result.status == "scored":
                    assert result.value is not None
                    series.values.append(result.value)
                else:
                    composite_reasons[judge.name][name] = result.reason or ""
                    series.unscored[_reason_kind(result.reason)] += 1
        performance = transcript.performance.as_dict()
        for name, value in performance.items():
            if value is not None:
                self.performance[name].append(float(value))
        row = {
            "transcript_id": transcript.id,
            "scores": scores,
            "composites": composites,
            "unscored": reasons,
            "composites_unscored": composite_reasons,
            "performance": performance,
        }
        self._results.write(json.dumps(row, ensure_ascii=False) + "\n")

    def _count(self, j: Judgment) -> None:
        self.status_counts[j.status] += 1
        series = self.scores[(j.rubric, j.judge)]
        stats = self.judge_stats[j.judge]
        if j.status == "scored":
            if j.score is not None:  # a categorical rubric's label is not a number: no numeric series
                series.values.append(j.score)
            series.clamped += j.clamped
        elif j.status == "unscored":
            series.unscored[j.reason or "unknown"] += 1
        else:
            series.failed[j.reason or "unknown"] += 1
            stats.failed += 1
        if j.reason:
            self.reason_counts[f"{j.status}:{j.reason}"] += 1
        if j.reason in ("missing_input", "cache_miss", "interrupted", "budget_exhausted") and not j.attempts:
            return
        self.costs[(j.judge, j.rubric)].add(j)
        if j.cached:
            stats.cache_hits += 1
            return
        stats.calls += 1
        stats.requests += j.attempts
        stats.prompt_tokens += j.prompt_tokens or 0
        stats.completion_tokens += j.completion_tokens or 0
        if j.status != "failed" and j.cost_usd is None:
            stats.cost_unknown += 1
        if j.latency_ms is not None and j.status != "failed":
            stats.latencies.append(j.latency_ms)

    def _cost_section(self) -> dict[str, Any]:
        priced = {j.name: j.has_prices for j in self.judges}
        by_judge: dict[str, _Cost] = defaultdict(_Cost)
        for (judge, _), cost in self.costs.items():
            merged = by_judge[judge]
            merged.paid += cost.paid
            merged.retried_billed += cost.retried_billed
            merged.billed_retries += cost.billed_retries
            merged.saved += cost.saved
        total = _Cost()
        for cost in by_judge.values():
            total.paid += cost.paid
            total.retried_billed += cost.retried_billed
            total.billed_retries += cost.billed_retries
            total.saved += cost.saved
        return {
            "total": total.as_dict(all(priced.values())),
            "by_judge": {j.name: by_judge[j.name].as_dict(priced[j.name]) for j in self.judges},
            "by_rubric": {
                rubric: {j.name: self.costs[(j.name, rubric)].as_dict(priced[j.name]) for j in self.judges}
                for rubric in self.rubrics
            },
            "note": None if all(priced.values()) else "a judge has no price: its cost is unknown (null), not 0",
        }

    def summary(self, *, wall_time_s: float, extra: Mapping[str, Any]) -> dict[str, Any]:
        cost = self._cost_section()
        judges = {j.name: self.judge_stats[j.name].as_dict(cost["by_judge"][j.name]) for j in self.judges}
        total_cost = cost["total"]["total_usd"]
        return {
            **extra,
            "transcripts": self.transcripts,
            "judgments": dict(sorted(self.status_counts.items())),
            "rubrics": {
                rubric: {judge.name: self.scores[(rubric, judge.name)].as_dict() for judge in self.judges}
                for rubric in self.rubrics
            },
            "composites": {
                name: {judge.name: self.composite_scores[(name, judge.name)].as_dict() for judge in self.judges}
                for name in self.composites
            },
            "judges": judges,
            "cost_usd": total_cost,
            "cost": cost,
            "performance": {
                name: {**describe(values), **percentiles(values)} for name, values in self.performance.items()
            },
            "wall_time_s": round(wall_time_s, 3),
        }

    def close(self) -> None:
        self._judgments.close()
        self._results.close()


def _reason_kind(reason: str | None) -> str:
    # "relevance unscored (missing_input)" -> "missing_input": the component's reason, for counting.
    if reason and reason.endswith(")") and "(" in reason:
        return reason[reason.rindex("(") + 1 : -1]
    return reason or "unknown"


def write_summary(out: Path, summary: Mapping[str, Any]) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
