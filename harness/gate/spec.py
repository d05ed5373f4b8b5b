"""What a user gates: :class:`GateSpec`, read from ``harness gate``'s options or from a dict.

Four kinds of check, each naming a metric of the run: a rubric, a composite, a bounded agent metric
(``trajectory_match``, ...), or ``pass^K`` / ``pass@K`` (the mean over tasks of repeated runs, whose
success is ``success``):

- ``min``: ``NAME=X``, the lower bound of the mean's interval must be at least X (higher is better);
- ``max``: ``NAME=X``, its upper bound must be at most X (a lower-is-better metric: hallucination);
- ``no_regression``: ``NAME``, the run must not be significantly worse than the baseline;
- ``max_drop``: ``NAME=M``, the interval of the difference from the baseline must not reach past M
  on the worse side (a non-inferiority margin, M > 0, on the metric's scale).

Before any of them the run must be complete (``allow_incomplete``: the share of unjudged
transcripts accepted, 0 by default; ``gate/complete.py``).

Every value is checked here, with the option it came from in the message, before a run is read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import UserInputError
from ..validation import first_problem

if TYPE_CHECKING:
    from ..analysis.repeated import SuccessRule

__all__ = ["OPTION", "Bound", "GateSpec", "Success", "passk_metric", "success_from_text"]

#: The command-line option of each field, for messages.
OPTION = {
    "min": "--min",
    "max": "--max",
    "no_regression": "--no-regression",
    "max_drop": "--max-drop",
    "success": "--success",
    "judge": "--judge",
    "alpha": "--alpha",
    "allow_incomplete": "--allow-incomplete",
}
_PASSK = re.compile(r"^pass([\^@])(\d+)$")
_SUCCESS = re.compile(r"^\s*([^<>=\s]+)\s*(>=|<=)\s*(\S+)\s*$")


def passk_metric(name: str) -> tuple[Literal["pass^k", "pass@k"], int] | None:
    """``pass^3`` -> ("pass^k", 3), ``pass@5`` -> ("pass@k", 5); None for any other name."""
    match = _PASSK.match(name)
    if match is None:
        return None
    k = int(match.group(2))
    if k < 1:
        raise ValueError(f"{name}: k must be at least 1")
    return ("pass^k" if match.group(1) == "^" else "pass@k"), k


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


class Bound(BaseModel):
    """A metric and a number: ``NAME=X`` on the command line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(min_length=1)
    value: float = Field(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            name, sep, number = data.rpartition("=")
            if not sep or not name.strip():
                raise ValueError("expected NAME=NUMBER")
            return {"metric": name.strip(), "value": _number(number.strip())}
        return data

    def __str__(self) -> str:
        return f"{self.metric}={self.value:g}"


class Success(BaseModel):
    """When one run of a task succeeds, for pass^k and pass@k: ``NAME>=X`` or ``NAME<=X``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(min_length=1)
    at_least: float | None = Field(default=None, allow_inf_nan=False)
    at_most: float | None = Field(default=None, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            match = _SUCCESS.match(data)
            if match is None:
                raise ValueError("expected NAME>=NUMBER or NAME<=NUMBER, e.g. 'relevance>=0.7'")
            name, op, number = match.groups()
            return {"metric": name, "at_least" if op == ">=" else "at_most": _number(number)}
        return data

    @model_validator(mode="after")
    def _one_side(self) -> Success:
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError("give one of at_least and at_most")
        return self

    def __str__(self) -> str:
        return f"{self.metric}>={self.at_least:g}" if self.at_least is not None else f"{self.metric}<={self.at_most:g}"


class GateSpec(BaseModel):
    """Every check of one gate, and how sure it must be (``alpha``: each interval is at 1 - alpha)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: list[Bound] = []
    max: list[Bound] = []
    no_regression: list[str] = []
    max_drop: list[Bound] = []
    success: Success | None = None
    judge: str | None = None
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    #: the share of a run's transcripts that may be unjudged (interrupted, failed, never reached)
    #: and the gate still pass; 0: the run must be complete (``gate/complete.py``)
    allow_incomplete: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)

    @field_validator("no_regression")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.strip() or "=" in name:
                raise ValueError(f"{name}: expected a metric's name (no =X: the test decides)")
        return [n.strip() for n in names]

    @field_validator("max_drop")
    @classmethod
    def _margins(cls, bounds: list[Bound]) -> list[Bound]:
        for b in bounds:
            if b.value <= 0:
                raise ValueError(f"{b}: the margin must be above 0 (use --no-regression {b.metric} to fail on any significant drop)")
        return bounds

    @model_validator(mode="after")
    def _complete(self) -> GateSpec:
        named = [b.metric for b in (*self.min, *self.max, *self.max_drop)] + self.no_regression
        if not named:
            raise ValueError("no check: give --min, --max, --no-regression or --max-drop")
        for field in ("min", "max", "max_drop"):
            seen = [b.metric for b in getattr(self, field)]
            if dup := sorted({m for m in seen if seen.count(m) > 1}):
                raise ValueError(f"{OPTION[field]} {dup[0]}: given twice")
        if dup := sorted({m for m in self.no_regression if self.no_regression.count(m) > 1}):
            raise ValueError(f"--no-regression {dup[0]}: given twice")
        for name in named:
            try:
                kind = passk_metric(name)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            if kind is not None and self.success is None:
                raise ValueError(f"{name}: say when a run of a task succeeds with --success, e.g. --success 'relevance>=0.7'")
        return self

    @property
    def needs_baseline(self) -> bool:
        return bool(self.no_regression or self.max_drop)

    @classmethod
    def from_options(
        cls,
        *,
        min: list[str] | None = None,
        max: list[str] | None = None,
        no_regression: list[str] | None = None,
        max_drop: list[str] | None = None,
        success: str | None = None,
        judge: str | None = None,
        alpha: float = 0.05,
        allow_incomplete: float = 0.0,
    ) -> GateSpec:
        """The spec from ``harness gate``'s options; a bad value is a `UserInputError` naming its option."""
        given: dict[str, Any] = {
            "min": list(min or []),
            "max": list(max or []),
            "no_regression": list(no_regression or []),
            "max_drop": list(max_drop or []),
            "success": success,
            "judge": judge,
            "alpha": alpha,
            "allow_incomplete": allow_incomplete,
        }
        return cls.validated(given)

    @classmethod
    def validated(cls, data: Any) -> GateSpec:
        """``model_validate`` with the first problem as one line naming the option and the value given."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = first_problem(exc, whole="gate")
            loc = first.loc
            if not loc:
                raise UserInputError(f"harness gate: {first.problem}") from None
            option = OPTION.get(str(loc[0]), str(loc[0]))
            value: Any = data.get(loc[0]) if isinstance(data, dict) else None
            if len(loc) > 1 and isinstance(loc[1], int) and isinstance(value, list) and loc[1] < len(value):
                value = value[loc[1]]
            if isinstance(value, list):  # a check of the whole list: its message starts with the item
                raise UserInputError(f"{option} {first.problem}") from None
            shown = f" {value}" if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
            raise UserInputError(f"{option}{shown}: {first.problem}") from None


def success_from_text(text: str, *, labels: Sequence[Path] = (), judge: str | None = None) -> SuccessRule:
    """The rule from ``--success``, spelled as for ``harness gate``: ``'NAME>=X'`` or ``'NAME<=X'``,
    NAME an agent metric of results.jsonl (``trajectory_match``, ...) or a judged rubric or
    composite; with ``labels``, NAME is the labelled rubric, and pass/fail labels take ``NAME`` alone."""
    from ..agent.specs import SPECS
    from ..analysis.repeated import success_rule

    name = text.strip()
    if labels and name and not any(c in name for c in "<>= "):
        return success_rule(rubric=name, labels=labels)
    try:
        parsed = Success.model_validate(text)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
        raise UserInputError(f"--success {text}: {problem}") from None
    agent = parsed.metric in SPECS and not labels
    return success_rule(
        rubric=None if agent else parsed.metric,
        metric=parsed.metric if agent else None,
        labels=labels,
        at_least=parsed.at_least,
        at_most=parsed.at_most,
        judge=judge,
    )
