"""Statistics for evaluation results: classification metrics, agreement, curves, tests, intervals.

Parts (each a module named for what it holds):

- `confusion`: label encoding, the confusion matrix and per-class TP / FP / FN / TN.
- `classification`: one function per formula on those counts, and `classification_report`.
- `agreement`: Cohen's kappa and Matthews' correlation (multi-class R_K).
- `curves`: ROC and precision-recall curves, ROC-AUC and average precision.
- `hypothesis_tests`: McNemar, paired / Welch / 5x2cv t-tests, Cohen's d.
- `intervals`: normal, Wilson, t and bootstrap confidence intervals.

The formulas come from seeds/004 (classification metrics) and seeds/002 (statistical validation),
corrected where a document errs; each docstring names its section and the correction.

The names below are imported on first use (PEP 562), so a run that needs none of them, such as
``harness run``, which imports ``stats.noise`` only, does not pay for NumPy and SciPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._common import UndefinedMetricWarning
    from .agreement import cohen_kappa, matthews_corrcoef
    from .classification import ClassificationReport, classification_report
    from .confusion import ClassCounts, class_counts, confusion_matrix
    from .curves import (
        average_precision,
        pr_curve,
        precision_recall_curve,
        roc_auc,
        roc_curve,
    )
    from .hypothesis_tests import (
        SignificanceResult,
        cohens_d,
        cv52_paired_ttest,
        mcnemar,
        paired_ttest,
        welch_ttest,
    )
    from .intervals import (
        bootstrap_interval,
        mean_interval,
        normal_interval,
        wilson_interval,
    )

_HOME = {
    "ClassCounts": "confusion",
    "ClassificationReport": "classification",
    "SignificanceResult": "hypothesis_tests",
    "UndefinedMetricWarning": "_common",
    "average_precision": "curves",
    "bootstrap_interval": "intervals",
    "class_counts": "confusion",
    "classification_report": "classification",
    "cohen_kappa": "agreement",
    "cohens_d": "hypothesis_tests",
    "confusion_matrix": "confusion",
    "cv52_paired_ttest": "hypothesis_tests",
    "matthews_corrcoef": "agreement",
    "mcnemar": "hypothesis_tests",
    "mean_interval": "intervals",
    "normal_interval": "intervals",
    "paired_ttest": "hypothesis_tests",
    "pr_curve": "curves",
    "precision_recall_curve": "curves",
    "roc_auc": "curves",
    "roc_curve": "curves",
    "welch_ttest": "hypothesis_tests",
    "wilson_interval": "intervals",
}

__all__ = [
    "ClassCounts",
    "ClassificationReport",
    "SignificanceResult",
    "UndefinedMetricWarning",
    "average_precision",
    "bootstrap_interval",
    "class_counts",
    "classification_report",
    "cohen_kappa",
    "cohens_d",
    "confusion_matrix",
    "cv52_paired_ttest",
    "matthews_corrcoef",
    "mcnemar",
    "mean_interval",
    "normal_interval",
    "paired_ttest",
    "pr_curve",
    "precision_recall_curve",
    "roc_auc",
    "roc_curve",
    "welch_ttest",
    "wilson_interval",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
