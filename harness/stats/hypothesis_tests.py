"""Significance tests and effect size for comparing two models or two experiments.

Sources: seeds/004 section 7 (McNemar, paired t, 5x2cv paired t) and the "Statistical validation"
part of seeds/002 (Welch's t, Cohen's d). The statistics are computed here from their formulas;
SciPy supplies the reference distributions (chi2, t, binomial). Tests return a
`SignificanceResult`; a degenerate input (no discordant pairs, zero variance) gives a defined
result and a message in its ``warnings`` field.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._common import UndefinedMetricWarning, _sp, as_1d_float

__all__ = [
    "SignificanceResult",
    "cohens_d",
    "cv52_paired_ttest",
    "mcnemar",
    "paired_ttest",
    "welch_ttest",
]


@dataclass(frozen=True)
class SignificanceResult:
    """A test statistic and its two-sided p-value, SciPy style.

    ``df`` is the degrees of freedom of the reference distribution (None for an exact test);
    ``warnings`` explains any degenerate case.
    """

    statistic: float
    pvalue: float
    df: float | None = None
    warnings: tuple[str, ...] = field(default=())


def _t_result(numerator: float, denominator: float, df: float, what: str) -> SignificanceResult:
    """t = numerator / denominator with a two-sided p-value from Student's t with ``df``.

    A zero standard error leaves t undefined: it is reported as +-inf (p = 0) when the numerator is
    non-zero, and 0 (p = 1) when it is zero too, with a warning either way.
    """
    if denominator == 0.0:
        if numerator == 0.0:
            note = f"{what}: zero variance and zero difference; reported as t = 0, p = 1"
            return SignificanceResult(0.0, 1.0, df, (note,))
        note = f"{what}: zero variance with a non-zero difference; reported as t = +-inf, p = 0"
        return SignificanceResult(math.copysign(math.inf, numerator), 0.0, df, (note,))
    t = numerator / denominator
    return SignificanceResult(float(t), float(2.0 * _sp.t.sf(abs(t), df)), float(df))


def mcnemar(table: Any, exact: bool = False, correction: bool = True) -> SignificanceResult:
    """McNemar's test on a 2x2 table of paired outcomes (seeds/004 section 7.1).

    ``table[0][1]`` = n01 (A correct, B wrong), ``table[1][0]`` = n10; the diagonal is unused.
    Chi-square form: (|n01 - n10| - 1)^2 / (n01 + n10) with ``correction`` (the document's Yates
    form, applied as printed, also when n01 = n10, as statsmodels does), else (n01 - n10)^2 /
    (n01 + n10); p from chi2 with 1 df. ``exact``: statistic min(n01, n10), p from the two-sided
    binomial test of n01 out of n01 + n10 at 1/2 (``scipy.stats.binomtest``). With no discordant
    pairs there is no evidence of a difference: statistic 0, p = 1, and a warning.
    """
    t = np.asarray(table, dtype=np.float64)
    if t.shape != (2, 2):
        raise ValueError(f"McNemar's test needs a 2x2 table, got shape {t.shape}")
    if np.any(t < 0) or np.any(t != np.round(t)) or not np.all(np.isfinite(t)):
        raise ValueError("McNemar's table must hold non-negative integer counts")
    n01, n10 = int(t[0, 1]), int(t[1, 0])
    df = None if exact else 1.0
    if n01 + n10 == 0:
        return SignificanceResult(0.0, 1.0, df, ("no discordant pairs (n01 + n10 = 0); reported as p = 1",))
    if exact:
        return SignificanceResult(float(min(n01, n10)), float(_sp.binomtest(n01, n01 + n10, 0.5).pvalue))
    diff = abs(n01 - n10) - (1.0 if correction else 0.0)
    statistic = diff * diff / (n01 + n10)
    return SignificanceResult(float(statistic), float(_sp.chi2.sf(statistic, 1)), 1.0)


def paired_ttest(a: Any, b: Any) -> SignificanceResult:
    """Paired t-test: t = mean(d) / (s_d / sqrt(n)), d = a - b, n - 1 df (seeds/004 section 7.2)."""
    x = as_1d_float(a, "a", min_size=2)
    y = as_1d_float(b, "b", min_size=2)
    if x.size != y.size:
        raise ValueError(f"a paired t-test needs equal lengths, got {x.size} and {y.size}")
    d = x - y
    n = d.size
    # Equal differences have zero variance exactly; computed, rounding leaves ~1e-17, which would
    # turn "no spread" into an overwhelming (and false) t.
    sd = 0.0 if np.ptp(d) == 0 else float(d.std(ddof=1))
    return _t_result(float(d[0]) if sd == 0.0 else float(d.mean()), sd / math.sqrt(n), n - 1, "paired t-test")


def welch_ttest(a: Any, b: Any) -> SignificanceResult:
    """Welch's t-test: t = (mean_a - mean_b) / sqrt(s_a^2/n_a + s_b^2/n_b) (seeds/002, "Statistical
    validation" 1), with sample variances (ddof 1) and Welch-Satterthwaite degrees of freedom
    (s_a^2/n_a + s_b^2/n_b)^2 / ((s_a^2/n_a)^2/(n_a-1) + (s_b^2/n_b)^2/(n_b-1)).
    """
    x = as_1d_float(a, "a", min_size=2)
    y = as_1d_float(b, "b", min_size=2)
    va = 0.0 if np.ptp(x) == 0 else x.var(ddof=1) / x.size  # constant samples: exactly 0 (see paired_ttest)
    vb = 0.0 if np.ptp(y) == 0 else y.var(ddof=1) / y.size
    se2 = va + vb
    df_den = va * va / (x.size - 1) + vb * vb / (y.size - 1)
    df = se2 * se2 / df_den if df_den > 0 else float(x.size + y.size - 2)
    return _t_result(float(x.mean() - y.mean()), float(math.sqrt(se2)), float(df), "Welch's t-test")


def cohens_d(a: Any, b: Any) -> float:
    """Cohen's d = (mean_a - mean_b) / s_pooled, s_pooled^2 = ((n_a-1)s_a^2 + (n_b-1)s_b^2)/(n_a+n_b-2).

    seeds/002 ("Statistical validation" 2) writes d = |mean_1 - mean_2| / s_pooled; this keeps the
    sign so the direction is not lost (``abs()`` gives the document's value). Zero pooled SD: 0.0
    when the means are equal, +-inf otherwise, with an `UndefinedMetricWarning`.
    """
    x = as_1d_float(a, "a", min_size=1)
    y = as_1d_float(b, "b", min_size=1)
    dof = x.size + y.size - 2
    if dof < 1:
        raise ValueError("Cohen's d needs at least three values in total (pooled SD has n_a + n_b - 2 df)")
    ss = np.sum((x - x.mean()) ** 2) + np.sum((y - y.mean()) ** 2)
    diff = float(x.mean() - y.mean())
    if ss == 0.0:
        warnings.warn(
            "Cohen's d is undefined: pooled standard deviation is 0",
            UndefinedMetricWarning,
            stacklevel=2,
        )
        return 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(ss / dof)


def cv52_paired_ttest(diffs: Any) -> SignificanceResult:
    """Dietterich's 5x2cv paired t-test (seeds/004 section 7.3; Dietterich 1998).

    ``diffs[j, i]`` = p_j^(i), the difference in error between the two models on fold i of
    replication j. t = p_1^(1) / sqrt(mean_j s_j^2) with 5 df, where s_j^2 = sum_i (p_j^(i) -
    mean_i p_j^(i))^2 -- Dietterich's definition; for two folds it equals the sample variance
    with ddof = 1, which is what the document's "variance of differences" must mean.
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.shape != (5, 2):
        raise ValueError(f"the 5x2cv test needs differences of shape (5, 2), got {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("diffs contains NaN or infinite values")
    s2 = np.sum((d - d.mean(axis=1, keepdims=True)) ** 2, axis=1)
    return _t_result(float(d[0, 0]), float(math.sqrt(s2.mean())), 5, "5x2cv paired t-test")
