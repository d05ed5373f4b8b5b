"""McNemar, paired / Welch / 5x2cv t-tests and Cohen's d against SciPy, statsmodels and references."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import (
    SignificanceResult,
    UndefinedMetricWarning,
    cohens_d,
    cv52_paired_ttest,
    mcnemar,
    paired_ttest,
    welch_ttest,
)

TOL = {"rel": 1e-9, "abs": 1e-12}


def assert_same_test(got, statistic, pvalue):
    assert isinstance(got, SignificanceResult)
    assert got.statistic == pytest.approx(float(statistic), **TOL)
    assert got.pvalue == pytest.approx(float(pvalue), **TOL)
    assert got.warnings == ()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=4, max_size=4).filter(lambda t: t[1] + t[2] > 0),
    st.booleans(),
    st.booleans(),
)
def test_mcnemar_matches_statsmodels(cells, exact, correction):
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    table = np.array(cells).reshape(2, 2)
    want = sm_mcnemar(table, exact=exact, correction=correction)
    got = mcnemar(table, exact=exact, correction=correction)
    assert_same_test(got, want.statistic, want.pvalue)
    assert got.df == (None if exact else 1.0)


def test_mcnemar_is_the_documented_formula():
    # seeds/004 section 7.1: n01 = 15, n10 = 5
    from scipy import stats

    table = [[50, 15], [5, 30]]
    assert mcnemar(table).statistic == pytest.approx((abs(15 - 5) - 1) ** 2 / 20, abs=1e-12)
    assert mcnemar(table, correction=False).statistic == pytest.approx(100 / 20, abs=1e-12)
    assert mcnemar(table).pvalue == pytest.approx(stats.chi2.sf(81 / 20, 1), abs=1e-12)
    # exact: two-sided binomial test of 5 successes in 20 at 1/2
    assert mcnemar(table, exact=True).pvalue == pytest.approx(2 * stats.binom.cdf(5, 20, 0.5), abs=1e-12)


@pytest.mark.parametrize("exact", [False, True])
def test_mcnemar_without_discordant_pairs(exact):
    got = mcnemar([[10, 0], [0, 7]], exact=exact)
    assert (got.statistic, got.pvalue) == (0.0, 1.0)
    assert "no discordant pairs" in got.warnings[0]


@pytest.mark.parametrize("table", [[[1, 2, 3]], [[1, -1], [2, 3]], [[1, 0.5], [2, 3]], [[1, np.nan], [0, 1]]])
def test_mcnemar_rejects_bad_tables(table):
    with pytest.raises(ValueError, match="McNemar"):
        mcnemar(table)


def random_samples(seed):
    rng = np.random.default_rng(seed)
    n1, n2 = (int(v) for v in rng.integers(2, 60, 2))
    return (
        rng.normal(0, rng.uniform(0.1, 3), n1),
        rng.normal(rng.normal(), rng.uniform(0.1, 3), n2),
        rng,
    )


@pytest.mark.parametrize("seed", range(60))
def test_paired_ttest_matches_scipy(seed):
    from scipy import stats

    a, _, rng = random_samples(seed)
    b = a + rng.normal(0.2, 1.0, a.size)
    want = stats.ttest_rel(a, b)
    got = paired_ttest(a, b)
    assert_same_test(got, want.statistic, want.pvalue)
    assert got.df == a.size - 1


@pytest.mark.parametrize("seed", range(60))
def test_welch_ttest_matches_scipy_and_statsmodels(seed):
    from scipy import stats
    from statsmodels.stats.weightstats import ttest_ind as sm_ttest_ind

    a, b, _ = random_samples(seed)
    want = stats.ttest_ind(a, b, equal_var=False)
    got = welch_ttest(a, b)
    assert_same_test(got, want.statistic, want.pvalue)
    t, p, df = sm_ttest_ind(a, b, usevar="unequal")
    assert (got.statistic, got.pvalue, got.df) == pytest.approx((t, p, df), **TOL)


@pytest.mark.parametrize("seed", range(60))
def test_cohens_d_matches_the_student_t_identity(seed):
    # independent route: d = t_student * sqrt(1/n_a + 1/n_b), t from scipy's equal-variance t-test
    from scipy import stats

    a, b, _ = random_samples(seed)
    t = stats.ttest_ind(a, b, equal_var=True).statistic
    assert cohens_d(a, b) == pytest.approx(t * math.sqrt(1 / a.size + 1 / b.size), **TOL)
    assert cohens_d(b, a) == pytest.approx(-cohens_d(a, b), **TOL)


def test_cohens_d_small_example():
    # a: mean 2, SS 2; b: mean 5, SS 8; pooled variance (2 + 8) / 4 = 2.5
    assert cohens_d([1, 2, 3], [3, 5, 7]) == pytest.approx(-3 / math.sqrt(2.5), abs=1e-12)


def test_zero_variance_cases():
    with pytest.warns(UndefinedMetricWarning):
        assert cohens_d([1, 1, 1], [1, 1]) == 0.0
    with pytest.warns(UndefinedMetricWarning):
        assert cohens_d([2, 2, 2], [1, 1]) == math.inf
    same = paired_ttest([1, 2, 3], [1, 2, 3])
    assert (same.statistic, same.pvalue) == (0.0, 1.0) and same.warnings
    shifted = welch_ttest([1, 1, 1], [2, 2])
    assert (shifted.statistic, shifted.pvalue) == (-math.inf, 0.0) and shifted.warnings
    flat = cv52_paired_ttest(np.full((5, 2), 0.25))
    assert (flat.statistic, flat.pvalue) == (math.inf, 0.0) and flat.warnings


def cv52_reference(diffs):
    """Dietterich (1998) written out with loops."""
    from scipy import stats

    s2 = []
    for j in range(5):
        mean_j = (diffs[j][0] + diffs[j][1]) / 2
        s2.append((diffs[j][0] - mean_j) ** 2 + (diffs[j][1] - mean_j) ** 2)
    t = diffs[0][0] / math.sqrt(sum(s2) / 5)
    return t, 2 * stats.t.sf(abs(t), 5)


@pytest.mark.parametrize("seed", range(60))
def test_cv52_matches_reference(seed):
    rng = np.random.default_rng(seed)
    diffs = rng.normal(rng.normal(0, 0.05), rng.uniform(0.001, 0.1), (5, 2))
    got = cv52_paired_ttest(diffs)
    assert_same_test(got, *cv52_reference(diffs.tolist()))
    assert got.df == 5
    # s_j^2 is the ddof=1 sample variance of each replication's two differences
    t = diffs[0, 0] / math.sqrt(np.var(diffs, axis=1, ddof=1).mean())
    assert got.statistic == pytest.approx(t, **TOL)


def test_cv52_hand_example():
    # one replication with differences (1, -1): mean 0, s^2 = 2; the others are flat.
    diffs = np.zeros((5, 2))
    diffs[0] = [1, -1]
    got = cv52_paired_ttest(diffs)
    assert got.statistic == pytest.approx(1 / math.sqrt(2 / 5), abs=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_ttest([], []), "a is empty"),
        (lambda: paired_ttest([1], [2]), "at least 2"),
        (lambda: paired_ttest([1, 2, 3], [1, 2]), "equal lengths"),
        (lambda: welch_ttest([1, 2], [3]), "b has 1 value"),
        (lambda: welch_ttest([1, np.inf], [3, 4]), "NaN or infinite"),
        (lambda: cohens_d([1], [2]), "at least three"),
        (lambda: cohens_d([], [1, 2, 3]), "a is empty"),
        (lambda: cv52_paired_ttest(np.zeros((2, 5))), r"shape \(5, 2\)"),
    ],
)
def test_bad_input_raises_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_results_are_frozen():
    got = mcnemar([[1, 2], [3, 4]])
    with pytest.raises(AttributeError):
        got.pvalue = 0.5  # type: ignore[misc]
