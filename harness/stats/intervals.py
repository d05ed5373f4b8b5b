"""Confidence intervals: for a proportion (normal, Wilson), for a mean (t) and by bootstrap.

Sources: seeds/004 section 8 (normal, Wilson, bootstrap percentile) and seeds/002 "Statistical
validation" 3 (CI of a mean). Every interval is a ``(low, high)`` tuple. The bootstrap draws its
resamples in chunks whose size is bounded by an element budget, so memory stays bounded however
many resamples of however many values are asked for.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ._common import (
    UndefinedMetricWarning,
    accepts_axis,
    as_1d_float,
    check_confidence,
    critical_value,
)

__all__ = ["bootstrap_interval", "mean_interval", "normal_interval", "wilson_interval"]

DEFAULT_MAX_ELEMENTS = 1 << 22  # values per chunk: 32 MiB of float64 plus 32 MiB of indices


def _proportion(successes: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(successes, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    if k.size == 0 or m.size == 0:
        raise ValueError("successes and n must not be empty")
    if np.any(m <= 0) or np.any(m != np.round(m)):
        raise ValueError(f"n must be a positive integer count, got {n!r}")
    if np.any(k < 0) or np.any(k > m) or not np.all(np.isfinite(k)):
        raise ValueError(f"successes must lie between 0 and n, got successes={successes!r}, n={n!r}")
    return k, m


def _pair(low: np.ndarray, high: np.ndarray) -> tuple[Any, Any]:
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def normal_interval(successes: Any, n: Any, confidence: float = 0.95) -> tuple[Any, Any]:
    """Normal-approximation (Wald) interval p +- z sqrt(p(1-p)/n) for a proportion.

    seeds/004 section 8.1 (which rounds z to 1.96; the exact normal quantile is used). Clipped to
    [0, 1] as ``statsmodels proportion_confint(method="normal")`` does: a proportion cannot leave
    it, though the raw formula can. Arrays broadcast.
    """
    k, m = _proportion(successes, n)
    z = critical_value(confidence)
    p = k / m
    half = z * np.sqrt(p * (1.0 - p) / m)
    return _pair(np.clip(p - half, 0.0, 1.0), np.clip(p + half, 0.0, 1.0))


def wilson_interval(successes: Any, n: Any, confidence: float = 0.95) -> tuple[Any, Any]:
    """Wilson score interval (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n).

    seeds/004 section 8.2. Arrays broadcast.
    """
    k, m = _proportion(successes, n)
    z = critical_value(confidence)
    p = k / m
    z2 = z * z
    centre = p + z2 / (2.0 * m)
    half = z * np.sqrt(p * (1.0 - p) / m + z2 / (4.0 * m * m))
    den = 1.0 + z2 / m
    # At k = 0 and k = n the bounds are exactly 0 and 1; rounding would leave them ~1e-18 off.
    low = np.where(k == 0, 0.0, np.clip((centre - half) / den, 0.0, 1.0))
    high = np.where(k == m, 1.0, np.clip((centre + half) / den, 0.0, 1.0))
    return _pair(low, high)


def mean_interval(values: Any, confidence: float = 0.95) -> tuple[float, float]:
    """t-based interval for a mean: mean +- t_{n-1} s / sqrt(n), s the sample SD (ddof 1).

    seeds/002 ("Statistical validation" 3) writes mean +- 1.96 sigma / sqrt(n). Student's t quantile
    (``scipy.special.stdtrit``, what ``scipy.stats.t`` calls) is used instead: a run often has few items, where 1.96 gives intervals
    that are too narrow; the two agree as n grows. Needs at least two values.
    """
    # scipy.special here, not at the top: 0.2 s to import, for every importer of harness.stats.
    from scipy.special import stdtrit

    x = as_1d_float(values, "values", min_size=2)
    c = check_confidence(confidence)
    # t.isf(q, df) = -stdtrit(df, q): the same cephes routine scipy.stats.t calls, without importing
    # scipy.stats (a second of start-up at the end of every run).
    half = float(-stdtrit(x.size - 1, (1.0 - c) / 2.0)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    m = float(x.mean())
    return m - half, m + half


def _vectorised(statistic: Callable[..., Any]) -> Callable[[np.ndarray], np.ndarray]:
    """A function mapping a (rows, n) array to the statistic of each row."""
    if accepts_axis(statistic):
        return lambda a: np.asarray(statistic(a, axis=-1), dtype=np.float64)
    return lambda a: np.array([statistic(row) for row in a], dtype=np.float64)


def _chunked(func: Callable[[np.ndarray], np.ndarray], rows: int, total: int, make_rows) -> np.ndarray:
    """Apply ``func`` to ``make_rows(count)`` blocks of at most ``rows`` rows until ``total`` rows."""
    out = np.empty(total, dtype=np.float64)
    for start in range(0, total, rows):
        count = min(rows, total - start)
        block = func(make_rows(start, count))
        if block.shape != (count,):
            raise ValueError(f"statistic must return one number per resample: got shape {block.shape} for {count} resamples")
        out[start : start + count] = block
    return out


def _jackknife(x: np.ndarray, func: Callable[[np.ndarray], np.ndarray], rows: int) -> np.ndarray:
    """The statistic of each leave-one-out sample, computed in blocks of at most ``rows`` rows."""
    n = x.size

    def leave_one_out(start: int, count: int) -> np.ndarray:
        keep = np.ones((count, n), dtype=bool)
        keep[np.arange(count), np.arange(start, start + count)] = False
        return np.broadcast_to(x, (count, n))[keep].reshape(count, n - 1)

    return _chunked(func, rows, n, leave_one_out)


def _bca_levels(theta_hat: float, theta_b: np.ndarray, theta_jack: np.ndarray, alpha: float):
    """BCa quantile levels (Efron & Tibshirani 1993, section 14.3, eq. 14.14-14.15).

    z0 = Phi^-1(share of resamples below theta_hat, ties counted half); a = sum U^3 / (6 (sum
    U^2)^1.5) with U the jackknife deviations. Zero jackknife spread means no acceleration (a = 0).
    Returns None when z0 is infinite (every resample on one side of theta_hat).
    """
    from scipy.special import ndtr, ndtri  # imported here: see mean_interval

    share = (np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)) / (2.0 * theta_b.size)
    z0 = float(ndtri(share))
    if not math.isfinite(z0):
        return None
    u = theta_jack.mean() - theta_jack
    den = float(np.sum(u * u))
    a = float(np.sum(u**3) / (6.0 * den**1.5)) if den > 0 else 0.0
    levels = []
    for z in (ndtri(alpha), -ndtri(alpha)):
        num = z0 + z
        levels.append(float(ndtr(z0 + num / (1.0 - a * num))))
    return levels


def bootstrap_interval(
    values: Any,
    statistic: Callable[..., Any] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    method: Literal["percentile", "bca"] = "percentile",
    seed: int | np.random.Generator | None = 0,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> tuple[float, float]:
    """Bootstrap confidence interval of ``statistic(values)``.

    seeds/004 section 8.3: resample with replacement B times, take the alpha/2 and 1 - alpha/2
    quantiles of the B statistics. The quantiles are interpolated linearly (numpy's default, as in
    ``scipy.stats.bootstrap``) rather than the document's order statistics theta_(alpha/2 B),
    which are undefined when alpha/2 B is not an integer. ``method="bca"`` adjusts the quantile
    levels for bias and skew (Efron & Tibshirani 1993, section 14.3).

    Resamples are drawn as ``rng.integers(0, n, (rows, n))`` blocks of at most
    ``max_elements // n`` rows (one row when n is larger), so the same seed and block size give the
    same resamples as ``scipy.stats.bootstrap(..., batch=rows)``. ``statistic`` is called on a
    (rows, n) array with ``axis=-1`` when it takes ``axis`` (np.mean does), else once per row.
    BCa also needs the n leave-one-out statistics, computed in blocks the same way: memory stays
    bounded, but the work grows as n^2, so prefer "percentile" for very large n. When BCa cannot
    be computed (every resample on one side of the estimate) the percentile interval is returned
    with an `UndefinedMetricWarning`.
    """
    x = as_1d_float(values, "values", min_size=2)
    c = check_confidence(confidence)
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    if int(max_elements) < 1:
        raise ValueError(f"max_elements must be positive, got {max_elements!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n = x.size
    rows = max(1, int(max_elements) // n)
    func = _vectorised(statistic)

    theta_b = _chunked(
        func,
        rows,
        int(n_resamples),
        lambda _start, count: x[rng.integers(0, n, (count, n))],
    )
    alpha = (1.0 - c) / 2.0
    levels = [alpha, 1.0 - alpha]
    if method == "bca":
        theta_hat = float(func(x[np.newaxis, :])[0])
        bca = _bca_levels(
            theta_hat,
            theta_b,
            _jackknife(x, func, max(1, int(max_elements) // (n - 1))),
            alpha,
        )
        if bca is None:
            warnings.warn(
                "BCa interval undefined (every resample falls on one side of the estimate); returning the percentile interval",
                UndefinedMetricWarning,
                stacklevel=2,
            )
        else:
            levels = bca
    low, high = np.quantile(theta_b, levels)
    return float(low), float(high)
