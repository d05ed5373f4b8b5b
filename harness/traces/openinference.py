"""OpenInference (Arize Phoenix, the ``openinference-instrumentation-*`` packages): spans to transcripts.

``openinference.span.kind`` sorts the spans: LLM is llm time, TOOL tool time, RETRIEVER, EMBEDDING
and RERANKER api time. One transcript per trace, or per top-level AGENT span when there are any.
The query is the root AGENT/CHAIN span's ``input.value`` when it is text, else the last user
message (``llm.input_messages.N.message.*``) of the first LLM span; the response likewise from
``output.value`` or the last LLM span's output messages. Contexts are the retrieved documents
(``retrieval.documents.N.document.content``), tool outputs and tool messages.

Steps (:mod:`.steps`): the LLM spans (not those under a TOOL span) are the turns, their
``llm.output_messages.N.message.tool_calls.M.tool_call.*`` (``id``, ``function.name``,
``function.arguments``) the calls asked for, and their input's tool messages
(``message.tool_call_id``) the results; each TOOL span is a tool's run: ``tool.name``,
``tool_call.id``, the arguments from ``tool_call.function.arguments`` or ``input.value``, the result
``output.value``, failed when the span's status is ERROR (or it has an ``exception`` event). The
declared tools come from the LLM spans' ``llm.tools.N.tool.*`` and the TOOL spans'
``tool.description`` and ``tool.parameters`` (when that is a JSON Schema).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..agent.steps import Step
from ..jsonlines import MAX_INPUT_DEPTH, decode_json
from .otlp import Trace, TraceSpan, span_transcript
from .records import Extracted, first, last, span, text_of, unique
from .steps import Executed, Requested, Result, Turn, assemble, declared, is_schema, tool_spec

KIND = "openinference.span.kind"
_KINDS = {"LLM": "llm", "TOOL": "tool", "RETRIEVER": "api", "EMBEDDING": "api", "RERANKER": "api"}
_REPR = re.compile(r"^[A-Z][A-Za-z0-9_]*\((?:[a-z_]+=|[A-Z])")
_INDEXED = re.compile(r"^(?P<prefix>.+?)\.(?P<index>\d+)\.(?P<rest>.+)$")
_QUERY_SOURCES = "input.value of the root AGENT/CHAIN span and llm.input_messages of the LLM spans"
_RESPONSE_SOURCES = "output.value of the root AGENT/CHAIN span and llm.output_messages of the LLM spans"


def kind(s: TraceSpan) -> str | None:
    value = s.attributes.get(KIND)
    return value.upper() if isinstance(value, str) else None


def is_openinference(trace: Trace) -> bool:
    return any(KIND in s.attributes for s in trace.spans)


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest = v`` attributes as a list of ``{rest: v}``, in index order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix + "."):
            continue
        match = _INDEXED.match(key)
        if match and match["prefix"] == prefix:
            found.setdefault(int(match["index"]), {})[match["rest"]] = value
    return [found[i] for i in sorted(found)]


def _message_text(message: dict[str, Any]) -> str | None:
    if message.get("message.content") is not None:
        return text_of(message["message.content"])
    parts = sorted((k, v) for k, v in message.items() if k.startswith("message.contents.") and k.endswith(".message_content.text"))
    return "\n".join(v for _, v in parts) if parts else None


def messages(s: TraceSpan, direction: str) -> list[dict[str, Any]]:
    return indexed(s.attributes, f"llm.{direction}_messages")


def _plain(s: TraceSpan, key: str) -> str | None:
    """``input.value``/``output.value`` when it is text, not the JSON of a request or reply."""
    value = s.attributes.get(key)
    if not isinstance(value, str) or s.attributes.get(f"{key.split('.')[0]}.mime_type") == "application/json" or _is_json(value):
        return None
    return value


#: the text field of the JSON an agent framework records as its AGENT/CHAIN span's ``input.value``
#: (smolagents ``{"task": ...}``, llama-index ``{"user_msg": ...}``, Agno/ADK ``{"input"/"message": ...}``):
#: the user's words, never the wrapper
WRAPPER_TEXT = ("task", "user_msg", "input", "message", "query", "question", "prompt", "new_message")
#: the same for ``output.value``
WRAPPER_ANSWER = ("output", "answer", "response", "final_output", "content", "text", "result")


def _is_json(value: str) -> bool:
    return value[:1] in "{[" and _json(value) is not value


def _wrapped(s: TraceSpan, key: str, fields: tuple[str, ...]) -> str | None:
    """The text of the first of ``fields`` in the JSON object at ``key`` (recursing into a value
    that is itself a message: ``{"role": ..., "content"/"parts": ...}``)."""
    value = s.attributes.get(key)
    decoded = _json(value) if isinstance(value, str) else None
    return _field_text(decoded, fields) if isinstance(decoded, dict) else None


def _field_text(value: Any, fields: tuple[str, ...]) -> str | None:
    if isinstance(value, str):
        return value if value.strip() and not _is_json(value) else None
    if isinstance(value, list):
        return last(_field_text(v, fields) for v in value)
    if not isinstance(value, dict):
        return None
    for name in (*fields, "content", "parts", "text"):
        if name in value and (found := _field_text(value[name], fields)):
            return found
    return None


def _query(root: TraceSpan, llm_spans: list[TraceSpan]) -> str | None:
    if kind(root) in ("AGENT", "CHAIN") and (text := _plain(root, "input.value")):
        return text
    # the framework's wrapper says where the user's text is; else the first model call's last user message
    if kind(root) in ("AGENT", "CHAIN") and (text := _wrapped(root, "input.value", WRAPPER_TEXT)):
        return text
    for s in llm_spans:
        if found := last(_message_text(m) for m in messages(s, "input") if m.get("message.role") == "user"):
            return found
    return None


def _response(root: TraceSpan, llm_spans: list[TraceSpan]) -> str | None:
    model = next((found for s in reversed(llm_spans) if (found := _answer(s))), None)
    if kind(root) in ("AGENT", "CHAIN") and (text := _plain(root, "output.value")):
        # the agent's output, unless it is the repr of the framework's result object (which holds
        # the last model answer, and is cut short: llama-index's ``StopEvent(result=...)``)
        return model if model and _REPR.match(text) else text
    if model:
        return model
    if kind(root) in ("AGENT", "CHAIN") and (text := _wrapped(root, "output.value", WRAPPER_ANSWER)):
        return text
    return None


def _answer(s: TraceSpan) -> str | None:
    return last(_message_text(m) for m in messages(s, "output") if m.get("message.role") in ("assistant", None))


def _contexts(spans: list[TraceSpan], llm_spans: list[TraceSpan]) -> list[str]:
    documents = [d.get("document.content") for s in spans for d in indexed(s.attributes, "retrieval.documents")]
    tools = [tool_output(s) for s in spans if kind(s) == "TOOL"]
    tool_messages = [_message_text(m) for s in llm_spans for m in messages(s, "input") if m.get("message.role") == "tool"]
    return unique([*map(text_of, documents), *tools, *tool_messages])


def _requested(s: TraceSpan) -> tuple[Requested, ...]:
    return tuple(
        Requested(str(c.get("tool_call.function.name") or ""), c.get("tool_call.function.arguments"), _id(c.get("tool_call.id")))
        for m in messages(s, "output")
        for c in indexed(m, "message.tool_calls")
    )


def _results(s: TraceSpan) -> tuple[Result, ...]:
    return tuple(Result(_id(m.get("message.tool_call_id")), _message_text(m)) for m in messages(s, "input") if m.get("message.role") == "tool")


def _id(value: Any) -> str | None:
    return str(value) if value is not None and value != "" else None


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return decode_json(value, MAX_INPUT_DEPTH)
        except ValueError:
            return value
    return value


def _run(s: TraceSpan) -> Executed:
    attrs = s.attributes
    error = s.failure()
    return Executed(
        name=str(attrs.get("tool.name") or attrs.get("tool_call.function.name") or s.name),
        arguments=attrs.get("tool_call.function.arguments", attrs.get("input.value")),
        result=tool_output(s),
        failed=error is not None,
        error=error,
        call_id=_id(attrs.get("tool_call.id")),
        start_s=s.start_s,
        end_s=s.end_s,
        span_id=s.span_id,
    )


#: a framework's tool-output record as a TOOL span's JSON ``output.value`` (llama-index's
#: ``ToolOutput``: ``{"tool_name", "raw_output", "blocks", ...}``): the field holding what the tool returned
TOOL_OUTPUT_FIELDS = ("raw_output", "content", "result", "output")


def tool_output(s: TraceSpan) -> str | None:
    """The TOOL span's ``output.value``; when that is a record naming the tool itself (a
    ``tool_name``/``name`` equal to ``tool.name``), the record's result field, not the record."""
    value = s.attributes.get("output.value")
    decoded = _json(value)
    if isinstance(decoded, dict) and s.attributes.get("tool.name") in (decoded.get("tool_name"), decoded.get("name")):
        for name in TOOL_OUTPUT_FIELDS:
            if decoded.get(name) is not None:
                return text_of(decoded[name])
    return text_of(value)


def _specs(llm_spans: list[TraceSpan], tool_spans: list[TraceSpan]) -> list[dict[str, Any]]:
    specs = [
        tool_spec(_json(t.get("tool.json_schema")), _str(t.get("tool.name")), _str(t.get("tool.description")))
        for s in llm_spans
        for t in indexed(s.attributes, "llm.tools")
    ]
    for s in tool_spans:
        name, parameters = s.attributes.get("tool.name"), _json(s.attributes.get("tool.parameters"))
        if isinstance(name, str) and name and (is_schema(parameters) or s.attributes.get("tool.description")):
            specs.append(tool_spec(parameters if is_schema(parameters) else None, name, _str(s.attributes.get("tool.description"))))
    return declared(specs)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def steps(trace: Trace, spans: list[TraceSpan]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of the spans of one transcript."""
    tool_spans = [s for s in spans if kind(s) == "TOOL"]
    inside_tools = trace.below(tool_spans)
    llm_spans = [s for s in spans if kind(s) == "LLM" and s.span_id not in inside_tools]
    turns = [Turn(s.start_s, s.end_s, _requested(s), _results(s)) for s in llm_spans]
    return assemble(turns, [_run(s) for s in tool_spans]), _specs(llm_spans, tool_spans)


def _usage(llm_spans: list[TraceSpan]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for s in llm_spans:
        for key, name in (("llm.token_count.prompt", "input_tokens"), ("llm.token_count.completion", "output_tokens")):
            if isinstance(s.attributes.get(key), int):
                totals[name] = totals.get(name, 0) + s.attributes[key]
    return totals


def units(trace: Trace) -> Iterator[tuple[TraceSpan, str, list[TraceSpan]]]:
    ids = {s.span_id for s in trace.spans}
    agents = [s for s in trace.spans if kind(s) == "AGENT"]
    by_id = {s.span_id: s for s in trace.spans}

    def nested(s: TraceSpan) -> bool:
        parent = by_id.get(s.parent_id or "")
        while parent is not None:
            if kind(parent) == "AGENT":
                return True
            parent = by_id.get(parent.parent_id or "")
        return False

    top = sorted((s for s in agents if not nested(s)), key=lambda s: s.start_s)
    if len(top) > 1:
        for s in top:
            yield s, f"{trace.trace_id}:{s.span_id}", trace.descendants(s)
        return
    roots = [s for s in trace.spans if s.parent_id not in ids] or trace.spans
    root = top[0] if top else min(roots, key=lambda s: (s.start_s, -s.end_s))
    yield root, trace.trace_id, (trace.descendants(root) if top else sorted(trace.spans, key=lambda s: s.start_s))


def extract(trace: Trace, root: TraceSpan, transcript_id: str, spans: list[TraceSpan]) -> Extracted:
    llm_spans = [s for s in spans if kind(s) == "LLM"]
    found, tools = steps(trace, spans)
    return span_transcript(
        trace,
        root,
        transcript_id,
        spans,
        source_format="openinference",
        query=_query(root, llm_spans),
        response=_response(root, llm_spans),
        contexts=_contexts(spans, llm_spans),
        timed=[span(k, s.name, s.start_s, s.end_s) for s in spans if (k := _KINDS.get(kind(s) or ""))],
        steps=found,
        tools=tools,
        model=first(s.attributes.get("llm.model_name") for s in llm_spans),
        usage=_usage(llm_spans),
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


def transcripts(trace: Trace) -> Iterator[Extracted]:
    for root, transcript_id, spans in units(trace):
        yield extract(trace, root, transcript_id, spans)
