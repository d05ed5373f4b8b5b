"""The report's aggregates that summary.json does not already hold: histograms and judge health.

Means, confidence intervals, percentiles and costs are taken from summary.json as the run wrote
them, so the report and the summary can never disagree. What is computed here is only what needs
the rows: the bins of each distribution, and per judge and rubric how often a reply could not be
parsed, was clamped, or needed a retry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, get_args

import numpy as np

from ..rows import JudgmentRow
from ..rubrics.parsing import ParseReason

#: Reasons that mean the judge answered and its reply held no usable score (or label).
PARSE_FAILURES: tuple[str, ...] = get_args(ParseReason)
SCORE_BINS = 20
LATENCY_BINS = 24
#: When the largest latency is more than this many times the 99th percentile, values above p99 share one bin.
OVERFLOW_RATIO = 1.5
MAX_COUNT_BINS = 30


def _num(x: float) -> str:
    return f"{x:.3g}"


def score_histogram(values: Sequence[float] | np.ndarray, scale: tuple[float, float] | None) -> dict[str, Any]:
    """Counts on the metric's scale: one bin per step of an integer scale 2 to 20 steps long (1..5 has
    5 bins), else 20 equal bins from the scale's low to high end (both ends in: np.histogram)."""
    data = np.asarray(values, dtype=float)
    if scale is None:
        lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 1.0)
    else:
        lo, hi = float(scale[0]), float(scale[1])
    if hi <= lo:
        hi = lo + 1.0
    if lo.is_integer() and hi.is_integer() and 2 <= hi - lo <= 20:
        steps = np.arange(lo, hi + 1)
        edges = np.append(steps - 0.5, hi + 0.5)
        labels = [f"{s:g}" for s in steps]
    else:
        edges = np.linspace(lo, hi, SCORE_BINS + 1)
        labels = [f"{_num(a)}–{_num(b)}" for a, b in pairwise(edges)]
    counts, _ = np.histogram(np.clip(data, edges[0], edges[-1]), bins=edges)
    return {"labels": labels, "counts": counts.tolist()}


def label_histogram(labels: Sequence[str], counts: Mapping[str, int]) -> dict[str, Any]:
    """Judgments per label of a categorical rubric, in the rubric's order."""
    extra = sorted(set(counts) - set(labels))  # a label the rubric file no longer lists
    names = [*labels, *extra]
    return {"labels": names, "counts": [int(counts.get(n, 0)) for n in names]}


def fmt_ms(ms: float) -> str:
    """Three significant digits, in seconds from 1 s on (999.7 ms is "1 s", never "1e+03 ms")."""
    if float(f"{ms:.3g}") >= 1000:
        return f"{ms / 1000:.3g} s"
    return f"{ms:.3g} ms"


def latency_edges(values: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """Bin edges for latencies, and whether the last bin is an overflow bin.

    Equal bins from 0, so bar heights compare as densities. When the largest value is far above the
    99th percentile, the bins span 0..p99 and one last bin holds everything above it, so a few
    stragglers (a call that was retried, a hung tool) do not squeeze the rest into one bar.
    """
    if values.size == 0:
        return None
    hi = float(values.max())
    if hi <= 0:
        return np.array([0.0, 1.0]), False
    p99 = float(np.percentile(values, 99))
    if p99 > 0 and hi > OVERFLOW_RATIO * p99:
        return np.append(np.linspace(0.0, p99, LATENCY_BINS), hi), True
    return np.linspace(0.0, hi, LATENCY_BINS + 1), False


def latency_histogram(values: Sequence[float] | np.ndarray) -> dict[str, Any] | None:
    data = np.asarray(values, dtype=float)
    binned = latency_edges(data)
    if binned is None:
        return None
    edges, overflow = binned
    counts, _ = np.histogram(data, bins=edges)
    labels = [f"{fmt_ms(a)}–{fmt_ms(b)}" for a, b in pairwise(edges)]
    if overflow:
        labels[-1] = f"> {fmt_ms(edges[-2])} (to {fmt_ms(edges[-1])})"
    return {"labels": labels, "counts": counts.tolist(), "overflow": overflow}


def count_histogram(values: Sequence[int]) -> dict[str, Any] | None:
    """Transcripts per tool-call count 0, 1, 2, …; counts above MAX_COUNT_BINS share the last bin."""
    if not values:
        return None
    top = min(max(values), MAX_COUNT_BINS)
    counts = [0] * (top + 1)
    for v in values:
        counts[min(v, top)] += 1
    labels = [str(i) for i in range(top + 1)]
    if max(values) > MAX_COUNT_BINS:
        labels[-1] = f"≥{MAX_COUNT_BINS}"
    return {"labels": labels, "counts": counts}


@dataclass(slots=True)
class Health:
    """One judge on one rubric: what came back, and how well it could be read."""

    judgments: int = 0
    answered: int = 0  # replies that were parsed (scored, or unscored for a parse reason)
    scored: int = 0
    parse_failures: Counter[str] = field(default_factory=Counter)
    clamped: int = 0
    live: int = 0  # judgments that called the judge (not cached, not skipped)
    cached: int = 0
    retried: int = 0  # live judgments that needed more than one attempt
    attempts: int = 0
    billed_retries: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    other_unscored: Counter[str] = field(default_factory=Counter)

    def add(self, row: JudgmentRow) -> None:
        self.count(row.status, row.reason, row.attempts, row.cached, row.retries, row.billed_retries, row.clamped)

    def count(self, status: str, reason: str | None, attempts: int, cached: bool, retries: int, billed_retries: int, clamped: bool) -> None:
        """`add` of a judgment given by these fields of its row (the viewer's first pass reads only them)."""
        self.judgments += 1
        if cached:
            self.cached += 1
        elif attempts:
            self.live += 1
            self.attempts += attempts
            # a sample's own request is no retry (the row's schema has ``retries``, 0 when absent)
            self.retried += retries > 0
            self.billed_retries += billed_retries
        if status == "scored":
            self.scored += 1
            self.answered += 1
            self.clamped += clamped
        elif status == "unscored" and reason in PARSE_FAILURES:
            self.answered += 1
            self.parse_failures[str(reason)] += 1
        elif status == "failed":
            self.failed[str(reason or "unknown")] += 1
        else:
            self.other_unscored[str(reason or "unknown")] += 1

    def as_dict(self) -> dict[str, Any]:
        parse = sum(self.parse_failures.values())
        return {
            "judgments": self.judgments,
            "answered": self.answered,
            "parse_failures": parse,
            "parse_failure_rate": parse / self.answered if self.answered else None,
            "parse_reasons": dict(sorted(self.parse_failures.items())),
            "clamped": self.clamped,
            "clamp_rate": self.clamped / self.scored if self.scored else None,
            "live": self.live,
            "cached": self.cached,
            "retried": self.retried,
            "retry_rate": self.retried / self.live if self.live else None,
            "attempts": self.attempts,
            "billed_retries": self.billed_retries,
            "failed": sum(self.failed.values()),
            "error_kinds": dict(sorted(self.failed.items())),
            "other_unscored": dict(sorted(self.other_unscored.items())),
        }
