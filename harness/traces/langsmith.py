"""LangSmith run exports: one run per JSONL line (or a JSON array), grouped into traces by ``trace_id``.

Runs are LangSmith's ``Run`` objects as the SDK serialises them (``id``, ``name``, ``run_type``,
``inputs``, ``outputs``, ``start_time``, ``end_time``, ``parent_run_id``, ``trace_id``,
``dotted_order``, ``extra``). One transcript per trace, from its root run (no ``parent_run_id``):
the query is the root's text input (``question``/``input``/``query``/a single string, or the last
user message), the response its text output; else the first and last ``llm`` runs' messages.
``tool`` and ``retriever`` outputs become contexts; ``llm``, ``tool`` and ``retriever``/``embedding``
runs become llm, tool and api spans. Messages may be plain (``role``/``type`` and ``content``) or
LangChain's serialised ones (``{"lc": 1, "type": "constructor", "kwargs": {...}}``).

Steps (:mod:`.steps`): the ``llm`` runs (not those under a ``tool`` run) are the turns, the tool
calls of their output the calls asked for (an OpenAI completion's ``choices[0].message.tool_calls``,
or a LangChain ``generations`` message's ``tool_calls``/``additional_kwargs.tool_calls``) and the
tool messages of their input the results; each ``tool`` run is a tool's run: its ``name``,
``inputs`` as the arguments, ``outputs`` (``output``, a LangChain ``ToolMessage``'s content) as
the result, ``extra.tool_call_id``, failed when it has an ``error`` (or its ToolMessage's
``status`` is ``error``). The declared tools come from the ``llm`` runs'
``extra.invocation_params.tools`` or ``inputs.tools``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import TranscriptError
from .records import Extracted, first, last, span, text_of, unique
from .steps import Executed, Requested, Result, Turn, assemble, declared, error_text, tool_spec

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


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message as a plain dict: LangChain's serialised form (``{"lc": 1, "kwargs": {...}}``) unwrapped."""
    if message.get("lc") is not None and isinstance(message.get("kwargs"), dict):
        return message["kwargs"]
    return message


def flat_messages(messages: Any) -> list[dict[str, Any]]:
    """A run's messages, one list (LangChain nests a batch of lists), each a plain dict."""
    if not isinstance(messages, list):
        return []
    return [plain_message(m) for group in messages for m in (group if isinstance(group, list) else [group]) if isinstance(m, dict)]


def _messages_text(messages: Any, role: str) -> str | None:
    flat = flat_messages(messages)
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


def output_message(outputs: Any) -> dict[str, Any]:
    """The assistant message of an llm run's outputs: an OpenAI completion's first choice, a
    LangChain ``generations`` message, or a message (or ``messages``) given as it is."""
    if not isinstance(outputs, dict):
        return {}
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0].get("message") or {}
    generations = outputs.get("generations")
    if isinstance(generations, list):
        flat = [g for group in generations for g in (group if isinstance(group, list) else [group]) if isinstance(g, dict)]
        if flat and isinstance(flat[0].get("message"), dict):
            return plain_message(flat[0]["message"])
    if isinstance(outputs.get("tool_calls"), list):
        return plain_message(outputs)
    found = flat_messages(outputs.get("messages"))
    return found[-1] if found else {}


def requested_calls(message: dict[str, Any]) -> tuple[Requested, ...]:
    """A message's tool calls: LangChain's ``tool_calls`` (``name``, ``args``, ``id``) or OpenAI's
    (``function.name``, ``function.arguments``, ``id``), also under ``additional_kwargs``."""
    calls = message.get("tool_calls")
    if not calls and isinstance(message.get("additional_kwargs"), dict):
        calls = message["additional_kwargs"].get("tool_calls")
    out = []
    for c in calls or []:
        if not isinstance(c, dict):
            continue
        function = c.get("function")
        if isinstance(function, dict):
            out.append(Requested(str(function.get("name") or ""), function.get("arguments"), _id(c.get("id"))))
        else:
            out.append(Requested(str(c.get("name") or ""), c.get("args", c.get("arguments")), _id(c.get("id"))))
    return tuple(out)


def tool_results(messages: Any) -> tuple[Result, ...]:
    """The tool messages of a model call's input."""
    return tuple(
        Result(_id(m.get("tool_call_id")), text_of(m.get("content")), m.get("status") == "error" or bool(m.get("is_error")))
        for m in flat_messages(messages)
        if m.get("role", m.get("type")) == "tool"
    )


def _id(value: Any) -> str | None:
    return str(value) if value is not None and value != "" else None


def _tool_run(run: dict[str, Any]) -> Executed:
    outputs = run.get("outputs")
    output = outputs.get("output", outputs) if isinstance(outputs, dict) else outputs
    message = plain_message(output) if isinstance(output, dict) else {}
    result = text_of(message["content"]) if "content" in message else text_of(output or None)
    error = error_text(run.get("error"))
    failed = error is not None or message.get("status") == "error"
    extra = run.get("extra")
    extra = extra if isinstance(extra, dict) else {}
    inputs = run.get("inputs")
    return Executed(
        name=str(run.get("name") or "tool"),
        arguments=inputs.get("input") if isinstance(inputs, dict) and list(inputs) == ["input"] else inputs,
        result=result,
        failed=failed,
        error=error or (result if failed else None),
        call_id=_id(extra.get("tool_call_id") or message.get("tool_call_id")),
        start_s=_seconds(run.get("start_time")),
        end_s=_seconds(run.get("end_time")),
    )


def _tools(llm: list[dict[str, Any]]) -> list[dict[str, Any]]:
    specs = []
    for run in llm:
        extra, inputs = run.get("extra"), run.get("inputs")
        params = extra.get("invocation_params") if isinstance(extra, dict) else None
        for holder in (params, inputs):
            if isinstance(holder, dict) and isinstance(holder.get("tools"), list):
                specs += [tool_spec(t) for t in holder["tools"]]
    return declared(specs)


def steps(ordered: list[dict[str, Any]]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of one trace's runs, in start order."""
    tools = [r for r in ordered if r.get("run_type") == "tool"]
    tool_ids = {str(r["id"]) for r in tools}
    by_id = {str(r["id"]): r for r in ordered}

    def under_tool(run: dict[str, Any]) -> bool:
        parent = by_id.get(str(run.get("parent_run_id")))
        while parent is not None:
            if str(parent["id"]) in tool_ids:
                return True
            parent = by_id.get(str(parent.get("parent_run_id")))
        return False

    llm = [r for r in ordered if r.get("run_type") == "llm" and not under_tool(r)]
    turns = [
        Turn(
            _seconds(r.get("start_time")),
            _seconds(r.get("end_time")),
            requested_calls(output_message(r.get("outputs"))),
            tool_results((r.get("inputs") or {}).get("messages") if isinstance(r.get("inputs"), dict) else None),
        )
        for r in llm
    ]
    return assemble(turns, [_tool_run(r) for r in tools]), _tools(llm)


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
    found, tools = steps(ordered)
    return Extracted(
        session=_thread(root),
        start_s=root_start,
        span_id=str(root["id"]),
        line=line,
        label=f"trace {trace_id}",
        id=trace_id,
        query=first([io_text(root.get("inputs"), "user"), *(io_text(r.get("inputs"), "user") for r in llm)]),
        response=first([io_text(root.get("outputs"), "assistant"), *(io_text(r.get("outputs"), "assistant") for r in reversed(llm))]),
        contexts=_contexts(ordered),
        spans=timed,
        total_ms=(root_end - root_start) * 1000.0 if root_start is not None and root_end is not None else None,
        steps=[step.as_dict() for step in found],
        tools=tools,
        metadata=meta,
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


#: the metadata keys LangSmith groups a thread's traces by, in its documented order
THREAD_KEYS = ("session_id", "thread_id", "conversation_id")


def _thread(root: dict[str, Any]) -> str | None:
    extra = root.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    metadata = metadata if isinstance(metadata, dict) else root.get("metadata")
    if not isinstance(metadata, dict):
        return None
    for key in THREAD_KEYS:
        value = metadata.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def read_runs(path: Path) -> Iterator[Extracted]:
    """Group the runs by trace (they may arrive in any order), then one transcript per trace."""
    traces: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for line, run in _runs(path):
        trace_id = str(run.get("trace_id") or (run.get("dotted_order") or "").split(".")[0][-36:] or run["id"])
        traces.setdefault(trace_id, (line, []))[1].append(run)
    for line, runs in traces.values():
        yield trace_transcript(runs, line)
