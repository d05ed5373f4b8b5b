"""Langfuse exports: observations grouped into traces by ``traceId``, one transcript per trace.

Accepted: the public API's observations response (``{"data": [ObservationV2...], "meta": ...}``),
a JSON array or JSONL of observations, or trace objects carrying their ``observations`` (the
trace export of the UI and the v1 API). Observations have ``id``, ``traceId``,
``parentObservationId``, ``type`` (GENERATION, SPAN, AGENT, TOOL, RETRIEVER, ...), ``name``,
``startTime``, ``endTime``, ``input``, ``output``, ``model``, ``usageDetails``.

The root observation (no parent) gives the query and response; else the first and last
GENERATION's messages. TOOL and RETRIEVER outputs become contexts; GENERATION, TOOL and
RETRIEVER/EMBEDDING observations become llm, tool and api spans. Langfuse's ids are OpenTelemetry
ids, so the trace and root observation ids are kept for ``harness export --format otel``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import TranscriptError
from .langsmith import io_text
from .records import Extracted, first, span, text_of, unique

_KINDS = {"GENERATION": "llm", "TOOL": "tool", "RETRIEVER": "api", "EMBEDDING": "api"}
_QUERY_SOURCES = "the root observation's input and the GENERATION inputs"
_RESPONSE_SOURCES = "the root observation's output and the GENERATION outputs"


def _items(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for each observation or trace object in the file."""
    from ..transcripts.raw import iter_json_records

    with path.open("rb") as fh:
        head = fh.read(1 << 12).lstrip()
    if head.startswith(b"{") and b'"data"' in head:
        try:
            doc = json.loads(path.read_bytes())
        except json.JSONDecodeError as exc:
            raise TranscriptError(str(path), exc.lineno, "<json>", f"invalid JSON ({exc.msg})") from None
        if isinstance(doc, dict) and isinstance(doc.get("data"), list):
            for index, item in enumerate(doc["data"]):
                yield 1, _checked(path, 1, item, f"data.{index}")
            return
    for raw in iter_json_records(Path(path)):
        try:
            item = json.loads(raw.text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TranscriptError(str(path), raw.line, "<json>", f"invalid JSON ({exc})") from None
        yield raw.line, _checked(path, raw.line, item, "<record>")


def _checked(path: Path, line: int, item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or "id" not in item:
        raise TranscriptError(
            str(path), line, f"{where}.id" if where != "<record>" else "id", "required field is missing (not a Langfuse observation or trace)"
        )
    return item


def _seconds(stamp: Any) -> float | None:
    from datetime import datetime

    if not isinstance(stamp, str):
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


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


def trace_transcript(trace_id: str, line: int, observations: list[dict[str, Any]], trace: dict[str, Any] | None) -> Extracted:
    ordered = sorted(observations, key=lambda o: o.get("startTime") or "")
    ids = {o["id"] for o in observations}
    root = next((o for o in ordered if o.get("parentObservationId") not in ids), None)
    generations = [o for o in ordered if o.get("type") == "GENERATION"]
    top = trace or root or {}
    timed = []
    for o in ordered:
        start, end = _seconds(o.get("startTime")), _seconds(o.get("endTime"))
        if (kind := _KINDS.get(o.get("type", ""))) and start is not None and end is not None:
            timed.append(span(kind, o.get("name") or kind, start, end))
    meta: dict[str, Any] = {"source_format": "langfuse", "trace_id": trace_id}
    if root is not None:
        meta |= {"span_id": root["id"], "span_name": root.get("name")}
    usage = [o.get("usageDetails") or {} for o in generations]
    if any(usage):
        meta["usage"] = {
            "input_tokens": sum(u.get("input", u.get("prompt_tokens", 0)) for u in usage),
            "output_tokens": sum(u.get("output", u.get("completion_tokens", 0)) for u in usage),
        }
    root_start, root_end = (_seconds(root.get("startTime")), _seconds(root.get("endTime"))) if root else (None, None)
    return Extracted(
        line=line,
        label=f"trace {trace_id}",
        id=trace_id,
        query=first([_text(top.get("input"), "user"), *(_text(g.get("input"), "user") for g in generations)]),
        response=first([_text(top.get("output"), "assistant"), *(_text(g.get("output"), "assistant") for g in reversed(generations))]),
        contexts=unique(text_of(o.get("output")) for o in ordered if o.get("type") in ("TOOL", "RETRIEVER")),
        spans=timed,
        total_ms=(root_end - root_start) * 1000.0 if root_start is not None and root_end is not None else None,
        tool_calls=sum(1 for o in ordered if o.get("type") == "TOOL"),
        metadata=meta,
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


def read_traces(path: Path) -> Iterator[Extracted]:
    groups: dict[str, tuple[int, list[dict[str, Any]], dict[str, Any] | None]] = {}
    for line, item in _items(path):
        if isinstance(item.get("observations"), list):  # a trace object with its observations
            groups.setdefault(str(item["id"]), (line, [], item))[1].extend(item["observations"])
            continue
        trace_id = str(item.get("traceId") or item["id"])
        groups.setdefault(trace_id, (line, [], None))[1].append(item)
    for trace_id, (line, observations, trace) in groups.items():
        yield trace_transcript(trace_id, line, observations, trace)
