"""What a transcript may say about its agent, as users write it (pydantic, ``extra="forbid"``).

- ``steps``: the agent's tool calls, one object each (:class:`StepRecord`); what ``harness import``
  writes for traces. A transcript with ``messages`` gets its steps from them instead.
- ``tools``: the tools the agent had (:class:`ToolSpec`): name, description and the JSON Schema of
  the parameters; OpenAI's ``{"type": "function", "function": {...}}`` and Anthropic's
  ``input_schema`` spellings are accepted as they are.
- ``task``: the id of the task a run attempted (several transcripts of one task are repeated runs).
- ``reference_trajectory``: the calls the agent should make (:data:`RefItem`), for
  :mod:`harness.agent.match`. Besides plain calls, a reference may hold a block whose calls may
  come in any order (``{"any_order": [...]}``), alternatives (``{"one_of": [...]}``) and optional
  items (``"optional": true``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .steps import Step, parse_arguments, result_text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _seconds(value: float | datetime | None) -> float | None:
    if value is None:
        return None
    return value.timestamp() if isinstance(value, datetime) else float(value)


class StepRecord(_Strict):
    """One tool call as a transcript's ``steps`` entry."""

    name: str = Field(min_length=1)
    #: an object, or the JSON text the agent wrote (kept as written when it does not parse)
    arguments: Any = None
    #: the tool's result: text, or JSON (shown to a judge as canonical JSON)
    result: Any = None
    error: str | None = None
    #: true when the call failed; implied by ``error``
    failed: bool | None = None
    turn: int | None = Field(default=None, ge=0)
    group: int | None = Field(default=None, ge=0)
    id: str | None = None
    start: float | datetime | None = None
    end: float | datetime | None = None
    #: the trace span of the call's run (what ``harness import`` keeps from a trace)
    span_id: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _times(self) -> StepRecord:
        start, end = _seconds(self.start), _seconds(self.end)
        if start is not None and end is not None and end < start:
            raise ValueError("end is before start")
        return self

    def step(self, index: int) -> Step:
        parsed, raw, problem = parse_arguments(self.arguments)
        failed = bool(self.failed) or self.error is not None
        return Step(
            index,
            self.name,
            parsed,
            raw,
            problem,
            result=result_text(self.result),
            failed=failed,
            error=self.error,
            turn=self.turn,
            group=self.group,
            call_id=self.id,
            start_s=_seconds(self.start),
            end_s=_seconds(self.end),
            span_id=self.span_id,
        )


class ToolSpec(_Strict):
    """A tool the agent had."""

    name: str = Field(min_length=1)
    description: str = ""
    #: the JSON Schema of the arguments
    parameters: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _spellings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("type") == "function" and isinstance(value.get("function"), dict):
                value = value["function"]  # OpenAI's tools list
            if "input_schema" in value and "parameters" not in value:  # Anthropic's
                value = {**value, "parameters": value["input_schema"]}
                value.pop("input_schema")
            value = {k: v for k, v in value.items() if k not in ("strict", "type", "cache_control")}
        return value


class ArgumentRule(_Strict):
    """How a call's arguments are compared with a reference call's (per tool, or per reference call).

    ``exact``: equal JSON values; ``ignore``: not compared; ``fields``: only the named top-level
    fields are compared (each equal); ``schema``: only valid against the tool's declared schema;
    ``any_of``: the reference gives each argument as a list of the values it may take (BFCL's
    possible answers; ``""`` in a list: the argument may be left out); ``call_fields``: only the
    fields the call itself gives are compared, each equal to the reference's (tau2-bench's
    ``compare_args`` left out). ``tolerance``: numbers equal within this absolute difference;
    ``fold``: strings compared case- and whitespace-insensitively. Both apply inside ``exact``,
    ``fields``, ``any_of`` and ``call_fields`` (docs/reference/trajectories.md).
    """

    mode: Literal["exact", "ignore", "fields", "schema", "any_of", "call_fields"] = "exact"
    fields: tuple[str, ...] | None = None
    tolerance: float = Field(default=0.0, ge=0)
    fold: bool = False

    @model_validator(mode="after")
    def _fields_named(self) -> ArgumentRule:
        if self.mode == "fields" and not self.fields:
            raise ValueError("mode 'fields' needs a non-empty `fields` list")
        if self.mode != "fields" and self.fields is not None:
            raise ValueError("`fields` is only read with mode 'fields'")
        return self


class RefCall(_Strict):
    """A call the agent should make. ``arguments`` None: any arguments."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    optional: bool = False
    #: overrides the tool's argument rule for this call
    match: ArgumentRule | None = None

    @model_validator(mode="before")
    @classmethod
    def _tau2_action(cls, value: Any) -> Any:
        # A tau2-bench gold action ({"action_id", "name", "arguments", "compare_args", ...}) as it
        # is written in its tasks: its compared keys become the call's argument rule.
        if isinstance(value, dict) and "action_id" in value:
            compare = value.get("compare_args")
            if compare is not None and not (isinstance(compare, list) and all(isinstance(k, str) for k in compare)):
                raise ValueError("compare_args must be a list of argument names")
            rule = {"mode": "call_fields"} if compare is None else {"mode": "ignore"} if not compare else {"mode": "fields", "fields": compare}
            kept = {k: v for k, v in value.items() if k not in ("action_id", "requestor", "info", "compare_args")}
            return {**kept, "match": kept.get("match", rule)}
        return value

    @field_validator("arguments", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            parsed, _, problem = parse_arguments(value)
            if problem is not None:
                raise ValueError(problem)
            return parsed
        return value


class AnyOrder(_Strict):
    """Items that may come in any order among themselves (parallel calls)."""

    any_order: list[RefItem] = Field(min_length=1)
    optional: bool = False


class OneOf(_Strict):
    """Alternatives: exactly one of these items is expected."""

    one_of: list[RefItem] = Field(min_length=2)
    optional: bool = False


RefItem = RefCall | AnyOrder | OneOf
AnyOrder.model_rebuild()
OneOf.model_rebuild()
