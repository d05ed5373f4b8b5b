"""Aggregates for summary.json: mean with a 95% confidence interval, and latency percentiles.

The interval is Student's t interval of the mean (``harness.stats.mean_interval``), the usual
choice for a mean of judge scores; with one value it is undefined and reported as null. Percentiles are
NumPy's default (linear interpolation), the same definition the report uses.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

# numpy and SciPy (the t quantile) are imported by the functions that use them, when a run ends:
# every command would otherwise pay ~0.4 s for them at start-up. (Importing them in a thread
# during the run was measured and rejected: it takes the GIL from the event loop.)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float | None, tuple[float, float] | None]:
    """Mean and t-interval; ``(None, None)`` for no values, ``(mean, None)`` for one value."""
    import numpy as np

    from ..stats.intervals import mean_interval

    n = len(values)
    if n == 0:
        return None, None
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if n == 1:
        return mean, None
    return mean, mean_interval(data, confidence)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float | None]:
    """``{"p50": …, "p95": …, "p99": …}``; every entry None when there are no values."""
    import numpy as np

    if len(values) == 0:
        return {f"p{q:g}": None for q in qs}
    points = np.percentile(np.asarray(values, dtype=float), qs)
    return {f"p{q:g}": float(p) for q, p in zip(qs, points, strict=True)}


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
