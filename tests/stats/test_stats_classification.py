"""classification_report against scikit-learn, zero-denominator handling, and the seeds/004 example."""

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import classification_report
from harness.stats.classification import METRICS, f_beta, precision, recall

TOL = {"rtol": 0, "atol": 1e-9}
SEED_MATRIX = np.array([[45, 3, 2], [4, 38, 3], [1, 2, 52]])


def sk(func, *args, **kwargs):
    """Call a scikit-learn oracle, silencing the warnings it gives on degenerate input."""
    from sklearn.exceptions import UndefinedMetricWarning as SkUndefined

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SkUndefined)
        warnings.filterwarnings("ignore", message="A single label was found", category=UserWarning)
        warnings.filterwarnings(
            "ignore",
            message="y_pred contains classes not in y_true",
            category=UserWarning,
        )
        return func(*args, **kwargs)


def labels_from_matrix(cm, names):
    i, j = np.indices(cm.shape)
    names = np.asarray(names)
    return names[np.repeat(i.ravel(), cm.ravel())], names[np.repeat(j.ravel(), cm.ravel())]


def sklearn_report(y_true, y_pred, labels, beta):
    """Every number of the report, computed with scikit-learn only."""
    from sklearn import metrics as skm

    mcm = sk(skm.multilabel_confusion_matrix, y_true, y_pred, labels=labels)
    tn, fp, fn, tp = (mcm[:, a, b].astype(float) for a, b in ((0, 0), (0, 1), (1, 0), (1, 1)))

    def rate(num, den):  # sklearn has no specificity/FPR/FNR; zero_division=0 convention
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    out = {"per_class": {}, "macro": {}, "micro": {}, "weighted": {}}
    for average, key in (
        (None, "per_class"),
        ("macro", "macro"),
        ("micro", "micro"),
        ("weighted", "weighted"),
    ):
        p, r, f1, _ = sk(
            skm.precision_recall_fscore_support,
            y_true,
            y_pred,
            labels=labels,
            average=average,
            zero_division=0,
        )
        fb = sk(
            skm.fbeta_score,
            y_true,
            y_pred,
            beta=beta,
            labels=labels,
            average=average,
            zero_division=0,
        )
        jac = sk(
            skm.jaccard_score,
            y_true,
            y_pred,
            labels=labels,
            average=average,
            zero_division=0,
        )
        out[key].update(precision=p, recall=r, f1=f1, f_beta=fb, jaccard=jac)
    support = tp + fn
    spec, fpr, fnr = rate(tn, tn + fp), rate(fp, fp + tn), rate(fn, fn + tp)
    bal = (out["per_class"]["recall"] + spec) / 2
    for name, v in (
        ("specificity", spec),
        ("fpr", fpr),
        ("fnr", fnr),
        ("balanced_accuracy", bal),
    ):
        out["per_class"][name] = v
        out["macro"][name] = v.mean()
        out["weighted"][name] = v @ support / support.sum()
    s_tn, s_fp, s_fn = tn.sum(), fp.sum(), fn.sum()
    out["micro"]["specificity"] = rate(s_tn, s_tn + s_fp)
    out["micro"]["fpr"] = rate(s_fp, s_fp + s_tn)
    out["micro"]["fnr"] = rate(s_fn, s_fn + tp.sum())
    out["micro"]["balanced_accuracy"] = (out["micro"]["recall"] + out["micro"]["specificity"]) / 2
    out["accuracy"] = skm.accuracy_score(y_true, y_pred)
    out["balanced_accuracy"] = sk(skm.balanced_accuracy_score, y_true, y_pred)
    out["mcc"] = sk(skm.matthews_corrcoef, y_true, y_pred)
    kappa = sk(skm.cohen_kappa_score, y_true, y_pred, labels=labels)
    out["cohen_kappa"] = 0.0 if np.isnan(kappa) else kappa
    return out


def assert_report_matches_sklearn(y_true, y_pred, labels=None, beta=1.0):
    report = classification_report(y_true, y_pred, labels=labels, beta=beta)
    expected = sklearn_report(y_true, y_pred, list(report.labels), beta)
    for name in METRICS:
        np.testing.assert_allclose(report.per_class[name], expected["per_class"][name], **TOL, err_msg=name)
        for avg in ("macro", "micro", "weighted"):
            np.testing.assert_allclose(
                report.__getattribute__(avg)[name],
                expected[avg][name],
                **TOL,
                err_msg=f"{avg} {name}",
            )
    for name in ("accuracy", "balanced_accuracy", "mcc", "cohen_kappa"):
        np.testing.assert_allclose(getattr(report, name), expected[name], **TOL, err_msg=name)
    np.testing.assert_allclose(report.error_rate, 1 - expected["accuracy"], **TOL)
    for name in METRICS:
        assert np.all(np.isfinite(report.per_class[name]))
    return report


@pytest.mark.parametrize("seed", range(60))
def test_report_matches_sklearn_on_random_labels(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 7))
    n = int(rng.integers(1, 120))
    y_true = rng.integers(0, k, n)
    # mostly right, sometimes random: realistic and full of ties / empty classes
    y_pred = np.where(rng.random(n) < rng.random(), y_true, rng.integers(0, k, n))
    beta = float(rng.choice([0.5, 1.0, 2.0, rng.uniform(0.1, 4)]))
    assert_report_matches_sklearn(y_true, y_pred, beta=beta)
    # with every label given, including ones that never occur
    assert_report_matches_sklearn(y_true, y_pred, labels=list(range(k + 2)), beta=beta)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_report_matches_sklearn_property(data):
    n = data.draw(st.integers(1, 30))
    names = st.sampled_from(["neg", "pos", "maybe"])
    y_true = data.draw(st.lists(names, min_size=n, max_size=n))
    y_pred = data.draw(st.lists(names, min_size=n, max_size=n))
    beta = data.draw(st.sampled_from([0.5, 1.0, 2.0]))
    assert_report_matches_sklearn(y_true, y_pred, beta=beta)


def test_binary_report_matches_sklearn_binary_average():
    from sklearn import metrics as skm

    rng = np.random.default_rng(7)
    y_true, y_pred = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    report = assert_report_matches_sklearn(y_true, y_pred)
    np.testing.assert_allclose(report.per_class["f1"][1], skm.f1_score(y_true, y_pred), **TOL)
    # seeds/004 3.9: (sensitivity + specificity) / 2 for the positive class is balanced accuracy
    np.testing.assert_allclose(report.per_class["balanced_accuracy"][1], report.balanced_accuracy, **TOL)


def test_all_correct_single_class_gives_defined_values_and_warnings():
    report = assert_report_matches_sklearn(["yes"] * 5, ["yes"] * 5)
    assert report.accuracy == 1.0 and report.error_rate == 0.0
    assert report.per_class["precision"][0] == 1.0 and report.per_class["specificity"][0] == 0.0
    text = "\n".join(report.warnings)
    assert "specificity is undefined for class 'yes'" in text
    assert "fpr is undefined for class 'yes'" in text
    assert "Cohen's kappa is undefined" in text
    assert "MCC is undefined" in text


@pytest.mark.parametrize("k", [2, 3, 5])
def test_all_correct_and_all_wrong_multiclass(k):
    y = np.arange(40) % k
    right = assert_report_matches_sklearn(y, y)
    assert right.warnings == ()
    assert right.accuracy == right.mcc == right.cohen_kappa == 1.0
    wrong = assert_report_matches_sklearn(y, (y + 1) % k)
    assert wrong.accuracy == 0.0 and wrong.error_rate == 1.0
    np.testing.assert_array_equal(wrong.per_class["f1"], np.zeros(k))


def test_labels_must_cover_the_data():
    with pytest.raises(ValueError, match="y_true contains labels not in labels"):
        classification_report([0, 1, 2], [0, 1, 1], labels=[0, 1])


def test_never_predicted_class_warns_about_precision_only():
    report = classification_report([0, 1, 1, 0], [0, 0, 0, 0])
    assert report.per_class["precision"][1] == 0.0
    undefined = [w for w in report.warnings if "class 1" in w]
    assert len(undefined) == 1 and undefined[0].startswith("precision is undefined")
    assert "never predicted" in undefined[0]


def test_label_absent_everywhere_is_zero_and_warned():
    report = assert_report_matches_sklearn([0, 1], [0, 1], labels=[0, 1, 2])
    np.testing.assert_array_equal(report.per_class["f1"], [1.0, 1.0, 0.0])
    assert any(w.startswith("f1 is undefined for class 2") for w in report.warnings)
    # balanced accuracy leaves the absent class out (as scikit-learn does) and says so
    assert report.balanced_accuracy == 1.0
    assert any("leaves out classes absent from y_true: [2]" in w for w in report.warnings)


def test_clean_input_has_no_warnings():
    report = classification_report(*labels_from_matrix(SEED_MATRIX, ["A", "B", "C"]))
    assert report.warnings == ()


def test_seed_worked_example():
    """seeds/004 section 9, from its confusion matrix, exact values and the printed roundings."""
    report = classification_report(*labels_from_matrix(SEED_MATRIX, ["A", "B", "C"]))
    assert report.labels == ("A", "B", "C")
    exact = {
        "precision": [Fraction(45, 50), Fraction(38, 43), Fraction(52, 57)],
        "recall": [Fraction(45, 50), Fraction(38, 45), Fraction(52, 55)],
        "f1": [Fraction(90, 100), Fraction(76, 88), Fraction(104, 112)],
    }
    for name, values in exact.items():
        np.testing.assert_allclose(report.per_class[name], [float(v) for v in values], rtol=0, atol=1e-12)
        np.testing.assert_allclose(report.macro[name], float(sum(values) / 3), rtol=0, atol=1e-12)
    assert report.accuracy == pytest.approx(135 / 150, abs=1e-12)
    # The document's printed three-decimal values; it rounds intermediate steps, so its F1_C (0.928)
    # and macro recall (0.896) are one unit off the exact 0.9286 and 0.8966.
    np.testing.assert_allclose(report.per_class["precision"], [0.900, 0.884, 0.912], atol=5e-4)
    np.testing.assert_allclose(report.per_class["recall"], [0.900, 0.844, 0.945], atol=5e-4)
    np.testing.assert_allclose(report.per_class["f1"], [0.900, 0.864, 0.928], atol=1e-3)
    assert report.macro["precision"] == pytest.approx(0.899, abs=5e-4)
    assert report.macro["recall"] == pytest.approx(0.896, abs=1e-3)
    assert report.macro["f1"] == pytest.approx(0.897, abs=5e-4)
    assert report.cohen_kappa == pytest.approx(0.849, abs=5e-4)
    # Seed 004's erratum: the multi-class MCC is R_K = 0.8495, not the document's 0.845
    assert report.mcc == pytest.approx(0.8495, abs=5e-5)
    # micro P = R = F1 = accuracy for single-label multi-class (seeds/004 section 4.2)
    for name in ("precision", "recall", "f1"):
        assert report.micro[name] == pytest.approx(report.accuracy, abs=1e-12)
    # Jaccard = F1 / (2 - F1) per class (seeds/004 section 5.3)
    f1 = report.per_class["f1"]
    np.testing.assert_allclose(report.per_class["jaccard"], f1 / (2 - f1), rtol=0, atol=1e-12)


def test_f_beta_equals_the_precision_recall_form_where_defined():
    rng = np.random.default_rng(3)
    tp, fp, fn = (rng.integers(1, 50, 200) for _ in range(3))
    beta = rng.uniform(0.1, 5, 200)
    p, r = precision(tp, fp).value, recall(tp, fn).value
    expected = (1 + beta**2) * p * r / (beta**2 * p + r)  # seeds/004 section 3.5
    np.testing.assert_allclose(
        [f_beta(a, b, c, be).value for a, b, c, be in zip(tp, fp, fn, beta)],
        expected,
        rtol=1e-12,
    )


def test_as_dict_is_plain_python():
    import json

    report = classification_report(["a", "b", "a"], ["a", "a", "a"])
    data = json.loads(json.dumps(report.as_dict()))
    assert data["labels"] == ["a", "b"]
    assert data["confusion_matrix"] == [[2, 0], [1, 0]]
    assert data["warnings"] == list(report.warnings)


@pytest.mark.parametrize("beta", [0, -1, float("nan"), float("inf")])
def test_report_rejects_bad_beta(beta):
    with pytest.raises(ValueError, match="beta must be a positive number"):
        classification_report([1], [1], beta=beta)


def test_report_rejects_empty_input():
    with pytest.raises(ValueError, match="y_true is empty"):
        classification_report([], [])
