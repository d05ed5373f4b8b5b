"""One transcript's composites as arithmetic: the formula with its numbers put in.

``answer_correctness = 0.7·relevance + 0.3·faithfulness = 0.7·0.9 + 0.3·1 = 0.93`` — recomputed
from the transcript's judgments with :func:`harness.metrics.weighted_composite` (the function the
run used), each component normalised on its rubric's scale, and checked against the value the run
wrote to results.jsonl. The report and ``harness explain`` both print these lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..metrics.composites import Component, CompositeResult, weighted_composite
from ..rows import JudgmentRow, TurnJudgmentRow
from ..rubrics.rubric import Rubric
from .run import RunView, TurnScores


@dataclass(frozen=True, slots=True)
class CompositeLine:
    name: str
    judge: str
    status: str  # "scored" | "unscored" | "unknown" (weights or a rubric's scale not known)
    value: float | None
    #: "0.7·relevance + 0.3·faithfulness" ("" when the weights are unknown)
    definition: str
    #: "0.7·0.9 + 0.3·1 = 0.93", "unscored (relevance unscored (no_score_found))" or why it is unknown
    arithmetic: str
    #: how each component left its rubric's scale, where that is not the identity
    steps: tuple[str, ...]
    #: the value results.jsonl holds for this composite and judge
    recorded: float | None
    #: recomputed value == recorded value (None when nothing could be recomputed)
    agrees: bool | None

    def text(self) -> str:
        if not self.definition:
            return f"{self.name}: {self.arithmetic}"
        joiner = " = " if self.status == "scored" else ": "
        return f"{self.name} = {self.definition}{joiner}{self.arithmetic}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "judge": self.judge,
            "status": self.status,
            "value": self.value,
            "text": self.text(),
            "steps": list(self.steps),
            "recorded": self.recorded,
            "agrees": self.agrees,
        }


def _step(rubric: Rubric, score: float, normalised: float) -> str | None:
    """How ``score`` became ``normalised`` on 0..1 (1 best), or None when it is the same number."""
    lo, hi = rubric.lo, rubric.hi
    unit = f"{score:g}" if (lo, hi) == (0.0, 1.0) else f"({score:g} − {lo:g})/({hi:g} − {lo:g})"
    if rubric.direction == "lower":
        return f"{rubric.name} {score:g}, lower is better: 1 − {unit} = {normalised:g}"
    if (lo, hi) == (0.0, 1.0):
        return None
    return f"{rubric.name} {score:g} on [{lo:g}, {hi:g}]: {unit} = {normalised:g}"


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def judgment_components(judgments: Iterable[JudgmentRow]) -> dict[str, dict[str, Component]]:
    """judge -> rubric -> the component a composite weighs, of one transcript's judgments (a
    per-turn judgment is left out: the conversation's score is what a composite weighs)."""
    components: dict[str, dict[str, Component]] = {}
    for row in judgments:
        if not isinstance(row, TurnJudgmentRow):
            components.setdefault(row.judge, {})[row.rubric] = Component(row.status, row.score, row.reason)
    return components


def composite_lines(
    view: RunView,
    judged: Mapping[str, Mapping[str, Component]],
    recorded: Mapping[str, Mapping[str, Any]] | None,
    conversation: TurnScores | None = None,
) -> list[CompositeLine]:
    """Every (judge, composite) of one transcript. ``judged``: its judgments' components
    (:func:`judgment_components`); ``recorded``: its results.jsonl ``composites`` (judge -> name ->
    value); ``conversation``: a conversation judged per turn, whose composites weigh its rubrics'
    conversation scores."""
    components: dict[str, dict[str, Component]] = {judge: {} for judge in view.judges}
    for judge, by_rubric in judged.items():
        components.setdefault(judge, {}).update(by_rubric)
    for (rubric, judge), (value, why) in (conversation.conversation if conversation is not None else {}).items():
        reason = why.split(": ", 1)[1].split(" (turn ")[0] if why and ": " in why else why
        status = "scored" if value is not None else (why.split(":", 1)[0] if why else "unscored")
        components.setdefault(judge, {})[rubric] = Component(status, value, reason if value is None else None)
    lines = []
    for judge in view.judges:
        for name, weights in view.composites.items():
            value_recorded = (recorded or {}).get(judge, {}).get(name)
            if weights is None:
                lines.append(CompositeLine(name, judge, "unknown", None, "", "weights unknown (pass the run's --config)", (), value_recorded, None))
                continue
            definition = " + ".join(f"{w:g}·{r}" for r, w in weights.items())
            unknown = [r for r in weights if r not in view.rubrics]
            if unknown:
                lines.append(
                    CompositeLine(
                        name,
                        judge,
                        "unknown",
                        None,
                        definition,
                        f"the scale of {unknown[0]} is unknown (pass --prompts DIR)",
                        (),
                        value_recorded,
                        None,
                    )
                )
                continue
            result: CompositeResult = weighted_composite(name, weights, components.get(judge, {}), view.rubrics)
            steps = tuple(s for r, _, score, norm in result.terms if (s := _step(view.rubrics[r], score, norm)) is not None)
            lines.append(
                CompositeLine(
                    name, judge, result.status, result.value, definition, result.formula(), steps, value_recorded, _same(result.value, value_recorded)
                )
            )
    return lines
