"""ROC / PR curves, ROC-AUC and average precision against scikit-learn."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import (
    average_precision,
    pr_curve,
    precision_recall_curve,
    roc_auc,
    roc_curve,
)

TOL = {"rtol": 0, "atol": 1e-9}


def binary_case(seed, ties=False):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    y = rng.integers(0, 2, n)
    y[rng.choice(n, 2, replace=False)] = [0, 1]  # both classes present
    score = y * rng.uniform(0, 1.5) + rng.normal(size=n)
    if ties:
        score = np.round(score, 1)  # many tied scores, across classes
    return y, score


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_binary_curves_and_areas_match_sklearn(seed, ties):
    from sklearn import metrics as skm

    y, score = binary_case(seed, ties)
    for drop in (True, False):
        got = roc_curve(y, score, drop_intermediate=drop)
        want = skm.roc_curve(y, score, drop_intermediate=drop)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, **TOL)
    auc = roc_auc(y, score)
    assert auc == pytest.approx(skm.roc_auc_score(y, score), abs=1e-9)
    # seeds/004 6.2: the rank form equals the trapezoidal area under the full curve
    fpr, tpr, _ = roc_curve(y, score, drop_intermediate=False)
    assert auc == pytest.approx(np.trapezoid(tpr, fpr), abs=1e-9)
    for a, b in zip(precision_recall_curve(y, score), skm.precision_recall_curve(y, score)):
        np.testing.assert_allclose(a, b, **TOL)
    assert average_precision(y, score) == pytest.approx(skm.average_precision_score(y, score), abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), min_size=2, max_size=30))
def test_binary_auc_and_ap_property(pairs):
    from sklearn import metrics as skm

    y = np.array([p[0] for p in pairs])
    score = np.array([p[1] for p in pairs], dtype=float)
    if 0 < y.sum() < y.size:
        assert roc_auc(y, score) == pytest.approx(skm.roc_auc_score(y, score), abs=1e-9)
        # AUC = P(score_pos > score_neg) + P(tie) / 2, by brute force over all pairs
        diff = score[y][:, None] - score[~y][None, :]
        assert roc_auc(y, score) == pytest.approx(np.mean((diff > 0) + 0.5 * (diff == 0)), abs=1e-9)
    if y.any():
        assert average_precision(y, score) == pytest.approx(skm.average_precision_score(y, score), abs=1e-9)


def test_string_labels_with_pos_label():
    from sklearn import metrics as skm

    y, score = binary_case(3)
    names = np.array(["spam", "ham"])[1 - y]  # 1 -> "spam"
    assert roc_auc(names, score, pos_label="spam") == pytest.approx(roc_auc(y, score), abs=1e-12)
    for a, b in zip(
        roc_curve(names, score, pos_label="spam"),
        skm.roc_curve(names, score, pos_label="spam"),
    ):
        np.testing.assert_allclose(a, b, **TOL)
    assert average_precision(names, score, pos_label="spam") == pytest.approx(skm.average_precision_score(names, score, pos_label="spam"), abs=1e-9)
    with pytest.raises(ValueError, match="pass pos_label"):
        roc_auc(names, score)


def test_minus_one_one_and_boolean_labels():
    y, score = binary_case(5)
    assert roc_auc(2 * y - 1, score) == pytest.approx(roc_auc(y, score), abs=1e-12)
    assert roc_auc(y.astype(bool), score) == pytest.approx(roc_auc(y, score), abs=1e-12)


def multiclass_case(seed):
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(3, 6)), int(rng.integers(3 * 6, 300))
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)  # every class present
    logits = rng.normal(size=(n, k)) + rng.uniform(0, 2) * np.eye(k)[y]
    if seed % 2:
        logits = np.round(logits, 1)  # ties
    prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return y, prob


@pytest.mark.parametrize("seed", range(30))
def test_multiclass_ovr_auc_matches_sklearn(seed):
    from sklearn import metrics as skm

    y, prob = multiclass_case(seed)
    for average in ("macro", "weighted"):
        want = skm.roc_auc_score(y, prob, multi_class="ovr", average=average)
        assert roc_auc(y, prob, average=average) == pytest.approx(want, abs=1e-9)
    per_class = roc_auc(y, prob, average=None)
    np.testing.assert_allclose(
        per_class,
        [skm.roc_auc_score(y == j, prob[:, j]) for j in range(prob.shape[1])],
        **TOL,
    )
    # OvR areas do not need rows summing to 1 (scikit-learn insists); scaling by 8 is exact in
    # floating point, so it keeps every order and tie and must leave the areas unchanged
    np.testing.assert_allclose(roc_auc(y, prob * 8.0, average=None), per_class, **TOL)
    want_ap = skm.average_precision_score(np.eye(prob.shape[1])[y], prob, average=None)
    np.testing.assert_allclose(average_precision(y, prob, average=None), want_ap, **TOL)
    assert average_precision(y, prob, average="weighted") == pytest.approx(
        skm.average_precision_score(np.eye(prob.shape[1])[y], prob, average="weighted"),
        abs=1e-9,
    )


def test_multiclass_with_labels_naming_the_columns():
    y, prob = multiclass_case(4)
    names = np.array(["d", "c", "b", "a", "e"])[: prob.shape[1]]
    got = roc_auc(names[y], prob, labels=list(names), average=None)
    np.testing.assert_allclose(got, roc_auc(y, prob, average=None), **TOL)


def test_perfect_and_inverted_scores():
    y = np.array([0, 0, 1, 1])
    assert roc_auc(y, [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert roc_auc(y, [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert roc_auc(y, [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert average_precision(y, [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert pr_curve is precision_recall_curve


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: roc_auc([1, 1, 1], [0.1, 0.2, 0.3]), "no negative samples"),
        (lambda: roc_auc([0, 0], [0.1, 0.2]), "no positive samples"),
        (lambda: roc_curve([0, 0], [0.1, 0.2]), "no positive samples"),
        (lambda: average_precision([0, 0], [0.1, 0.2]), "no positive samples"),
        (lambda: precision_recall_curve([0, 0], [0.1, 0.2]), "no positive samples"),
        (lambda: roc_auc([0, 1], [0.1]), "different lengths"),
        (lambda: roc_auc([0, 1], [0.1, np.nan]), "NaN"),
        (lambda: roc_auc([], []), "y_true is empty"),
        (lambda: roc_auc([0, 1, 2], [0.1, 0.2, 0.3]), "pass pos_label"),
        (
            lambda: roc_auc([0, 1, 2], [0.1, 0.2, 0.3], pos_label=1),
            "more than two classes",
        ),
        (lambda: roc_auc([0, 1, 2], np.ones((3, 2))), "3 classes"),
        (lambda: roc_auc([0, 1, 1], np.ones((3, 3)), labels=[0, 1, 2]), "class 2"),
        (lambda: roc_auc([0, 1, 2], np.eye(3), average="micro"), "average must be"),
        (
            lambda: average_precision([0, 1, 1], np.eye(3), labels=[0, 1, 2]),
            "absent from y_true",
        ),
    ],
)
def test_degenerate_and_bad_input_raise_clear_errors(call, message):
    # Single-class y_true leaves every rate 0/0: an error, not a silent NaN or a misleading 0.
    with pytest.raises(ValueError, match=message):
        call()
