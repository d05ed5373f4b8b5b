"""harness/agent/passk.py: pass@k and pass^k against a hand-worked example and a simulation, and the
interval over tasks against scipy.stats.bootstrap."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from harness.agent.passk import flakiness, is_flaky, mean_over_tasks, pass_at_k, pass_hat_k, undefined_reason


def test_hand_worked_example() -> None:
    # A task run n = 5 times with c = 3 successes (runs S S S F F).
    # C(5, 2) = 10 pairs of runs; C(2, 2) = 1 pair is all failures; C(3, 2) = 3 pairs all successes.
    #   pass@2 = 1 - C(2, 2) / C(5, 2) = 1 - 1/10 = 0.9
    #   pass^2 = C(3, 2) / C(5, 2) = 3/10 = 0.3
    # k = 3: C(5, 3) = 10 triples; C(2, 3) = 0 (every triple holds a success); C(3, 3) = 1.
    #   pass@3 = 1 - 0/10 = 1.0, pass^3 = 1/10 = 0.1
    # k = 1: pass@1 = pass^1 = c / n = 0.6.
    # flakiness = 1 - |2 * 3/5 - 1| = 1 - 0.2 = 0.8
    assert pass_at_k(5, 3, 2) == pytest.approx(0.9, abs=1e-15)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3, abs=1e-15)
    assert pass_at_k(5, 3, 3) == 1.0
    assert pass_hat_k(5, 3, 3) == pytest.approx(0.1, abs=1e-15)
    assert pass_at_k(5, 3, 1) == pass_hat_k(5, 3, 1) == pytest.approx(0.6, abs=1e-15)
    assert flakiness(5, 3) == pytest.approx(0.8, abs=1e-15)
    # The same by counting subsets directly.
    runs = [1, 1, 1, 0, 0]
    for k in range(1, 6):
        subsets = list(combinations(runs, k))
        assert pass_at_k(5, 3, k) == pytest.approx(float(Fraction(sum(any(s) for s in subsets), len(subsets))), abs=1e-15)
        assert pass_hat_k(5, 3, k) == pytest.approx(float(Fraction(sum(all(s) for s in subsets), len(subsets))), abs=1e-15)


def test_edges() -> None:
    assert pass_hat_k(4, 4, 4) == 1.0 and pass_at_k(4, 0, 4) == 0.0
    assert pass_hat_k(4, 2, 3) == 0.0  # fewer than k successes
    assert pass_at_k(4, 3, 2) == 1.0  # fewer than k failures
    # k > n: undefined, with the reason; never extrapolated.
    assert pass_at_k(2, 1, 3) is None and pass_hat_k(2, 1, 3) is None
    assert undefined_reason(2, 3) == "k=3 is more than the task's 2 runs: no set of 3 runs to count"
    assert undefined_reason(0, 1) == "k=1 is more than the task's 0 runs: no set of 1 runs to count"
    assert undefined_reason(3, 3) is None
    assert flakiness(1, 1) is None and flakiness(4, 4) == flakiness(4, 0) == 0.0 and flakiness(4, 2) == 1.0
    assert is_flaky(3, 1) and not is_flaky(3, 3) and not is_flaky(3, 0)
    # Large n: exact binomials, no overflow or cancellation. C(1000, 5) = 8,250,291,250,200.
    assert pass_hat_k(1000, 999, 5) == pytest.approx(995 / 1000, rel=1e-14)
    assert pass_at_k(10_000, 1, 5) == pytest.approx(5 / 10_000, rel=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (-1, 0, 1)])
def test_bad_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_bad_types() -> None:
    with pytest.raises(TypeError):
        pass_hat_k(3.0, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pass_hat_k(3, True, 1)


def test_simulation_is_unbiased() -> None:
    # 40,000 tasks, each with its own success probability p ~ U(0, 1), run n = 8 times.
    # Over the tasks, mean pass^k -> mean p^k and mean pass@k -> mean 1 - (1 - p)^k.
    rng = np.random.default_rng(20240617)
    tasks, n = 40_000, 8
    p = rng.uniform(0, 1, tasks)
    c = rng.binomial(n, p)
    for k in (1, 2, 3, 5, 8):
        hat = np.array([pass_hat_k(n, int(ci), k) for ci in c])
        at = np.array([pass_at_k(n, int(ci), k) for ci in c])
        # The standard error of a mean of 40,000 values in [0, 1] is at most 0.0025: 4 SE = 0.01.
        assert hat.mean() == pytest.approx(np.mean(p**k), abs=0.01), k
        assert at.mean() == pytest.approx(np.mean(1 - (1 - p) ** k), abs=0.01), k


def test_the_plug_in_convention_is_biased_and_this_one_is_not() -> None:
    # Exactly, by summing over the binomial distribution of c: n = 5, k = 3, p = 0.5.
    # E[(c/n)^k] = sum_c C(5, c) / 32 * (c/5)^3 = (5*1 + 10*8 + 10*27 + 5*64 + 125) / (32 * 125) = 0.2,
    # while p^k = 0.125; E[C(c, 3) / C(5, 3)] = 0.125 exactly.
    from scipy import stats as sp

    n, k, p = 5, 3, 0.5
    weights = sp.binom.pmf(np.arange(n + 1), n, p)
    plug_in = sum(w * (c / n) ** k for c, w in enumerate(weights))
    unbiased = sum(w * pass_hat_k(n, c, k) for c, w in enumerate(weights))  # type: ignore[operator]
    assert plug_in == pytest.approx(0.2, abs=1e-12)
    assert unbiased == pytest.approx(p**k, abs=1e-12)
    # And for every (n, k, p) on a grid, both estimators' expectations are exact.
    for n in range(1, 9):
        weights_of = {q: sp.binom.pmf(np.arange(n + 1), n, q) for q in (0.1, 0.37, 0.9)}
        for k in range(1, n + 1):
            for q, w in weights_of.items():
                assert sum(w[c] * pass_hat_k(n, c, k) for c in range(n + 1)) == pytest.approx(q**k, abs=1e-12)  # type: ignore[operator]
                assert sum(w[c] * pass_at_k(n, c, k) for c in range(n + 1)) == pytest.approx(1 - (1 - q) ** k, abs=1e-12)  # type: ignore[operator]


def test_mean_over_tasks_against_scipy() -> None:
    from scipy import stats as sp

    rng = np.random.default_rng(3)
    values = rng.uniform(0, 1, 37)
    got = mean_over_tasks(values, 0.9, 999, seed=11)
    oracle = sp.bootstrap((values,), np.mean, confidence_level=0.9, n_resamples=999, method="percentile", random_state=np.random.default_rng(11))
    assert got.value == pytest.approx(values.mean(), abs=1e-15)
    assert got.ci == pytest.approx((oracle.confidence_interval.low, oracle.confidence_interval.high), abs=1e-12)
    assert got.tasks == 37 and got.note is None
    assert mean_over_tasks([]).value is None and mean_over_tasks([]).tasks == 0
    one = mean_over_tasks([0.25])
    assert one.value == 0.25 and one.ci is None and one.note == "one task: no interval over tasks"
