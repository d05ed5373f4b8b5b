"""Paired (transcript-level) bootstrap intervals for agreement statistics, vectorised.

Every interval here resamples *transcripts*: the pairs (reference, judge) are kept together and
drawn with replacement. `paired_bootstrap` draws index blocks ``rng.integers(0, n, (rows, n))``
with ``rows = max_elements // n``, so for the same seed and ``batch=rows`` its resamples are those
of ``scipy.stats.bootstrap(..., paired=True, method="percentile")``, and its interval is the same
linear-interpolated percentile interval (seeds/004 section 8.3). A statistic that is undefined on
a resample (kappa when both raters use one class, a correlation of constant values) is NaN there;
those resamples are left out of the quantiles and counted, never replaced by 0.

The statistics are computed for a whole block of resamples at once: confusion matrices by one
``np.bincount`` over offset codes, and Cohen's kappa, MCC and Spearman's rho from them row-wise,
with the same formulas as `harness.stats.agreement` (seeds/004 sections 5.1-5.2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ..errors import UserInputError

__all__ = [
    "DEFAULT_RESAMPLES",
    "check_resampling",
    "confusion_batch",
    "kappa_batch",
    "mcc_batch",
    "paired_bootstrap",
    "spearman_batch",
]

DEFAULT_RESAMPLES = 2000
#: Indices per block: 32 MiB of int64, whatever n and the number of resamples.
MAX_ELEMENTS = 1 << 22


def check_resampling(n_resamples: int, seed: int | None) -> None:
    """``--resamples`` and ``--seed`` as a user gave them: a positive count and a non-negative seed."""
    if isinstance(n_resamples, bool) or int(n_resamples) != n_resamples or n_resamples < 1:
        raise UserInputError(f"--resamples must be a positive integer, got {n_resamples!r}")
    if seed is not None and (int(seed) != seed or seed < 0):
        raise UserInputError(f"--seed must be a non-negative integer, got {seed!r}")


def block_rows(n: int, max_elements: int = MAX_ELEMENTS) -> int:
    """Resamples per block for n items (at least one)."""
    return max(1, int(max_elements) // max(n, 1))


def paired_bootstrap(
    n: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
    max_elements: int = MAX_ELEMENTS,
) -> dict[str, Any]:
    """Percentile interval of ``statistic`` over transcript resamples.

    ``statistic(idx)`` gets an int array of shape (rows, n) (each row one resample of positions
    0..n-1) and returns one value per row, NaN where undefined. Returns ``{"ci": [low, high] or
    None, "resamples": B, "undefined_resamples": k}``; ``ci`` is None when n < 2 or when every
    resample is undefined.
    """
    if n < 2:
        return {"ci": None, "resamples": 0, "undefined_resamples": 0}
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    rng = np.random.default_rng(seed)
    rows = block_rows(n, max_elements)
    theta = np.empty(int(n_resamples), dtype=np.float64)
    for start in range(0, int(n_resamples), rows):
        count = min(rows, int(n_resamples) - start)
        block = np.asarray(statistic(rng.integers(0, n, (count, n))), dtype=np.float64)
        if block.shape != (count,):
            raise ValueError(f"statistic returned shape {block.shape} for {count} resamples")
        theta[start : start + count] = block
    defined = np.isfinite(theta)
    undefined = int(theta.size - defined.sum())
    if not defined.any():
        return {"ci": None, "resamples": int(n_resamples), "undefined_resamples": undefined}
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(theta[defined], [alpha, 1.0 - alpha])
    return {"ci": [float(low), float(high)], "resamples": int(n_resamples), "undefined_resamples": undefined}


def confusion_batch(true_codes: np.ndarray, pred_codes: np.ndarray, k: int, idx: np.ndarray) -> np.ndarray:
    """Confusion matrices (rows, k, k) of each resample ``idx[r]`` of the coded pairs."""
    rows = idx.shape[0]
    flat = true_codes[idx] * k + pred_codes[idx]
    flat += (np.arange(rows, dtype=np.int64) * (k * k))[:, None]
    return np.bincount(flat.ravel(), minlength=rows * k * k).reshape(rows, k, k)


def _weights(k: int, weights: Literal["linear", "quadratic"] | None) -> np.ndarray:
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(np.float64)
    if weights == "linear":
        return np.abs(i - j).astype(np.float64)
    return ((i - j) ** 2).astype(np.float64)


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with NaN where den == 0 (undefined), without a floating-point warning."""
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def kappa_batch(cms: np.ndarray, weights: Literal["linear", "quadratic"] | None = None) -> np.ndarray:
    """Cohen's kappa of each matrix: 1 - sum(w O) / sum(w E), E = outer(row sums, column sums) / N.

    As `harness.stats.agreement.kappa_from_matrix` (seeds/004 section 5.1), but NaN where chance
    agreement is total (the library reports 0.0 with a warning; a bootstrap must not count it).
    """
    c = cms.astype(np.float64)
    w = _weights(c.shape[-1], weights)
    total = c.sum(axis=(1, 2))
    expected = np.einsum("bi,ij,bj->b", c.sum(axis=2), w, c.sum(axis=1)) / total
    observed = np.einsum("bij,ij->b", c, w)
    return 1.0 - _divide(observed, expected)


def mcc_batch(cms: np.ndarray) -> np.ndarray:
    """Matthews correlation (Gorodkin's R_K, seeds/004 section 5.2) of each matrix; NaN where undefined."""
    c = cms.astype(np.float64)
    t = c.sum(axis=2)
    p = c.sum(axis=1)
    s = c.sum(axis=(1, 2))
    trace = np.einsum("bii->b", c)
    cov_tp = trace * s - np.einsum("bi,bi->b", t, p)
    cov_pp = s * s - np.einsum("bi,bi->b", p, p)
    cov_tt = s * s - np.einsum("bi,bi->b", t, t)
    return _divide(cov_tp, np.sqrt(cov_pp * cov_tt))


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
    return np.clip(_divide(np.einsum("ij,ij->i", a, b), den), -1.0, 1.0)


def _resample_ranks(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank, as ``scipy.stats.rankdata``) within each resample.

    No sort per resample: the values are coded once by their sorted distinct values, each
    resample's count of every code is one ``np.bincount``, and a value's average rank is
    (count of smaller values) + (its own count + 1) / 2.
    """
    distinct, codes = np.unique(values, return_inverse=True)
    rows, k = idx.shape[0], distinct.size
    coded = codes[idx]
    counts = np.bincount((coded + (np.arange(rows, dtype=np.int64) * k)[:, None]).ravel(), minlength=rows * k)
    counts = counts.reshape(rows, k)
    average = (np.cumsum(counts, axis=1) - counts) + (counts + 1) / 2.0
    return np.take_along_axis(average, coded, axis=1)


def spearman_batch(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Spearman's rho (Pearson's r of average ranks) of each resample; NaN when one side is constant."""
    return _rowwise_pearson(_resample_ranks(np.asarray(x), idx), _resample_ranks(np.asarray(y), idx))
