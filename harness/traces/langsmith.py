"""LangSmith run exports: one run per JSONL line (or a JSON array), grouped into traces by ``trace_id``.

Runs are LangSmith's ``Run`` objects as the SDK serialises them (``id``, ``name``, ``run_type``,
``inputs``, ``outputs``, ``start_time``, ``end_time``, ``parent_run_id``, ``trace_id``,
``dotted_order``, ``extra``). One transcript per trace, from its root run (no ``parent_run_id``):
the query is the root's text input (``question``/``input``/``query``/a single string, or the last
user message), the response its text output; else the first and last ``llm`` runs' messages.
``tool`` and ``retriever`` outputs become contexts; ``llm``, ``tool`` and ``retriever``/``embedding``
runs become llm, tool and api spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import TranscriptError
from .records import Extracted, first, last, span, text_of, unique

_KINDS = {"llm": "llm", "tool": "tool", "retriever": "api", "embedding": "api"}
_TEXT_KEYS = ("question", "query", "input", "prompt", "output", "answer", "response", "text", "content")
_QUERY_SOURCES = "the root run's inputs and the llm runs' input messages"
_RESPONSE_SOURCES = "the root run's outputs and the llm runs' output messages"


def _runs(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    from ..transcripts.raw import iter_json_values

    for line, run in iter_json_values(Path(path)):
        if not isinstance(run, dict) or "id" not in run:
            raise TranscriptError(str(path), line, "id", "required field is missing (not a LangSmith run)")
        yield line, run


def _seconds(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _messages_text(messages: Any, role: str) -> str | None:
    if not isinstance(messages, list):
        return None
    flat = [m for group in messages for m in (group if isinstance(group, list) else [group]) if isinstance(m, dict)]
    return last(text_of(m.get("content")) for m in flat if m.get("role", m.get("type")) in (role, "human" if role == "user" else "ai"))


def io_text(value: Any, role: str) -> str | None:
    """The text of a run's ``inputs``/``outputs``: a known key, the only string, or messages."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    if found := _messages_text(value.get("messages"), role):
        return found
    choices = value.get("choices")
    if isinstance(choices, list) and choices:
        return text_of((choices[0].get("message") or {}).get("content"))
    for key in _TEXT_KEYS:
        if isinstance(value.get(key), str):
            return value[key]
    strings = [v for v in value.values() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else None


def _contexts(runs: list[dict[str, Any]]) -> list[str]:
    out: list[str | None] = []
    for run in runs:
        outputs = run.get("outputs") or {}
        if run.get("run_type") == "tool":
            out.append(io_text(outputs, "assistant") or text_of(outputs or None))
        elif run.get("run_type") == "retriever":
            out += [text_of(d.get("page_content")) for d in outputs.get("documents") or [] if isinstance(d, dict)]
    return unique(out)


def _usage(runs: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for run in runs:
        usage = ((run.get("extra") or {}).get("metadata") or {}).get("usage_metadata") or {}
        for key in ("input_tokens", "output_tokens"):
            if isinstance(usage.get(key), int):
                totals[key] = totals.get(key, 0) + usage[key]
    return totals


def _model(run: dict[str, Any]) -> str | None:
    """An llm run's model: ``ls_model_name`` (what wrap_openai and LangChain record), else the call's ``model``."""
    extra = run.get("extra")
    if not isinstance(extra, dict):
        return None
    for holder in (extra.get("metadata"), extra.get("invocation_params")):
        if isinstance(holder, dict):
            for key in ("ls_model_name", "model", "model_name"):
                if isinstance(holder.get(key), str) and holder[key]:
                    return str(holder[key])
    return None


def trace_transcript(runs: list[dict[str, Any]], line: int) -> Extracted:
    ordered = sorted(runs, key=lambda r: r.get("dotted_order") or r.get("start_time") or "")
    ids = {r["id"] for r in runs}
    root = next((r for r in ordered if r.get("parent_run_id") not in ids), ordered[0])
    llm = [r for r in ordered if r.get("run_type") == "llm"]
    timed = []
    for run in ordered:
        start, end = _seconds(run.get("start_time")), _seconds(run.get("end_time"))
        if (kind := _KINDS.get(run.get("run_type", ""))) and start is not None and end is not None:
            timed.append(span(kind, run.get("name", kind), start, end))
    root_start, root_end = _seconds(root.get("start_time")), _seconds(root.get("end_time"))
    trace_id = str(root.get("trace_id") or root["id"])
    meta: dict[str, Any] = {"source_format": "langsmith", "langsmith_trace_id": trace_id, "run_id": root["id"], "run_name": root.get("name")}
    if models := unique(_model(r) for r in llm):
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = models
    if usage := _usage(llm):
        meta["usage"] = usage
    return Extracted(
        line=line,
        label=f"trace {trace_id}",
        id=trace_id,
        query=first([io_text(root.get("inputs"), "user"), *(io_text(r.get("inputs"), "user") for r in llm)]),
        response=first([io_text(root.get("outputs"), "assistant"), *(io_text(r.get("outputs"), "assistant") for r in reversed(llm))]),
        contexts=_contexts(ordered),
        spans=timed,
        total_ms=(root_end - root_start) * 1000.0 if root_start is not None and root_end is not None else None,
        tool_calls=sum(1 for r in ordered if r.get("run_type") == "tool"),
        metadata=meta,
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


def read_runs(path: Path) -> Iterator[Extracted]:
    """Group the runs by trace (they may arrive in any order), then one transcript per trace."""
    traces: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for line, run in _runs(path):
        trace_id = str(run.get("trace_id") or (run.get("dotted_order") or "").split(".")[0][-36:] or run["id"])
        traces.setdefault(trace_id, (line, []))[1].append(run)
    for line, runs in traces.values():
        yield trace_transcript(runs, line)
