"""Anytime-valid confidence sequences for a bounded mean: look after every round, stop when sure.

The method is the hedged betting confidence sequence with the predictable plug-in bet of
Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting" (JRSS-B 2024),
section 4 (Theorem 3, the "hedged capital" process, and the predictable plug-in λ of eq. (26)).
We chose it over the asymptotic sequences of Waudby-Smith et al. (Annals of Statistics 2024)
because judge scores are bounded, and the betting sequence is valid at every sample size with no
asymptotics: a sequence of 20 pairs is as valid as one of 20,000, which is exactly where an early
stop happens.

For a candidate mean ``m`` of observations in [0, 1] two gamblers bet, one that the mean is above
``m`` and one that it is below:

    K⁺_t(m) = Π_{i≤t} (1 + λ⁺_i(m) (x_i − m)),   λ⁺_i(m) = min(λ_i, c / m)
    K⁻_t(m) = Π_{i≤t} (1 − λ⁻_i(m) (x_i − m)),   λ⁻_i(m) = min(λ_i, c / (1 − m))
    K±_t(m) = max(θ K⁺_t(m), (1 − θ) K⁻_t(m))

with the predictable plug-in bet (it uses only x_1..x_{i−1})

    λ_i = sqrt(2 log(2/α) / (σ̂²_{i−1} · i · log(1 + i))),
    μ̂_i = (1/2 + Σ_{j≤i} x_j) / (i + 1),   σ̂²_i = (1/4 + Σ_{j≤i} (x_j − μ̂_j)²) / (i + 1).

Under the true mean K± is a nonnegative supermartingale with K±_0 = 1, so by Ville's inequality
P(∃t: K±_t(μ) ≥ 1/α) ≤ α: the set {m : K±_t(m) < 1/α} covers μ at every t simultaneously. We keep
the running intersection over t (also valid) on a grid of candidate means, and report its hull.

A paired difference d = b − a of two scores on [lo, hi] lies in [−w, w] with w = hi − lo; it is
mapped to x = (d / w + 1) / 2 in [0, 1] and the interval mapped back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: the cap on a bet (c in the paper): 1/2 keeps the wealth away from zero, as the paper advises
BET_CAP = 0.5
#: how many candidate means the sequence tracks on [0, 1]; the interval's ends are exact to 1/GRID
GRID = 2000


@dataclass(frozen=True, slots=True)
class Interval:
    lo: float
    hi: float

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def excludes(self, value: float) -> bool:
        return not self.lo <= value <= self.hi


class BettingCS:
    """The hedged betting confidence sequence for the mean of observations in [0, 1].

    ``update(xs)`` adds observations (in the order they were drawn) and returns the running
    interval; the interval after any number of updates is a valid (1 − α) confidence interval
    whatever rule decided when to look or stop."""

    def __init__(self, alpha: float = 0.05, *, theta: float = 0.5, cap: float = BET_CAP, grid: int = GRID) -> None:
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        self.alpha = alpha
        self.theta = theta
        self.cap = cap
        # the candidate means: a grid on [0, 1] (the ends included, where every bet is capped at 0)
        self.m = np.linspace(0.0, 1.0, grid + 1)
        self._log_plus = np.zeros_like(self.m)
        self._log_minus = np.zeros_like(self.m)
        self._alive = np.ones_like(self.m, dtype=bool)
        self.n = 0
        self._sum = 0.0
        self._sq = 0.0  # Σ (x_j − μ̂_j)²
        self._threshold = math.log(1.0 / alpha)

    def _bet(self) -> float:
        """λ_{n+1} from the first n observations (predictable)."""
        i = self.n + 1
        var = (0.25 + self._sq) / (self.n + 1)
        return math.sqrt(2.0 * math.log(2.0 / self.alpha) / (var * i * math.log(1.0 + i)))

    def update(self, xs: np.ndarray | list[float]) -> Interval:
        m = self.m
        with np.errstate(divide="ignore"):
            cap_plus = np.where(m > 0, self.cap / np.where(m > 0, m, 1.0), np.inf)
            cap_minus = np.where(m < 1, self.cap / np.where(m < 1, 1.0 - m, 1.0), np.inf)
        for x in np.asarray(xs, dtype=float):
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"observation {x!r} is outside [0, 1]")
            lam = self._bet()
            lp = np.minimum(lam, cap_plus)
            lm = np.minimum(lam, cap_minus)
            self._log_plus += np.log1p(lp * (x - m))
            self._log_minus += np.log1p(-lm * (x - m))
            self.n += 1
            self._sum += x
            mu = (0.5 + self._sum) / (self.n + 1)
            self._sq += (x - mu) ** 2
            # log K± = max(log θ + log K⁺, log(1 − θ) + log K⁻)
            hedged = np.maximum(math.log(self.theta) + self._log_plus, math.log(1.0 - self.theta) + self._log_minus)
            self._alive &= hedged < self._threshold
        return self.interval()

    def interval(self) -> Interval:
        """The hull of the candidate means not yet rejected (the whole [0, 1] before any data).
        Should every candidate be rejected (possible only by grid rounding), the interval is the
        point estimate's grid cell."""
        alive = np.flatnonzero(self._alive)
        step = self.m[1] - self.m[0]
        if alive.size == 0:
            centre = self._sum / self.n if self.n else 0.5
            return Interval(max(0.0, centre - step), min(1.0, centre + step))
        # a grid point's neighbourhood may hold surviving means: widen by one step, so the hull
        # never claims more than the grid resolves
        return Interval(max(0.0, self.m[alive[0]] - step), min(1.0, self.m[alive[-1]] + step))


class PairedDifferenceCS:
    """A confidence sequence for the mean difference B − A of paired scores on [lo, hi]."""

    def __init__(self, lo: float, hi: float, alpha: float = 0.05) -> None:
        if not hi > lo:
            raise ValueError("the score scale must have hi > lo")
        self.lo, self.hi = lo, hi
        self._cs = BettingCS(alpha)

    @property
    def n(self) -> int:
        return self._cs.n

    def update(self, a: list[float] | np.ndarray, b: list[float] | np.ndarray) -> Interval:
        w = self.hi - self.lo
        d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
        x = np.clip((d / w + 1.0) / 2.0, 0.0, 1.0)
        inner = self._cs.update(x)
        return Interval((2.0 * inner.lo - 1.0) * w, (2.0 * inner.hi - 1.0) * w)

    def interval(self) -> Interval:
        inner = self._cs.interval()
        w = self.hi - self.lo
        return Interval((2.0 * inner.lo - 1.0) * w, (2.0 * inner.hi - 1.0) * w)
