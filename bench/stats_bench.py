#!/usr/bin/env python
"""harness.stats against scikit-learn on 10,000,000 predictions (issue 4).

    python bench/stats_bench.py                # N = 10,000,000, median of 3
    python bench/stats_bench.py --n 1000000 --repeats 5

On the same arrays, in the same process, alternating the two libraries so that a noisy machine
slows both alike, it times:

- report: ``confusion_matrix`` and the full ``classification_report`` of 5-class integer labels
  (harness: ``harness.stats.confusion_matrix`` + ``harness.stats.classification_report``;
  scikit-learn: ``confusion_matrix`` + ``classification_report(output_dict=True)``); the
  harness's report also holds specificity, FPR, FNR, Jaccard, balanced accuracy, kappa and MCC,
  which scikit-learn's does not;
- report+: the same harness calls against scikit-learn computing what the harness's report holds
  (confusion matrix, classification_report, balanced accuracy, Cohen's kappa, MCC, Jaccard);
- roc_auc: binary ROC-AUC of continuous scores (``roc_auc_score``);
- roc_auc ties: binary ROC-AUC of scores rounded to two decimals, as judges reply (many ties).

Every pair of results is checked to agree (1e-9) before it is timed. Prints the median seconds of
each and the ratio sklearn / harness: above 1 means harness.stats is faster.

Figures on the 2-core shared machine (load average 4-5 during both runs, so absolute times are
noisy; the ratios come from alternating runs), N = 10,000,000, median of 3:

    case           before: harness s  sklearn s  ratio     after: harness s  sklearn s  ratio
    report                    5.002     10.391    2.08              0.331      6.468  19.51
    report+                   6.635     21.888    3.30              0.524     14.491  27.68
    roc_auc                   9.308     10.563    1.13              1.217      7.748   6.36
    roc_auc ties              3.255      6.512    2.00              1.000      3.994   3.99

"before" is harness.stats as first written (labels encoded with ``np.unique``, ROC-AUC by
``scipy.stats.rankdata``); "after" encodes integer labels with ``np.bincount`` and a lookup
table, and counts the Mann-Whitney U of a binary ROC-AUC with ``searchsorted`` over the sorted
scores of each class (harness/stats/confusion.py, curves.py).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np
from sklearn import metrics as skm

from harness import stats


def timed(func: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def harness_report(y: np.ndarray, p: np.ndarray) -> Any:
    return stats.confusion_matrix(y, p), stats.classification_report(y, p)


def sklearn_report(y: np.ndarray, p: np.ndarray) -> Any:
    return skm.confusion_matrix(y, p), skm.classification_report(y, p, output_dict=True, zero_division=0)


def sklearn_report_plus(y: np.ndarray, p: np.ndarray) -> Any:
    return (
        *sklearn_report(y, p),
        skm.balanced_accuracy_score(y, p),
        skm.cohen_kappa_score(y, p),
        skm.matthews_corrcoef(y, p),
        skm.jaccard_score(y, p, average=None),
    )


def check_report(y: np.ndarray, p: np.ndarray) -> None:
    (cm, report), (sk_cm, sk_report, sk_bal, sk_kappa, sk_mcc, sk_jac) = harness_report(y, p), sklearn_report_plus(y, p)
    assert np.array_equal(cm, sk_cm) and np.array_equal(report.confusion_matrix, sk_cm)
    for i, label in enumerate(report.labels):
        for ours, theirs in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
            assert abs(report.per_class[ours][i] - sk_report[str(label)][theirs]) < 1e-9
    assert abs(report.accuracy - sk_report["accuracy"]) < 1e-9
    assert abs(report.macro["f1"] - sk_report["macro avg"]["f1-score"]) < 1e-9
    assert abs(report.weighted["f1"] - sk_report["weighted avg"]["f1-score"]) < 1e-9
    assert abs(report.balanced_accuracy - sk_bal) < 1e-9
    assert abs(report.cohen_kappa - sk_kappa) < 1e-9 and abs(report.mcc - sk_mcc) < 1e-9
    assert np.allclose(report.per_class["jaccard"], sk_jac, atol=1e-9)


def race(name: str, ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int) -> tuple[str, float, float]:
    t_ours: list[float] = []
    t_theirs: list[float] = []
    for i in range(repeats):  # alternate, and alternate who goes first
        pair = [(t_ours, ours), (t_theirs, theirs)]
        for times, func in pair if i % 2 == 0 else pair[::-1]:
            times.append(timed(func))
    return name, statistics.median(t_ours), statistics.median(t_theirs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="predictions (default 10,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per library; the median is reported")
    parser.add_argument("--classes", type=int, default=5)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    n = args.n
    y = rng.integers(0, args.classes, n)
    p = np.where(rng.random(n) < 0.7, y, rng.integers(0, args.classes, n))
    yb = rng.integers(0, 2, n)
    score = rng.random(n) + 0.5 * yb
    tied = np.round(np.clip(score / 1.5, 0, 1), 2)

    check_report(y, p)
    for s in (score, tied):
        assert abs(stats.roc_auc(yb, s) - skm.roc_auc_score(yb, s)) < 1e-9

    results = [
        race("report", lambda: harness_report(y, p), lambda: sklearn_report(y, p), args.repeats),
        race("report+", lambda: harness_report(y, p), lambda: sklearn_report_plus(y, p), args.repeats),
        race("roc_auc", lambda: stats.roc_auc(yb, score), lambda: skm.roc_auc_score(yb, score), args.repeats),
        race("roc_auc ties", lambda: stats.roc_auc(yb, tied), lambda: skm.roc_auc_score(yb, tied), args.repeats),
    ]
    print(f"n = {n:,}, {args.classes} classes, median of {args.repeats}; ratio = sklearn / harness (> 1: harness faster)")
    print(f"{'case':<14} {'harness s':>10} {'sklearn s':>10} {'ratio':>7}")
    for name, ours, theirs in results:
        print(f"{name:<14} {ours:>10.3f} {theirs:>10.3f} {theirs / ours:>7.2f}")


if __name__ == "__main__":
    main()
