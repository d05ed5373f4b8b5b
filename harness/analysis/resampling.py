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

`grouped_bootstrap` resamples *groups* instead (transcripts of one task or conversation together):
its statistics take each resample as weights on the items (how many times each is in it), and
`confusion_weighted`, `spearman_weighted` and `mae_weighted` compute from those weights what the
plain statistics give on the resample written out item by item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np

from ..errors import UserInputError

__all__ = [
    "DEFAULT_RESAMPLES",
    "check_resampling",
    "confusion_batch",
    "confusion_weighted",
    "group_weights",
    "grouped_bootstrap",
    "kappa_batch",
    "mae_weighted",
    "mcc_batch",
    "paired_bootstrap",
    "percentile_interval",
    "spearman_batch",
    "spearman_weighted",
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


# -- grouped resampling: whole groups drawn, each item weighted by how often its group was drawn --------


def group_weights(groups: np.ndarray, n_resamples: int, seed: int | None = 0, max_elements: int = MAX_ELEMENTS) -> Iterator[np.ndarray]:
    """Resamples of *groups* (the cluster bootstrap: Davison & Hinkley 1997, section 3.8), in
    blocks: each block is float weights of shape (rows, n), each row how many times each item is in
    one resample. G groups are drawn with replacement and every item of a drawn group enters with
    it, so items of one group (one task, one conversation) never count as independent.
    ``groups`` holds each item's group code 0..G-1; ``n_resamples`` rows in all."""
    codes = np.asarray(groups, dtype=np.int64)
    g = int(codes.max()) + 1 if codes.size else 0
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    rng = np.random.default_rng(seed)
    rows = block_rows(max(g, codes.size), max_elements)
    for start in range(0, int(n_resamples), rows):
        count = min(rows, int(n_resamples) - start)
        drawn = rng.integers(0, g, (count, g))
        drawn += (np.arange(count, dtype=np.int64) * g)[:, None]
        per_group = np.bincount(drawn.ravel(), minlength=count * g).reshape(count, g)
        yield per_group[:, codes].astype(np.float64)


def percentile_interval(theta: np.ndarray, confidence: float = 0.95, null: float | None = None) -> dict[str, Any]:
    """``{"ci", "resamples", "undefined_resamples"}`` of resampled values ``theta`` (NaN where
    undefined: left out and counted, as in `paired_bootstrap`); with ``null``, also ``pvalue``:
    the two-sided bootstrap p-value of the value ``null``, 2·min(share ≤ null, share ≥ null), at
    most 1. ``ci`` (and ``pvalue``) are None when every value is undefined."""
    defined = theta[np.isfinite(theta)]
    out: dict[str, Any] = {"ci": None, "resamples": int(theta.size), "undefined_resamples": int(theta.size - defined.size)}
    if null is not None:
        out["pvalue"] = None
    if defined.size:
        alpha = (1.0 - confidence) / 2.0
        low, high = np.quantile(defined, [alpha, 1.0 - alpha])
        out["ci"] = [float(low), float(high)]
        if null is not None:
            out["pvalue"] = float(min(1.0, 2.0 * min(np.mean(defined <= null), np.mean(defined >= null))))
    return out


def grouped_bootstrap(
    groups: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    confidence: float = 0.95,
    null: float | None = None,
    max_elements: int = MAX_ELEMENTS,
) -> dict[str, Any]:
    """Percentile interval of ``statistic`` over `group_weights` resamples: ``statistic(weights)``
    gets a block (rows, n) and returns one value per row, NaN where undefined. The result is
    `percentile_interval`'s with ``groups`` (G); ``ci`` is None when G < 2."""
    codes = np.asarray(groups, dtype=np.int64)
    g = int(codes.max()) + 1 if codes.size else 0
    if g < 2:
        return {"ci": None, "resamples": 0, "undefined_resamples": 0, "groups": g, **({"pvalue": None} if null is not None else {})}
    blocks = []
    for weights in group_weights(codes, n_resamples, seed, max_elements):
        block = np.asarray(statistic(weights), dtype=np.float64)
        if block.shape != (weights.shape[0],):
            raise ValueError(f"statistic returned shape {block.shape} for {weights.shape[0]} resamples")
        blocks.append(block)
    return {**percentile_interval(np.concatenate(blocks), confidence, null), "groups": g}


def confusion_weighted(true_codes: np.ndarray, pred_codes: np.ndarray, k: int, weights: np.ndarray) -> np.ndarray:
    """Confusion matrices (rows, k, k) of weighted items: cell (i, j) sums the weights of the items
    coded i by the reference and j by the judge (`confusion_batch` with weights for draws)."""
    cells = np.asarray(true_codes, dtype=np.int64) * k + np.asarray(pred_codes, dtype=np.int64)
    onehot = np.zeros((cells.size, k * k))
    onehot[np.arange(cells.size), cells] = 1.0
    return (np.asarray(weights, dtype=np.float64) @ onehot).reshape(-1, k, k)


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean) of each item within each weighted resample:
    the ranks ``scipy.stats.rankdata`` gives the resample with every item repeated weight times."""
    distinct, codes = np.unique(np.asarray(values), return_inverse=True)
    onehot = np.zeros((codes.size, distinct.size))
    onehot[np.arange(codes.size), codes] = 1.0
    counts = weights @ onehot
    average = (np.cumsum(counts, axis=1) - counts) + (counts + 1.0) / 2.0
    return average[:, codes]


def spearman_weighted(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho of each weighted resample (Pearson's r of the average ranks, every item
    counted weight times); NaN when one side is constant in the resample."""
    w = np.asarray(weights, dtype=np.float64)
    rx, ry = _weighted_ranks(x, w), _weighted_ranks(y, w)
    total = w.sum(axis=1, keepdims=True)
    dx = rx - np.einsum("ij,ij->i", w, rx)[:, None] / total
    dy = ry - np.einsum("ij,ij->i", w, ry)[:, None] / total
    cov = np.einsum("ij,ij,ij->i", w, dx, dy)
    den = np.sqrt(np.einsum("ij,ij,ij->i", w, dx, dx) * np.einsum("ij,ij,ij->i", w, dy, dy))
    # A side whose ranks are all equal has a sum of squares of rounding size, not exactly 0; one
    # that is not has at least two ranks 1 apart, so a sum of squares of at least 1/2.
    den[den <= 1e-6] = 0.0
    return np.clip(_divide(cov, den), -1.0, 1.0)


def mae_weighted(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean absolute error |y − x| of each weighted resample."""
    w = np.asarray(weights, dtype=np.float64)
    return _divide(w @ np.abs(np.asarray(y, dtype=np.float64) - np.asarray(x, dtype=np.float64)), w.sum(axis=1))
