"""Classification metrics from one-vs-rest counts, and the report that gathers them.

Source: seeds/004 sections 3 (per-class metrics), 4 (macro / micro / weighted averages) and 5.3-5.4
(Jaccard, error rate). Each formula is a small function of count arrays returning a `Ratio`
(value with 0.0 where the denominator is zero, plus the mask of those places);
`classification_report` turns every masked place into a message in its ``warnings`` field, so a
zero denominator is never a crash, never a NaN and never silent.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ._common import Ratio, ratio
from .agreement import kappa_from_matrix, mcc_from_matrix
from .confusion import ClassCounts, _matrix_from_codes, _paired_codes, class_counts

__all__ = [
    "ClassificationReport",
    "accuracy",
    "balanced_accuracy",
    "classification_report",
    "error_rate",
    "f_beta",
    "false_negative_rate",
    "false_positive_rate",
    "jaccard_index",
    "precision",
    "recall",
    "specificity",
]

METRICS = (
    "precision",
    "recall",
    "f1",
    "f_beta",
    "specificity",
    "fpr",
    "fnr",
    "balanced_accuracy",
    "jaccard",
)

# What a zero denominator means for each metric, for the warning text.
_ZERO_DENOMINATOR = {
    "precision": "TP + FP = 0, the class is never predicted",
    "recall": "TP + FN = 0, the class never occurs in y_true",
    "f1": "2TP + FP + FN = 0, the class occurs in neither y_true nor y_pred",
    "f_beta": "(1 + b^2)TP + b^2 FN + FP = 0, the class occurs in neither y_true nor y_pred",
    "specificity": "TN + FP = 0, every sample belongs to the class",
    "fpr": "FP + TN = 0, every sample belongs to the class",
    "fnr": "FN + TP = 0, the class never occurs in y_true",
    "balanced_accuracy": "recall or specificity is undefined",
    "jaccard": "TP + FP + FN = 0, the class occurs in neither y_true nor y_pred",
}


def accuracy(confusion: np.ndarray) -> float:
    """Accuracy = sum_i C_ii / sum_ij C_ij (seeds/004 section 3.1, multi-class form)."""
    return float(np.trace(confusion) / np.sum(confusion))


def error_rate(confusion: np.ndarray) -> float:
    """Error rate = 1 - accuracy (seeds/004 section 5.4)."""
    return float(1.0 - accuracy(confusion))


def precision(tp: Any, fp: Any) -> Ratio:
    """Precision = TP / (TP + FP) (seeds/004 section 3.2)."""
    return ratio(tp, np.add(tp, fp))


def recall(tp: Any, fn: Any) -> Ratio:
    """Recall (sensitivity, TPR) = TP / (TP + FN) (seeds/004 section 3.3)."""
    return ratio(tp, np.add(tp, fn))


def f_beta(tp: Any, fp: Any, fn: Any, beta: float = 1.0) -> Ratio:
    """F-beta = (1 + b^2) TP / ((1 + b^2) TP + b^2 FN + FP).

    seeds/004 sections 3.4-3.5 give it in terms of precision and recall; the count form used here is
    the same value wherever those are defined, and stays defined (0.0) when only one of them is
    undefined, as in ``sklearn.metrics.fbeta_score``.
    """
    b2 = float(beta) ** 2
    tp = np.asarray(tp, dtype=np.float64)
    return ratio((1.0 + b2) * tp, (1.0 + b2) * tp + b2 * np.asarray(fn) + np.asarray(fp))


def specificity(tn: Any, fp: Any) -> Ratio:
    """Specificity (TNR) = TN / (TN + FP) (seeds/004 section 3.6)."""
    return ratio(tn, np.add(tn, fp))


def false_positive_rate(fp: Any, tn: Any) -> Ratio:
    """FPR (fall-out) = FP / (FP + TN) (seeds/004 section 3.7)."""
    return ratio(fp, np.add(fp, tn))


def false_negative_rate(fn: Any, tp: Any) -> Ratio:
    """FNR (miss rate) = FN / (FN + TP) (seeds/004 section 3.8)."""
    return ratio(fn, np.add(fn, tp))


def balanced_accuracy(tp: Any, fp: Any, fn: Any, tn: Any) -> Ratio:
    """Balanced accuracy = (recall + specificity) / 2 (seeds/004 section 3.9), one class vs rest.

    Undefined where either part is undefined; the undefined part counts as 0.0.
    """
    r, s = recall(tp, fn), specificity(tn, fp)
    return Ratio((r.value + s.value) / 2.0, r.undefined | s.undefined)


def jaccard_index(tp: Any, fp: Any, fn: Any) -> Ratio:
    """Jaccard index = TP / (TP + FP + FN) (seeds/004 section 5.3)."""
    return ratio(tp, np.add(np.add(tp, fp), fn))


def _all_metrics(tp, fp, fn, tn, beta: float) -> dict[str, Ratio]:
    return {
        "precision": precision(tp, fp),
        "recall": recall(tp, fn),
        "f1": f_beta(tp, fp, fn, 1.0),
        "f_beta": f_beta(tp, fp, fn, beta),
        "specificity": specificity(tn, fp),
        "fpr": false_positive_rate(fp, tn),
        "fnr": false_negative_rate(fn, tp),
        "balanced_accuracy": balanced_accuracy(tp, fp, fn, tn),
        "jaccard": jaccard_index(tp, fp, fn),
    }


def _overall_balanced_accuracy(counts: ClassCounts, labels) -> tuple[float, str | None]:
    """Mean recall over the classes present in y_true (Brodersen et al. 2010).

    For two classes this equals seeds/004 section 3.9, (sensitivity + specificity) / 2; for more it
    is ``sklearn.metrics.balanced_accuracy_score``. Classes absent from y_true have no recall and
    are left out of the mean (as scikit-learn does) rather than counted as 0.
    """
    present = counts.support > 0
    r = recall(counts.tp, counts.fn).value
    problem = None
    if not present.all():
        absent = [labels[i] for i in np.flatnonzero(~present)]
        problem = f"balanced accuracy leaves out classes absent from y_true: {absent!r}"
    return float(np.mean(r[present])), problem


@dataclass(frozen=True, eq=False)
class ClassificationReport:
    """Everything `classification_report` computes.

    ``per_class[metric]`` is an array ordered like ``labels``; ``macro``, ``micro`` and
    ``weighted`` map each metric name (see ``METRICS``) to its average. ``balanced_accuracy`` is
    mean recall over classes present in y_true; ``per_class["balanced_accuracy"]`` is the
    one-vs-rest (recall + specificity) / 2 of each class. ``warnings`` lists every value that was
    undefined and reported as 0.0 (or otherwise adjusted).
    """

    labels: tuple[Hashable, ...]
    confusion_matrix: np.ndarray
    counts: ClassCounts
    beta: float
    accuracy: float
    error_rate: float
    balanced_accuracy: float
    cohen_kappa: float
    mcc: float
    per_class: Mapping[str, np.ndarray]
    macro: Mapping[str, float]
    micro: Mapping[str, float]
    weighted: Mapping[str, float]
    warnings: tuple[str, ...] = field(default=())

    @property
    def support(self) -> np.ndarray:
        """Number of true samples of each class."""
        return self.counts.support

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values (lists, floats, strings), e.g. for JSON output."""
        return {
            "labels": list(self.labels),
            "confusion_matrix": self.confusion_matrix.tolist(),
            "support": self.support.tolist(),
            "beta": self.beta,
            "accuracy": self.accuracy,
            "error_rate": self.error_rate,
            "balanced_accuracy": self.balanced_accuracy,
            "cohen_kappa": self.cohen_kappa,
            "mcc": self.mcc,
            "per_class": {m: v.tolist() for m, v in self.per_class.items()},
            "macro": dict(self.macro),
            "micro": dict(self.micro),
            "weighted": dict(self.weighted),
            "warnings": list(self.warnings),
        }


def classification_report(
    y_true: Any,
    y_pred: Any,
    labels: Iterable[Hashable] | None = None,
    beta: float = 1.0,
) -> ClassificationReport:
    """Accuracy, per-class and averaged metrics, kappa and MCC for one labeling.

    Source: seeds/004 sections 2-5. Averages follow section 4: macro = unweighted mean over
    classes, micro = the formula applied to counts summed over classes, weighted = mean weighted by
    support. Every class in ``labels`` (given, or the sorted union of labels seen) counts in the
    averages, as with scikit-learn's ``labels=`` argument. Zero denominators give 0.0 and an entry
    in ``warnings``.
    """
    beta = float(beta)
    if not np.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    found, t, p = _paired_codes(y_true, y_pred, labels)
    cm = _matrix_from_codes(t, p, len(found))
    counts = class_counts(cm)
    problems: list[str] = []

    per_class = _all_metrics(counts.tp, counts.fp, counts.fn, counts.tn, beta)
    for name, r in per_class.items():
        for i in np.flatnonzero(r.undefined):
            problems.append(f"{name} is undefined for class {found[i]!r} ({_ZERO_DENOMINATOR[name]}); reported as 0.0")
    micro = _all_metrics(counts.tp.sum(), counts.fp.sum(), counts.fn.sum(), counts.tn.sum(), beta)
    for name, r in micro.items():
        if r.undefined:
            problems.append(f"micro {name} is undefined ({_ZERO_DENOMINATOR[name]}); reported as 0.0")

    support = counts.support.astype(np.float64)
    weights = support / support.sum()
    balanced, problem = _overall_balanced_accuracy(counts, found)
    kappa, kappa_problem = kappa_from_matrix(cm)
    mcc, mcc_problem = mcc_from_matrix(cm)
    problems.extend(x for x in (problem, kappa_problem, mcc_problem) if x is not None)

    return ClassificationReport(
        labels=found,
        confusion_matrix=cm,
        counts=counts,
        beta=beta,
        accuracy=accuracy(cm),
        error_rate=error_rate(cm),
        balanced_accuracy=balanced,
        cohen_kappa=kappa,
        mcc=mcc,
        per_class=MappingProxyType({m: r.value for m, r in per_class.items()}),
        macro=MappingProxyType({m: float(np.mean(r.value)) for m, r in per_class.items()}),
        micro=MappingProxyType({m: float(r.value) for m, r in micro.items()}),
        weighted=MappingProxyType({m: float(weights @ r.value) for m, r in per_class.items()}),
        warnings=tuple(problems),
    )
