"""`harness.stats.ppi` against ppi-python (the authors' implementation) and by simulated coverage.

ppi_py is the test-only oracle: point estimate, λ and interval of PPI++ equal its
``ppi_mean_pointestimate`` / ``ppi_mean_ci`` / ``_calc_lam_glm`` to 1e-9. The active (IPW)
estimator has no ppi_py counterpart, so it is checked by a hand-worked example and by coverage.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.ppi_coverage import simulate
from harness.labels.design import inclusion_probabilities
from harness.stats.ppi import active_lambda, active_mean, ppi_lambda, ppi_mean, weighted_variance


def _data(seed: int, n: int, big_n: int, bias: float, noise: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y_all = rng.normal(3, 1, size=n + big_n)
    yhat_all = y_all + bias + rng.normal(0, noise, size=n + big_n)
    return y_all[:n], yhat_all[:n], yhat_all[n:]


@pytest.mark.parametrize(
    ("seed", "n", "big_n", "bias", "noise", "alpha"),
    [(0, 50, 500, 0.5, 0.3, 0.05), (1, 200, 2000, -0.2, 1.0, 0.1), (2, 25, 60, 0.0, 3.0, 0.05), (3, 30, 1000, 1.0, 0.05, 0.01)],
)
def test_ppi_mean_equals_ppi_py(seed: int, n: int, big_n: int, bias: float, noise: float, alpha: float) -> None:
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
    from ppi_py.ppi import _calc_lam_glm

    y, yhat, yu = _data(seed, n, big_n, bias, noise)
    ours = ppi_mean(y, yhat, yu, alpha)
    assert ours.estimate == pytest.approx(float(ppi_mean_pointestimate(y, yhat, yu)[0]), abs=1e-9)
    low, high = ppi_mean_ci(y, yhat, yu, alpha=alpha)
    assert ours.ci == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)
    pe = float(ppi_mean_pointestimate(y, yhat, yu, lam=1)[0])
    lam = _calc_lam_glm((y - pe)[:, None], (yhat - pe)[:, None], (yu - pe)[:, None], np.eye(1), clip=True)
    assert ours.lam == pytest.approx(float(lam), abs=1e-9)
    assert ppi_lambda(y, yhat, yu) == ours.lam
    # λ = 0 is the classical interval, λ = 1 plain PPI: ppi_py's own meaning of those values.
    for fixed in (0.0, 1.0):
        low, high = ppi_mean_ci(y, yhat, yu, alpha=alpha, lam=fixed)
        assert ppi_mean(y, yhat, yu, alpha, lam=fixed).ci == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)


def test_a_clipped_lambda_and_a_constant_judge() -> None:
    y, yhat, yu = _data(4, 40, 400, 0.0, 1.0)
    assert ppi_mean(y, -yhat, -yu).lam == 0.0  # anti-correlated judge: clipped to 0
    constant = ppi_mean(y, np.ones(40), np.ones(400))
    assert constant.lam == 0.0 and constant.estimate == pytest.approx(float(y.mean()))


def test_active_mean_by_hand() -> None:
    # N = 4, λ fixed to 1. Without β the terms Ŷ + (Y − Ŷ)·ξ/π are r = [3, 2, -5, 4]; c = 1 − ξ/π is
    # [-1, 1, -3, 1]; β = −cov(r, c)/var(c) = −5/2.75 = −20/11; the terms r + β·c have mean
    # 1 + (20/11)·0.5 = 21/11.
    y = np.array([2.0, np.nan, 1.0, np.nan])
    yhat = np.array([1.0, 2.0, 3.0, 4.0])
    pi = np.array([0.5, 0.5, 0.25, 0.25])
    drawn = np.array([True, False, True, False])
    est = active_mean(y, yhat, pi, drawn, lam=1.0)
    terms = np.array([3, 2, -5, 4]) - 20 / 11 * np.array([-1, 1, -3, 1])
    assert est.estimate == pytest.approx(21 / 11)
    assert est.se == pytest.approx(np.std(terms) / 2)
    # (λ, β) minimise the variance of the terms: no point of a grid does better.
    y0 = np.nan_to_num(y)
    lam, beta = active_lambda(y0, yhat, pi, drawn)

    def var(g: float, b: float) -> float:
        pred = g * yhat + b
        return float(np.var(pred + (y0 - pred) * drawn / pi))

    assert var(lam, beta) <= min(var(g, b) for g in np.linspace(0, 1, 51) for b in np.linspace(-5, 5, 101)) + 1e-12
    assert weighted_variance(np.array([1.0, 3.0]), np.array([0.5, 0.25])) == pytest.approx(np.cov([1, 3, 3], ddof=0))


def test_inclusion_probabilities_sum_to_n_with_the_floor() -> None:
    u = np.random.default_rng(0).exponential(size=500) ** 4
    pi = inclusion_probabilities(u, 100, 0.2)
    assert pi.sum() == pytest.approx(100)
    assert pi.max() <= 1 and pi.min() >= 0.2 * 100 / 500
    assert np.all(np.diff(pi[np.argsort(u)]) >= -1e-12)  # more uncertain, more likely
    assert inclusion_probabilities(np.zeros(10), 3, 0.2) == pytest.approx(np.full(10, 0.3))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("design", ["uniform", "active"])
def test_coverage_of_the_corrected_interval(design: str) -> None:
    # 400 simulated data sets: coverage of a 95% interval has SD ~1.1 points; a judge-only interval
    # of a biased judge covers the human mean almost never.
    result = simulate(design, datasets=400, seed=11)
    assert 0.92 <= result["coverage"] <= 0.98
    assert result["judge_only_coverage"] < 0.2
    assert result["width_gain"] > 1.2
