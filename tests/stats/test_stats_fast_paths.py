"""The fast paths added for 10^7-sample inputs give exactly what the general paths give.

- `encode_labels` on integer arrays with a small value range counts with ``np.bincount`` instead of
  sorting (``np.unique``): same labels (ascending Python ints), same codes.
- Binary `roc_auc` counts with ``searchsorted`` over sorted class scores instead of ranking:
  checked against scikit-learn, with heavy ties, any label dtype and ``pos_label``.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats import confusion_matrix, roc_auc
from harness.stats.confusion import encode_labels


def _unique_path(*arrays: np.ndarray) -> tuple[tuple[int, ...], list[list[int]]]:
    joined = np.concatenate([a.astype(object) for a in arrays])
    labels = sorted(set(joined.tolist()))
    index = {v: i for i, v in enumerate(labels)}
    return tuple(labels), [[index[v] for v in a.tolist()] for a in arrays]


@pytest.mark.parametrize(
    "arrays",
    [
        [np.array([3, 1, 3, 7], np.int8), np.array([-100, 100, 1], np.int8)],  # int8 span > 127
        [np.array([5, 5, 9], np.uint64), np.array([9, 12], np.uint8)],
        [np.array([2**40, 2**40 + 3]), np.array([2**40 + 3])],  # far from 0, small span
        [np.array([0, 10**12]), np.array([10**12])],  # span too wide: the general path
        [np.array([2**63 + 5, 2**63 + 1], np.uint64)],  # above intp: the general path
        [np.array([-3, -1]), np.array([-2, -3])],
    ],
)
def test_dense_integer_codes_equal_the_unique_path(arrays: list[np.ndarray]) -> None:
    labels, codes = encode_labels(*arrays)
    want_labels, want_codes = _unique_path(*arrays)
    assert labels == want_labels and all(type(v) is int for v in labels)
    assert [c.tolist() for c in codes] == want_codes and all(c.dtype == np.int64 for c in codes)


def test_confusion_matrix_of_random_integer_labels_matches_sklearn() -> None:
    from sklearn.metrics import confusion_matrix as sk_confusion_matrix

    rng = np.random.default_rng(0)
    for lo, hi in ((0, 5), (-7, 3), (1000, 1010)):
        y = rng.integers(lo, hi, 500)
        p = np.where(rng.random(500) < 0.5, y, rng.integers(lo, hi, 500))
        np.testing.assert_array_equal(confusion_matrix(y, p), sk_confusion_matrix(y, p))


def test_binary_roc_auc_fast_path_matches_sklearn_with_ties() -> None:
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    for n in (2, 3, 10, 200, 5000):
        for decimals in (0, 1, 2, 8):
            y = rng.integers(0, 2, n)
            y[:2] = (0, 1)
            s = np.round(rng.random(n) + 0.3 * y, decimals)
            assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert roc_auc(y.astype(bool), s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert roc_auc(np.where(y == 1, 1, -1), s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert roc_auc(np.where(y == 1, 7.0, 2.0), s, pos_label=7) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_binary_target_errors_unchanged() -> None:
    with pytest.raises(ValueError, match="pass pos_label="):
        roc_auc(np.array([0, 1, 2]), [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="more than two classes"):
        roc_auc(np.array([1, 2, 3]), [0.1, 0.2, 0.3], pos_label=3)
    with pytest.raises(ValueError, match="no positive samples"):
        roc_auc(np.array([0, 0, 0]), [0.1, 0.2, 0.3])
