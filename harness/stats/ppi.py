"""Prediction-powered inference of a mean: a few human labels correct the judge's scores on all.

`ppi_mean` is PPI++ (Angelopoulos, Duchi & Zrnic, arXiv 2311.01453, Example 6.1 and Section 6):
n labelled transcripts with human label Y and judge score Ŷ, and N others with only Ŷ, give

    θ̂ = λ·mean(Ŷ_unlabelled) + mean(Y − λ·Ŷ),   se² = var(λ·Ŷ_unlabelled)/N + var(Y − λ·Ŷ)/n

with λ ∈ [0, 1] the plug-in minimiser of the variance. λ = 0 is the human-only mean (the classical
CLT interval), λ = 1 plain PPI (Angelopoulos et al., Science 2023). The formulas, including the
(1 + n/N) term of λ, the ddof = 0 variances and the ddof = 1 pooled variance of Ŷ, are those of
``ppi_py.ppi_mean_ci`` (ppi-python 0.2.3), which the tests use as the oracle. The labelled and
unlabelled sets must be disjoint samples: the judge scores of the labelled transcripts enter
only through Ŷ, never twice.

`active_mean` is the inverse-probability-weighted estimator of active inference (Zrnic & Candès,
ICML 2024, Section 3): each of N transcripts was labelled independently with known probability
π_i (ξ_i = 1 when drawn), and θ̂ = mean(g_i + (Y_i − g_i)·ξ_i/π_i) with the CLT interval of
those N terms, for the prediction g = λŶ + β; λ (clipped to [0, 1] like PPI++'s) and β are the
plug-in minimisers of their variance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MeanEstimate", "active_beta", "active_lambda", "active_mean", "ppi_lambda", "ppi_mean", "z_interval"]


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its standard error, two-sided interval and the λ that weighed the judge."""

    estimate: float
    se: float
    ci: tuple[float, float]
    lam: float

    @property
    def width(self) -> float:
        return self.ci[1] - self.ci[0]


def z_interval(estimate: float, se: float, alpha: float) -> tuple[float, float]:
    """The two-sided normal interval ``estimate ± z_{1-α/2}·se`` (statsmodels' ``_zconfint_generic``)."""
    from scipy.special import ndtri  # here, not at the top: 0.2 s to import, for every importer

    z = float(ndtri(1 - alpha / 2))
    return (estimate - z * se, estimate + z * se)


def _pop_var(x: np.ndarray) -> float:
    return float(np.var(x)) if x.size else 0.0


def ppi_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> float:
    """PPI++'s power-tuning λ for a mean (ppi_py ``_calc_lam_glm``, clip=True).

    λ = cov_n(Y, Ŷ) / ((1 + n/N)·var_{ddof=1}(Ŷ ∪ Ŷ_unlabelled)), clipped to [0, 1]. Returns 0 when
    the judge's scores are all equal (the denominator is 0: the judge carries no information).
    """
    n, big_n = y.size, yhat_unlabelled.size
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    pooled = np.concatenate([yhat, yhat_unlabelled])
    var = float(np.var(pooled, ddof=1)) if pooled.size > 1 else 0.0
    if var <= 0:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, alpha: float = 0.05, lam: float | None = None) -> MeanEstimate:
    """PPI++ mean of Y from labelled (Y, Ŷ) and unlabelled Ŷ (module docstring); ``lam`` fixes λ.

    Needs n ≥ 2 labelled and N ≥ 1 unlabelled; the caller refuses smaller samples with its reason.
    """
    y, yhat, yu = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_unlabelled))
    n, big_n = y.size, yu.size
    if n < 2 or big_n < 1 or yhat.size != n:
        raise ValueError(f"ppi_mean needs n >= 2 labelled pairs and N >= 1 unlabelled scores (n={n}, N={big_n})")
    lam = ppi_lambda(y, yhat, yu) if lam is None else float(lam)
    estimate = float(lam * yu.mean() + (y - lam * yhat).mean())
    se = float(np.sqrt(_pop_var(lam * yu) / big_n + _pop_var(y - lam * yhat) / n))
    return MeanEstimate(estimate, se, z_interval(estimate, se, alpha), lam)


def active_lambda(y: np.ndarray, yhat: np.ndarray, pi: np.ndarray, drawn: np.ndarray) -> tuple[float, float]:
    """λ and β of the prediction λ·Ŷ + β minimising the variance of the IPW terms
    Z = Y·ξ/π + (λ·Ŷ + β)·(1 − ξ/π): least squares of −Y·ξ/π on Ŷ·(1 − ξ/π) and (1 − ξ/π), λ
    clipped to [0, 1] and β refitted. E[1 − ξ/π] = 0, so neither changes the estimand; β matters
    because Poisson sampling, unlike a fixed n, does not cancel a constant offset of Y − λŶ."""
    weight = drawn / pi
    a = np.where(drawn, y, 0.0) * weight
    b, c = yhat * (1 - weight), 1 - weight
    design = np.column_stack([b - b.mean(), c - c.mean()])
    if np.linalg.matrix_rank(design) < 2:
        return 0.0, 0.0
    lam = float(np.clip(np.linalg.lstsq(design, -(a - a.mean()), rcond=None)[0][0], 0.0, 1.0))
    rest = a + lam * b
    var_c = float(np.var(c))
    beta = -float(np.mean((rest - rest.mean()) * (c - c.mean()))) / var_c if var_c > 0 else 0.0
    return lam, beta


def active_mean(y: np.ndarray, yhat: np.ndarray, pi: np.ndarray, drawn: np.ndarray, alpha: float = 0.05, lam: float | None = None) -> MeanEstimate:
    """Active-inference IPW mean over all N transcripts (module docstring), with the prediction λ·Ŷ + β.

    ``y`` is read only where ``drawn`` (elsewhere any value, e.g. NaN); ``pi`` are the design's
    inclusion probabilities, all > 0. ``lam=0`` is the human-only estimate of the design
    (Horvitz-Thompson with the variance-minimising constant β, a control variate).
    """
    yhat, pi = np.asarray(yhat, dtype=np.float64), np.asarray(pi, dtype=np.float64)
    drawn = np.asarray(drawn, dtype=bool)
    y = np.where(drawn, np.asarray(y, dtype=np.float64), 0.0)
    if yhat.size < 2 or np.any(pi <= 0) or np.any(pi > 1):
        raise ValueError("active_mean needs N >= 2 transcripts and inclusion probabilities in (0, 1]")
    if lam is None:
        lam, beta = active_lambda(y, yhat, pi, drawn)
    else:
        lam, beta = float(lam), active_beta(y, yhat, pi, drawn, float(lam))
    predicted = lam * yhat + beta
    terms = predicted + (y - predicted) * drawn / pi
    estimate = float(terms.mean())
    se = float(np.std(terms) / np.sqrt(terms.size))
    return MeanEstimate(estimate, se, z_interval(estimate, se, alpha), lam)


def active_beta(y: np.ndarray, yhat: np.ndarray, pi: np.ndarray, drawn: np.ndarray, lam: float) -> float:
    """The variance-minimising β for a fixed λ (see `active_lambda`)."""
    weight = drawn / pi
    rest = np.where(drawn, y, 0.0) * weight + lam * yhat * (1 - weight)
    c = 1 - weight
    var_c = float(np.var(c))
    return -float(np.mean((rest - rest.mean()) * (c - c.mean()))) / var_c if var_c > 0 else 0.0


def weighted_variance(y: np.ndarray, pi: np.ndarray) -> float:
    """The population variance of Y estimated from an unequal-probability sample (Hájek weights 1/π)."""
    w = 1 / np.asarray(pi, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return 0.0
    mean = float(np.sum(w * y) / np.sum(w))
    return float(np.sum(w * (y - mean) ** 2) / np.sum(w))
