"""Trust-or-Escalate thresholds (harness.stats.selective): the exact binomial bound against
statsmodels' Clopper–Pearson interval, a hand-worked calibration, and the guarantee by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

from harness.stats.selective import StageThreshold, calibrate_cascade, calibrate_stage, candidates, clopper_pearson_upper, route


@pytest.mark.parametrize(("errors", "n", "delta"), [(0, 30, 0.1), (3, 60, 0.05), (10, 100, 0.01), (29, 30, 0.2), (1, 1, 0.1)])
def test_clopper_pearson_matches_statsmodels_and_scipy(errors: int, n: int, delta: float) -> None:
    # a one-sided (1 - δ) upper bound is the upper end of the two-sided (1 - 2δ) exact interval
    _, upper = proportion_confint(errors, n, alpha=2 * delta, method="beta")
    assert clopper_pearson_upper(errors, n, delta) == pytest.approx(upper, abs=1e-12)
    if errors < n:
        exact = binomtest(errors, n).proportion_ci(confidence_level=1 - 2 * delta, method="exact").high
        assert clopper_pearson_upper(errors, n, delta) == pytest.approx(exact, abs=1e-12)
    # 0 errors of 30 at δ = 0.1: 1 - 0.1 ** (1/30), by hand
    assert clopper_pearson_upper(0, 30, 0.1) == pytest.approx(1 - 0.1 ** (1 / 30))


def test_hand_worked_calibration() -> None:
    """60 transcripts: the 30 most confident (0.99) all agree, the next 30 (0.6) agree 20 times.
    Candidates (min_accept 30): 0.99, then 0.6. At 0.99: 0 errors in 30, bound 1 - 0.1^(1/30) =
    0.0739 <= 0.1, certified. At 0.6: 10 errors in 60, bound ~0.25 > 0.1: the sequence stops."""
    conf = np.array([0.99] * 30 + [0.6] * 30)
    agree = np.array([True] * 30 + [True] * 20 + [False] * 10)
    assert candidates(conf, 30) == [0.99, 0.6]
    stage = calibrate_stage(conf, agree, alpha=0.1, delta=0.1, min_accept=30)
    assert stage == StageThreshold(0.99, 60, 30, 0, pytest.approx(1 - 0.1 ** (1 / 30)))
    # a looser target accepts both
    assert calibrate_stage(conf, agree, alpha=0.3, delta=0.1, min_accept=30).threshold == 0.6
    # a stricter one accepts nothing: every transcript passes on
    assert calibrate_stage(conf, agree, alpha=0.05, delta=0.1, min_accept=30).threshold is None


def test_cascade_routes_what_a_stage_passes_on() -> None:
    weak = np.array([0.99] * 30 + [0.5] * 30)
    strong = np.array([0.2] * 30 + [0.95] * 30)
    weak_agrees = np.array([True] * 30 + [False] * 30)  # the weak judge is wrong where unsure
    stages = calibrate_cascade([weak, strong], [weak_agrees, np.ones(60, bool)], alpha=0.1, delta=0.2, min_accept=30)
    assert stages[0].threshold == 0.99 and stages[1].reached == 30
    answered = route([weak, strong], stages)
    assert (answered[:30] == 0).all() and (answered[30:] == 1).all()


def _simulate(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Two scripted judges against human labels: a weak, overconfident one and a strong one."""
    c1 = rng.beta(5, 1.5, n)
    a1 = rng.random(n) < 0.5 + 0.5 * c1**2  # agreement rises with confidence, below it
    c2 = rng.beta(6, 1, n)
    a2 = rng.random(n) < 0.7 + 0.3 * c2
    return [c1, c2], [a1, a2]


def test_realised_agreement_meets_the_target_in_at_least_1_minus_delta_of_calibrations() -> None:
    rng = np.random.default_rng(11)
    alpha, delta, held = 0.1, 0.1, []
    for _ in range(150):
        confs, agrees = _simulate(rng, 600)
        stages = calibrate_cascade(confs, agrees, alpha, delta)
        test_confs, test_agrees = _simulate(rng, 4000)
        answered = route(test_confs, stages)
        given = answered >= 0
        if given.any():
            agreement = np.mean([test_agrees[s][i] for i, s in enumerate(answered) if s >= 0])
            held.append(agreement >= 1 - alpha)
    assert len(held) > 100
    assert np.mean(held) >= 1 - delta
