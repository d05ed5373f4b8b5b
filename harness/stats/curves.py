"""Threshold curves and the areas under them: ROC / ROC-AUC and precision-recall / average precision.

Source: seeds/004 section 6. `_cumulative_counts` sweeps the threshold down through the distinct
scores once (TP and FP counts at each); both curves are read off those counts. A ROC or PR curve
needs both outcomes present (ROC) or positives present (PR): otherwise a rate has a zero
denominator for every threshold, and these functions raise ValueError rather than return NaN.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Literal

import numpy as np

from ._common import _sp
from .confusion import _as_label_array, encode_labels

__all__ = [
    "average_precision",
    "pr_curve",
    "precision_recall_curve",
    "roc_auc",
    "roc_curve",
]

Average = Literal["macro", "weighted"] | None


def _binary_target(y_true: Any, pos_label: Hashable | None) -> np.ndarray:
    """Boolean array: which samples are positive."""
    arr = _as_label_array(y_true, "y_true")
    if arr.dtype.kind in "biuf" and (pos_label is None or isinstance(pos_label, int | float | np.number | np.bool_)):
        # Vectorised checks for numeric labels (a Python set of 10^7 labels takes seconds); on
        # any doubt fall through to the set-based path, which also words the error.
        positive = arr == (1 if pos_label is None else pos_label)
        rest = arr[~positive]
        if pos_label is None:
            if np.all(rest == 0) or np.all(rest == -1):
                return positive
        elif rest.size == 0 or np.all(rest == rest[0]):
            return positive
    values = set(arr.tolist())
    if pos_label is None:
        if not values <= {0, 1} and not values <= {-1, 1}:
            raise ValueError(
                f"y_true has labels {sorted(values, key=repr)[:10]!r}; pass pos_label= to say which "
                "is positive (it defaults to 1 only for 0/1 or -1/1 labels)"
            )
        pos_label = 1
    if len(values - {pos_label}) > 1:
        raise ValueError(f"y_true has more than two classes: {sorted(values, key=repr)[:10]!r}")
    return arr == pos_label if arr.dtype.kind != "O" else np.array([v == pos_label for v in arr.tolist()])


def _scores(y_score: Any, n: int, ndim: int) -> np.ndarray:
    s = np.asarray(y_score, dtype=np.float64)
    if s.ndim != ndim:
        raise ValueError(f"y_score must be {ndim}-dimensional here, got shape {s.shape}")
    if s.shape[0] != n:
        raise ValueError(f"y_true and y_score have different lengths: {n} and {s.shape[0]}")
    if not np.all(np.isfinite(s)):
        raise ValueError("y_score contains NaN or infinite values")
    return s


def _cumulative_counts(positive: np.ndarray, score: np.ndarray):
    """TP and FP counts when predicting positive for score >= each distinct threshold (descending)."""
    order = np.argsort(-score, kind="mergesort")
    s = score[order]
    y = positive[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]
    tps = np.cumsum(y, dtype=np.float64)[last]
    fps = (last + 1) - tps
    return tps, fps, s[last]


def _require_both(positive: np.ndarray, what: str) -> None:
    n_pos = int(positive.sum())
    if n_pos == 0 or n_pos == positive.size:
        missing = "positive" if n_pos == 0 else "negative"
        raise ValueError(f"{what} is undefined: y_true has no {missing} samples")


def roc_curve(
    y_true: Any,
    y_score: Any,
    pos_label: Hashable | None = None,
    drop_intermediate: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr, thresholds)`` of a binary problem (seeds/004 section 6.1).

    Points are (FPR(t), TPR(t)) for each distinct score t, predicting positive when score >= t,
    preceded by (0, 0) at threshold +inf, as ``sklearn.metrics.roc_curve``. ``drop_intermediate``
    drops points on straight segments (they do not change the area).
    """
    positive = _binary_target(y_true, pos_label)
    score = _scores(y_score, positive.size, 1)
    _require_both(positive, "the ROC curve")
    tps, fps, thresholds = _cumulative_counts(positive, score)
    if drop_intermediate and fps.size > 2:
        keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        tps, fps, thresholds = tps[keep], fps[keep], thresholds[keep]
    tps, fps = np.r_[0.0, tps], np.r_[0.0, fps]
    return fps / fps[-1], tps / tps[-1], np.r_[np.inf, thresholds]


def _binary_auc(positive: np.ndarray, score: np.ndarray) -> np.ndarray | float:
    """AUC = P(score(pos) > score(neg)) + P(tie) / 2 via the Mann-Whitney U, along axis 0.

    seeds/004 section 6.2 gives both this probabilistic form and the trapezoidal sum over the ROC
    curve; with ties counted as 1/2 the two are equal, and the rank form needs no curve.
    """
    if positive.ndim == 1:
        return _binary_auc_sorted(positive, score)
    n_pos = positive.sum(axis=0).astype(np.float64)
    n_neg = positive.shape[0] - n_pos
    ranks = _sp.rankdata(score, axis=0)
    rank_sum = np.sum(ranks * positive, axis=0)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def _binary_auc_sorted(positive: np.ndarray, score: np.ndarray) -> float:
    """The same Mann-Whitney U for one binary problem, from the sorted scores of each class.

    U = sum over positives of (#negatives scored lower + #negatives scored equal / 2), counted
    with two ``searchsorted`` passes over the sorted negative scores. Sorting the two classes'
    values (``np.sort``) is several times faster than the ``argsort`` behind ``rankdata``, and
    the counts are exact integers.
    """
    pos = np.sort(score[positive])
    neg = np.sort(score[~positive])
    below = np.searchsorted(neg, pos, side="left")
    upto = np.searchsorted(neg, pos, side="right")
    u = float(below.sum(dtype=np.int64)) + 0.5 * float((upto - below).sum(dtype=np.int64))
    return u / (float(pos.size) * float(neg.size))


def _one_vs_rest(y_true: Any, y_score: Any, labels: Iterable[Hashable] | None, what: str):
    """(indicator matrix, score matrix, support) for a multi-class y_true and a (n, K) y_score."""
    found, (codes,) = encode_labels(y_true, labels=labels, names=("y_true",))
    score = _scores(y_score, codes.size, 2)
    k = len(found)
    if score.shape[1] != k:
        raise ValueError(
            f"y_score has {score.shape[1]} columns but there are {k} classes {list(found)[:10]!r}; pass labels= naming the class of each column"
        )
    positive = codes[:, None] == np.arange(k)[None, :]
    support = positive.sum(axis=0)
    for i in range(k):
        _require_both(positive[:, i], f"{what} for class {found[i]!r} (one-vs-rest)")
    return positive, score, support


def _average(per_class: np.ndarray, support: np.ndarray, average: Average) -> float | np.ndarray:
    if average is None:
        return per_class
    if average == "macro":
        return float(np.mean(per_class))
    if average == "weighted":
        return float(per_class @ support / support.sum())
    raise ValueError(f"average must be 'macro', 'weighted' or None, got {average!r}")


def roc_auc(
    y_true: Any,
    y_score: Any,
    average: Average = "macro",
    labels: Iterable[Hashable] | None = None,
    pos_label: Hashable | None = None,
) -> float | np.ndarray:
    """Area under the ROC curve (seeds/004 sections 6.2-6.3).

    Binary when ``y_score`` is 1-D (scores of the positive class). When it is 2-D (n, K), one-vs-rest
    per class, column j scoring ``labels[j]`` (default the sorted labels of y_true), combined by
    ``average``: "macro" (mean), "weighted" (by support, as section 6.3) or None (per-class array).
    Scores need not sum to 1 (scikit-learn requires that for multi-class; the OvR area does not).
    """
    if np.ndim(y_score) == 1:
        positive = _binary_target(y_true, pos_label)
        score = _scores(y_score, positive.size, 1)
        _require_both(positive, "ROC-AUC")
        return float(_binary_auc(positive, score))
    _check_average(average)
    positive, score, support = _one_vs_rest(y_true, y_score, labels, "ROC-AUC")
    return _average(np.asarray(_binary_auc(positive, score)), support, average)


def _check_average(average: Average) -> None:
    if average not in ("macro", "weighted", None):
        raise ValueError(f"average must be 'macro', 'weighted' or None, got {average!r}")


def precision_recall_curve(y_true: Any, y_score: Any, pos_label: Hashable | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision-recall curve ``(precision, recall, thresholds)`` of a binary problem.

    seeds/004 section 6.4. Same layout as ``sklearn.metrics.precision_recall_curve``: thresholds
    increasing, recall decreasing, with a final point (precision 1, recall 0) with no threshold.
    Needs at least one positive sample (recall = TP / P).
    """
    positive = _binary_target(y_true, pos_label)
    score = _scores(y_score, positive.size, 1)
    if not positive.any():
        raise ValueError("the precision-recall curve is undefined: y_true has no positive samples")
    tps, fps, thresholds = _cumulative_counts(positive, score)
    prec = tps / (tps + fps)
    rec = tps / tps[-1]
    return np.r_[prec[::-1], 1.0], np.r_[rec[::-1], 0.0], thresholds[::-1]


pr_curve = precision_recall_curve


def _binary_average_precision(positive: np.ndarray, score: np.ndarray) -> float:
    """AP = sum_k (R_k - R_{k-1}) P_k over descending thresholds, R_0 = 0."""
    tps, fps, _ = _cumulative_counts(positive, score)
    rec = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, rec]) * (tps / (tps + fps))))


def average_precision(
    y_true: Any,
    y_score: Any,
    average: Average = "macro",
    labels: Iterable[Hashable] | None = None,
    pos_label: Hashable | None = None,
) -> float | np.ndarray:
    """Average precision, the step-wise area under the PR curve (seeds/004 section 6.4).

    Section 6.4 writes PR-AUC as an integral; this is the usual non-interpolated estimate of it
    (``sklearn.metrics.average_precision_score``), not a trapezoid, which over-states the area
    between PR points. A 2-D ``y_score`` gives one-vs-rest values combined as in `roc_auc`.
    """
    if np.ndim(y_score) == 1:
        positive = _binary_target(y_true, pos_label)
        score = _scores(y_score, positive.size, 1)
        if not positive.any():
            raise ValueError("average precision is undefined: y_true has no positive samples")
        return _binary_average_precision(positive, score)
    _check_average(average)
    found, (codes,) = encode_labels(y_true, labels=labels, names=("y_true",))
    score = _scores(y_score, codes.size, 2)
    if score.shape[1] != len(found):
        raise ValueError(f"y_score has {score.shape[1]} columns but there are {len(found)} classes; pass labels= naming the class of each column")
    positive = codes[:, None] == np.arange(len(found))[None, :]
    support = positive.sum(axis=0)
    if not support.all():
        missing = [found[i] for i in np.flatnonzero(support == 0)]
        raise ValueError(f"average precision is undefined for classes absent from y_true: {missing!r}")
    per_class = np.array([_binary_average_precision(positive[:, j], score[:, j]) for j in range(len(found))])
    return _average(per_class, support, average)
