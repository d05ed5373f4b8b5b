"""Traces to conversations: the turns of one conversation, gathered from the transcripts a reader found.

A reader yields one :class:`~.records.Extracted` per trace (per top-level agent invocation, for
OTLP). Here they become conversations (docs/guide/traces.md, "Sessions"):

- **Sessions.** Transcripts carrying the same session id (``Extracted.session``: OTel GenAI
  ``gen_ai.conversation.id``, OpenInference ``session.id``, Langfuse ``sessionId``, LangSmith
  ``session_id``/``thread_id``/``conversation_id`` metadata, MLflow ``mlflow.trace.session``) are the
  turns of one transcript whose id is the session id. A session of one transcript stays as it is.
- **Several agent invocations in one trace** (no session id) are the turns of one transcript
  whose id is the trace id.
- **Earlier turns a model call received** (:mod:`.history`): the first traced turn's first model
  call may hold the turns before it; they come first, with no trace, span or steps.

Turns are ordered by start time; ties by trace id, then span id, then the reader's order, so the
same traces in any order give the same conversation. Each turn keeps its user text, answer, steps
(their ``turn`` and ``group`` numbers shifted to follow the turns before) and tool results, and
the trace and span it came from (``turns[].trace_id``/``span_id``: verdicts go back there). A
turn whose query or response cannot be found refuses the whole conversation, in one line naming the
session, the turn and its trace. A transcript that is one exchange is yielded unchanged, byte for
byte what it was before this module existed.

Transcripts without a session are yielded as they come; those of a session are held until the
file is read (its traces may be anywhere in it), then yielded in the order each session first
appeared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal

from .records import Extracted, unique

Sessions = Literal["on", "off"]
SESSIONS: tuple[str, ...] = ("on", "off")


def _trace_id(item: Extracted) -> str:
    meta = item.metadata
    return str(meta.get("trace_id") or meta.get("langsmith_trace_id") or item.id)


def conversations(items: Iterable[Extracted], sessions: Sessions = "on") -> Iterator[Extracted]:
    """The conversations of ``items`` (module docstring); with ``sessions="off"``, ``items`` as they are."""
    if sessions == "off":
        yield from items
        return
    held: dict[str, list[tuple[int, Extracted]]] = {}
    pending: list[tuple[int, Extracted]] = []  # consecutive units of one trace, without a session
    for n, item in enumerate(items):
        if item.session is not None:
            held.setdefault(item.session, []).append((n, item))
            continue
        if pending and _trace_id(pending[0][1]) != _trace_id(item):
            yield _conversation(_trace_id(pending[0][1]), None, pending)
            pending = []
        pending.append((n, item))
    if pending:
        yield _conversation(_trace_id(pending[0][1]), None, pending)
    for session, members in held.items():
        yield _conversation(session, session, members)


def _order(member: tuple[int, Extracted]) -> tuple[Any, ...]:
    n, item = member
    return (item.start_s is None, item.start_s or 0.0, _trace_id(item), item.span_id or "", n)


def _conversation(conversation_id: str, session: str | None, members: list[tuple[int, Extracted]]) -> Extracted:
    ordered = [item for _, item in sorted(members, key=_order)]
    if len(ordered) == 1 and not ordered[0].earlier:
        return ordered[0]
    if len(ordered) == 1 and session is None:
        conversation_id = ordered[0].id
    what = f"session {session}" if session is not None else f"trace {conversation_id}"
    line = min(item.line for item in ordered)
    for index, item in enumerate(ordered, len(ordered[0].earlier) + 1):
        if problem := item.problem():
            return Extracted(line=item.line, label=what, id=conversation_id, refusal=f"turn {index} ({item.label}): {problem}")
    # the turns before the first traced one, as its first model call received them (.history)
    turns: list[dict[str, Any]] = [{"user": user, "answer": answer} for user, answer in ordered[0].earlier]
    group_at = turn_at = 0
    for item in ordered:
        steps = []
        for step in item.steps:
            shifted = dict(step)
            for key, at in (("group", group_at), ("turn", turn_at)):
                if isinstance(shifted.get(key), int):
                    shifted[key] += at
            steps.append(shifted)
        group_at = max([group_at - 1, *(s["group"] for s in steps if isinstance(s.get("group"), int))]) + 1
        turn_at = max([turn_at - 1, *(s["turn"] for s in steps if isinstance(s.get("turn"), int))]) + 1
        turn: dict[str, Any] = {"user": item.query, "answer": item.response}
        if steps:
            turn["steps"] = steps
        if item.contexts:
            turn["contexts"] = item.contexts
        turn["trace_id"] = _trace_id(item)
        if item.span_id is not None:
            turn["span_id"] = item.span_id
        turns.append(turn)
    first, final = ordered[0], ordered[-1]
    meta: dict[str, Any] = {"source_format": first.metadata.get("source_format")}
    if session is not None:
        meta["session_id"] = session
    meta["trace_ids"] = unique(_trace_id(item) for item in ordered)
    if models := unique(item.metadata.get("model") for item in ordered):
        meta["model"] = models[0]
        if len(models) > 1:
            meta["models"] = models
    usage: dict[str, int] = {}
    for item in ordered:
        for key, value in (item.metadata.get("usage") or {}).items():
            usage[key] = usage.get(key, 0) + value
    if usage:
        meta["usage"] = usage
    tools = list({str(t.get("name")): t for item in ordered for t in item.tools}.values())
    totals = [item.total_ms for item in ordered]
    return Extracted(
        line=line,
        label=what,
        id=conversation_id,
        query=first.query,
        response=final.response,
        contexts=unique(c for item in ordered for c in item.contexts),
        spans=[s for item in ordered for s in item.spans],
        # the agent's time over the conversation: its turns' (the user's time between them is not the agent's)
        total_ms=sum(t for t in totals if t is not None) if all(t is not None for t in totals) else None,
        tools=tools,
        metadata=meta,
        turns=turns,
        session=session,
        start_s=first.start_s,
        span_id=first.span_id,
    )
