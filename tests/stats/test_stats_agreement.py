"""cohen_kappa and matthews_corrcoef against scikit-learn, invariances, degenerate cases, seed example."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import UndefinedMetricWarning, cohen_kappa, matthews_corrcoef
from harness.stats.agreement import kappa_from_matrix, mcc_from_matrix

TOL = {"rel": 0, "abs": 1e-9}
SEED_MATRIX = np.array([[45, 3, 2], [4, 38, 3], [1, 2, 52]])


def sk(func, *args, **kwargs):
    from sklearn.exceptions import UndefinedMetricWarning as SkUndefined

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SkUndefined)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="A single label was found", category=UserWarning)
        return func(*args, **kwargs)


def labels_from_matrix(cm):
    i, j = np.indices(cm.shape)
    return np.repeat(i.ravel(), cm.ravel()), np.repeat(j.ravel(), cm.ravel())


def noisy_labels(seed):
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(2, 8)), int(rng.integers(2, 300))
    y_true = rng.integers(0, k, n)
    y_pred = np.where(rng.random(n) < rng.random(), y_true, rng.integers(0, k, n))
    return y_true, y_pred


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(40))
def test_kappa_matches_sklearn(seed, weights):
    from sklearn import metrics as skm

    y_true, y_pred = noisy_labels(seed)
    expected = sk(skm.cohen_kappa_score, y_true, y_pred, weights=weights)
    if np.isnan(expected):  # undefined: sklearn gives NaN, this library 0.0 with a warning
        with pytest.warns(UndefinedMetricWarning):
            assert cohen_kappa(y_true, y_pred, weights=weights) == 0.0
    else:
        assert cohen_kappa(y_true, y_pred, weights=weights) == pytest.approx(expected, **TOL)


def test_weighted_kappa_follows_the_given_label_order():
    from sklearn import metrics as skm

    y_true, y_pred = ["lo", "mid", "hi", "hi", "mid"], ["mid", "mid", "hi", "lo", "lo"]
    order = ["lo", "mid", "hi"]
    for weights in ("linear", "quadratic"):
        got = cohen_kappa(y_true, y_pred, weights=weights, labels=order)
        assert got == pytest.approx(skm.cohen_kappa_score(y_true, y_pred, weights=weights, labels=order), **TOL)
        # the default sorted order ("hi" < "lo" < "mid") is a different ordinal scale
        assert got != pytest.approx(cohen_kappa(y_true, y_pred, weights=weights), abs=1e-6)


@pytest.mark.parametrize("seed", range(60))
def test_mcc_matches_sklearn(seed):
    from sklearn import metrics as skm

    y_true, y_pred = noisy_labels(seed)
    assert matthews_corrcoef(y_true, y_pred) == pytest.approx(skm.matthews_corrcoef(y_true, y_pred), **TOL)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=40))
def test_mcc_and_kappa_property(pairs):
    from sklearn import metrics as skm

    y_true, y_pred = map(list, zip(*pairs))
    sk_mcc = sk(skm.matthews_corrcoef, y_true, y_pred)
    sk_kappa = sk(skm.cohen_kappa_score, y_true, y_pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        assert matthews_corrcoef(y_true, y_pred) == pytest.approx(sk_mcc, **TOL)
        assert cohen_kappa(y_true, y_pred) == pytest.approx(0.0 if np.isnan(sk_kappa) else sk_kappa, **TOL)


@pytest.mark.parametrize("seed", range(20))
def test_mcc_and_nominal_kappa_do_not_depend_on_class_numbering(seed):
    y_true, y_pred = noisy_labels(seed)
    rng = np.random.default_rng(seed + 1000)
    relabel = rng.permutation(int(max(y_true.max(), y_pred.max())) + 1)
    assert matthews_corrcoef(relabel[y_true], relabel[y_pred]) == pytest.approx(matthews_corrcoef(y_true, y_pred), **TOL)
    assert cohen_kappa(relabel[y_true], relabel[y_pred]) == pytest.approx(cohen_kappa(y_true, y_pred), **TOL)


def test_binary_mcc_is_the_documented_formula():
    # seeds/004 section 5.2, binary case, on explicit counts
    rng = np.random.default_rng(11)
    for _ in range(50):
        tn, fp, fn, tp = (int(v) for v in rng.integers(1, 40, 4))
        expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        assert mcc_from_matrix([[tn, fp], [fn, tp]])[0] == pytest.approx(expected, **TOL)


def test_seed_example_kappa_and_mcc():
    """seeds/004 section 9 steps 4-5, with the MCC erratum corrected (R_K)."""
    y_true, y_pred = labels_from_matrix(SEED_MATRIX)
    p_o, p_e = 135 / 150, 7570 / 22500
    assert cohen_kappa(y_true, y_pred) == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12)
    assert cohen_kappa(y_true, y_pred) == pytest.approx(0.849, abs=5e-4)
    mcc = matthews_corrcoef(y_true, y_pred)
    assert mcc == pytest.approx(0.8495, abs=5e-5)
    # The document's "Pearson correlation of the label codes" is a different number (0.8867) and
    # changes when classes are renumbered; R_K does neither.
    pearson = np.corrcoef(y_true, y_pred)[0, 1]
    assert pearson == pytest.approx(0.8867, abs=5e-5)
    swapped = np.array([1, 0, 2])
    assert np.corrcoef(swapped[y_true], swapped[y_pred])[0, 1] != pytest.approx(pearson, abs=1e-3)
    assert matthews_corrcoef(swapped[y_true], swapped[y_pred]) == pytest.approx(mcc, abs=1e-12)


@pytest.mark.parametrize(
    ("y_true", "y_pred"),
    [
        ([1, 1, 1], [1, 1, 1]),
        (["a", "b", "a"], ["a", "a", "a"]),
        ([0, 0, 0], [0, 1, 2]),
    ],
)
def test_undefined_mcc_is_zero_with_a_warning(y_true, y_pred):
    from sklearn import metrics as skm

    assert sk(skm.matthews_corrcoef, y_true, y_pred) == 0.0
    with pytest.warns(UndefinedMetricWarning, match="MCC is undefined"):
        assert matthews_corrcoef(y_true, y_pred) == 0.0


def test_undefined_kappa_is_zero_with_a_warning():
    from sklearn import metrics as skm

    assert np.isnan(sk(skm.cohen_kappa_score, ["x", "x"], ["x", "x"]))
    with pytest.warns(UndefinedMetricWarning, match="kappa is undefined"):
        assert cohen_kappa(["x", "x"], ["x", "x"]) == 0.0
    assert kappa_from_matrix([[4]])[1] is not None


def test_perfect_and_opposite_agreement():
    assert cohen_kappa([0, 1, 0, 1], [0, 1, 0, 1]) == 1.0
    assert matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0, abs=1e-12)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0, abs=1e-12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="weights must be"):
        cohen_kappa([0, 1], [0, 1], weights="cubic")
    with pytest.raises(ValueError, match="y_true is empty"):
        matthews_corrcoef([], [])
    with pytest.raises(ValueError, match="different lengths"):
        cohen_kappa([0, 1], [0])
