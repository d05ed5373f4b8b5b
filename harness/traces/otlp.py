"""OTLP JSON trace files, read into plain :class:`TraceSpan` values grouped by trace.

The file is what the OpenTelemetry SDK's JSON file exporter or the Collector's ``file`` exporter
writes: one ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) per line, or one such
document spanning the file, indented or not (read by :func:`~harness.transcripts.raw.iter_json_values`). Ids are hex, timestamps are nanosecond integers (often as strings),
attributes are ``[{"key": ..., "value": {"stringValue": ...}}]`` (OTLP/JSON, proto3 JSON mapping).

The spans of one trace may arrive on many lines (one per export batch), so spans are grouped per
trace before a trace is handed on; a trace costs its spans' memory, the file is read line by line.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import TranscriptError
from .records import Extracted

_SCALARS = ("stringValue", "boolValue", "intValue", "doubleValue")
_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_s: float
    attributes: dict[str, Any]


@dataclass(slots=True)
class TraceSpan:
    """One span, its attributes flattened to ``{key: python value}``."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_s: float
    end_s: float
    attributes: dict[str, Any]
    events: list[SpanEvent] = field(default_factory=list)
    line: int = 0
    #: ``status.code``: 0 unset, 1 ok, 2 error
    status: int = 0
    status_message: str | None = None
    #: values a reader derives from the span more than once (decoded message lists), by name
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def failure(self) -> str | None:
        """The error of a span that failed, None when it did not. A span failed when its status
        is ERROR, when it carries ``error.type`` (OTel's attribute for a failed operation), or
        when its status is unset and it recorded an ``exception`` event. The error is the
        exception's message, else the status message, else ``error.type``, else "error"."""
        exceptions = [e for e in self.events if e.name == "exception"]
        error_type = self.attributes.get("error.type")
        if not (self.status == 2 or error_type is not None or (self.status == 0 and exceptions)):
            return None
        messages = [e.attributes.get("exception.message") or e.attributes.get("exception.type") for e in exceptions]
        found = next((m for m in messages if isinstance(m, str) and m), None)
        return found or self.status_message or (str(error_type) if error_type is not None else None) or "error"


@dataclass(slots=True)
class Trace:
    trace_id: str
    spans: list[TraceSpan]

    def children(self, span_id: str) -> list[TraceSpan]:
        return [s for s in self.spans if s.parent_id == span_id]

    def below(self, tops: list[TraceSpan]) -> set[str]:
        """The ids of every span under one of ``tops`` (not the tops themselves)."""
        children: dict[str, list[str]] = {}
        for s in self.spans:
            if s.parent_id:
                children.setdefault(s.parent_id, []).append(s.span_id)
        out: set[str] = set()
        todo = [c for top in tops for c in children.get(top.span_id, [])]
        while todo:
            span_id = todo.pop()
            if span_id not in out:
                out.add(span_id)
                todo.extend(children.get(span_id, []))
        return out

    def descendants(self, root: TraceSpan) -> list[TraceSpan]:
        """``root`` and every span under it, in start order."""
        out, todo = [], [root]
        while todo:
            span = todo.pop()
            out.append(span)
            todo.extend(self.children(span.span_id))
        return sorted(out, key=lambda s: (s.start_s, s.end_s))


def any_value(value: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as a Python value (``intValue`` is a JSON string in proto3 JSON)."""
    for key in _SCALARS:
        if key in value:
            raw = value[key]
            return int(raw) if key == "intValue" else raw
    if "arrayValue" in value:
        return [any_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return attributes(value["kvlistValue"].get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["key"]: any_value(item.get("value", {})) for item in items}


def _hex_id(raw: str | None, size: int) -> str | None:
    """OTLP/JSON ids are hex; proto3-JSON dumps (``MessageToJson``) carry base64 instead."""
    if not raw:
        return None
    if len(raw) == size * 2 and _HEX.fullmatch(raw):
        return raw.lower()
    return base64.b64decode(raw).hex()


def _seconds(nanos: str | int | None) -> float:
    return int(nanos or 0) / 1e9


#: ``status.code`` as proto3 JSON writes it (the enum's name) or as a number
_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2, 0: 0, 1: 1, 2: 2}


def _status(raw: Any) -> tuple[int, str | None]:
    if not isinstance(raw, dict):
        return 0, None
    code = raw.get("code", 0)
    message = raw.get("message")
    return _STATUS.get(int(code) if isinstance(code, str) and code.isdigit() else code, 0), (
        message if isinstance(message, str) and message else None
    )


def _span(raw: dict[str, Any], line: int) -> TraceSpan:
    trace_id = _hex_id(raw.get("traceId"), 16)
    span_id = _hex_id(raw.get("spanId"), 8)
    if not trace_id or not span_id:
        raise KeyError("traceId" if not trace_id else "spanId")
    status = _status(raw.get("status"))
    return TraceSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_hex_id(raw.get("parentSpanId"), 8),
        name=raw.get("name", ""),
        start_s=_seconds(raw.get("startTimeUnixNano")),
        end_s=_seconds(raw.get("endTimeUnixNano")),
        attributes=attributes(raw.get("attributes", [])),
        events=[SpanEvent(e.get("name", ""), _seconds(e.get("timeUnixNano")), attributes(e.get("attributes", []))) for e in raw.get("events", [])],
        line=line,
        status=status[0],
        status_message=status[1],
    )


def read_traces(path: Path) -> Iterator[Trace]:
    """Every trace of an OTLP JSON file, in the order its first span appears."""
    from ..transcripts.raw import iter_json_values

    traces: dict[str, Trace] = {}
    for line, doc in iter_json_values(path):
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            raise TranscriptError(str(path), line, "resourceSpans", "required field is missing (not an OTLP JSON trace export)")
        for r_index, resource in enumerate(doc["resourceSpans"]):
            for s_index, scope in enumerate(resource.get("scopeSpans", [])):
                for index, raw in enumerate(scope.get("spans", [])):
                    where = f"resourceSpans.{r_index}.scopeSpans.{s_index}.spans.{index}"
                    try:
                        span = _span(raw, line)
                    except KeyError as exc:
                        raise TranscriptError(str(path), line, f"{where}.{exc.args[0]}", "required field is missing") from None
                    except (TypeError, ValueError) as exc:
                        raise TranscriptError(str(path), line, where, f"not an OTLP span ({exc})") from None
                    traces.setdefault(span.trace_id, Trace(span.trace_id, [])).spans.append(span)
    # each trace let go once yielded: what the import has left to hold (and the garbage
    # collector to scan, again and again, while the rest is converted) shrinks as it goes
    for trace_id in list(traces):
        yield traces.pop(trace_id)


#: The attributes naming a trace's conversation: OTel GenAI's, then OpenInference's.
SESSION_ATTRIBUTES = ("gen_ai.conversation.id", "session.id")


def session_of(root: TraceSpan, spans: Sequence[TraceSpan], trace: Trace) -> str | None:
    """The conversation id of a transcript: on its root span, else on the first of its spans (by
    start) that carries one, else on any span of its trace (frameworks set it where they can)."""
    for group in ((root,), sorted(spans, key=lambda s: (s.start_s, s.span_id)), sorted(trace.spans, key=lambda s: (s.start_s, s.span_id))):
        for s in group:
            for key in SESSION_ATTRIBUTES:
                value = s.attributes.get(key)
                if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                    return str(value)
    return None


def span_transcript(
    trace: Trace,
    root: TraceSpan,
    transcript_id: str,
    spans: list[TraceSpan],
    *,
    source_format: str,
    query: str | None,
    response: str | None,
    contexts: list[str],
    timed: list[dict[str, Any]],
    steps: Sequence[Step],
    tools: list[dict[str, Any]],
    model: str | None,
    usage: dict[str, int],
    query_sources: str,
    response_sources: str,
) -> Extracted:
    # the conversation: on the root span by the conventions, on any span of the unit in practice
    # (an instrumentor's session context marks the spans opened inside it)
    """The transcript of ``root`` as an OTLP reader (OpenTelemetry GenAI, OpenInference) found it in
    ``spans``: named after the trace, ``total_ms`` from the first span's start to the last one's
    end, the metadata naming the source format, trace and root span, and the model and token usage
    when known; ``timed`` are the transcript's spans, ``steps`` its tool calls and ``tools`` the
    tools declared."""
    meta: dict[str, Any] = {"source_format": source_format, "trace_id": trace.trace_id, "span_id": root.span_id, "span_name": root.name}
    if model:
        meta["model"] = model
    if usage:
        meta["usage"] = usage
    return Extracted(
        session=session_of(root, spans, trace),
        start_s=min(s.start_s for s in spans),
        span_id=root.span_id,
        line=root.line,
        label=f"trace {transcript_id}",
        id=transcript_id,
        query=query,
        response=response,
        contexts=contexts,
        spans=timed,
        total_ms=(max(s.end_s for s in spans) - min(s.start_s for s in spans)) * 1000.0,
        steps=[step.as_dict() for step in steps],
        tools=tools,
        metadata=meta,
        query_sources=query_sources,
        response_sources=response_sources,
    )
