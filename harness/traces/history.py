"""The turns before the traced one, as an OTLP trace's first model call received them.

An agent that keeps a conversation sends its model the earlier turns with each request: the first
model call of an agent invocation holds, before the user message being answered, the user messages
and answers of the turns before it (``gen_ai.input.messages``; OpenInference's
``llm.input_messages``). When that last user message is the transcript's query (so the messages
are this conversation's and not a framework's wrapper), the turns before it are the
conversation's earlier turns: each user message with text opens one, its answer the last assistant
text before the next. Tool messages and tool-call-only assistant messages carry no turn of their
own. :mod:`.sessions` puts them before the traced turns; they name no trace or span (they were
traced elsewhere, or not at all), and their steps are unknown.

The messages are read with the conventions' own readers (:mod:`.otel_genai`, :mod:`.openinference`).
"""

from __future__ import annotations

from .otlp import Trace, TraceSpan
from .records import Extracted


def _otel_messages(s: TraceSpan) -> list[tuple[str, str | None]]:
    from . import otel_genai

    return [(str(m.get("role") or ""), otel_genai._parts_text(m)) for m in otel_genai.input_messages(s)]


def _oi_messages(s: TraceSpan) -> list[tuple[str, str | None]]:
    from . import openinference

    return [(str(m.get("message.role") or ""), openinference._message_text(m)) for m in openinference.messages(s, "input")]


def _first_model_span(trace: Trace, item: Extracted, convention: str) -> TraceSpan | None:
    from . import openinference, otel_genai

    by_id = {s.span_id: s for s in trace.spans}
    root = by_id.get(item.span_id or "")
    spans = trace.descendants(root) if root is not None else trace.spans
    if convention == "openinference":
        models = [s for s in spans if openinference.kind(s) == "LLM"]
    else:
        models = [s for s in spans if otel_genai.operation(s) in otel_genai.LLM_OPERATIONS]
    return min(models, key=lambda s: (s.start_s, s.span_id)) if models else None


def earlier_turns(trace: Trace, item: Extracted, convention: str) -> list[tuple[str, str | None]]:
    """``(user, answer)`` of each turn before ``item``'s, from its first model call (module docstring)."""
    if not item.query:
        return []
    first = _first_model_span(trace, item, convention)
    if first is None:
        return []
    said = [(role, text) for role, text in (_oi_messages(first) if convention == "openinference" else _otel_messages(first))]
    users = [i for i, (role, text) in enumerate(said) if role == "user" and text and text.strip()]
    if len(users) < 2 or (said[users[-1]][1] or "").strip() != item.query.strip():
        return []
    turns: list[tuple[str, str | None]] = []
    for start, end in zip(users, users[1:], strict=False):
        answers = [text for role, text in said[start + 1 : end] if role == "assistant" and text and text.strip()]
        turns.append((str(said[start][1]), answers[-1] if answers else None))
    return turns
