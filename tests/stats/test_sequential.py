"""The betting confidence sequence (harness.stats.sequential) against a hand-worked example and
its guarantee: under the null, looking after every round, false decisions stay under α."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats.sequential import BettingCS, PairedDifferenceCS


def _capital(cs: BettingCS, m: float) -> tuple[float, float]:
    index = int(np.argmin(np.abs(cs.m - m)))
    assert cs.m[index] == pytest.approx(m)
    return math.exp(cs._log_plus[index]), math.exp(cs._log_minus[index])


def test_hand_worked_capital() -> None:
    """alpha = 0.05, x = (1, 1). Bet 1: var = 1/4, λ = sqrt(2 ln 40 / (0.25 · 1 · ln 2)) = 6.525,
    capped at c/m = 0.5/0.5 = 1 both ways: K⁺ = 1.5, K⁻ = 0.5. Then μ̂₁ = 1.5/2 = 0.75,
    σ̂²₁ = (0.25 + 0.0625)/2 = 0.15625, λ = sqrt(2 ln 40 / (0.15625 · 2 · ln 3)) = 4.636, capped at 1:
    K⁺ = 2.25, K⁻ = 0.25; hedged max(0.5 · 2.25, 0.5 · 0.25) = 1.125 < 20, so 0.5 stays in."""
    cs = BettingCS(0.05)
    cs.update([1.0, 1.0])
    assert _capital(cs, 0.5) == pytest.approx((2.25, 0.25))
    assert cs.interval().lo <= 0.5 <= cs.interval().hi
    # m = 0.1, x = 0.3: λ = 6.525 capped at c/m = 5 for the upper bet and c/(1 − m) = 0.5556 for
    # the lower one: K⁺ = 1 + 5 · 0.2 = 2, K⁻ = 1 − 0.5556 · 0.2 = 0.88889
    cs = BettingCS(0.05)
    cs.update([0.3])
    assert _capital(cs, 0.1) == pytest.approx((2.0, 1 - 0.2 * 0.5 / 0.9))
    # an uncapped bet: m = 0.9, x = 1: λ⁺ = min(6.525, 0.5556), λ⁻ = min(6.525, 5)
    cs = BettingCS(0.05)
    cs.update([1.0])
    lam = math.sqrt(2 * math.log(40) / (0.25 * math.log(2)))
    assert lam == pytest.approx(6.5249, abs=1e-4)
    assert _capital(cs, 0.9) == pytest.approx((1 + 0.5 / 0.9 * 0.1, 1 - 5 * 0.1))


def test_rejects_a_mean_once_the_capital_reaches_one_over_alpha() -> None:
    cs = BettingCS(0.05)
    cs.update([1.0] * 40)
    iv = cs.interval()
    assert iv.lo > 0.8 and iv.hi == 1.0
    # a rejected mean stays rejected (running intersection), whatever comes next
    cs.update([0.0] * 5)
    assert cs.interval().lo >= iv.lo


def test_null_false_decisions_stay_under_alpha_at_every_look() -> None:
    """A and B identical (scores 1..5 drawn alike), a look after every round of 10 pairs, 300
    sequences of up to 300 pairs: the share that ever excludes 0 is at most α."""
    rng = np.random.default_rng(20261125)
    alpha, false = 0.05, 0
    for _ in range(300):
        cs = PairedDifferenceCS(1, 5, alpha)
        a, b = rng.integers(1, 6, 300), rng.integers(1, 6, 300)
        for start in range(0, 300, 10):
            if cs.update(a[start : start + 10], b[start : start + 10]).excludes(0):
                false += 1
                break
    assert false / 300 <= alpha


def test_a_real_difference_is_found_and_the_interval_covers_it() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(1, 6, 2000).astype(float)
    b = np.clip(a + rng.choice([0.0, 1.0], 2000, p=[0.5, 0.5]), 1, 5)
    true = 0.5 * 4 / 5  # +1 half the time, except when a = 5 (clipped): E[b - a] = 0.4
    cs = PairedDifferenceCS(1, 5, 0.05)
    for start in range(0, 2000, 50):
        iv = cs.update(a[start : start + 50], b[start : start + 50])
        assert iv.lo <= true <= iv.hi  # covered at every look
        if iv.excludes(0):
            break
    assert iv.lo > 0 and cs.n < 2000


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="alpha"):
        BettingCS(1.5)
    with pytest.raises(ValueError, match="outside"):
        BettingCS().update([1.2])
