"""Trust-or-Escalate thresholds (harness.stats.selective): the exact binomial bound against
statsmodels' Clopper–Pearson interval, a hand-worked calibration, and the guarantee by simulation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats.selective import StageThreshold, calibrate_cascade, calibrate_stage, candidates, clopper_pearson_upper, route, step


@pytest.mark.parametrize(("errors", "n", "delta"), [(0, 30, 0.1), (3, 60, 0.05), (10, 100, 0.01), (29, 30, 0.2), (1, 1, 0.1)])
def test_clopper_pearson_matches_statsmodels_and_scipy(errors: int, n: int, delta: float) -> None:
    # a one-sided (1 - δ) upper bound is the upper end of the two-sided (1 - 2δ) exact interval
    from scipy.stats import binomtest
    from statsmodels.stats.proportion import proportion_confint

    _, upper = proportion_confint(errors, n, alpha=2 * delta, method="beta")
    assert clopper_pearson_upper(errors, n, delta) == pytest.approx(upper, abs=1e-12)
    if errors < n:
        exact = binomtest(errors, n).proportion_ci(confidence_level=1 - 2 * delta, method="exact").high
        assert clopper_pearson_upper(errors, n, delta) == pytest.approx(exact, abs=1e-12)
    # 0 errors of 30 at δ = 0.1: 1 - 0.1 ** (1/30), by hand
    assert clopper_pearson_upper(0, 30, 0.1) == pytest.approx(1 - 0.1 ** (1 / 30))


def test_hand_worked_calibration() -> None:
    """80 transcripts: the 40 most confident (0.99) all agree, the next 40 (0.6) agree 20 times.
    α = δ = 0.1: the fewest transcripts that can certify 0.1 at all is ceil(ln 0.1 / ln 0.9) = 22,
    so candidates are 33 apart: 0.99 (rank 33), then 0.6. At 0.99: 0 errors in 40, bound
    1 - 0.1^(1/40) = 0.0559 <= 0.1, certified. At 0.6: 20 errors in 80, bound > 0.1: stop."""
    conf = np.array([0.99] * 40 + [0.6] * 40)
    agree = np.array([True] * 40 + [True] * 20 + [False] * 20)
    assert step(0.1, 0.1) == 33
    assert candidates(conf, 33) == [0.99, 0.6]
    stage = calibrate_stage(conf, agree, alpha=0.1, delta=0.1)
    assert stage == StageThreshold(0.99, 80, 40, 0, pytest.approx(1 - 0.1 ** (1 / 40)))
    # α = 0.35: 20 errors in 80 have the bound below, and both candidates are certified
    assert clopper_pearson_upper(20, 80, 0.1) < 0.35
    assert calibrate_stage(conf, agree, alpha=0.35, delta=0.1).threshold == 0.6
    # α = 0.05: candidates 68 apart, the first admits all 80 (20 errors): nothing is trusted
    assert step(0.05, 0.1) == 68
    assert calibrate_stage(conf, agree, alpha=0.05, delta=0.1).threshold is None


def test_cascade_routes_what_a_stage_passes_on() -> None:
    weak = np.array([0.99] * 40 + [0.5] * 40)
    strong = np.array([0.2] * 40 + [0.95] * 40)
    weak_agrees = np.array([True] * 40 + [False] * 40)  # the weak judge is wrong where unsure
    stages = calibrate_cascade([weak, strong], [weak_agrees, np.ones(80, bool)], alpha=0.1, delta=0.2)
    assert stages[0].threshold == 0.99 and stages[1].reached == 40
    answered = route([weak, strong], stages)
    assert (answered[:40] == 0).all() and (answered[40:] == 1).all()


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
