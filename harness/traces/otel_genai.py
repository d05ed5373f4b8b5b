"""OpenTelemetry GenAI semantic conventions: spans to transcripts.

One transcript per trace, or one per top-level ``invoke_agent`` span when the trace has any.
``gen_ai.operation.name`` sorts the spans: ``chat``/``text_completion``/``generate_content`` are
llm time, ``execute_tool`` tool time, anything else with an ``http.*``, ``url.*`` or ``db.*``
attribute, or an ``embeddings``/``retrieval`` operation, api time. The query is the last user
message of the first model call; the response the assistant text of the last model call (or of the
agent span itself when it records messages). Tool results become contexts.

Messages are read from ``gen_ai.input.messages``/``gen_ai.output.messages`` (JSON, parts form),
or from the older per-message span events (``gen_ai.user.message``, ``gen_ai.choice``, ...).

Steps (:mod:`.steps`): the model spans (not those under a tool span) are the turns, their output
messages' ``tool_call`` parts (or a ``gen_ai.choice`` event's ``tool_calls``) the calls asked for,
and their input's ``tool_call_response`` parts the results; each ``execute_tool`` span is a tool's
run: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``,
``gen_ai.tool.call.result`` (pydantic-ai's older ``tool_arguments``/``tool_response`` too), failed
when the span's status is ERROR (or it has ``error.type``, or an ``exception`` event). The declared
tools come from the model spans' ``gen_ai.tool.definitions``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..agent.steps import Step
from ..jsonlines import MAX_INPUT_DEPTH, decode_json
from .openinference import indexed
from .otlp import Trace, TraceSpan, span_transcript
from .records import Extracted, first, last, span, text_of, unique
from .steps import Executed, Requested, Result, Turn, assemble, declared, tool_spec

LLM_OPERATIONS = {"chat", "text_completion", "generate_content"}
API_OPERATIONS = {"embeddings", "retrieval"}
_API_PREFIXES = ("http.", "url.", "db.", "rpc.")
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_QUERY_SOURCES = "gen_ai.input.messages attributes and operation.details events, gen_ai.user.message events, gen_ai.prompt.N of the model spans"
_RESPONSE_SOURCES = "gen_ai.output.messages attributes and operation.details events, gen_ai.choice events, gen_ai.completion.N of the model spans"


def operation(s: TraceSpan) -> str | None:
    return s.attributes.get("gen_ai.operation.name")


def is_genai(trace: Trace) -> bool:
    return any(operation(s) for s in trace.spans)


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = decode_json(value, MAX_INPUT_DEPTH)
        except ValueError:
            return []
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _parts_text(message: dict[str, Any], part_type: str = "text") -> str | None:
    parts = message.get("parts")
    if parts is None:  # the older event bodies: {"content": ...}
        return text_of(message.get("content"))
    texts = [p.get("content") for p in parts if isinstance(p, dict) and p.get("type") == part_type]
    return "\n".join(text_of(t) or "" for t in texts) if texts else None


def _event_messages(s: TraceSpan, kind: str) -> list[dict[str, Any]]:
    """Messages from span events: ``gen_ai.client.inference.operation.details`` (the current
    conventions: the same ``gen_ai.input.messages``/``gen_ai.output.messages`` as the span
    attributes), else the older per-message events (``gen_ai.user.message`` etc., ``gen_ai.choice``),
    whose ``content`` or ``message`` may be JSON text (Strands writes content blocks so)."""
    for event in s.events:
        if event.name == DETAILS_EVENT and (found := _messages(event.attributes.get(f"gen_ai.{kind}.messages"))):
            return found
    out = []
    for event in s.events:
        attrs = event.attributes
        if kind == "input" and event.name.startswith("gen_ai.") and event.name.endswith(".message"):
            role = event.name.removeprefix("gen_ai.").removesuffix(".message")
            message = {"role": attrs.get("role", role), "content": _decoded(attrs.get("content")), "id": attrs.get("id")}
            out.append(message | ({"tool_calls": _decoded(attrs["tool_calls"])} if "tool_calls" in attrs else {}))
        elif kind == "output" and event.name == "gen_ai.choice":
            # ``message`` is {"content", "tool_calls"} by the conventions; Strands writes the
            # content itself there (text, or a JSON list of content blocks)
            body = _decoded(attrs.get("message"))
            body = body if isinstance(body, dict) else {"content": body} if body is not None else {}
            content = body.get("content", _decoded(attrs.get("content")))
            out.append({"role": "assistant", "content": content, "tool_calls": body.get("tool_calls", _decoded(attrs.get("tool_calls")))})
    return out


def _indexed_messages(s: TraceSpan, prefix: str) -> list[dict[str, Any]]:
    """The oldest form: ``gen_ai.prompt.N.role``/``.content``/``.tool_call_id`` and
    ``gen_ai.completion.N.*`` (with ``.tool_calls.M.{id,name,arguments}``) span attributes."""
    out = []
    for m in indexed(s.attributes, prefix):
        calls = [{"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in indexed(m, "tool_calls")]
        message = {"role": m.get("role"), "content": _decoded(m.get("content")), "id": m.get("tool_call_id")}
        out.append(message | ({"tool_calls": calls} if calls else {}))
    return out


def _decoded(value: Any) -> Any:
    """JSON text of a list or object as that value (content blocks, a message); other text as is."""
    return decode_json(value, MAX_INPUT_DEPTH) if isinstance(value, str) and _is_json(value) and value[:1] in "[{" else value


def input_messages(s: TraceSpan) -> list[dict[str, Any]]:
    if "input" not in s.memo:  # the query, the contexts and the steps all read them
        s.memo["input"] = _messages(s.attributes.get("gen_ai.input.messages")) or _event_messages(s, "input") or _indexed_messages(s, "gen_ai.prompt")
    return s.memo["input"]


def output_messages(s: TraceSpan) -> list[dict[str, Any]]:
    if "output" not in s.memo:
        s.memo["output"] = (
            _messages(s.attributes.get("gen_ai.output.messages")) or _event_messages(s, "output") or _indexed_messages(s, "gen_ai.completion")
        )
    return s.memo["output"]


def _query(model_spans: list[TraceSpan]) -> str | None:
    for s in model_spans:
        found = last(_parts_text(m) for m in input_messages(s) if m.get("role") == "user")
        if found:
            return found
    return None


def _response(agent: TraceSpan | None, model_spans: list[TraceSpan]) -> str | None:
    for s in [*([agent] if agent else []), *reversed(model_spans)]:
        found = last(_parts_text(m) for m in output_messages(s) if m.get("role") in ("assistant", None))
        if found:
            return found
    return None


def _tool_results(spans: list[TraceSpan], model_spans: list[TraceSpan]) -> list[str]:
    from_tools = [text_of(s.attributes.get("gen_ai.tool.call.result")) for s in spans if operation(s) == "execute_tool"]
    from_messages = [
        _parts_text(m, "tool_call_response") or (text_of(m.get("content")) if "parts" not in m else None)
        for s in model_spans
        for m in input_messages(s)
        if m.get("role") == "tool"
    ]
    from_messages = [text_of(decode_json(t, MAX_INPUT_DEPTH)) if t is not None and _is_json(t) else t for t in from_messages]
    return unique([*from_tools, *from_messages])


def _is_json(text: str | None) -> bool:
    if not text or text[:1] not in '{["':
        return False
    try:
        decode_json(text, MAX_INPUT_DEPTH)
    except ValueError:
        return False
    return True


def span_kind(s: TraceSpan) -> str | None:
    op = operation(s)
    if op in LLM_OPERATIONS:
        return "llm"
    if op == "execute_tool":
        return "tool"
    if op in API_OPERATIONS or (op is None and any(k.startswith(_API_PREFIXES) for k in s.attributes)):
        return "api"
    return None


def _requested(s: TraceSpan) -> tuple[Requested, ...]:
    calls = []
    for m in output_messages(s):
        for p in m.get("parts") or []:
            if isinstance(p, dict) and p.get("type") == "tool_call":
                calls.append(Requested(str(p.get("name") or ""), p.get("arguments"), _id(p.get("id"))))
        for c in m.get("tool_calls") or []:  # a gen_ai.choice event's message
            function = c.get("function") if isinstance(c, dict) else None
            if isinstance(function, dict):
                calls.append(Requested(str(function.get("name") or ""), function.get("arguments"), _id(c.get("id"))))
        for use in _blocks(m, "toolUse"):
            calls.append(Requested(str(use.get("name") or ""), use.get("input"), _id(use.get("toolUseId"))))
    return tuple(calls)


def _blocks(message: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The ``{key: {...}}`` content blocks of an event message's content (the Bedrock Converse
    shape Strands records: ``toolUse`` with ``toolUseId``/``name``/``input``, ``toolResult``
    with ``toolUseId``/``status``/``content``)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b[key] for b in content if isinstance(b, dict) and isinstance(b.get(key), dict)]


def _results(s: TraceSpan) -> tuple[Result, ...]:
    out: list[Result] = []
    for m in input_messages(s):
        if m.get("role") != "tool":
            continue
        parts = m.get("parts")
        if parts is None and (blocks := _blocks(m, "toolResult")):  # content blocks (Strands)
            out.extend(Result(_id(b.get("toolUseId")), text_of(b.get("content")), b.get("status") == "error") for b in blocks)
            continue
        if parts is None:  # an older gen_ai.tool.message event
            out.append(Result(_id(m.get("id") or m.get("tool_call_id")), text_of(m.get("content"))))
            continue
        for p in parts:
            if isinstance(p, dict) and p.get("type") == "tool_call_response":
                response = next((p[k] for k in ("response", "result", "content") if k in p), None)
                out.append(Result(_id(p.get("id")), text_of(response)))
    return tuple(out)


def _id(value: Any) -> str | None:
    return str(value) if value is not None and value != "" else None


def _event_attribute(s: TraceSpan, event: str, key: str) -> Any:
    return next((_decoded(e.attributes[key]) for e in s.events if e.name == event and key in e.attributes), None)


def _run(s: TraceSpan) -> Executed:
    attrs = s.attributes
    # the attributes of the conventions (pydantic-ai's older names); else the tool span's own
    # message events, as Strands records a run: arguments in gen_ai.tool.message, result in gen_ai.choice
    result = attrs.get("gen_ai.tool.call.result", attrs.get("tool_response"))
    if result is None:
        result = _event_attribute(s, "gen_ai.choice", "message")
    arguments = attrs.get("gen_ai.tool.call.arguments", attrs.get("tool_arguments"))
    if arguments is None:
        arguments = _event_attribute(s, "gen_ai.tool.message", "content")
    error = s.failure()
    name = attrs.get("gen_ai.tool.name") or s.name.removeprefix("execute_tool").strip() or s.name
    return Executed(
        name=str(name),
        arguments=arguments,
        result=text_of(result),
        failed=error is not None,
        error=error,
        call_id=_id(attrs.get("gen_ai.tool.call.id")),
        start_s=s.start_s,
        end_s=s.end_s,
        span_id=s.span_id,
    )


def steps(trace: Trace, spans: list[TraceSpan]) -> tuple[tuple[Step, ...], list[dict[str, Any]]]:
    """``(steps, declared tools)`` of the spans of one transcript."""
    tool_spans = [s for s in spans if operation(s) == "execute_tool"]
    inside_tools = trace.below(tool_spans)
    turns = [Turn(s.start_s, s.end_s, _requested(s), _results(s)) for s in spans if operation(s) in LLM_OPERATIONS and s.span_id not in inside_tools]
    runs = [_run(s) for s in tool_spans]
    specs = [tool_spec(t) for s in spans if operation(s) in LLM_OPERATIONS for t in _messages(s.attributes.get("gen_ai.tool.definitions"))]
    specs += [
        tool_spec(None, str(s.attributes["gen_ai.tool.name"]), _str(s.attributes.get("gen_ai.tool.description")))
        for s in tool_spans
        if s.attributes.get("gen_ai.tool.name") and s.attributes.get("gen_ai.tool.description")
    ]
    return assemble(turns, runs), declared(specs)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _usage(model_spans: list[TraceSpan]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for s in model_spans:
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
            if isinstance(s.attributes.get(key), int):
                totals[key.removeprefix("gen_ai.usage.")] = totals.get(key.removeprefix("gen_ai.usage."), 0) + s.attributes[key]
    return totals


def units(trace: Trace) -> Iterator[tuple[TraceSpan, str, list[TraceSpan]]]:
    """``(root span, id, its spans)`` of each transcript: top-level agent spans, else the whole trace."""
    agents = [s for s in trace.spans if operation(s) == "invoke_agent"]
    agent_ids = {s.span_id for s in agents}
    top = [s for s in agents if not _has_ancestor_in(trace, s, agent_ids)]
    if top:
        for s in sorted(top, key=lambda s: s.start_s):
            yield s, (trace.trace_id if len(top) == 1 else f"{trace.trace_id}:{s.span_id}"), trace.descendants(s)
        return
    ids = {s.span_id for s in trace.spans}
    roots = [s for s in trace.spans if s.parent_id not in ids] or trace.spans
    yield min(roots, key=lambda s: (s.start_s, -s.end_s)), trace.trace_id, sorted(trace.spans, key=lambda s: (s.start_s, s.end_s))


def _has_ancestor_in(trace: Trace, s: TraceSpan, ids: set[str]) -> bool:
    by_id = {x.span_id: x for x in trace.spans}
    parent = by_id.get(s.parent_id or "")
    while parent is not None:
        if parent.span_id in ids:
            return True
        parent = by_id.get(parent.parent_id or "")
    return False


def extract(trace: Trace, root: TraceSpan, transcript_id: str, spans: list[TraceSpan]) -> Extracted:
    """The transcript of ``root`` from ``spans`` (the spans under an agent span, or the whole trace)."""
    model_spans = [s for s in spans if operation(s) in LLM_OPERATIONS]
    agent = root if operation(root) == "invoke_agent" else None
    found, tools = steps(trace, spans)
    return span_transcript(
        trace,
        root,
        transcript_id,
        spans,
        source_format="otel",
        query=_query(model_spans) or (first(_parts_text(m) for m in input_messages(agent) if m.get("role") == "user") if agent else None),
        response=_response(agent, model_spans),
        contexts=_tool_results(spans, model_spans),
        timed=[span(kind, s.name, s.start_s, s.end_s) for s in spans if (kind := span_kind(s))],
        steps=found,
        tools=tools,
        model=first(s.attributes.get("gen_ai.request.model") for s in model_spans),
        usage=_usage(model_spans),
        query_sources=_QUERY_SOURCES,
        response_sources=_RESPONSE_SOURCES,
    )


def transcripts(trace: Trace) -> Iterator[Extracted]:
    for root, transcript_id, spans in units(trace):
        yield extract(trace, root, transcript_id, spans)
