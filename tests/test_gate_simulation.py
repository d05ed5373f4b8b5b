"""The gate's error rates, by simulation: a real regression fails it, noise does not, as often as
harness/gate/decide.py says.

Each scenario draws 2,000 pairs of runs (a baseline and a candidate of 60 transcripts, or of 30
tasks run 5 times each) with a known true difference, and asks `harness.gate.decide`, the function
``harness gate`` calls, for the verdict. Scores are bounded like judge scores: a transcript's
baseline score is uniform on [0.3, 0.7] and the candidate's is that plus the true difference plus
noise uniform on [-0.2, 0.2], so every score lies in [0, 1] with no clipping and the true mean
difference is exactly the one set.

Where the test's statistic has a closed form (the t-test's power under a shift: the noncentral t,
SciPy's ``stats.nct``), the observed rate must match it within 4 standard errors of a proportion;
the error rates the module states (at most alpha / 2 for a bar or a margin at the true value, at
most alpha over the no-regression family) must hold by a one-sided binomial test at 0.001.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from harness.agent.passk import pass_hat_k
from harness.gate import Check, CheckData, decide

PAIRS = 2000
N = 60
ALPHA = 0.05
#: SD of the paired difference: uniform noise on [-0.2, 0.2]
SIGMA = 0.4 / math.sqrt(12)


def _rate(pairs: int, fails: Callable[[np.random.Generator], bool], seed: int) -> float:
    rng = np.random.default_rng(seed)
    return sum(fails(rng) for _ in range(pairs)) / pairs


def _not_above(rate: float, bound: float) -> None:
    """The observed rate is not significantly above ``bound`` (one-sided binomial, p > 0.001)."""
    from scipy import stats as sp

    count = round(rate * PAIRS)
    p = sp.binom.sf(count - 1, PAIRS, bound)
    assert p > 0.001, f"rate {rate:.4f} is above the stated {bound} (binomial p={p:.2g})"


def _near(rate: float, expected: float) -> None:
    se = math.sqrt(expected * (1 - expected) / PAIRS)
    assert abs(rate - expected) <= 4 * se + 1e-12, f"rate {rate:.4f}, expected {expected:.4f} ± {4 * se:.4f}"


def _pair(rng: np.random.Generator, delta: float) -> tuple[np.ndarray, np.ndarray]:
    base = rng.uniform(0.3, 0.7, N)
    return base + delta + rng.uniform(-0.2, 0.2, N), base


def _difference(kind: str, metric: str, candidate: np.ndarray, base: np.ndarray, margin: float | None = None, unit: str = "transcripts") -> CheckData:
    return CheckData(Check(kind, metric, None, "higher", margin, unit), candidate, base)  # type: ignore[arg-type]


def _t_power(ncp: float, crit: float) -> float:
    """P(T > crit) for Student's t with N - 1 df and noncentrality ``ncp``."""
    from scipy import stats as sp

    return float(sp.nct.sf(crit, N - 1, ncp))


RATES: dict[str, float] = {}


def test_noise_fails_the_no_regression_family_at_most_alpha() -> None:
    """Three metrics, no true difference on any: the gate's false failures, over the family."""

    def fails(rng: np.random.Generator) -> bool:
        items = [_difference("no_regression", m, *_pair(rng, 0.0)) for m in ("relevance", "faithfulness", "answer_correctness")]
        return not all(r.passed for r in decide(items, ALPHA))

    rate = RATES["noise, 3 no-regression checks"] = _rate(PAIRS, fails, 1)
    _not_above(rate, ALPHA)
    assert rate > 0  # the test is not vacuous: noise does cross sometimes


def test_noise_fails_one_no_regression_check_about_half_alpha() -> None:
    def fails(rng: np.random.Generator) -> bool:
        return not decide([_difference("no_regression", "relevance", *_pair(rng, 0.0))], ALPHA)[0].passed

    rate = RATES["noise, 1 no-regression check"] = _rate(PAIRS, fails, 2)
    _near(rate, ALPHA / 2)  # the two-sided t-test is exact here; only its "worse" side fails


def test_a_real_regression_fails_the_gate_with_the_t_tests_power() -> None:
    """relevance truly 0.06 lower, two other metrics unchanged: Holm tests the smallest p at
    alpha / 3 first, so the gate fails at least as often as a one-sided t at alpha / 6."""
    from scipy import stats as sp

    delta = -0.06

    def fails(rng: np.random.Generator) -> bool:
        items = [
            _difference("no_regression", "relevance", *_pair(rng, delta)),
            _difference("no_regression", "faithfulness", *_pair(rng, 0.0)),
            _difference("no_regression", "answer_correctness", *_pair(rng, 0.0)),
        ]
        return not decide(items, ALPHA)[0].passed

    rate = RATES["regression of 0.06, 3 checks"] = _rate(PAIRS, fails, 3)
    ncp = -delta * math.sqrt(N) / SIGMA
    at_least = _t_power(ncp, float(sp.t.isf(ALPHA / 6, N - 1)))
    alone = _t_power(ncp, float(sp.t.isf(ALPHA / 2, N - 1)))
    assert at_least > 0.9
    _not_above(1 - rate, 1 - at_least)
    assert rate <= alone + 4 * math.sqrt(alone * (1 - alone) / PAIRS)  # never more power than the test alone


@pytest.mark.parametrize(("delta", "label"), [(-0.05, "at the margin"), (0.0, "no difference")])
def test_a_margin_passes_a_drop_at_the_margin_at_most_half_alpha(delta: float, label: str) -> None:
    from scipy import stats as sp

    margin = 0.05

    def passes(rng: np.random.Generator) -> bool:
        return decide([_difference("max_drop", "answer_correctness", *_pair(rng, delta), margin=margin)], ALPHA)[0].passed

    rate = RATES[f"max-drop 0.05, true difference {delta:+g}: passes"] = _rate(PAIRS, passes, 4 if delta else 5)
    # passes when the lower bound d̄ - t·s/√n >= -margin, i.e. T = (d̄ + margin)·√n/s >= t_crit
    expected = _t_power((delta + margin) * math.sqrt(N) / SIGMA, float(sp.t.isf(ALPHA / 2, N - 1)))
    _near(rate, expected)
    if label == "at the margin":
        _not_above(rate, ALPHA / 2)
    else:
        assert rate > 0.85


@pytest.mark.parametrize(("mean", "label"), [(0.6, "on the bar"), (0.7, "above the bar")])
def test_a_bar_passes_a_run_on_the_bar_at_most_half_alpha(mean: float, label: str) -> None:
    from scipy import stats as sp

    bar = 0.6

    def passes(rng: np.random.Generator) -> bool:
        x = mean + rng.uniform(-0.3, 0.3, N)
        return decide([CheckData(Check("min", "relevance", None, "higher", bar), x)], ALPHA)[0].passed

    rate = RATES[f"min 0.6, true mean {mean}: passes"] = _rate(PAIRS, passes, 6 if mean == bar else 7)
    sd = 0.6 / math.sqrt(12)
    expected = _t_power((mean - bar) * math.sqrt(N) / sd, float(sp.t.isf(ALPHA / 2, N - 1)))
    _near(rate, expected)
    if label == "on the bar":
        _not_above(rate, ALPHA / 2)
    else:
        assert rate > 0.9


TASKS = 30
RUNS = 5
P_TASK = np.linspace(0.55, 0.95, TASKS)


def _pass2(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    """Each task run RUNS times with success probability p; pass^2 per task (the unbiased C(c,2)/C(n,2))."""
    c = rng.binomial(RUNS, p)
    return np.array([pass_hat_k(RUNS, int(ci), 2) for ci in c])


def test_pass_hat_k_over_tasks_noise_and_regression() -> None:
    """pass^2 over 30 tasks of 5 runs: a candidate no different from its baseline, and one whose
    every task succeeds 0.2 less often."""

    def noise_fails(rng: np.random.Generator) -> bool:
        items = [_difference("no_regression", "pass^2", _pass2(rng, P_TASK), _pass2(rng, P_TASK), unit="tasks")]
        return not decide(items, ALPHA)[0].passed

    def regression_fails(rng: np.random.Generator) -> bool:
        items = [_difference("no_regression", "pass^2", _pass2(rng, P_TASK - 0.2), _pass2(rng, P_TASK), unit="tasks")]
        return not decide(items, ALPHA)[0].passed

    noise = RATES["pass^2, noise: fails"] = _rate(PAIRS, noise_fails, 8)
    regression = RATES["pass^2, 0.2 less success per run: fails"] = _rate(PAIRS, regression_fails, 9)
    _not_above(noise, ALPHA / 2)
    assert regression > 0.9


def test_pass_hat_k_bar_at_the_true_mean() -> None:
    """The bar set at the true mean of pass^2 over the tasks, mean(p^2) (the estimator is unbiased)."""
    truth = float(np.mean(P_TASK**2))

    def passes(rng: np.random.Generator) -> bool:
        return decide([CheckData(Check("min", "pass^2", None, "higher", truth, "tasks"), _pass2(rng, P_TASK))], ALPHA)[0].passed

    rate = RATES["pass^2 bar at its true mean: passes"] = _rate(PAIRS, passes, 10)
    _not_above(rate, ALPHA / 2)


def test_report_the_rates(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the rates measured above (``pytest -s``), as docs/reference/statistics.md quotes them."""
    with capsys.disabled():
        for name, rate in RATES.items():
            print(f"{name}: {rate:.4f} over {PAIRS} pairs")
