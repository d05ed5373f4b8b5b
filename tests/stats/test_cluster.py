"""Intervals over turn scores clustered by conversation (``harness.stats.cluster``):

- the CR1 standard error of the mean turn score against statsmodels (an intercept-only OLS with
  ``cov_type="cluster"``), on random unbalanced conversations;
- the cluster bootstrap interval against a hand-rolled resampler written independently here (a
  loop that draws conversation ids with ``random.Random`` and pools their turns), and its width
  against the CR1 interval;
- a simulation with correlated turns (a random effect per conversation): the naive per-turn t
  interval undercovers the true mean, the clustered intervals hold about 95%.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.stats.cluster import cluster_bootstrap_ci, cluster_mean_se, naive_mean_ci

pytestmark = pytest.mark.timeout(120)


def _conversations(rng: np.random.Generator, groups: int, icc_sd: float = 0.3) -> tuple[list[float], list[int]]:
    """Turn scores of ``groups`` conversations of 1-12 turns, sharing a conversation effect."""
    values: list[float] = []
    clusters: list[int] = []
    for g in range(groups):
        effect = rng.normal(0.0, icc_sd)
        for _ in range(int(rng.integers(1, 13))):
            values.append(float(0.6 + effect + rng.normal(0.0, 0.15)))
            clusters.append(g)
    return values, clusters


@pytest.mark.parametrize("seed", range(5))
def test_cluster_se_equals_statsmodels_cluster_robust_ols(seed: int) -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(seed)
    values, clusters = _conversations(rng, int(rng.integers(3, 40)))
    fit = sm.OLS(np.asarray(values), np.ones((len(values), 1))).fit(cov_type="cluster", cov_kwds={"groups": np.asarray(clusters)})
    assert cluster_mean_se(values, clusters) == pytest.approx(float(fit.bse[0]), rel=1e-10)


def test_cluster_se_with_string_ids_and_the_guards() -> None:
    assert cluster_mean_se([0.5, 0.7], ["a", "a"]) is None  # one conversation: undefined
    assert cluster_bootstrap_ci([0.5, 0.7], ["a", "a"]) is None
    with pytest.raises(ValueError, match="NaN"):
        cluster_mean_se([0.5, math.nan], ["a", "b"])
    with pytest.raises(ValueError, match="length"):
        cluster_mean_se([0.5], ["a", "b"])
    # two conversations of one turn each: the mean of two values, CR1 = the sample sd / sqrt(2)
    assert cluster_mean_se([0.2, 0.6], ["a", "b"]) == pytest.approx(0.2)


def _hand_rolled_bootstrap(values: list[float], clusters: list[int], resamples: int, seed: int) -> tuple[float, float]:
    """An independent cluster bootstrap: draw conversation ids, pool their turns, take the mean."""
    by: dict[int, list[float]] = {}
    for v, c in zip(values, clusters, strict=True):
        by.setdefault(c, []).append(v)
    ids = sorted(by)
    rand = random.Random(seed)
    means = []
    for _ in range(resamples):
        pooled = [v for _ in ids for v in by[rand.choice(ids)]]
        means.append(sum(pooled) / len(pooled))
    means.sort()
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def test_cluster_bootstrap_agrees_with_an_independent_resampler_and_with_cr1() -> None:
    rng = np.random.default_rng(7)
    values, clusters = _conversations(rng, 40)
    ours = cluster_bootstrap_ci(values, clusters, resamples=4000)
    theirs = _hand_rolled_bootstrap(values, clusters, 4000, seed=1)
    assert ours is not None
    se = cluster_mean_se(values, clusters)
    assert se is not None
    # two Monte Carlo estimates of one interval: the ends agree to a small share of its width
    width = ours[1] - ours[0]
    assert abs(ours[0] - theirs[0]) < 0.08 * width and abs(ours[1] - theirs[1]) < 0.08 * width
    # and its width is about the normal interval's, 2 * 1.96 * SE (within 15%)
    assert width == pytest.approx(2 * 1.96 * se, rel=0.15)
    # reproducible: the seed is fixed
    assert cluster_bootstrap_ci(values, clusters, resamples=4000) == ours


def test_simulated_correlated_turns_naive_undercovers_clustered_holds() -> None:
    """200 runs of 30 conversations x 8 turns, intra-conversation correlation about 0.8."""
    rng = np.random.default_rng(2024)
    true_mean, runs, groups, turns = 0.6, 200, 30, 8
    naive = boot = cr1 = 0
    for _ in range(runs):
        effects = rng.normal(0.0, 0.3, size=groups)
        scores = (true_mean + effects[:, None] + rng.normal(0.0, 0.15, size=(groups, turns))).ravel()
        clusters = np.repeat(np.arange(groups), turns)
        lo, hi = naive_mean_ci(scores.tolist()) or (math.nan, math.nan)
        naive += lo <= true_mean <= hi
        blo, bhi = cluster_bootstrap_ci(scores.tolist(), clusters.tolist(), resamples=1000) or (math.nan, math.nan)
        boot += blo <= true_mean <= bhi
        se = cluster_mean_se(scores.tolist(), clusters.tolist())
        assert se is not None
        t = 2.045  # t quantile 0.975 with G - 1 = 29 degrees of freedom
        cr1 += abs(float(scores.mean()) - true_mean) <= t * se
    # the naive interval treats 240 correlated turns as independent: far below 95%
    assert naive / runs < 0.70
    # the clustered ones hold near 95% (a percentile bootstrap of 30 clusters runs a little narrow)
    assert 0.89 <= boot / runs <= 0.99
    assert 0.91 <= cr1 / runs <= 0.99
