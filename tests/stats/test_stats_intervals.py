"""Normal, Wilson, t and bootstrap intervals against statsmodels, SciPy and direct references."""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import (
    UndefinedMetricWarning,
    bootstrap_interval,
    mean_interval,
    normal_interval,
    wilson_interval,
)

TOL = {"rel": 1e-9, "abs": 1e-12}
CONFIDENCES = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 0.999])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    CONFIDENCES,
)
def test_proportion_intervals_match_statsmodels(case, confidence):
    from statsmodels.stats.proportion import proportion_confint

    k, n = case
    for ours, method in ((normal_interval, "normal"), (wilson_interval, "wilson")):
        low, high = ours(k, n, confidence)
        want = proportion_confint(k, n, alpha=1 - confidence, method=method)
        assert (low, high) == pytest.approx(want, **TOL), method
        assert 0.0 <= low <= k / n <= high <= 1.0


def test_proportion_intervals_broadcast_over_arrays():
    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(0)
    n = rng.integers(1, 1000, 50)
    k = rng.integers(0, n + 1)
    for ours, method in ((normal_interval, "normal"), (wilson_interval, "wilson")):
        low, high = ours(k, n, 0.9)
        want_low, want_high = proportion_confint(k, n, alpha=0.1, method=method)
        np.testing.assert_allclose(low, want_low, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(high, want_high, rtol=1e-9, atol=1e-12)


def test_proportion_intervals_follow_the_seed_formulas():
    # seeds/004 sections 8.1-8.2 with their rounded z = 1.96 (the library uses the exact quantile)
    k, n, z = 87, 120, 1.96
    p = k / n
    half = z * math.sqrt(p * (1 - p) / n)
    assert normal_interval(k, n) == pytest.approx((p - half, p + half), abs=1e-4)
    centre, spread = (
        p + z**2 / (2 * n),
        z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)),
    )
    wilson = ((centre - spread) / (1 + z**2 / n), (centre + spread) / (1 + z**2 / n))
    assert wilson_interval(k, n) == pytest.approx(wilson, abs=1e-4)
    # the raw normal formula leaves [0, 1] near the edges; the interval is clipped
    assert normal_interval(1, 3)[0] == 0.0 and normal_interval(2, 3)[1] == 1.0


@pytest.mark.parametrize(
    ("k", "n", "message"),
    [
        (1, 0, "positive integer"),
        (5, 4, "between 0 and n"),
        (-1, 4, "between 0 and n"),
        (1, 2.5, "integer"),
        ([], [], "must not be empty"),
    ],
)
def test_proportion_intervals_reject_bad_counts(k, n, message):
    with pytest.raises(ValueError, match=message):
        wilson_interval(k, n)


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1])
def test_confidence_must_be_a_probability(confidence):
    with pytest.raises(ValueError, match="confidence"):
        normal_interval(1, 2, confidence)
    with pytest.raises(ValueError, match="confidence"):
        mean_interval([1, 2], confidence)


@pytest.mark.parametrize("seed", range(60))
def test_mean_interval_matches_statsmodels(seed):
    from statsmodels.stats.weightstats import DescrStatsW

    rng = np.random.default_rng(seed)
    values = rng.normal(rng.normal(), rng.uniform(0.1, 5), int(rng.integers(2, 200)))
    confidence = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
    want = DescrStatsW(values).tconfint_mean(alpha=1 - confidence)
    assert mean_interval(values, confidence) == pytest.approx(want, **TOL)


def test_mean_interval_approaches_the_seed_normal_formula():
    # seeds/002: mean +- 1.96 sigma / sqrt(n); the t interval is wider, and converges to it
    values = np.random.default_rng(1).normal(size=20_000)
    half = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    low, high = mean_interval(values)
    assert (low, high) == pytest.approx((values.mean() - half, values.mean() + half), abs=1e-5)
    small = values[:5]
    assert mean_interval(small)[1] - mean_interval(small)[0] > 2 * 1.96 * small.std(ddof=1) / math.sqrt(5)


def test_mean_interval_guards():
    with pytest.raises(ValueError, match="values is empty"):
        mean_interval([])
    with pytest.raises(ValueError, match="at least 2"):
        mean_interval([1.0])
    assert mean_interval([3.0, 3.0, 3.0]) == (3.0, 3.0)


def _trimmed_mean(x, axis=-1):
    from scipy import stats

    return stats.trim_mean(x, 0.1, axis=axis)


STATISTICS = {
    "mean": np.mean,
    "median": np.median,
    "trimmed mean (axis keyword)": _trimmed_mean,
    "std (no axis: called per resample)": lambda x: float(np.std(x, ddof=1)),
}


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("name", list(STATISTICS))
@pytest.mark.parametrize("seed", range(6))
def test_bootstrap_matches_scipy(seed, name, method):
    from scipy import stats

    rng = np.random.default_rng(seed)
    values = rng.lognormal(0, 1, int(rng.integers(10, 80)))
    statistic = STATISTICS[name]
    rows, n_resamples = int(rng.integers(1, 50)), int(rng.integers(200, 1200))
    confidence = float(rng.choice([0.9, 0.95]))
    got = bootstrap_interval(
        values,
        statistic,
        confidence,
        n_resamples,
        method,
        seed=seed,
        max_elements=rows * values.size,
    )
    want = stats.bootstrap(
        (values,),
        statistic,
        n_resamples=n_resamples,
        batch=rows,
        method=method,
        confidence_level=confidence,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    assert got == pytest.approx((want.low, want.high), **TOL)


@pytest.mark.parametrize("seed", range(10))
def test_bootstrap_chunking_does_not_change_the_result(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=int(rng.integers(2, 300)))
    n_resamples = 700
    # direct, non-chunked reference from the same generator draws
    draws = np.random.default_rng(seed).integers(0, values.size, (n_resamples, values.size))
    want = tuple(np.quantile(values[draws].mean(axis=1), [0.025, 0.975]))
    for budget in (1, values.size * 3 + 1, 10**9):
        got = bootstrap_interval(values, n_resamples=n_resamples, seed=seed, max_elements=budget)
        assert got == pytest.approx(want, **TOL)


def test_bootstrap_respects_the_element_budget():
    values = np.arange(1000.0)
    seen = []

    def recording_mean(x, axis=-1):
        seen.append(x.shape)
        return np.mean(x, axis=axis)

    bootstrap_interval(values, recording_mean, n_resamples=95, method="bca", max_elements=4000)
    assert max(rows * n for rows, n in seen) <= 4000
    assert sum(rows for rows, n in seen if n == 1000) == 95 + 1  # resamples + the estimate itself
    assert sum(rows for rows, n in seen if n == 999) == 1000  # jackknife
    seen.clear()
    bootstrap_interval(values, recording_mean, n_resamples=3, max_elements=10)  # budget < n
    assert seen == [(1, 1000)] * 3


def test_bootstrap_memory_stays_bounded():
    values = np.random.default_rng(0).normal(size=100_000)
    tracemalloc.start()
    try:
        bootstrap_interval(values, n_resamples=300, max_elements=1 << 18)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full = 300 * values.size * 16  # indices + gathered values of all resamples at once: 458 MiB
    assert peak < 8 * 2**20 < full / 50


def test_bootstrap_of_the_mean_covers_like_the_t_interval():
    values = np.random.default_rng(5).normal(10, 2, 400)
    low, high = bootstrap_interval(values, n_resamples=4000, seed=1)
    t_low, t_high = mean_interval(values)
    assert low == pytest.approx(t_low, abs=0.03) and high == pytest.approx(t_high, abs=0.03)


def test_bootstrap_accepts_a_generator_and_is_reproducible():
    values = np.random.default_rng(2).normal(size=50)
    assert bootstrap_interval(values, seed=3, n_resamples=300) == bootstrap_interval(values, seed=3, n_resamples=300)
    first = bootstrap_interval(values, seed=np.random.default_rng(3), n_resamples=300)
    assert first == bootstrap_interval(values, seed=3, n_resamples=300)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_of_constant_values(method):
    assert bootstrap_interval([4.0] * 10, n_resamples=50, method=method) == (4.0, 4.0)


def test_bca_falls_back_to_percentile_when_undefined():
    # Nearly every resample has fewer distinct values than the data, so every bootstrap statistic
    # lies below the estimate: z0 = -inf and BCa is undefined (SciPy returns NaN here).
    values = np.arange(20.0)

    def distinct(x):
        return float(np.unique(x).size)

    with pytest.warns(UndefinedMetricWarning, match="BCa interval undefined"):
        got = bootstrap_interval(values, distinct, n_resamples=300, method="bca")
    assert got == bootstrap_interval(values, distinct, n_resamples=300, method="percentile")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values": []}, "values is empty"),
        ({"values": [1.0]}, "at least 2"),
        ({"values": [1.0, np.nan]}, "NaN"),
        ({"values": [[1.0, 2.0]]}, "one-dimensional"),
        ({"values": [1.0, 2.0], "n_resamples": 0}, "n_resamples"),
        ({"values": [1.0, 2.0], "n_resamples": 2.5}, "n_resamples"),
        ({"values": [1.0, 2.0], "method": "basic"}, "method"),
        ({"values": [1.0, 2.0], "confidence": 1.0}, "confidence"),
        ({"values": [1.0, 2.0], "max_elements": 0}, "max_elements"),
        (
            {"values": [1.0, 2.0], "statistic": lambda x, axis: x},
            "one number per resample",
        ),
    ],
)
def test_bootstrap_rejects_bad_arguments(kwargs, message):
    kwargs.setdefault("n_resamples", 10)
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(**kwargs)
