"""Krippendorff's alpha: the agreement of any number of raters on any number of units, with
missing ratings, for nominal, ordinal and interval values.

Source: K. Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011, Annenberg School for
Communication, University of Pennsylvania), sections "C. Nominal data, any number of observers,
missing values" and "E. Other metrics": for the coincidence matrix ``o`` of the pairable values
(a unit's values each paired with every other value of that unit, each pair weighted
``1 / (m_u - 1)`` where ``m_u`` is the unit's number of values, units with one value left out),
``n_c = sum_k o_ck`` and ``n = sum_c n_c``,

    alpha = 1 - (n - 1) * sum_ck o_ck delta2_ck / sum_ck n_c n_k delta2_ck

with the difference functions ``delta2_ck``: nominal ``[c != k]``; interval ``(c - k)^2``; ordinal
``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2`` (the values' ranks by their frequencies).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

__all__ = ["Alpha", "Level", "coincidences", "krippendorff_alpha"]

Level = Literal["nominal", "ordinal", "interval"]


class Alpha(NamedTuple):
    """Alpha, or None with the reason it is undefined; ``pairable`` counts the values in units with
    at least two of them (the ``n`` of the formula)."""

    value: float | None
    pairable: int
    problem: str | None


def coincidences(ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values (sorted) and their coincidence matrix ``o`` (section C, step 2) of ``ratings``:
    raters x units, NaN where a rater gave no value. ``o = sum_u (N_u N_u^T - diag N_u) / (m_u - 1)``
    for ``N_u`` the counts of each value in unit u, over the units with at least two values."""
    data = np.asarray(ratings, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"ratings must be raters x units (2-D), got shape {data.shape}")
    present = ~np.isnan(data)
    values = np.unique(data[present])
    codes = np.searchsorted(values, np.where(present, data, values[0] if values.size else 0.0))
    counts = np.zeros((data.shape[1], values.size))  # units x values
    units = np.broadcast_to(np.arange(data.shape[1]), data.shape)
    np.add.at(counts, (units[present], codes[present]), 1.0)
    per_unit = counts.sum(axis=1)
    pairable = per_unit >= 2
    counts, per_unit = counts[pairable], per_unit[pairable]
    scale = 1.0 / (per_unit - 1.0)
    o = (counts * scale[:, None]).T @ counts - np.diag((counts * scale[:, None]).sum(axis=0))
    return values, o


def _delta2(values: np.ndarray, n_c: np.ndarray, level: Level) -> np.ndarray:
    """The squared difference ``delta2_ck`` of every pair of values (section E)."""
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":
        cumulative = np.concatenate(([0.0], np.cumsum(n_c)))
        c, k = np.meshgrid(np.arange(values.size), np.arange(values.size), indexing="ij")
        lo, hi = np.minimum(c, k), np.maximum(c, k)
        between = cumulative[hi + 1] - cumulative[lo]  # sum of n_g for g from the lower to the higher value
        return (between - (n_c[c] + n_c[k]) / 2.0) ** 2
    raise ValueError(f"level must be nominal, ordinal or interval, got {level!r}")


def krippendorff_alpha(ratings: np.ndarray, level: Level = "nominal") -> Alpha:
    """Krippendorff's alpha of ``ratings`` (raters x units, NaN for a missing value; numbers,
    category codes for nominal data). Undefined (None) when fewer than two values are pairable or
    all pairable values are equal (no expected disagreement: 0/0)."""
    values, o = coincidences(ratings)
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    if n < 2:
        return Alpha(None, int(round(n)), "undefined: no unit has two values to pair")
    delta2 = _delta2(values, n_c, level)
    expected = float(n_c @ delta2 @ n_c)
    if expected == 0.0:
        return Alpha(None, int(round(n)), "undefined: every pairable value is the same (no disagreement is expected)")
    observed = float(np.sum(o * delta2))
    return Alpha(1.0 - (n - 1.0) * observed / expected, int(round(n)), None)
