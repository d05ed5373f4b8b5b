"""Chance-corrected agreement between two labelings: Cohen's kappa and Matthews' correlation.

Source: seeds/004 sections 5.1 and 5.2. Each statistic has a ``*_from_matrix`` form returning
``(value, problem)`` so that `classification_report` can collect problems as warnings; the public
functions take label arrays and raise `UndefinedMetricWarning` instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable
from typing import Any, Literal

import numpy as np

from ._common import UndefinedMetricWarning
from .confusion import check_confusion_matrix, confusion_matrix

__all__ = ["cohen_kappa", "fleiss_kappa", "kappa_from_matrix", "matthews_corrcoef", "mcc_from_matrix"]

KappaWeights = Literal["linear", "quadratic"] | None


def _disagreement_weights(k: int, weights: KappaWeights) -> np.ndarray:
    """w_ij: 1 off the diagonal (nominal), |i - j| (linear) or (i - j)^2 (quadratic)."""
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(np.float64)
    if weights == "linear":
        return np.abs(i - j).astype(np.float64)
    if weights == "quadratic":
        return ((i - j) ** 2).astype(np.float64)
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def kappa_from_matrix(confusion: Any, weights: KappaWeights = None) -> tuple[float, str | None]:
    """Cohen's kappa of a confusion matrix: 1 - sum(w * O) / sum(w * E), E = outer(rows, cols) / N.

    Source: seeds/004 section 5.1, kappa = (p_o - p_e) / (1 - p_e), which is the unweighted case
    (w = 1 off the diagonal); the weighted forms use the class order as an ordinal scale (Cohen
    1968), as ``sklearn.metrics.cohen_kappa_score`` does. When chance agreement is total
    (p_e = 1, e.g. both raters use one class) kappa is 0/0: returns 0.0 and a problem message.
    """
    cm = check_confusion_matrix(confusion).astype(np.float64)
    w = _disagreement_weights(cm.shape[0], weights)
    expected = np.outer(cm.sum(axis=1), cm.sum(axis=0)) / cm.sum()
    denominator = float(np.sum(w * expected))
    if denominator == 0.0:
        return (
            0.0,
            "Cohen's kappa is undefined (chance agreement is 1: 1 - p_e = 0); reported as 0.0",
        )
    return float(1.0 - np.sum(w * cm) / denominator), None


def mcc_from_matrix(confusion: Any) -> tuple[float, str | None]:
    """Matthews correlation coefficient of a confusion matrix (Gorodkin's R_K).

    R_K = (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) with c = trace, s = N, t = row sums, p = column
    sums. Source: seeds/004 section 5.2; for two classes it is the binary formula printed there.
    The multi-class formula printed in 5.2 is garbled and the "Pearson correlation of label codes"
    of 5.2 / 9 depends on how classes are numbered, so R_K is used (an erratum of seed 004; it is
    what ``sklearn.metrics.matthews_corrcoef`` computes). A zero denominator (one class in y_true
    or in y_pred) returns 0.0 and a problem message.
    """
    cm = check_confusion_matrix(confusion).astype(np.float64)
    t = cm.sum(axis=1)
    p = cm.sum(axis=0)
    s = cm.sum()
    c = np.trace(cm)
    cov_tp = c * s - t @ p
    cov_pp = s * s - p @ p
    cov_tt = s * s - t @ t
    if cov_pp * cov_tt == 0.0:
        return (
            0.0,
            "MCC is undefined (y_true or y_pred holds a single class); reported as 0.0",
        )
    return float(cov_tp / np.sqrt(cov_pp * cov_tt)), None


def _warned(result: tuple[float, str | None]) -> float:
    value, problem = result
    if problem is not None:
        warnings.warn(problem, UndefinedMetricWarning, stacklevel=3)
    return value


def cohen_kappa(
    y_true: Any,
    y_pred: Any,
    weights: KappaWeights = None,
    labels: Iterable[Hashable] | None = None,
) -> float:
    """Cohen's kappa between two labelings (seeds/004 section 5.1); see `kappa_from_matrix`.

    For weighted kappa the class order is ``labels`` (or the sorted labels). Undefined kappa
    returns 0.0 with an `UndefinedMetricWarning`.
    """
    return _warned(kappa_from_matrix(confusion_matrix(y_true, y_pred, labels), weights))


def matthews_corrcoef(y_true: Any, y_pred: Any) -> float:
    """Matthews correlation coefficient, binary or multi-class R_K (seeds/004 section 5.2).

    See `mcc_from_matrix`. Undefined MCC returns 0.0 with an `UndefinedMetricWarning`.
    """
    return _warned(mcc_from_matrix(confusion_matrix(y_true, y_pred)))


def fleiss_kappa(counts: Any) -> tuple[float | None, str | None]:
    """Fleiss' kappa of ``counts`` (items x categories: how many raters put item i in category j;
    every item rated by the same number of raters, at least 2), or None and why it is undefined.

    Source: J. L. Fleiss, "Measuring nominal scale agreement among many raters", Psychological
    Bulletin 76(5), 1971: P_i = (sum_j n_ij^2 - n) / (n (n - 1)), p_j = sum_i n_ij / (N n),
    kappa = (mean P_i - sum_j p_j^2) / (1 - sum_j p_j^2) (as ``statsmodels`` ``fleiss_kappa``).
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        return None, "undefined: no items"
    raters = table.sum(axis=1)
    n = float(raters[0])
    if n < 2 or np.any(raters != n):
        return None, "undefined: needs the same number of raters (2 or more) on every item"
    p_i = (np.sum(table * table, axis=1) - n) / (n * (n - 1))
    p_j = table.sum(axis=0) / (table.shape[0] * n)
    chance = float(np.sum(p_j * p_j))
    if chance == 1.0:
        return None, "undefined: every rating is the same category (no disagreement is expected)"
    return (float(np.mean(p_i)) - chance) / (1.0 - chance), None
