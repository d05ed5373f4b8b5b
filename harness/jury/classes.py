"""What a jury votes on for one rubric: the rubric's labels, or its scale's ordinal bins.

A numeric rubric's scores are binned as ``harness agreement`` bins them (``analysis.scales.Bins``:
a whole-number scale 2 to 20 steps wide by its steps, any other in tenths), so majority, weighted
and Dawid–Skene juries vote on categories; mean and median juries average the scores themselves.

Ties go to the worse verdict: for a numeric rubric the lower bin when higher is better (the
higher when lower is better): a jury split between pass and fail says fail. For a label rubric
the label listed first in the rubric wins, as it does between a judge's repeated samples
(``planning.samples``). ``rank`` orders the classes so: the lowest rank wins a tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["Classes"]


@dataclass(frozen=True, slots=True)
class Classes:
    """A rubric as a jury sees it: name, scale and direction, and its labels for a label rubric."""

    rubric: str
    lo: float
    hi: float
    direction: Literal["higher", "lower"] = "higher"
    labels: tuple[str, ...] | None = None

    @classmethod
    def of(cls, rubric: Any) -> Classes:
        """From a ``Rubric`` (anything with name, lo, hi, direction and labels)."""
        labels = tuple(rubric.labels) if rubric.labels is not None else None
        return cls(rubric.name, float(rubric.lo), float(rubric.hi), rubric.direction, labels)

    @classmethod
    def recorded(cls, rubric: str, entry: dict[str, Any]) -> Classes:
        """From summary.json's ``rubric_scales`` entry of ``rubric`` (``harness merge``)."""
        lo, hi = entry["scale"]
        labels = entry.get("labels")
        return cls(rubric, float(lo), float(hi), entry.get("direction", "higher"), tuple(labels) if labels is not None else None)

    @property
    def numeric(self) -> bool:
        return self.labels is None

    @property
    def _bins(self) -> Any:
        from ..analysis.scales import Bins

        return Bins(self.lo, self.hi)

    @property
    def count(self) -> int:
        return len(self.labels) if self.labels is not None else int(self._bins.count)

    def values(self) -> list[float]:
        """Each bin's score (a numeric rubric's class values)."""
        return [float(v) for v in self._bins.values()]

    @property
    def rank(self) -> np.ndarray:
        """Tie order of the classes: the lowest rank wins (the worse bin; the first label)."""
        order = np.arange(self.count)
        return order[::-1].copy() if self.numeric and self.direction == "lower" else order

    def codes(self, votes: np.ndarray) -> np.ndarray:
        """Class index of each vote (a score, or a label's index as a float), -1 for NaN (no vote)."""
        votes = np.asarray(votes, dtype=np.float64)
        missing = np.isnan(votes)
        codes = self._bins.codes(np.where(missing, self.lo, votes)) if self.numeric else np.where(missing, 0, votes).astype(np.int64)
        return np.where(missing, -1, codes)

    def value(self, code: int) -> float | str:
        """The verdict of class ``code``: its bin's score, or its label."""
        if self.labels is not None:
            return self.labels[code]
        return self.values()[code]

    def normalised(self, score: float) -> float:
        """The score on 0..1 with 1 best, as ``Rubric.normalised`` (composites weigh it so)."""
        unit = (score - self.lo) / (self.hi - self.lo)
        return 1.0 - unit if self.direction == "lower" else unit

    def as_dict(self) -> dict[str, Any]:
        if self.labels is not None:
            return {"labels": list(self.labels)}
        return {"bins": self.values(), "ties_to": "the lower bin" if self.direction == "higher" else "the higher bin"}
