"""Structured output: the JSON Schema a judge is asked to answer with, and reading a reply by it.

A numeric rubric asks for ``{"score": <number>}``, a categorical one for ``{"label": <one of its
labels>}``; nothing else is allowed (OpenAI's strict mode requires ``additionalProperties: false``
and every property listed as required). The providers send it as ``response_format`` (OpenAI) or
as the input schema of a forced tool (Anthropic). A reply that is not a JSON object of exactly
that shape is ``unscored`` with reason ``schema_violation``: it is never read by the free-text
rules, since a judge that was given a schema and broke it is not giving a verdict we can trust.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .parsing import ParsedLabel, ParsedScore
from .rubric import Rubric


def schema_for(rubric: Rubric) -> dict[str, Any]:
    if rubric.labels is not None:
        prop: dict[str, Any] = {"type": "string", "enum": list(rubric.labels)}
        name = "label"
    else:
        prop = {"type": "number", "description": f"the score, from {rubric.lo:g} to {rubric.hi:g}"}
        name = "score"
    return {"type": "object", "properties": {name: prop}, "required": [name], "additionalProperties": False}


def _object(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_structured_score(text: str | None, lo: float, hi: float) -> ParsedScore:
    data = _object(text)
    value = data.get("score") if data is not None and set(data) == {"score"} else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return ParsedScore("unscored", None, None, False, "schema_violation")
    score = float(min(max(value, lo), hi))
    return ParsedScore("scored", score, float(value), score != value, None)


def parse_structured_label(text: str | None, labels: tuple[str, ...]) -> ParsedLabel:
    data = _object(text)
    value = data.get("label") if data is not None and set(data) == {"label"} else None
    if value not in labels:
        return ParsedLabel("unscored", None, "schema_violation")
    return ParsedLabel("scored", str(value), None)
