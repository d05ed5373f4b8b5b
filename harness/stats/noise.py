"""How much of the variance between transcripts is judge noise: a one-way random-effects ANOVA
over repeated samples (Shrout & Fleiss 1979, ICC(1); McGraw & Wong 1996, case 1).

Each transcript i has n_i ≥ 1 scored samples with mean m_i and variance s_i² (ddof = 1). With
N = Σ n_i samples over g transcripts and grand mean m:

    MSB = Σ n_i (m_i − m)² / (g − 1)                       between transcripts
    MSW = Σ (n_i − 1) s_i² / (N − g)                         within (the judge's own noise)
    n0  = (N − Σ n_i² / N) / (g − 1)                         the mean group size (= k balanced)
    σ²_transcripts = max(0, (MSB − MSW) / n0),  σ²_noise = MSW
    noise share = σ²_noise / (σ²_noise + σ²_transcripts) = 1 − ICC(1)

so a noise share of 0.25 says a quarter of the variance of single judge scores is the judge
disagreeing with itself, not the transcripts differing. Averaging k samples divides the noise
variance by k; ``noise_share_of_mean`` is the share left in the k-sample mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def noise_share(groups: Sequence[tuple[int, float, float]]) -> dict[str, Any]:
    """``groups``: (n_i, mean_i, variance_i) per transcript. Needs ≥ 2 transcripts and at least one
    with ≥ 2 samples; otherwise every figure is None and ``note`` says why."""
    empty = {
        "transcripts": len(groups),
        "samples": sum(n for n, _, _ in groups),
        "noise_variance": None,
        "transcript_variance": None,
        "noise_share": None,
        "noise_share_of_mean": None,
        "mean_spread": None,
    }
    big = sum(n for n, _, _ in groups)
    g = len(groups)
    if g < 2 or big - g < 1:
        return {**empty, "note": "needs at least 2 transcripts and one with 2 or more scored samples"}
    grand = sum(n * m for n, m, _ in groups) / big
    msb = sum(n * (m - grand) ** 2 for n, m, _ in groups) / (g - 1)
    msw = sum((n - 1) * v for n, _, v in groups) / (big - g)
    n0 = (big - sum(n * n for n, _, _ in groups) / big) / (g - 1)
    between = max(0.0, (msb - msw) / n0)
    total = msw + between
    share = msw / total if total > 0 else None
    k = big / g
    of_mean = (msw / k) / (msw / k + between) if total > 0 else None
    spreads = [v**0.5 for n, _, v in groups if n > 1]
    return {
        **empty,
        "noise_variance": msw,
        "transcript_variance": between,
        "noise_share": share,
        "noise_share_of_mean": of_mean,
        "mean_spread": sum(spreads) / len(spreads) if spreads else None,
        "note": None if total > 0 else "every sample of every transcript has the same score",
    }
