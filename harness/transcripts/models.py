"""The transcript record users hand the harness, as pydantic models (``extra="forbid"``).

A record carries the query and answer either directly (``query``/``response``/``contexts``) or as an
OpenAI-style ``messages`` list, and its performance data either as ``timings`` or as ``spans``.
``Transcript.resolved()`` turns either form into one flat, internal :class:`Resolved` value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agent.records import RefItem, StepRecord, ToolSpec
from ..agent.steps import Step, group_by_overlap, steps_from_calls, steps_from_messages, steps_from_spans, tool_intervals
from ..validation import first_problem
from .conversation import Conversation, Turn, conversation_from_messages, conversation_from_turns
from .performance import Performance, performance_from_spans, union_ms


class _Strict(BaseModel):
    # Infinity and NaN (1e999 in a file) are refused where they are read, one line naming the field.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


#: A latency above this (about 31 years) is refused: sums of such values would overflow to inf.
MAX_MS = 1e12
#: Span times: epoch seconds up to the year 5138.
MAX_EPOCH_S = 1e11


class Timings(_Strict):
    """Latencies measured by the agent itself, in milliseconds (seed 003, performance metrics)."""

    total_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    llm_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    tool_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    api_ms: float | None = Field(default=None, ge=0, le=MAX_MS)


class Span(_Strict):
    """One timed step of the agent. ``start``/``end`` are epoch seconds or ISO-8601 timestamps."""

    kind: Literal["llm", "tool", "api"]
    name: str | None = None
    start: float | datetime
    end: float | datetime

    @model_validator(mode="after")
    def _end_after_start(self) -> Span:
        if not (abs(self.start_s) <= MAX_EPOCH_S and abs(self.end_s) <= MAX_EPOCH_S):
            raise ValueError(f"start and end must be epoch seconds (at most {MAX_EPOCH_S:g}) or ISO-8601 times")
        if self.end_s < self.start_s:
            raise ValueError("end is before start")
        return self

    @property
    def start_s(self) -> float:
        return self.start.timestamp() if isinstance(self.start, datetime) else float(self.start)

    @property
    def end_s(self) -> float:
        return self.end.timestamp() if isinstance(self.end, datetime) else float(self.end)


class ToolCallFunction(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    arguments: str | dict[str, Any] | None = None


class ToolCall(BaseModel):
    """An OpenAI tool call; unknown keys are kept because providers add their own."""

    model_config = ConfigDict(extra="allow", frozen=True)
    id: str | None = None
    type: str | None = "function"
    function: ToolCallFunction | None = None
    name: str | None = None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    text: str | None = None


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None
    #: a tool message's failure: Anthropic's ``is_error`` flag, or LangChain's ``status = "error"``
    is_error: bool | None = None
    status: Literal["success", "error"] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content if part.text is not None)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A transcript in the one internal shape the runner uses."""

    id: str
    query: str | None
    response: str | None
    contexts: tuple[str, ...] | None
    reference: str | None
    performance: Performance
    #: the agent's tool calls; None when the transcript says nothing about them
    steps: tuple[Step, ...] | None = None
    tools: tuple[ToolSpec, ...] | None = None
    task: str | None = None
    reference_trajectory: tuple[RefItem, ...] | None = None
    #: the model of the agent that wrote the response (``metadata.agent_model``, else ``metadata.model``):
    #: a jury flags its members of the same lineage (self-preference)
    agent_model: str | None = None
    #: the transcript's turns, when it gives ``messages`` (``conversation.py``): the ``conversation``
    #: input; query and response above stay the first question and the last answer
    conversation: Conversation | None = None
    #: judged per turn (``--turns``): the turn this view of the transcript is (from 1), and the
    #: conversation before it as the ``history`` input (``conversation.render_history``)
    turn: int | None = None
    history: str | None = None

    @property
    def turns(self) -> int:
        """How many turns the transcript holds (1 without ``messages``: one exchange)."""
        return 1 if self.conversation is None else max(len(self.conversation), 1)

    def judged_record(self) -> dict[str, Any]:
        """The judged fields as a transcript record (steps and tools included) that reads back to
        them: what the probes (``suites/probe.py``, the injection probe) perturb and judge."""
        row: dict[str, Any] = {"id": self.id}
        for name in ("query", "response", "reference"):
            if getattr(self, name) is not None:
                row[name] = getattr(self, name)
        if self.contexts is not None:
            row["contexts"] = list(self.contexts)
        if self.steps is not None:
            row["steps"] = [step.as_dict() for step in self.steps]
        if self.tools is not None:
            row["tools"] = [tool.model_dump(exclude_none=True) for tool in self.tools]
        return row


class TurnRecord(_Strict):
    """One turn of a conversation given already split (``harness import`` writes these for a
    session of traces, ``traces.sessions``): the user's text, the agent's answer, its tool calls
    and their results, and the trace and span the turn came from (verdicts go back there)."""

    user: str = Field(min_length=1)
    answer: str | None = None
    steps: list[StepRecord] | None = None
    contexts: list[str] | None = None
    trace_id: str | None = Field(default=None, min_length=1)
    span_id: str | None = Field(default=None, min_length=1)


class Transcript(_Strict):
    id: str
    query: str | None = None
    response: str | None = None
    contexts: list[str | dict[str, Any]] | None = None
    reference: str | None = None
    metadata: dict[str, Any] | None = None
    timings: Timings | None = None
    spans: list[Span] | None = None
    tool_calls: int | list[ToolCall] | None = None
    messages: list[Message] | None = None
    #: the agent's tool calls, one object each (``harness import`` writes them for traces)
    steps: list[StepRecord] | None = None
    #: the tools the agent had: name, description, JSON Schema of the parameters
    tools: list[ToolSpec] | None = None
    #: the task this run attempted; transcripts of one task are repeated runs of it
    task: str | None = Field(default=None, min_length=1)
    #: the calls the agent should have made (harness.agent.match)
    reference_trajectory: list[RefItem] | None = None
    #: the conversation's turns, given already split (a session of traces); excludes ``messages``
    turns: list[TurnRecord] | None = Field(default=None, min_length=1)

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        # Integer ids are common in exported data; bool is an int in Python but never an id.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("id")
    @classmethod
    def _id_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("reference_trajectory", mode="before")
    @classmethod
    def _reference_as_messages(cls, value: Any) -> Any:
        # The message list agentevals takes as its reference: the assistant messages' tool calls,
        # the calls of one message one parallel (any_order) block (docs/reference/trajectories.md).
        return reference_items(value)

    @field_validator("tool_calls")
    @classmethod
    def _count_not_negative(cls, value: Any) -> Any:
        if isinstance(value, int) and value < 0:
            raise ValueError("must be >= 0")
        return value

    @model_validator(mode="after")
    def _one_source_of_steps(self) -> Transcript:
        if self.steps is not None and self.messages is not None and any(m.tool_calls or _has_tool_use(m) for m in self.messages):
            raise ValueError("gives its tool calls twice: in `steps` and in `messages`; keep one")
        if self.turns is not None and (self.messages is not None or self.steps is not None):
            raise ValueError("gives its turns twice: in `turns` and in `messages` or `steps`; keep `turns` (each turn holds its steps)")
        if self.steps is not None and isinstance(self.tool_calls, list):
            raise ValueError("gives its tool calls twice: in `steps` and in `tool_calls`; keep one")
        if self.tools is not None:
            names = [t.name for t in self.tools]
            if len(set(names)) != len(names):
                raise ValueError("tools: a tool is declared twice: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))
        return self

    @model_validator(mode="after")
    def _has_conversation(self) -> Transcript:
        if self.messages is None and self.turns is None and self.query is None and self.response is None:
            raise ValueError("needs `query` and `response`, or a `messages` list")
        if self.messages is not None and not any(m.role == "user" and not _only_tool_results(m) for m in self.messages) and self.query is None:
            raise ValueError("`messages` has no user message to take the query from")
        return self

    def resolved(self) -> Resolved:
        """Fill query, response, contexts and tool-call count from ``messages`` where not given.

        Explicit fields win over what ``messages`` implies; ``timings`` fields win over ``spans``.
        """
        query, response, contexts = self.query, self.response, self._contexts_text()
        steps = self._steps()
        if self.messages is not None:
            if query is None:
                query = next(m.text() for m in self.messages if m.role == "user" and not _only_tool_results(m))
            if response is None:
                response = next((m.text() for m in reversed(self.messages) if m.role == "assistant"), None)
            if contexts is None:
                tool_results = tuple(m.text() for m in self.messages if m.role in ("tool", "function"))
                if not tool_results and steps:  # Anthropic's tool_result blocks
                    tool_results = tuple(s.result for s in steps if s.result is not None)
                contexts = tool_results or None
        elif self.turns is not None:  # first question and last answer, as for ``messages``
            if query is None:
                query = self.turns[0].user
            if response is None:
                response = self.turns[-1].answer
            if contexts is None:
                given = tuple(c for turn in self.turns for c in turn.contexts or ())
                contexts = given or (tuple(s.result for s in steps if s.result is not None) if steps else None) or None
        return Resolved(
            id=self.id,
            query=query,
            response=response,
            contexts=contexts,
            reference=self.reference,
            performance=self._performance(steps),
            steps=steps,
            tools=tuple(self.tools) if self.tools is not None else None,
            task=self.task,
            reference_trajectory=tuple(self.reference_trajectory) if self.reference_trajectory is not None else None,
            agent_model=agent_model(self.metadata),
            conversation=self._given_turns(steps) if self.turns is not None else self.conversation,
        )

    def _given_turns(self, steps: tuple[Step, ...] | None) -> Conversation:
        """``turns`` as a conversation; each turn's steps are its slice of ``steps`` (all turns'
        steps in order, numbered across the conversation)."""
        assert self.turns is not None
        given, at = [], 0
        for index, turn in enumerate(self.turns, 1):
            count = len(turn.steps or ())
            own = tuple(steps[at : at + count]) if steps else ()
            at += count
            contexts = tuple(turn.contexts) if turn.contexts else tuple(s.result for s in own if s.result is not None)
            given.append(Turn(index, turn.user, turn.answer, own, contexts))
        return conversation_from_turns(given)

    # What the rubric inputs read of a record that needs no resolving (``rubrics.inputs.inputs_of``):
    # a record without ``messages`` is one exchange, with no conversation and no turn's history.
    @property
    def conversation(self) -> Conversation | None:
        if self.turns is not None:
            return self._given_turns(self._steps())
        return conversation_from_messages(self.messages) if self.messages is not None else None

    @property
    def history(self) -> None:
        return None

    def _steps(self) -> tuple[Step, ...] | None:
        """The agent's tool calls from whichever source the record has (one home: performance's
        tool-call count and tool time are read from these)."""
        if self.steps is not None:
            return group_by_overlap([record.step(i) for i, record in enumerate(self.steps)])
        if self.turns is not None:
            records = [record for turn in self.turns for record in turn.steps or ()]
            return group_by_overlap([record.step(i) for i, record in enumerate(records)])
        if self.messages is not None:
            return steps_from_messages(self.messages)
        if isinstance(self.tool_calls, list):
            return steps_from_calls(self.tool_calls)
        if self.spans:
            spans = steps_from_spans(self.spans)
            if spans and (self.tool_calls is None or self.tool_calls == len(spans)):
                return spans
        return None

    def _contexts_text(self) -> tuple[str, ...] | None:
        if self.contexts is None:
            return None
        # JSON contexts go to the judge as canonical JSON text, so the same object renders identically.
        return tuple(c if isinstance(c, str) else json.dumps(c, sort_keys=True, ensure_ascii=False) for c in self.contexts)

    def _performance(self, steps: tuple[Step, ...] | None) -> Performance:
        return performance_of(self.spans, self.timings, self.tool_calls, steps)


def performance_of(
    spans: list[Span] | None, timings: Timings | None, tool_calls: int | list[ToolCall] | None, steps: tuple[Step, ...] | None
) -> Performance:
    """A record's performance from its ``spans``, ``timings``, ``tool_calls`` and steps."""
    # (Module constants, not a new Performance() and Timings() per transcript: a run resolves
    # every transcript, and a pydantic model costs microseconds to make.)
    from_spans = performance_from_spans(spans) if spans else _NO_SPANS
    timings = timings or _NO_TIMINGS
    # The count and the tool time come from the steps; an explicit count or tool time wins.
    if isinstance(tool_calls, int):
        count: int | None = tool_calls
    elif steps is not None:
        count = len(steps)
    else:
        count = from_spans.tool_calls
    # A latency given in ``timings`` wins; given as null it is unknown, not taken from the spans
    # (a trace with no API spans says nothing about API time: harness.traces writes api_ms null).
    given = timings.model_fields_set
    tool_ms = timings.tool_ms
    if tool_ms is None and "tool_ms" not in given:
        intervals = tool_intervals(steps) if steps else None
        tool_ms = union_ms(intervals) if intervals is not None else from_spans.tool_ms
    return Performance(
        timings.total_ms if timings.total_ms is not None or "total_ms" in given else from_spans.total_ms,
        timings.llm_ms if timings.llm_ms is not None or "llm_ms" in given else from_spans.llm_ms,
        tool_ms,
        timings.api_ms if timings.api_ms is not None or "api_ms" in given else from_spans.api_ms,
        count,
    )


def reference_items(value: Any) -> Any:
    """A ``reference_trajectory`` as given, or as :func:`reference_from_messages` reads it when it
    is written as messages (any item with a ``role``)."""
    if isinstance(value, list) and any(isinstance(item, dict) and "role" in item for item in value):
        return reference_from_messages(value)
    return value


def reference_from_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """A ``reference_trajectory`` from a chat's messages, as LangChain's agentevals reads its
    reference outputs: each assistant message's tool calls (OpenAI ``tool_calls``, Anthropic
    ``tool_use`` blocks), in order; a message of one call is that call, a message of several is one
    ``any_order`` block of them. Messages without calls (user, tool, a final answer) add nothing.
    A call's arguments are compared as given (a call written without arguments expects ``{}``)."""
    parsed: list[Message] = []
    for index, item in enumerate(messages):
        if not isinstance(item, dict) or "role" not in item:
            raise ValueError(f"item {index}: a reference written as messages holds only messages (each with a `role`)")
        try:
            parsed.append(Message.model_validate(item))
        except ValidationError as exc:
            first = first_problem(exc, whole="message")
            raise ValueError(f"message {index}: {first.field}: {first.problem}") from None
    groups: dict[int | None, list[dict[str, Any]]] = {}
    for step in steps_from_messages(parsed):
        if step.arguments_error is not None:
            raise ValueError(f"tool call {step.index} ({step.name}): arguments are {step.arguments_error}")
        if not step.name:
            raise ValueError(f"tool call {step.index}: has no name")
        arguments = step.arguments if step.arguments is not None else {}
        groups.setdefault(step.group, []).append({"name": step.name, "arguments": arguments})
    return [calls[0] if len(calls) == 1 else {"any_order": calls} for calls in groups.values()]


def agent_model(metadata: dict[str, Any] | None) -> str | None:
    """The agent's model named in a transcript's metadata (trace imports write ``model``)."""
    if not metadata:
        return None
    for key in ("agent_model", "model"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _has_tool_use(message: Message) -> bool:
    return isinstance(message.content, list) and any(p.type == "tool_use" for p in message.content)


def _only_tool_results(message: Message) -> bool:
    """An Anthropic-style user message that only carries tool results (not the user's query)."""
    return isinstance(message.content, list) and bool(message.content) and all(p.type == "tool_result" for p in message.content)


_NO_SPANS = Performance()
_NO_TIMINGS = Timings()
