"""Confusion matrix and the per-class counts TP, FP, FN, TN derived from it.

Source: seeds/004 (classification metrics), sections 1-2. Labels can be any hashable values; they
are encoded once to integer codes (`encode_labels`) and every other metric works on the matrix.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ClassCounts", "class_counts", "confusion_matrix", "encode_labels"]


def _as_label_array(y: Any, name: str) -> np.ndarray:
    """A 1-D array of labels: a typed array when numpy can hold it losslessly, else objects."""
    if isinstance(y, np.ndarray):
        arr = y
        if arr.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    else:
        if isinstance(y, (str, bytes)) or not isinstance(y, Iterable):
            raise TypeError(f"{name} must be a sequence of labels, got {type(y).__name__}")
        seq = y if isinstance(y, Sequence) else list(y)
        arr = np.asarray(seq) if len(seq) else np.empty(0)
        # numpy turns ["a", 1] into strings ["a", "1"] and tuples into rows; keep the
        # original objects in those cases so that distinct labels stay distinct.
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            arr = np.fromiter(seq, dtype=object, count=len(seq))
    if arr.size == 0:
        raise ValueError(f"{name} is empty; at least one label is needed")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN, which is not a valid label")
    return arr


def _python_scalar(value: Any) -> Hashable:
    return value.item() if isinstance(value, np.generic) else value


def _compatible(arrays: Sequence[np.ndarray]) -> bool:
    """Whether all arrays can be compared by numpy without coercion (all numeric or all text)."""
    kinds = {a.dtype.kind for a in arrays}
    return kinds <= set("biuf") or kinds <= {"U"} or kinds <= {"S"}


def encode_labels(
    *ys: Any,
    labels: Iterable[Hashable] | None = None,
    names: Sequence[str] | None = None,
) -> tuple[tuple[Hashable, ...], list[np.ndarray]]:
    """Map label arrays to integer codes 0..K-1.

    ``labels`` fixes the classes and their order; otherwise they are the sorted union of the
    labels seen. A value not among the given ``labels`` is an error, not silently dropped.
    Returns ``(labels, codes)`` with one int64 code array per input.
    """
    names = list(names) if names is not None else [f"argument {i}" for i in range(len(ys))]
    arrays = [_as_label_array(y, name) for y, name in zip(ys, names)]
    if labels is not None:
        given = [_python_scalar(v) for v in labels]
        if not given:
            raise ValueError("labels is empty; give at least one label or leave it as None")
        if len(set(given)) != len(given):
            raise ValueError(f"labels contains duplicates: {given!r}")
        lab = np.asarray(given) if all(a.dtype.kind != "O" for a in arrays) else None
        if lab is not None and lab.ndim == 1 and _compatible([*arrays, lab]):
            order = np.argsort(lab, kind="stable")
            sorted_lab = lab[order]
            codes = []
            for arr, name in zip(arrays, names):
                pos = np.clip(np.searchsorted(sorted_lab, arr), 0, len(lab) - 1)
                found = sorted_lab[pos] == arr
                if not found.all():
                    unknown = sorted({_python_scalar(v) for v in arr[~found]}, key=repr)
                    raise ValueError(f"{name} contains labels not in labels: {unknown[:10]!r}")
                codes.append(order[pos].astype(np.int64))
            return tuple(given), codes
        return tuple(given), _encode_objects(arrays, names, given)
    dense = _dense_integer_codes(arrays)
    if dense is not None:
        return dense
    if _compatible(arrays) and all(a.dtype.kind != "O" for a in arrays):
        uniq, inverse = np.unique(np.concatenate(arrays), return_inverse=True)
        bounds = np.cumsum([0] + [a.size for a in arrays])
        codes = [inverse[lo:hi].astype(np.int64) for lo, hi in itertools.pairwise(bounds)]
        return tuple(_python_scalar(v) for v in uniq), codes
    seen = set().union(*(set(a.tolist()) for a in arrays))
    try:
        inferred = sorted(seen)
    except TypeError as exc:
        raise ValueError(
            f"labels of different types cannot be sorted ({sorted({type(v).__name__ for v in seen})}); pass labels=[...] to fix their order"
        ) from exc
    return tuple(inferred), _encode_objects(arrays, names, inferred)


def _dense_integer_codes(
    arrays: Sequence[np.ndarray],
) -> tuple[tuple[Hashable, ...], list[np.ndarray]] | None:
    """Sorted labels and codes of integer arrays whose values span a small range, without sorting.

    Same result as the ``np.unique`` path (labels ascending, as Python ints), in O(n + range):
    which values occur is counted with ``np.bincount`` and a lookup table maps a value to its code.
    Sorting 10^7 labels is the usual bottleneck of a confusion matrix; this avoids it. Returns None
    (use the general path) for non-integer arrays or a range wider than the data.
    """
    if not arrays or any(a.dtype.kind not in "iu" for a in arrays):
        return None
    lo = min(int(a.min()) for a in arrays)
    hi = max(int(a.max()) for a in arrays)
    span = hi - lo + 1
    if span > max(1 << 16, sum(a.size for a in arrays)) or hi > np.iinfo(np.intp).max:
        return None
    offsets = [a.astype(np.intp, copy=False) for a in arrays]
    if lo:
        offsets = [off - lo for off in offsets]
    seen = np.zeros(span, dtype=bool)
    for off in offsets:
        seen |= np.bincount(off, minlength=span).astype(bool)
    lookup = np.cumsum(seen, dtype=np.int64) - 1
    labels = tuple(int(v) for v in np.flatnonzero(seen) + lo)
    return labels, [lookup[off] for off in offsets]


def _encode_objects(arrays: Sequence[np.ndarray], names: Sequence[str], labels: Sequence[Hashable]) -> list[np.ndarray]:
    index = {label: i for i, label in enumerate(labels)}
    codes = []
    for arr, name in zip(arrays, names):
        values = arr.tolist()
        unknown = {v for v in values if v not in index}
        if unknown:
            raise ValueError(f"{name} contains labels not in labels: {sorted(unknown, key=repr)[:10]!r}")
        codes.append(np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values)))
    return codes


def _paired_codes(y_true: Any, y_pred: Any, labels: Iterable[Hashable] | None):
    found, (t, p) = encode_labels(y_true, y_pred, labels=labels, names=("y_true", "y_pred"))
    if t.size != p.size:
        raise ValueError(f"y_true and y_pred have different lengths: {t.size} and {p.size}")
    return found, t, p


def confusion_matrix(y_true: Any, y_pred: Any, labels: Iterable[Hashable] | None = None) -> np.ndarray:
    """Confusion matrix C with C[i, j] = number of samples of true class i predicted as j.

    Source: seeds/004 section 2. Rows and columns follow ``labels`` (given, or the sorted union of
    the labels in ``y_true`` and ``y_pred``), as in ``sklearn.metrics.confusion_matrix``; unlike
    scikit-learn, samples whose label is not in ``labels`` raise ValueError instead of being dropped.
    """
    found, t, p = _paired_codes(y_true, y_pred, labels)
    return _matrix_from_codes(t, p, len(found))


def _matrix_from_codes(t: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k).astype(np.int64)


def check_confusion_matrix(confusion: Any) -> np.ndarray:
    """``confusion`` as a square, non-empty matrix of non-negative counts (int64)."""
    cm = np.asarray(confusion)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"a confusion matrix must be square, got shape {cm.shape}")
    if cm.size == 0:
        raise ValueError("the confusion matrix is empty; at least one class is needed")
    if not np.issubdtype(cm.dtype, np.number) or np.any(cm < 0) or np.any(cm != np.round(cm)):
        raise ValueError("a confusion matrix must hold non-negative integer counts")
    if cm.sum() == 0:
        raise ValueError("the confusion matrix counts no samples")
    return cm.astype(np.int64)


@dataclass(frozen=True, eq=False)
class ClassCounts:
    """One-vs-rest counts per class (arrays indexed like the confusion matrix's classes)."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray

    @property
    def support(self) -> np.ndarray:
        """Number of samples whose true label is the class (TP + FN)."""
        return self.tp + self.fn


def class_counts(confusion: Any) -> ClassCounts:
    """TP, FP, FN, TN for every class of a confusion matrix, treating that class as positive.

    Source: seeds/004 section 2 ("alternative notation"): TP_i = C_ii, FN_i = row_i - TP_i,
    FP_i = col_i - TP_i, TN_i = Total - TP_i - FN_i - FP_i.
    """
    cm = check_confusion_matrix(confusion)
    tp = np.diag(cm).copy()
    fn = cm.sum(axis=1) - tp
    fp = cm.sum(axis=0) - tp
    tn = cm.sum() - tp - fn - fp
    return ClassCounts(tp=tp, fp=fp, fn=fn, tn=tn)
