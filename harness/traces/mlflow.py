"""MLflow traces: ``Trace.to_json()`` documents (what ``mlflow.get_trace(id).to_json()`` writes, and
``harness pull mlflow://...``), one per line or a JSON array; one transcript per trace.

A trace is ``{"info": {"trace_id": "tr-...", ...}, "data": {"spans": [...]}}``; a span has base64
``trace_id``/``span_id``/``parent_span_id``, nanosecond ``start_time_unix_nano``/``end_time_unix_nano``
and ``attributes`` whose values are JSON text: ``mlflow.spanType`` (AGENT, CHAIN, LLM, CHAT_MODEL,
TOOL, RETRIEVER, ...), ``mlflow.spanInputs``, ``mlflow.spanOutputs``, ``mlflow.llm.model``,
``mlflow.chat.tokenUsage``.

The root span's (no parent's) inputs and outputs give the query and response (a known key such as
``question``/``answer``, the only string, or messages); else the first and last LLM/CHAT_MODEL
spans' messages (OpenAI-style requests and replies). TOOL outputs and RETRIEVER documents become
contexts; LLM/CHAT_MODEL, TOOL and RETRIEVER/EMBEDDING/RERANKER spans become llm, tool and api
spans.

Steps (:mod:`.steps`): the LLM/CHAT_MODEL spans (not those under a TOOL span) are the turns, the
tool calls of their replies the calls asked for and the tool messages of their input the results
they carried; each TOOL span is a run of a tool (its inputs the arguments, its outputs the result,
an ERROR status a failure). The tools the model spans' inputs declare become the transcript's tools. The metadata keeps the MLflow trace id and the root span's hex id, where verdicts are written
back (``harness push``: MLflow assessments).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import TranscriptError
from ..jsonlines import MAX_INPUT_DEPTH, decode_json
from .langsmith import io_text, output_message, requested_calls, tool_results
from .records import Extracted, first, span, text_of, unique
from .steps import Executed, Turn, assemble, declared, error_text, tool_spec

_KINDS = {"LLM": "llm", "CHAT_MODEL": "llm", "TOOL": "tool", "RETRIEVER": "api", "EMBEDDING": "api", "RERANKER": "api"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_QUERY_SOURCES = "the root span's inputs and the LLM/CHAT_MODEL spans' input messages"
_RESPONSE_SOURCES = "the root span's outputs and the LLM/CHAT_MODEL spans' replies"


@dataclass(slots=True)
class MlflowSpan:
    span_id: str
    parent_id: str | None
    name: str
    type: str
    start_s: float
    end_s: float
    attributes: dict[str, Any]
    error: str | None = None

    @property
    def inputs(self) -> Any:
        return self.attributes.get("mlflow.spanInputs")

    @property
    def outputs(self) -> Any:
        return self.attributes.get("mlflow.spanOutputs")


def _hex(raw: Any, size: int) -> str | None:
    """A span id as hex: MLflow writes base64 of the OpenTelemetry bytes (hex is taken as is)."""
    if not isinstance(raw, str) or not raw:
        return None
    if len(raw) == size * 2 and _HEX.fullmatch(raw):
        return raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw


def _value(text: Any) -> Any:
    """An attribute's value: MLflow keeps each as JSON text."""
    if not isinstance(text, str):
        return text
    try:  # bounded like every input's JSON: a value nested past the limit stays text
        return decode_json(text, MAX_INPUT_DEPTH)
    except ValueError:
        return text


def _span(raw: Any, where: str, path: Path, line: int) -> MlflowSpan:
    if not isinstance(raw, dict):
        raise TranscriptError(str(path), line, where, f"not an MLflow span (a {type(raw).__name__})")
    span_id = _hex(raw.get("span_id"), 8)
    if span_id is None:
        raise TranscriptError(str(path), line, f"{where}.span_id", "required field is missing")
    attrs = raw.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise TranscriptError(str(path), line, f"{where}.attributes", f"expected an object, got {type(attrs).__name__}")
    attributes = {key: _value(value) for key, value in attrs.items()}
    try:
        start = int(raw.get("start_time_unix_nano") or 0) / 1e9
        end = int(raw.get("end_time_unix_nano") or raw.get("start_time_unix_nano") or 0) / 1e9
    except (TypeError, ValueError):
        raise TranscriptError(str(path), line, f"{where}.start_time_unix_nano", "not a time in nanoseconds") from None
    span_type = attributes.get("mlflow.spanType")
    status = raw.get("status")
    failed = isinstance(status, dict) and str(status.get("code") or "").upper() in ("ERROR", "STATUS_CODE_ERROR", "2")
    return MlflowSpan(
        span_id=span_id,
        parent_id=_hex(raw.get("parent_span_id"), 8),
        name=str(raw.get("name") or ""),
        type=span_type.upper() if isinstance(span_type, str) else "",
        start_s=start,
        end_s=end,
        attributes=attributes,
        error=(error_text(status.get("message")) or "failed") if failed and isinstance(status, dict) else None,
    )


def _run(s: MlflowSpan) -> Executed:
    inputs = s.inputs
    return Executed(
        name=s.name or "tool",
        arguments=inputs.get("input") if isinstance(inputs, dict) and list(inputs) == ["input"] else inputs,
        result=text_of(s.outputs),
        failed=s.error is not None,
        error=s.error,
        start_s=s.start_s,
        end_s=s.end_s,
        span_id=s.span_id,
    )


def steps(spans: list[MlflowSpan]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of one trace's spans, in start order."""
    by_id = {s.span_id: s for s in spans}
    tools = [s for s in spans if s.type == "TOOL"]
    tool_ids = {s.span_id for s in tools}

    def under_tool(s: MlflowSpan) -> bool:
        seen: set[str] = set()
        parent = by_id.get(s.parent_id) if s.parent_id else None
        while parent is not None and parent.span_id not in seen:
            if parent.span_id in tool_ids:
                return True
            seen.add(parent.span_id)
            parent = by_id.get(parent.parent_id) if parent.parent_id else None
        return False

    llm = [s for s in spans if s.type in ("LLM", "CHAT_MODEL") and not under_tool(s)]
    turns = [
        Turn(
            s.start_s,
            s.end_s,
            requested_calls(output_message(s.outputs)),
            tool_results(s.inputs.get("messages") if isinstance(s.inputs, dict) else None),
        )
        for s in llm
    ]
    specs = [tool_spec(t) for s in llm if isinstance(s.inputs, dict) and isinstance(s.inputs.get("tools"), list) for t in s.inputs["tools"]]
    return assemble(turns, [_run(s) for s in tools]), declared(specs)


def _usage(llm: list[MlflowSpan]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for s in llm:
        usage = s.attributes.get("mlflow.chat.tokenUsage")
        if not isinstance(usage, dict):
            reply = s.outputs.get("usage") if isinstance(s.outputs, dict) else None
            usage = {"input_tokens": reply.get("prompt_tokens"), "output_tokens": reply.get("completion_tokens")} if isinstance(reply, dict) else {}
        for key in ("input_tokens", "output_tokens"):
            if isinstance(usage.get(key), int):
                totals[key] = totals.get(key, 0) + usage[key]
    return totals


def _model(s: MlflowSpan) -> str | None:
    model = s.attributes.get("mlflow.llm.model")
    if not isinstance(model, str) and isinstance(s.inputs, dict):
        model = s.inputs.get("model")
    return model if isinstance(model, str) and model else None


def _contexts(spans: list[MlflowSpan]) -> list[str]:
    out: list[str | None] = []
    for s in spans:
        if s.type == "TOOL":
            out.append(text_of(s.outputs))
        elif s.type == "RETRIEVER" and isinstance(s.outputs, list):
            out += [text_of(d.get("page_content")) for d in s.outputs if isinstance(d, dict)]
    return unique(out)


def trace_transcript(doc: dict[str, Any], path: Path, line: int) -> Extracted:
    info: dict[str, Any] = doc["info"] if isinstance(doc.get("info"), dict) else {}
    data: dict[str, Any] = doc["data"] if isinstance(doc.get("data"), dict) else {}
    raw_spans = data.get("spans")
    if not isinstance(raw_spans, list):
        raise TranscriptError(str(path), line, "data.spans", "required field is missing (not an MLflow trace)")
    spans = sorted((_span(s, f"data.spans.{i}", path, line) for i, s in enumerate(raw_spans)), key=lambda s: (s.start_s, s.end_s))
    trace_id = info.get("trace_id") or info.get("request_id") or (spans[0].attributes.get("mlflow.traceRequestId") if spans else None)
    if not isinstance(trace_id, str) or not trace_id:
        raise TranscriptError(str(path), line, "info.trace_id", "required field is missing (not an MLflow trace)")
    ids = {s.span_id for s in spans}
    root = next((s for s in spans if s.parent_id not in ids), None)
    llm = [s for s in spans if s.type in ("LLM", "CHAT_MODEL")]
    found, declared_tools = steps(spans)
    meta: dict[str, Any] = {"source_format": "mlflow", "trace_id": trace_id}
    if root is not None:
        meta |= {"span_id": root.span_id, "span_name": root.name}
    if models := unique(_model(s) for s in llm):
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = models
    if usage := _usage(llm):
        meta["usage"] = usage
    return Extracted(
        line=line,
        label=f"trace {trace_id}",
        id=trace_id,
        query=first([io_text(root.inputs if root else None, "user"), *(io_text(s.inputs, "user") for s in llm)]),
        response=first([io_text(root.outputs if root else None, "assistant"), *(io_text(s.outputs, "assistant") for s in reversed(llm))]),
        contexts=_contexts(spans),
        spans=[span(kind, s.name, s.start_s, s.end_s) for s in spans if (kind := _KINDS.get(s.type))],
        total_ms=(root.end_s - root.start_s) * 1000.0 if root is not None else None,
        steps=[step.as_dict() for step in found],
        tools=declared_tools,
        metadata=meta,
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
        session_id=_session(info),
    )


#: where MLflow records a trace's session: the trace metadata key ``mlflow.trace.session`` (or a tag)
SESSION_KEY = "mlflow.trace.session"


def _session(info: dict[str, Any]) -> str | None:
    for key in ("trace_metadata", "request_metadata", "tags"):
        holder = info.get(key)
        value = holder.get(SESSION_KEY) if isinstance(holder, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def read_traces(path: Path) -> Iterator[Extracted]:
    from ..transcripts.raw import iter_json_values

    for line, doc in iter_json_values(path):
        if not isinstance(doc, dict) or "data" not in doc:
            raise TranscriptError(str(path), line, "data", "required field is missing (not an MLflow trace: Trace.to_json())")
        yield trace_transcript(doc, path, line)
