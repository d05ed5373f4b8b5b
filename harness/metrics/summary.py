"""Aggregates for summary.json: mean with a 95% confidence interval, and latency percentiles.

The interval is Student's t interval of the mean, mean ± t_{(1+c)/2, n-1} · s/√n, the formula of
``harness.stats.mean_interval`` (the usual choice for a mean of judge scores; with one value it is
undefined and reported as null). Percentiles are NumPy's default (linear interpolation), the
definition the report uses. Both are computed here in plain Python, with the arithmetic NumPy does
(so overflow and underflow turn out as they did), and the t quantile from ``stats.tquantile``:
importing numpy and SciPy's t quantile cost every run ~0.5 s of CPU at its end.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

from ..stats.tquantile import t_quantile


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float | None, tuple[float, float] | None]:
    """Mean and t-interval; ``(None, None)`` for no values, ``(mean, None)`` for one value.

    As ``mean_interval``: a NaN or infinite value among two or more is a ValueError, and the
    confidence must lie strictly between 0 and 1."""
    n = len(values)
    if n == 0:
        return None, None
    if n == 1:
        return float(values[0]), None
    try:
        total = math.fsum(values)
    except OverflowError:  # finite values whose sum leaves float64: ±inf, as NumPy's sum
        total = sum(values, 0.0)
    except ValueError:  # fsum of +inf and -inf
        total = math.nan
    # A finite exact sum means every value is finite; only otherwise are they looked at one by one.
    if not math.isfinite(total) and not all(math.isfinite(v) for v in values):
        raise ValueError("values contains NaN or infinite values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    mean = total / n
    # Squares as NumPy forms them (d * d: inf on overflow, 0 on underflow), summed exactly.
    sd = math.sqrt(math.fsum((v - mean) * (v - mean) for v in values) / (n - 1))
    half = -t_quantile((1.0 - confidence) / 2.0, n - 1) * sd / math.sqrt(n)
    return mean, (mean - half, mean + half)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float | None]:
    """``{"p50": …, "p95": …, "p99": …}``; every entry None when there are no values.

    ``numpy.percentile``'s linear method step by step: index (n-1)·q/100 in the sorted values,
    then its two-sided interpolation; any NaN makes every percentile NaN, as there."""
    n = len(values)
    if n == 0:
        return {f"p{q:g}": None for q in qs}
    if any(math.isnan(v) for v in values):
        return {f"p{q:g}": math.nan for q in qs}
    ordered = sorted(values)
    out: dict[str, float | None] = {}
    for q in qs:
        index = (n - 1) * (q / 100)
        if not 0 <= index <= n - 1:
            raise ValueError(f"percentiles must be in the range [0, 100], got {q!r}")
        low = math.floor(index)
        if index >= n - 1:
            out[f"p{q:g}"] = float(ordered[-1])
            continue
        a, b, gamma = ordered[low], ordered[low + 1], index - low
        diff = b - a
        out[f"p{q:g}"] = float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


def describe(values: array | Sequence[float]) -> dict[str, object]:
    """n, mean, 95% CI, min, max of a series (a plain dict, ready for JSON)."""
    mean, ci = mean_ci(values)
    return {
        "n": len(values),
        "mean": mean,
        "ci95": list(ci) if ci is not None else None,
        "min": float(min(values)) if len(values) else None,
        "max": float(max(values)) if len(values) else None,
    }
