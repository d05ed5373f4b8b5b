"""Intervals over turn scores that resample the independent unit: the conversation.

Turns of one conversation share its user, its task and its agent's state, so their scores are
correlated; an interval that treats N turns as N independent draws is too narrow (it undercovers:
``tests/stats/test_cluster.py`` simulates it). Here the estimand is the **mean turn score** (every
judged turn weighted alike, the sum of all turn scores over the number of turns) and the
conversation is the sampled unit:

- :func:`cluster_mean_se`: the cluster-robust (CR1) standard error of that mean, the sandwich
  estimator of an intercept-only regression clustered by conversation, with the small-sample
  factor G/(G-1)·(N-1)/(N-1) = G/(G-1) (Cameron & Miller 2015, "A Practitioner's Guide to
  Cluster-Robust Inference", section IIC; statsmodels' ``cov_type="cluster"``, checked in the tests);
- :func:`cluster_bootstrap_ci`: the percentile interval of the same mean under the cluster (pairs)
  bootstrap: conversations drawn with replacement, each bringing all its turns (Cameron, Gelbach &
  Miller 2008, section 3; Field & Welsh 2007), with a fixed seed so a run's summary is reproducible.

With fewer than two conversations neither is defined (``None``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Resamples of the cluster bootstrap, and its seed (summary.json must be reproducible).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_240_601


def _by_cluster(values: Sequence[float], clusters: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's sum of values and its number of values, in first-seen order."""
    if len(values) != len(clusters):
        raise ValueError(f"values and clusters differ in length ({len(values)} and {len(clusters)})")
    index: dict[object, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64, count=len(clusters))
    x = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError("values contains NaN or infinite values")
    sums = np.bincount(codes, weights=x, minlength=len(index))
    sizes = np.bincount(codes, minlength=len(index)).astype(float)
    return sums, sizes


def cluster_mean_se(values: Sequence[float], clusters: Sequence[object]) -> float | None:
    """CR1 standard error of the mean of ``values`` clustered by ``clusters`` (module docstring)."""
    sums, sizes = _by_cluster(values, clusters)
    groups = len(sums)
    if groups < 2:
        return None
    n = float(sizes.sum())
    mean = float(sums.sum() / n)
    scores = sums - sizes * mean  # each cluster's sum of residuals
    meat = float(np.dot(scores, scores))
    variance = groups / (groups - 1) * meat / (n * n)
    return math.sqrt(variance)


def cluster_bootstrap_ci(
    values: Sequence[float],
    clusters: Sequence[object],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile cluster-bootstrap interval of the mean turn score (module docstring)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    sums, sizes = _by_cluster(values, clusters)
    groups = len(sums)
    if groups < 2:
        return None
    rng = np.random.default_rng(seed)
    # each resample: how many times each conversation is drawn (a multinomial of G draws)
    counts = rng.multinomial(groups, np.full(groups, 1.0 / groups), size=resamples).astype(float)
    means = (counts @ sums) / (counts @ sizes)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def naive_mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval treating every value as independent (the interval that undercovers
    clustered data; for comparison only)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return None
    half = float(stats.t.ppf((1 + confidence) / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return float(x.mean() - half), float(x.mean() + half)
