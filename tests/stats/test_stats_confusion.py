"""confusion_matrix and class_counts against scikit-learn, for many label types."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import class_counts, confusion_matrix

SEEDS = range(40)


def sk_confusion_matrix(*args, **kwargs):
    """The scikit-learn oracle, which warns when it sees a single label."""
    from sklearn import metrics as skm

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="A single label was found", category=UserWarning)
        return skm.confusion_matrix(*args, **kwargs)


def _random_labels(rng, n, k):
    return rng.integers(0, k, n), rng.integers(0, k, n)


@pytest.mark.parametrize("seed", SEEDS)
def test_confusion_matrix_matches_sklearn_on_integers(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 300)), int(rng.integers(1, 7))
    y_true, y_pred = _random_labels(rng, n, k)
    np.testing.assert_array_equal(confusion_matrix(y_true, y_pred), sk_confusion_matrix(y_true, y_pred))


@pytest.mark.parametrize("seed", SEEDS)
def test_confusion_matrix_with_given_labels_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    names = np.array(["cat", "dog", "eel", "fox", "gnu"])
    y_true, y_pred = names[rng.integers(0, 3, 50)], names[rng.integers(0, 4, 50)]
    labels = list(rng.permutation(names))  # includes absent labels, in a shuffled order
    np.testing.assert_array_equal(
        confusion_matrix(y_true, y_pred, labels=labels),
        sk_confusion_matrix(y_true, y_pred, labels=labels),
    )
    # Python lists of strings take the object path; same answer.
    np.testing.assert_array_equal(
        confusion_matrix(y_true.tolist(), y_pred.tolist(), labels=labels),
        sk_confusion_matrix(y_true, y_pred, labels=labels),
    )


label_values = st.one_of(
    st.lists(st.integers(-3, 3), min_size=1, max_size=40),
    st.lists(st.sampled_from(["a", "b", "c", "é"]), min_size=1, max_size=40),
    st.lists(st.booleans(), min_size=1, max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_confusion_matrix_property(data):
    y_true = data.draw(label_values)
    pool = sorted(set(y_true))
    y_pred = data.draw(st.lists(st.sampled_from(pool), min_size=len(y_true), max_size=len(y_true)))
    cm = confusion_matrix(y_true, y_pred)
    np.testing.assert_array_equal(cm, sk_confusion_matrix(y_true, y_pred))
    assert cm.sum() == len(y_true)
    assert np.trace(cm) == sum(a == b for a, b in zip(y_true, y_pred))


def test_hashable_non_scalar_labels_are_kept_apart():
    y_true = [(1, "x"), (2, "y"), (1, "x"), (2, "y")]
    y_pred = [(1, "x"), (1, "x"), (1, "x"), (2, "y")]
    np.testing.assert_array_equal(confusion_matrix(y_true, y_pred), [[2, 0], [1, 1]])


def test_mixed_label_types_are_not_coerced():
    # numpy would turn [1, "1"] into two equal strings; they are different labels.
    cm = confusion_matrix([1, "1"], [1, "1"], labels=[1, "1"])
    np.testing.assert_array_equal(cm, np.eye(2))
    with pytest.raises(ValueError, match="cannot be sorted"):
        confusion_matrix([1, "1"], [1, "1"])


@pytest.mark.parametrize(
    ("y_true", "y_pred", "kwargs", "message"),
    [
        ([], [], {}, "y_true is empty"),
        ([1, 2], [1], {}, "different lengths"),
        ([1, 2], [1, 3], {"labels": [1, 2]}, "y_pred contains labels not in labels"),
        ([1, 2], [1, 2], {"labels": [1, 1, 2]}, "duplicates"),
        ([1, 2], [1, 2], {"labels": []}, "labels is empty"),
        (np.zeros((2, 2)), np.zeros((2, 2)), {}, "one-dimensional"),
        ([1.0, np.nan], [1.0, 1.0], {}, "NaN"),
    ],
)
def test_confusion_matrix_rejects_bad_input(y_true, y_pred, kwargs, message):
    with pytest.raises(ValueError, match=message):
        confusion_matrix(y_true, y_pred, **kwargs)


def test_confusion_matrix_rejects_a_string_as_labels():
    with pytest.raises(TypeError, match="sequence of labels"):
        confusion_matrix("ab", "ab")


@pytest.mark.parametrize("seed", SEEDS)
def test_class_counts_match_sklearn_multilabel_confusion_matrix(seed):
    from sklearn import metrics as skm

    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 6))
    y_true, y_pred = _random_labels(rng, int(rng.integers(1, 200)), k)
    labels = list(range(k))
    counts = class_counts(confusion_matrix(y_true, y_pred, labels=labels))
    mcm = skm.multilabel_confusion_matrix(y_true, y_pred, labels=labels)  # [[tn, fp], [fn, tp]]
    np.testing.assert_array_equal(counts.tn, mcm[:, 0, 0])
    np.testing.assert_array_equal(counts.fp, mcm[:, 0, 1])
    np.testing.assert_array_equal(counts.fn, mcm[:, 1, 0])
    np.testing.assert_array_equal(counts.tp, mcm[:, 1, 1])
    np.testing.assert_array_equal(counts.support, np.bincount(y_true, minlength=k))


def test_class_counts_of_the_seed_example():
    # seeds/004 section 9, step 1.
    counts = class_counts([[45, 3, 2], [4, 38, 3], [1, 2, 52]])
    np.testing.assert_array_equal(counts.tp, [45, 38, 52])
    np.testing.assert_array_equal(counts.fn, [5, 7, 3])
    np.testing.assert_array_equal(counts.fp, [5, 5, 5])
    np.testing.assert_array_equal(counts.tn, [95, 100, 90])


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ([[1, 2, 3]], "square"),
        (np.zeros((0, 0)), "empty"),
        ([[1, -1], [0, 1]], "non-negative"),
        ([[0.5, 0], [0, 1]], "integer"),
        ([[0, 0], [0, 0]], "no samples"),
    ],
)
def test_class_counts_rejects_bad_matrices(matrix, message):
    with pytest.raises(ValueError, match=message):
        class_counts(matrix)
