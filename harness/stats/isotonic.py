"""Isotonic regression: the non-decreasing function closest to the data in weighted least squares.

Source: Barlow, Bartholomew, Bremner & Brunk, *Statistical Inference under Order Restrictions*
(1972), chapter 1: the pool-adjacent-violators algorithm (PAVA). Tied x values get one fitted
value, their weighted mean pooled first (the "secondary" approach to ties of de Leeuw, Hornik &
Mair 2009, JSS 32(5)), as ``sklearn.isotonic.IsotonicRegression`` does. Between the
fitted points the function is linear, and constant beyond them (scikit-learn's
``out_of_bounds="clip"``), so it can be written as knots in a rubric file.

``harness align`` uses it to recalibrate a judge's scores onto the human scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IsotonicFit", "isotonic_regression", "pool_adjacent_violators"]


@dataclass(frozen=True)
class IsotonicFit:
    """A fitted non-decreasing map: ``x`` strictly increasing, ``y`` non-decreasing (same length)."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, values: np.ndarray | list[float] | float) -> np.ndarray:
        """The map at ``values``: linear between knots, the end value beyond them."""
        return np.interp(np.asarray(values, dtype=np.float64), self.x, self.y)


def pool_adjacent_violators(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence minimising sum w_i (y_i - f_i)^2 (Barlow et al. 1972, chapter 1).

    Blocks are kept on a stack as (weighted mean, weight, length); a new value that is below the
    block before it merges with it, and the merged block with the one before, until they are in
    order. An empty input gives an empty output.
    """
    means: list[float] = []
    weights: list[float] = []
    lengths: list[int] = []
    for value, weight in zip(y.tolist(), w.tolist(), strict=True):
        means.append(value)
        weights.append(weight)
        lengths.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            total = weights[-2] + weights[-1]
            means[-2] = (means[-2] * weights[-2] + means[-1] * weights[-1]) / total
            weights[-2] = total
            lengths[-2] += lengths[-1]
            del means[-1], weights[-1], lengths[-1]
    return np.repeat(np.asarray(means, dtype=np.float64), lengths)


def isotonic_regression(x: np.ndarray | list[float], y: np.ndarray | list[float], w: np.ndarray | list[float] | None = None) -> IsotonicFit:
    """Fit a non-decreasing map of ``x`` to ``y`` (weights ``w``, default 1): tied x are pooled
    into their weighted mean, then `pool_adjacent_violators`; the knots are every distinct x.

    Needs at least one point and positive weights; raises ValueError otherwise.
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    ws = np.ones_like(xs) if w is None else np.asarray(w, dtype=np.float64)
    if xs.size == 0 or xs.shape != ys.shape or xs.shape != ws.shape:
        raise ValueError("isotonic regression needs x, y and w of one non-zero length")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys)) and np.all(ws > 0)):
        raise ValueError("isotonic regression needs finite x and y and positive weights")
    knots, inverse = np.unique(xs, return_inverse=True)
    pooled_w = np.bincount(inverse, weights=ws)
    pooled_y = np.bincount(inverse, weights=ws * ys) / pooled_w
    fitted = pool_adjacent_violators(pooled_y, pooled_w)
    return IsotonicFit(tuple(knots.tolist()), tuple(fitted.tolist()))
