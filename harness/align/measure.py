"""How far a judge agrees with human labels, on the select set (to choose) and the sealed test set
(to report once, baseline against aligned).

Pass/fail labels: Cohen's kappa, balanced accuracy, the true-positive rate (pass labels the judge
passes) and the true-negative rate (fail labels it fails); the judge passes at the threshold
(`harness.analysis.scales.passes`). Numeric labels: the quadratic-weighted kappa of labels and
scores binned on the rubric's scale (`harness.analysis.scales.Bins`, as ``harness agreement``),
Spearman's rho and the mean absolute error. Kappa is the primary figure: it chooses on the select
set and decides "improved" on the test set; the others are reported beside it.

On the test set every figure has a bootstrap percentile interval over test *groups*
(`harness.analysis.resampling.grouped_bootstrap`), and the difference aligned − baseline has the
paired one: each resample draws groups once and measures both judges on them. "Improved" is said
only when the paired interval of kappa's difference lies above 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..analysis.io import Metric
from ..analysis.resampling import (
    DEFAULT_RESAMPLES,
    confusion_weighted,
    group_weights,
    kappa_batch,
    mae_weighted,
    percentile_interval,
    spearman_weighted,
)
from ..analysis.scales import PASS, bins_for, passes

__all__ = [
    "FIGURES",
    "Estimate",
    "Figure",
    "Scale",
    "SealedTest",
    "agreement_figures",
    "chosen",
    "point_figures",
    "primary_score",
    "measure_sealed_test",
]

LabelKind = Literal["numeric", "pass_fail"]
#: the figures of each kind of label, the primary one first
FIGURES: Mapping[str, tuple[str, ...]] = {"pass_fail": ("kappa", "balanced_accuracy", "tpr", "tnr"), "numeric": ("kappa", "spearman", "mae")}
LOWER_IS_BETTER = frozenset({"mae"})


@dataclass(frozen=True)
class Scale:
    """The rubric's metric, the kind of its labels and the pass/fail threshold."""

    metric: Metric
    kind: LabelKind
    threshold: float

    @property
    def kappa_name(self) -> str:
        return "Cohen's kappa" if self.kind == "pass_fail" else "quadratic-weighted kappa"

    def human_values(self, labels: Sequence[float | str]) -> np.ndarray:
        """Labels as numbers on the rubric's scale: a pass is the scale's good end, a fail its bad end."""
        lo, hi = self.metric.scale
        good, bad = (lo, hi) if self.metric.direction == "lower" else (hi, lo)
        return np.array([(good if v == PASS else bad) if isinstance(v, str) else float(v) for v in labels], dtype=np.float64)

    def verdict_text(self) -> str:
        op = "or less" if self.metric.direction == "lower" else "or more"
        return f"a score of {self.threshold:g} {op} passes"


def agreement_figures(scale: Scale, human: Sequence[float | str], judged: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Every figure of ``scale.kind`` for each row of ``weights`` (rows, n): how many times each
    (label, score) pair counts in that row. NaN where a figure is undefined (constant values, a
    class absent)."""
    w = np.asarray(weights, dtype=np.float64)
    scores = np.asarray(judged, dtype=np.float64)
    if scale.kind == "pass_fail":
        truth = np.array([0 if v == PASS else 1 for v in human], dtype=np.int64)  # order pass, fail
        said = np.where(passes(scores, scale.metric, scale.threshold), 0, 1)
        cm = confusion_weighted(truth, said, 2, w)
        rows = cm.sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpr = np.where(rows[:, 0] > 0, cm[:, 0, 0] / rows[:, 0], np.nan)
            tnr = np.where(rows[:, 1] > 0, cm[:, 1, 1] / rows[:, 1], np.nan)
        return {"kappa": kappa_batch(cm), "balanced_accuracy": (tpr + tnr) / 2.0, "tpr": tpr, "tnr": tnr}
    values = scale.human_values(human)
    bins = bins_for(scale.metric)
    cm = confusion_weighted(bins.codes(values), bins.codes(scores), bins.count, w)
    return {"kappa": kappa_batch(cm, "quadratic"), "spearman": spearman_weighted(values, scores, w), "mae": mae_weighted(values, scores, w)}


def point_figures(scale: Scale, human: Sequence[float | str], judged: np.ndarray) -> dict[str, float | None]:
    """The figures of the pairs as they are (each counted once); None where undefined or no pairs."""
    if len(human) == 0:
        return dict.fromkeys(FIGURES[scale.kind])
    found = agreement_figures(scale, human, judged, np.ones((1, len(human))))
    return {name: (float(v[0]) if np.isfinite(v[0]) else None) for name, v in found.items()}


def primary_score(scale: Scale, human: Sequence[float | str], judged: np.ndarray) -> float:
    """Kappa of the pairs, what the select set chooses by; -inf when undefined (never chosen)."""
    value = point_figures(scale, human, judged)["kappa"]
    return float("-inf") if value is None else value


def chosen(gains: Mapping[str, float | None]) -> str | None:
    """The candidate with the largest kappa gain over the rubric on the select set, or None when
    none gains (a gain of 0, or an undefined one, is no reason to change the rubric). Ties go to
    the one named first."""
    best = max(((g, -i, name) for i, (name, g) in enumerate(gains.items()) if g is not None), default=None)
    return best[2] if best is not None and best[0] > 0 else None


@dataclass(frozen=True)
class Estimate:
    value: float | None
    ci: tuple[float, float] | None

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci": None if self.ci is None else list(self.ci)}


@dataclass(frozen=True)
class Figure:
    """One figure on the test set: baseline, aligned, and the paired difference aligned − baseline."""

    name: str
    lower_is_better: bool
    baseline: Estimate
    aligned: Estimate
    difference: Estimate
    #: two-sided paired bootstrap p-value of "no difference"
    pvalue: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "better": "lower" if self.lower_is_better else "higher",
            "baseline": self.baseline.as_dict(),
            "aligned": self.aligned.as_dict(),
            "difference": self.difference.as_dict(),
            "pvalue": self.pvalue,
        }


@dataclass(frozen=True)
class SealedTest:
    """Baseline against aligned on the sealed test set, measured once."""

    #: (label, baseline, aligned) pairs both judges scored, and the test groups they fall in
    n: int
    groups: int
    figures: tuple[Figure, ...]
    confidence: float
    resamples: int
    seed: int

    @property
    def primary(self) -> Figure:
        return self.figures[0]

    @property
    def improved(self) -> bool:
        """The paired interval of kappa's difference lies above 0."""
        ci = self.primary.difference.ci
        return ci is not None and ci[0] > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "groups": self.groups,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
            "primary": self.primary.name,
            "improved": self.improved,
            "figures": [f.as_dict() for f in self.figures],
        }


def _interval(result: Mapping[str, Any]) -> tuple[float, float] | None:
    ci = result.get("ci")
    return None if ci is None else (float(ci[0]), float(ci[1]))


def measure_sealed_test(
    scale: Scale,
    human: Sequence[float | str],
    baseline: np.ndarray,
    aligned: np.ndarray,
    groups: Sequence[str],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> SealedTest:
    """Every figure of baseline and aligned on the same test pairs, each with a bootstrap interval
    over ``groups`` (one per pair), and the paired difference with its interval and p-value: every
    figure of both sides is measured on each resample's one draw of groups."""
    names = FIGURES[scale.kind]
    codes = np.unique(np.asarray(list(groups), dtype=object), return_inverse=True)[1].astype(np.int64) if len(groups) else np.zeros(0, np.int64)
    g = int(codes.max()) + 1 if codes.size else 0
    sides: dict[str, dict[str, list[np.ndarray]]] = {"baseline": {n: [] for n in names}, "aligned": {n: [] for n in names}}
    if g >= 2:
        for weights in group_weights(codes, resamples, seed):
            for side, scores in (("baseline", baseline), ("aligned", aligned)):
                for name, values in agreement_figures(scale, human, scores, weights).items():
                    sides[side][name].append(values)
    base, new = point_figures(scale, human, baseline), point_figures(scale, human, aligned)
    figures = []
    for name in names:
        if g >= 2:
            b_theta, a_theta = np.concatenate(sides["baseline"][name]), np.concatenate(sides["aligned"][name])
            b_ci, a_ci = _interval(percentile_interval(b_theta, confidence)), _interval(percentile_interval(a_theta, confidence))
            diff = percentile_interval(a_theta - b_theta, confidence, null=0.0)
        else:
            b_ci = a_ci = None
            diff = {"ci": None, "pvalue": None}
        b, a = base[name], new[name]
        difference = Estimate(None if a is None or b is None else a - b, _interval(diff))
        figures.append(Figure(name, name in LOWER_IS_BETTER, Estimate(b, b_ci), Estimate(a, a_ci), difference, diff["pvalue"]))
    return SealedTest(len(human), g, tuple(figures), confidence, resamples, seed)
