"""Repeated samples: k judgments of one (transcript, rubric, judge) folded into the one judgment
judgments.jsonl reports.

- numeric rubric: the score is the mean of the scored samples, ``spread`` their standard deviation
  (ddof = 1; 0.0 for a single scored sample);
- label rubric: the label is the majority of the labelled samples (a tie goes to the label that
  comes first in the rubric's ``labels``), ``spread`` the share of labelled samples that differ
  from it;
- at least one sample scored is scored (``sample_scores`` shows which were not); none scored is
  the first sample's outcome, failures before unscored ones;
- tokens (prompt, completion, reasoning, cache reads and writes), attempts, retries and billed
  retries are summed over the samples, latency is the longest,
  ``cached`` only when every sample came from the cache; cost is the sum over the samples this run
  paid for (all of them when every sample came from the cache: what the cache saved). A sample that
  was answered but whose usage is unknown makes the sum unknown (None), never a partial sum or 0.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from .jobs import Entry, Job
from .judgment import Judgment

#: A judgment's token counts: the parts of its call's usage (``usage.py`` ``Usage``).
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "cache_write_tokens")


def _sum(values: Sequence[int | float | None]) -> int | float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _known_sum(parts: Sequence[Judgment], values: Sequence[int | float | None]) -> int | float | None:
    """The sum over the answered samples (a failed one used nothing), None if any is unknown."""
    answered = [v for p, v in zip(parts, values, strict=True) if p.status != "failed"]
    return None if any(v is None for v in answered) else _sum(values)


def combine_samples(jobs: Sequence[Job]) -> Judgment:
    """One judgment from the jobs of one (transcript, rubric, judge), in sample order."""
    results = [job.result for job in jobs]
    assert all(r is not None for r in results)
    parts: list[Judgment] = [r for r in results if r is not None]
    first = jobs[0]
    labels = first.rubric.labels
    scored = [p for p in parts if p.status == "scored"]
    base = scored[0] if scored else next((p for p in parts if p.status == "failed"), parts[0])
    combined = first.judgment(base.status, reason=base.reason, error=base.error, raw_output=base.raw_output)
    combined.samples = len(parts)
    for name in TOKEN_FIELDS:  # every part of the usage, summed alike: one unknown makes the total unknown
        setattr(combined, name, _known_sum(parts, [getattr(p, name) for p in parts]))
    combined.cached = all(p.cached for p in parts)
    # A judgment partly from the cache (k raised after a run) reports what this run paid.
    paid = [p for p in parts if combined.cached or not p.cached]
    combined.cost_usd = _known_sum(paid, [p.cost_usd for p in paid])
    latencies = [p.latency_ms for p in parts if p.latency_ms is not None]
    combined.latency_ms = max(latencies) if latencies else None
    combined.attempts = sum(p.attempts for p in parts)
    combined.retries = sum(p.retries for p in parts)
    combined.billed_retries = sum(p.billed_retries for p in parts)
    if labels is not None:
        combined.sample_labels = [p.label if p.status == "scored" else None for p in parts]
        given = [p.label for p in scored if p.label is not None]
        if given:
            counts = Counter(given)
            top = max(counts.values())
            combined.label = next(label for label in labels if counts.get(label) == top)
            combined.spread = 1.0 - top / len(given)
        return combined
    combined.sample_scores = [p.score if p.status == "scored" else None for p in parts]
    values = [p.score for p in scored if p.score is not None]
    if values:
        combined.score = statistics.fmean(values)
        raws = [p.raw_score for p in scored if p.raw_score is not None]
        combined.raw_score = statistics.fmean(raws) if raws else None
        combined.clamped = any(p.clamped for p in scored)
        combined.spread = statistics.stdev(values) if len(values) > 1 else 0.0
        distributions = [p.score_distribution for p in scored if p.score_distribution]
        if distributions:
            keys = sorted({k for d in distributions for k in d}, key=float)
            combined.score_distribution = {k: statistics.fmean(d.get(k, 0.0) for d in distributions) for k in keys}
    return combined


def collapse_samples(entry: Entry) -> None:
    """Replace each group of sample jobs in ``entry.jobs`` by its first job holding the combined judgment."""
    if all(job.samples == 1 for job in entry.jobs):
        return
    kept: list[Job] = []
    group: list[Job] = []
    for job in entry.jobs:
        if job.samples == 1:
            kept.append(job)
            continue
        group.append(job)
        if len(group) == job.samples:
            group[0].result = combine_samples(group)
            kept.append(group[0])
            group = []
    entry.jobs = kept
