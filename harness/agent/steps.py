"""A step of an agent: one tool call, with its arguments, result, error, turn and parallel group.

Every input format becomes the same :class:`Step` values (``Resolved.steps``): OpenAI-style
``messages`` (``tool_calls`` on assistant messages, ``tool`` messages for the results),
Anthropic-style content blocks (``tool_use`` in an assistant message, ``tool_result`` in the user
message after it), a transcript's own ``steps`` list (what ``harness import`` writes for traces),
a bare ``tool_calls`` list, and ``spans`` of kind ``tool``. The tool-call count and tool time of
:mod:`harness.transcripts.performance` are read from the same steps.

Vocabulary:

- **turn**: the assistant message (model turn) that made the call, counted from 0;
- **group**: the parallel group: calls made in one assistant message, or whose spans overlap in
  time, share a group; groups are numbered in order from 0;
- **call_id**: the id that links a call and its result (``tool_call_id``, ``tool_use_id``);
- **span_id**: the span of a trace that recorded the call's run (an OTel ``execute_tool`` span,
  an OpenInference TOOL span), when the steps came from one: ``harness export`` puts what is found
  about the step on that span.

A result goes to the call with its id; a result with no id to the oldest call not yet answered. A
result whose id no call has (an orphan), or whose call already has a result (a duplicate: a tool
message repeated, or a second answer to one call), is dropped: the step keeps its first result,
and a duplicate never goes to another call, which would give that call a result it never had.

A step's ``arguments`` are the parsed JSON (``None`` when there were none, or they were not valid
JSON: then ``arguments_error`` says why and ``arguments_raw`` keeps the text as written).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import orjson

from ..jsonlines import MAX_INPUT_DEPTH, decode_json, orjson_reads_as_stdlib


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of an agent."""

    index: int
    name: str
    #: the parsed arguments (usually an object); None when absent or not valid JSON
    arguments: Any = None
    #: the arguments as the agent wrote them, when they came as text
    arguments_raw: str | None = None
    #: why ``arguments_raw`` could not be parsed (None when it could, or there was no text)
    arguments_error: str | None = None
    result: str | None = None
    failed: bool = False
    error: str | None = None
    turn: int | None = None
    group: int | None = None
    call_id: str | None = None
    start_s: float | None = None
    end_s: float | None = None
    #: the id of the trace span of the call's run (hex), when the steps came from a trace
    span_id: str | None = None

    @property
    def duration_ms(self) -> float | None:
        if self.start_s is None or self.end_s is None:
            return None
        return round((self.end_s - self.start_s) * 1000.0, 3)

    def as_dict(self) -> dict[str, Any]:
        """The step as a transcript's ``steps`` entry (what ``harness import`` writes), leaving out
        what is unknown."""
        out: dict[str, Any] = {"name": self.name}
        if self.arguments_raw is not None:  # the text as the agent wrote it: it parses to the same
            out["arguments"] = self.arguments_raw
        elif self.arguments is not None:
            out["arguments"] = self.arguments
        for key in ("result", "error", "turn", "group", "call_id", "span_id"):
            value = getattr(self, key)
            if value is not None:
                out["id" if key == "call_id" else key] = value
        if self.failed:
            out["failed"] = True
        if self.start_s is not None:
            out["start"] = self.start_s
        if self.end_s is not None:
            out["end"] = self.end_s
        return out


_SLOTS = tuple(f.name for f in fields(Step))
assert len(_SLOTS) == 14 and _SLOTS[:11] == (
    "index", "name", "arguments", "arguments_raw", "arguments_error", "result", "failed", "error", "turn", "group", "call_id"
), "_built_step sets the slots in this order"  # fmt: skip
_SETTERS = tuple(getattr(Step, name).__set__ for name in _SLOTS)


def _built_step(index: int, name: str, arguments: Any, raw: str | None, problem: str | None, result: str | None, failed: bool, turn: int, group: int, call_id: str | None) -> Step:  # fmt: skip
    """``Step(index, name, arguments, raw, problem, result, failed, result if failed else None,
    turn, group, call_id)``, the same value, made by setting its slots (what the frozen dataclass's
    ``__init__`` does, through ``object.__setattr__`` and a lookup per field): 2.4 times faster,
    and a builder makes one a tool call (bench/agent_run.py)."""
    step = _new(Step)
    (s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13) = _SETTERS
    s0(step, index)
    s1(step, name)
    s2(step, arguments)
    s3(step, raw)
    s4(step, problem)
    s5(step, result)
    s6(step, failed)
    s7(step, result if failed else None)
    s8(step, turn)
    s9(step, group)
    s10(step, call_id)
    s11(step, None)
    s12(step, None)
    s13(step, None)
    return step


_new = object.__new__


def parse_arguments(value: Any) -> tuple[Any, str | None, str | None]:
    """``(arguments, raw text, parse error)`` of a call's arguments as given: a JSON text (OpenAI
    sends them so) is parsed as untrusted JSON (`harness.jsonlines.decode_json`: bounded nesting,
    orjson where it agrees with ``json``); an object (Anthropic's ``input``) is taken as it is."""
    if value is None:
        return None, None, None
    if isinstance(value, str):
        if not value.strip():
            return {}, value, None
        try:  # bytes take orjson's fast path; text with a lone surrogate cannot be UTF-8, so stays text
            data: bytes | str = value.encode("utf-8")
        except UnicodeEncodeError:
            data = value
        try:  # bounded like every untrusted JSON: nesting past the limit is an error, not a RecursionError
            return decode_json(data, MAX_INPUT_DEPTH), value, None
        except ValueError as exc:
            return None, value, f"not valid JSON ({exc})"
    return value, None, None


def result_text(value: Any) -> str | None:
    """A tool result's text: a string, text parts joined, or other JSON shown as canonical JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [p.get("text") if isinstance(p, Mapping) else getattr(p, "text", None) for p in value]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(t for t in texts if isinstance(t, str))
        value = [p if isinstance(p, Mapping) else p.model_dump() if hasattr(p, "model_dump") else p for p in value]
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _get(obj: Any, key: str) -> Any:
    """A field of a pydantic part with extra keys allowed, or of a plain dict."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    value = getattr(obj, key, None)
    if value is None and getattr(obj, "model_extra", None):
        value = obj.model_extra.get(key)
    return value


def _failed(message: Any) -> bool:
    """Whether a tool message reports a failure: ``is_error`` (Anthropic's flag, also accepted on
    OpenAI-style tool messages) or ``status = "error"`` (LangChain's ToolMessage); the error is then
    the message's text."""
    if not hasattr(message, "__pydantic_extra__") and isinstance(message, Mapping):  # (a model first: the usual case)
        return bool(message.get("is_error")) or message.get("status") == "error"
    flag, status = getattr(message, "is_error", None), getattr(message, "status", None)
    if flag is None or status is None:
        # a model with extra keys allowed (``_get``'s fallback; the attribute, not the slower ``model_extra``)
        extra = getattr(message, "__pydantic_extra__", None)
        if extra:
            flag = extra.get("is_error") if flag is None else flag
            status = extra.get("status") if status is None else status
    return bool(flag) or status == "error"


class _Builder:
    """Collects steps in call order and attaches results by id, else (no id) to the oldest
    unanswered call; orphan and duplicate results are dropped (the module docstring's rule).
    Each step is made once, by :meth:`built`, with its result (not made, then copied with it)."""

    def __init__(self) -> None:
        #: per call: [name, arguments, raw, problem, turn, group, call_id, result, failed]
        self._calls: list[list[Any]] = []
        self._by_id: dict[str, int] = {}
        self._open: list[int] = []  # calls without a result yet, oldest first
        self.turn = -1
        self.groups = 0

    def call(self, name: str, arguments: Any, call_id: str | None, group: int) -> None:
        raw: str | None
        error: str | None
        if type(arguments) is str and len(arguments) <= MAX_INPUT_DEPTH:
            # parse_arguments of the usual case, without its calls: text too short to nest past the
            # bound, read by orjson where it reads as the standard library; anything else, as there
            try:
                data = arguments.encode("utf-8")
                if not orjson_reads_as_stdlib(data):
                    raise ValueError
                parsed, raw, error = orjson.loads(data), arguments, None
            except (UnicodeEncodeError, ValueError):  # (orjson's JSONDecodeError is a ValueError)
                parsed, raw, error = parse_arguments(arguments)
        else:
            parsed, raw, error = parse_arguments(arguments)
        index = len(self._calls)
        self._calls.append([name, parsed, raw, error, self.turn, group, call_id, None, False])
        if call_id is not None:
            self._by_id[call_id] = index
        self._open.append(index)

    def result(self, call_id: str | None, text: str | None, failed: bool) -> bool:
        """Attach a result; False when it is dropped: no call has its id (an orphan), its call
        already has a result (a duplicate), or it has no id and every call is answered."""
        if call_id is not None:
            index = self._by_id.get(call_id)
            if index is None or index not in self._open:
                return False
        elif self._open:
            index = self._open[0]
        else:
            return False
        self._open.remove(index)
        call = self._calls[index]
        call[7], call[8] = text, failed
        return True

    def built(self) -> tuple[Step, ...]:
        make = _built_step
        return tuple(
            [
                make(i, name, parsed, raw, problem, result, failed, turn, group, call_id)
                for i, (name, parsed, raw, problem, turn, group, call_id, result, failed) in enumerate(self._calls)
            ]
        )


def steps_from_messages(messages: Sequence[Any]) -> tuple[Step, ...]:
    """The tool calls of an OpenAI- or Anthropic-style conversation, in the order they were made."""
    b = _Builder()
    for message in messages:
        role = message.role
        content = message.content
        if role == "assistant":
            b.turn += 1
            calls = [
                (
                    c.function.name if c.function is not None else c.name,
                    c.function.arguments if c.function is not None else _get(c, "arguments"),
                    c.id,
                )
                for c in message.tool_calls or ()
            ]
            if isinstance(content, list):
                calls += [(_get(p, "name"), _get(p, "input"), _get(p, "id")) for p in content if p.type == "tool_use"]
            if calls:
                group = b.groups
                b.groups += 1
                for name, arguments, call_id in calls:
                    b.call(name or "", arguments, call_id, group)
        elif role in ("tool", "function"):
            b.result(message.tool_call_id, message.text(), _failed(message))
        if role == "user" and isinstance(content, list):
            for p in content:
                if p.type == "tool_result":
                    b.result(_get(p, "tool_use_id"), result_text(_get(p, "content")), bool(_get(p, "is_error")))
    return b.built()


def steps_from_message_dicts(messages: Iterable[Mapping[str, Any]]) -> tuple[Step, ...]:
    """:func:`steps_from_messages` of OpenAI-style messages read as plain dicts, with text (or
    null) content (``transcripts.fast``: an agent-only run's reading; any other shape is read as
    :class:`~harness.transcripts.models.Message` models). The same builder, so the same steps."""
    b = _Builder()
    for message in messages:
        role = message["role"]
        if role == "assistant":
            b.turn += 1
            calls = message.get("tool_calls")
            if calls:
                group = b.groups
                b.groups += 1
                for c in calls:
                    function = c.get("function")
                    if function is not None:
                        b.call(function["name"] or "", function.get("arguments"), c.get("id"), group)
                    else:
                        b.call(c.get("name") or "", None, c.get("id"), group)
        elif role in ("tool", "function"):
            failed = bool(message.get("is_error")) or message.get("status") == "error"  # ``_failed`` of a dict
            b.result(message.get("tool_call_id"), message.get("content") or "", failed)
    return b.built()


def group_by_overlap(steps: Sequence[Step]) -> tuple[Step, ...]:
    """Give timed steps whose intervals overlap one parallel group (steps already grouped keep
    theirs); untimed ungrouped steps each get a group of their own, in order."""
    out: list[Step] = []
    group = -1
    group_end: float | None = None
    for step in steps:
        if step.group is not None:
            out.append(step)
            continue
        if step.start_s is not None and step.end_s is not None and group_end is not None and step.start_s < group_end:
            group_end = max(group_end, step.end_s)
        else:
            group += 1
            group_end = step.end_s if step.start_s is not None else None
        out.append(replace(step, group=group))
    return tuple(out)


def steps_from_calls(calls: Iterable[Any]) -> tuple[Step, ...]:
    """Steps of a bare ``tool_calls`` list (no results): one group, as one assistant message."""
    b = _Builder()
    b.turn = 0
    for call in calls:
        function = getattr(call, "function", None)
        name = function.name if function is not None else (call.name or "")
        b.call(name, function.arguments if function is not None else _get(call, "arguments"), call.id, 0)
    return b.built()


def steps_from_spans(spans: Sequence[Any]) -> tuple[Step, ...]:
    """Steps of ``spans`` of kind ``tool``, in start order, grouped by overlap."""
    tools = sorted((s for s in spans if s.kind == "tool"), key=lambda s: (s.start_s, s.end_s))
    steps = [Step(i, s.name or "", start_s=s.start_s, end_s=s.end_s) for i, s in enumerate(tools)]
    return group_by_overlap(steps)


def tool_intervals(steps: Sequence[Step]) -> list[tuple[float, float]] | None:
    """The steps' ``(start_s, end_s)``, or None unless every step is timed."""
    intervals = [(s.start_s, s.end_s) for s in steps if s.start_s is not None and s.end_s is not None]
    return intervals if steps and len(intervals) == len(steps) else None
