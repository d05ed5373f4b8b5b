"""Langfuse exports: observations grouped into traces by ``traceId``, one transcript per trace.

Accepted, each as one JSON document (indented or not), a JSON array or JSON lines:

- the public API's observation listings (``{"data": [Observation...], "meta": ...}``, v1 and v2);
- a trace with its observations: ``GET /api/public/traces/{id}`` (``TraceWithFullDetails``), and
  the UI's "Download JSON" of a trace (``{"trace": {...}, "observations": [...]}``);
- observations or such traces one by one.

Observations have ``id``, ``traceId``, ``parentObservationId``, ``type`` (GENERATION, SPAN, AGENT,
TOOL, RETRIEVER, ...), ``name``, ``startTime``, ``endTime`` (ISO 8601, or Unix epoch numbers in
s, ms, µs or ns told apart by magnitude), ``input``, ``output``, ``model``, ``usageDetails``. A
field of the wrong type is a bad record named by file, line and field, never a crash.

The trace object's input and output, else the root observation's (no parent), give the query and
response; else the first and last GENERATION's messages. TOOL and RETRIEVER outputs become
contexts; GENERATION, TOOL and RETRIEVER/EMBEDDING observations become llm, tool and api spans; the
generations' models are kept. Langfuse's ids are OpenTelemetry ids, so the trace and root
observation ids are kept for ``harness export --format otel``.

Steps (:mod:`.steps`): the GENERATIONs (not those under a TOOL) are the turns, the tool calls of
their output message the calls asked for and the tool messages of their input the results; each
TOOL observation is a tool's run: its ``name``, ``input`` as the arguments (``@observe``'s
``{"args": [], "kwargs": {...}}`` read as the keyword arguments), ``output`` as the result, failed
when its ``level`` is ``ERROR`` (the error its ``statusMessage``). The declared tools come from
the GENERATIONs' ``input.tools``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import TranscriptError
from .langsmith import flat_messages, io_text, output_message, requested_calls, tool_results
from .records import Extracted, first, span, text_of, unique
from .steps import Executed, Turn, assemble, declared, tool_spec

_KINDS = {"GENERATION": "llm", "TOOL": "tool", "RETRIEVER": "api", "EMBEDDING": "api"}
_QUERY_SOURCES = "the trace's input, the root observation's input and the GENERATION inputs"
_RESPONSE_SOURCES = "the trace's output, the root observation's output and the GENERATION outputs"
#: Epoch numbers below this are seconds (until the year 5138); each factor of 1000 above, a finer unit.
_EPOCH_SECONDS_BELOW = 1e11


@dataclass(slots=True)
class Observation:
    """One observation, its fields checked and its times in seconds."""

    id: str
    trace_id: str | None
    parent: str | None
    type: str
    name: str | None
    start: float | None
    end: float | None
    input: Any
    output: Any
    model: str | None
    usage: dict[str, float]
    #: DEBUG, DEFAULT, WARNING or ERROR
    level: str | None = None
    status_message: str | None = None


class _Where:
    """Names a record in messages: the file, its line and the record's path in the document."""

    def __init__(self, path: Path, line: int) -> None:
        self.path, self.line = path, line

    def error(self, field: str, problem: str) -> TranscriptError:
        return TranscriptError(str(self.path), self.line, field, problem)


def _seconds(value: Any, where: _Where, field: str) -> float | None:
    """An ISO 8601 time (naive means UTC) or a Unix epoch number, in seconds; None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise where.error(field, f"not a time (a {type(value).__name__}; expected an ISO 8601 string or a Unix epoch number)")
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise where.error(field, f"not an ISO 8601 time ({value[:40]!r})") from None
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise where.error(field, f"not a time ({value!r}: an epoch number must be finite and not negative)")
    while seconds >= _EPOCH_SECONDS_BELOW:  # ms, µs, ns
        seconds /= 1000.0
    return seconds


def _optional_str(item: dict[str, Any], key: str, where: _Where, field: str) -> str | None:
    value = item.get(key)
    if value is None or isinstance(value, str):
        return value
    raise where.error(_at(field, key), f"expected a string, got {type(value).__name__}")


def _observation(item: Any, where: _Where, field: str) -> Observation:
    if not isinstance(item, dict):
        hint = " (a trace listing holds observation ids only: export the trace itself)" if isinstance(item, str) else ""
        raise where.error(field or "<record>", f"not a Langfuse observation (a {type(item).__name__}, expected an object){hint}")
    raw_id = item.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == "":
        raise where.error(_at(field, "id"), "required field is missing (not a Langfuse observation or trace)")
    usage = item.get("usageDetails") or item.get("usage") or {}
    if not isinstance(usage, dict):
        raise where.error(_at(field, "usageDetails"), f"expected an object, got {type(usage).__name__}")
    return Observation(
        id=str(raw_id),
        trace_id=_optional_str(item, "traceId", where, field),
        parent=_optional_str(item, "parentObservationId", where, field),
        type=_optional_str(item, "type", where, field) or "",
        name=_optional_str(item, "name", where, field),
        start=_seconds(item.get("startTime"), where, _at(field, "startTime")),
        end=_seconds(item.get("endTime"), where, _at(field, "endTime")),
        input=item.get("input"),
        output=item.get("output"),
        model=_optional_str(item, "model", where, field),
        # usage is {unit: count}; the older "usage" also carries {"unit": "TOKENS"}, not a count
        usage={k: v for k, v in usage.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)},
        level=_optional_str(item, "level", where, field),
        status_message=_optional_str(item, "statusMessage", where, field),
    )


def _text(value: Any, role: str) -> str | None:
    """Observation input/output: text, ``@observe``'s ``{"args", "kwargs"}``, a message or messages."""
    if isinstance(value, list):
        return io_text({"messages": value}, role)
    if isinstance(value, dict):
        args = value.get("args")
        if isinstance(args, list) and len(args) == 1 and isinstance(args[0], str):
            return args[0]
        if value.get("role") == role or (role == "assistant" and value.get("role") is None and "content" in value):
            return text_of(value.get("content"))
    return io_text(value, role)


def _usage(generations: list[Observation]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for key, names in (("input_tokens", ("input", "prompt_tokens")), ("output_tokens", ("output", "completion_tokens"))):
        counts = [next((g.usage[n] for n in names if n in g.usage), None) for g in generations]
        if any(c is not None for c in counts):
            totals[key] = int(sum(c for c in counts if c is not None))
    return totals


def _arguments(value: Any) -> Any:
    """A TOOL's input as arguments: ``@observe`` records ``{"args": [...], "kwargs": {...}}``."""
    if isinstance(value, dict) and set(value) == {"args", "kwargs"} and isinstance(value["kwargs"], dict) and value["args"] in ([], None):
        return value["kwargs"]
    return value


def _generation_output(value: Any) -> dict[str, Any]:
    if isinstance(value, list):
        found = flat_messages(value)
        return found[-1] if found else {}
    return output_message(value) or (value if isinstance(value, dict) else {})


def _generation_input_messages(value: Any) -> Any:
    return value.get("messages") if isinstance(value, dict) else value


def steps(ordered: list[Observation]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of one trace's observations, in start order."""
    tools = [o for o in ordered if o.type == "TOOL"]
    tool_ids = {o.id for o in tools}
    by_id = {o.id: o for o in ordered}

    def under_tool(o: Observation) -> bool:
        parent = by_id.get(o.parent or "")
        while parent is not None:
            if parent.id in tool_ids:
                return True
            parent = by_id.get(parent.parent or "")
        return False

    generations = [o for o in ordered if o.type == "GENERATION" and not under_tool(o)]
    turns = [
        Turn(g.start, g.end, requested_calls(_generation_output(g.output)), tool_results(_generation_input_messages(g.input))) for g in generations
    ]
    runs = []
    for o in tools:
        failed = (o.level or "").upper() == "ERROR"
        result = text_of(o.output)
        runs.append(
            Executed(
                name=o.name or "tool",
                arguments=_arguments(o.input),
                result=result,
                failed=failed,
                error=(o.status_message or result or "error") if failed else None,
                start_s=o.start,
                end_s=o.end,
            )
        )
    specs = [tool_spec(t) for g in generations if isinstance(g.input, dict) and isinstance(g.input.get("tools"), list) for t in g.input["tools"]]
    return assemble(turns, runs), declared(specs)


def trace_transcript(trace_id: str, line: int, observations: list[Observation], trace: dict[str, Any] | None) -> Extracted:
    ordered = sorted(observations, key=lambda o: (o.start is None, o.start or 0.0))
    ids = {o.id for o in observations}
    root = next((o for o in ordered if o.parent not in ids), None)
    generations = [o for o in ordered if o.type == "GENERATION"]
    timed = []
    for o in ordered:
        if (kind := _KINDS.get(o.type)) and o.start is not None and o.end is not None:
            timed.append(span(kind, o.name or kind, o.start, o.end))
    meta: dict[str, Any] = {"source_format": "langfuse", "trace_id": trace_id}
    if root is not None:
        meta |= {"span_id": root.id, "span_name": root.name}
    models = unique(g.model for g in generations)
    if models:
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = models
    if usage := _usage(generations):
        meta["usage"] = usage
    found, tools = steps(ordered)
    top_input = trace.get("input") if trace else None
    top_output = trace.get("output") if trace else None
    return Extracted(
        line=line,
        label=f"trace {trace_id}",
        id=trace_id,
        query=first([_text(top_input, "user"), _text(root.input if root else None, "user"), *(_text(g.input, "user") for g in generations)]),
        response=first(
            [
                _text(top_output, "assistant"),
                _text(root.output if root else None, "assistant"),
                *(_text(g.output, "assistant") for g in reversed(generations)),
            ]
        ),
        contexts=unique(text_of(o.output) for o in ordered if o.type in ("TOOL", "RETRIEVER")),
        spans=timed,
        total_ms=(root.end - root.start) * 1000.0 if root and root.start is not None and root.end is not None else None,
        steps=[step.as_dict() for step in found],
        tools=tools,
        metadata=meta,
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
        session_id=_session(trace),
    )


def _session(trace: dict[str, Any] | None) -> str | None:
    """The trace's ``sessionId`` (Langfuse groups a conversation's traces by it)."""
    value = trace.get("sessionId") if trace else None
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and str(value) else None


_Groups = dict[str, tuple[int, list[Observation], dict[str, Any] | None]]


def _at(field: str, key: str | int) -> str:
    """The path of ``key`` inside the record at ``field`` ("" is the line's record itself)."""
    return f"{field}.{key}" if field else str(key)


def _add(groups: _Groups, item: Any, where: _Where, field: str = "") -> None:
    """File ``item`` (an observation listing, a trace with observations, or an observation) by trace."""
    if isinstance(item, dict) and isinstance(item.get("data"), list):
        for index, entry in enumerate(item["data"]):
            _add(groups, entry, where, _at(field, f"data.{index}"))
        return
    if isinstance(item, dict) and isinstance(item.get("trace"), dict) and isinstance(item.get("observations"), list):
        item = {**item["trace"], "observations": item["observations"]}  # the UI's "Download JSON"
    if isinstance(item, dict) and isinstance(item.get("observations"), list):  # a trace with its observations
        raw_id = item.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == "":
            raise where.error(_at(field, "id"), "required field is missing (a Langfuse trace needs its id)")
        line, observations, trace = groups.get(str(raw_id), (where.line, [], None))
        observations.extend(_observation(o, where, _at(field, f"observations.{i}")) for i, o in enumerate(item["observations"]))
        groups[str(raw_id)] = (line, observations, trace or item)
        return
    observation = _observation(item, where, field)
    groups.setdefault(observation.trace_id or observation.id, (where.line, [], None))[1].append(observation)


def read_traces(path: Path) -> Iterator[Extracted]:
    from ..transcripts.raw import iter_json_values

    groups: _Groups = {}
    for line, item in iter_json_values(path):
        _add(groups, item, _Where(path, line))
    for trace_id, (line, observations, trace) in groups.items():
        yield trace_transcript(trace_id, line, observations, trace)
