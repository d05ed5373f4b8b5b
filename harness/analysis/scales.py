"""Turning scores on a rubric's scale into pass/fail and into ordinal bins.

Pass/fail (used for classification reports, McNemar and pass/fail kappa and MCC):

- the threshold is ``--success 'NAME>=X'`` (``'NAME<=X'`` for a lower-is-better metric) for one
  metric, or ``--threshold X`` for every metric (``--threshold NAME=X`` is the old spelling of
  ``--success``), else the midpoint of the metric's scale (0.5 on 0..1, 3 on 1..5);
- ``direction = "higher"``: a score passes when ``score >= threshold``;
  ``direction = "lower"`` (hallucination): a score passes when ``score <= threshold``.
  A score exactly at the threshold passes either way.

Ordinal bins (used for the quadratic-weighted kappa of numeric scores): a scale whose ends are
integers 2 to 20 apart is binned by rounding to its integer steps (1..5 gives 5 bins, 0..10
gives 11); any other scale (0..1, 0..100) is cut into ten equal steps and rounded to the nearest step, so 0..1
gives the 11 bins 0.0, 0.1, ..., 1.0. Halves round up. Weights are by bin distance on the scale,
so bins that no one used still count in the distance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

import numpy as np

from ..errors import UserInputError
from .io import Metric

__all__ = ["Bins", "bins_for", "parse_thresholds", "passes", "threshold_for"]

PASS, FAIL = "pass", "fail"
#: ``--success`` (the spelling ``harness gate`` and ``passk`` share): ``NAME>=X`` or ``NAME<=X``.
_SUCCESS = re.compile(r"^\s*([^<>=\s]+)\s*(>=|<=)\s*(\S+)\s*$")


def parse_thresholds(values: Iterable[str], metrics: Mapping[str, Metric]) -> dict[str | None, float]:
    """``--success`` values, ``NAME>=X`` (``NAME<=X`` when lower is better), and ``--threshold``
    values, ``X`` (every metric) or ``NAME=X``; key None holds the bare number.

    Each threshold must lie on the scale of the metrics it applies to; a ``--success`` operator
    must be the metric's direction (a pass is ``>=`` on a higher-is-better metric).
    """
    out: dict[str | None, float] = {}
    spelled: dict[str | None, str] = {}  # the option each came from, for the scale's message
    for text in values:
        success = _SUCCESS.match(text)
        option = "--success" if success else "--threshold"
        if success:
            key, op, number = success.groups()
        else:
            name, _, number = text.rpartition("=")
            key, op = name.strip() or None, None
        try:
            value = float(number)
        except ValueError:
            raise UserInputError(
                f"--threshold {text}: expected a number or NAME=NUMBER" if not success else f"--success {text}: {number!r} is not a number"
            ) from None
        if not math.isfinite(value):
            raise UserInputError(f"{option} {text}: expected a finite number")
        if key is not None and key not in metrics:
            raise UserInputError(f"{option} {text}: {key!r} is not a rubric or composite of the run (it has: {', '.join(metrics)})")
        if key is not None and op is not None:
            expected = "<=" if metrics[key].direction == "lower" else ">="
            if op != expected:
                better = "lower" if expected == "<=" else "higher"
                raise UserInputError(f"{option} {text}: {better} is better on {key}, so a score passes at {key}{expected}{number}")
        if key in out:
            raise UserInputError(f"{option} {text}: given twice for {key or 'every metric'}")
        out[key] = value
        spelled[key] = f"{option} {text.strip()}"
    for metric in metrics.values():
        value = threshold_for(metric, out)
        lo, hi = metric.scale
        if not lo <= value <= hi:
            given = spelled[metric.name if metric.name in out else None]
            op = "<=" if metric.direction == "lower" else ">="
            hint = "" if metric.name in out else f"; give {metric.name} its own with --success '{metric.name}{op}X'"
            raise UserInputError(f"{given}: outside the {metric.name} scale [{lo:g}, {hi:g}]{hint}")
    return out


def threshold_for(metric: Metric, thresholds: Mapping[str | None, float]) -> float:
    """The pass/fail threshold of ``metric``: its own ``NAME=X``, else the bare one, else the midpoint."""
    if metric.name in thresholds:
        return thresholds[metric.name]
    if None in thresholds:
        return thresholds[None]
    lo, hi = metric.scale
    return (lo + hi) / 2.0


def passes(scores: np.ndarray, metric: Metric, threshold: float) -> np.ndarray:
    """Boolean array: which scores pass (``>=`` threshold, or ``<=`` when lower is better)."""
    scores = np.asarray(scores, dtype=np.float64)
    return scores <= threshold if metric.direction == "lower" else scores >= threshold


def pass_fail_labels(scores: np.ndarray, metric: Metric, threshold: float) -> np.ndarray:
    """ "pass" / "fail" strings for ``scores`` (see `passes`)."""
    return np.where(passes(scores, metric, threshold), PASS, FAIL)


class Bins:
    """The ordinal bins of a scale: ``count`` bins ``lo + k * step``, k = 0..count-1."""

    def __init__(self, lo: float, hi: float) -> None:
        integer = float(lo).is_integer() and float(hi).is_integer() and 2 <= hi - lo <= 20
        self.lo, self.hi = float(lo), float(hi)
        self.step = 1.0 if integer else (hi - lo) / 10.0
        self.count = round((hi - lo) / self.step) + 1
        self.rule = "rounded to the scale's integer steps" if integer else f"rounded to the nearest tenth of the scale (step {self.step:g})"

    def codes(self, scores: np.ndarray) -> np.ndarray:
        """Bin index of each score; halves round up (1e-9 absorbs 0.35 / 0.1 = 3.4999...)."""
        units = (np.asarray(scores, dtype=np.float64) - self.lo) / self.step
        return np.clip(np.floor(units + 0.5 + 1e-9), 0, self.count - 1).astype(np.int64)

    def values(self) -> list[float]:
        return [round(self.lo + k * self.step, 12) for k in range(self.count)]

    def as_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "step": self.step, "bins": self.values()}


def bins_for(metric: Metric) -> Bins:
    return Bins(*metric.scale)
