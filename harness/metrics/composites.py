"""Composite scores: weighted sums of rubric scores (seed 003, "Answer Correctness").

``answer_correctness = 0.7·relevance + 0.3·faithfulness``. Each component enters normalised to
0..1 on its rubric's scale, and as ``1 − normalised`` when lower is better (hallucination), so a
composite is always 0..1 with 1 best. For the seed's 0..1 rubrics the normalisation is the
identity, and the seed's worked example (0.9, 1.0 → 0.93) holds exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol


class Scaled(Protocol):
    """What a composite weighs, its score on 0..1 with 1 best: a rubric (``Rubric.normalised``), a
    bounded agent metric (``agent.specs.MetricSpec``), or a jury's ``Classes.normalised`` in ``harness merge``."""

    def normalised(self, score: float) -> float: ...


@dataclass(frozen=True, slots=True)
class Missing:
    """Why a composite is unscored: the first of its rubrics without a score, and that rubric's outcome."""

    rubric: str
    status: str  # the component's status, or "missing" when the rubric was not judged at all
    reason: str | None  # the component's reason; None when it was not judged

    @property
    def cause(self) -> str:
        """The component's reason, as summary.json counts unscored composites."""
        return self.reason or "not judged"

    def __str__(self) -> str:
        return f"{self.rubric} {self.status} ({self.cause})"


@dataclass(frozen=True, slots=True)
class CompositeResult:
    name: str
    status: Literal["scored", "unscored"]
    value: float | None
    missing: Missing | None
    terms: tuple[tuple[str, float, float, float], ...]  # (rubric, weight, score, normalised)

    @property
    def reason(self) -> str | None:
        """``relevance unscored (missing_input)``: the sentence results.jsonl carries."""
        return None if self.missing is None else str(self.missing)

    def formula(self) -> str:
        """The arithmetic, with the numbers put in: ``0.7·0.9 + 0.3·1 = 0.93``."""
        parts = " + ".join(f"{w:g}·{n:g}" for _, w, _, n in self.terms)
        return f"{parts} = {self.value:.6g}" if self.value is not None else f"unscored ({self.reason})"


class Component(NamedTuple):
    """One rubric's outcome for a transcript, as a composite sees it (a named tuple: one is made
    per judgment written)."""

    status: str
    score: float | None
    reason: str | None


def weighted_composite(
    name: str,
    weights: Mapping[str, float],
    components: Mapping[str, Component],
    rubrics: Mapping[str, Scaled],
) -> CompositeResult:
    """Σ wᵢ·normalisedᵢ over the composite's rubrics; unscored when any component is."""
    terms = []
    for rubric_name, weight in weights.items():
        component = components.get(rubric_name)
        if component is None:
            return CompositeResult(name, "unscored", None, Missing(rubric_name, "missing", None), ())
        if component.status != "scored" or component.score is None:
            return CompositeResult(name, "unscored", None, Missing(rubric_name, component.status, component.reason), ())
        normalised = rubrics[rubric_name].normalised(component.score)
        terms.append((rubric_name, weight, component.score, normalised))
    value = math.fsum(w * n for _, w, _, n in terms)
    return CompositeResult(name, "scored", value, None, tuple(terms))
