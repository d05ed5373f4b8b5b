"""What every trace reader produces: transcript records in the harness's own JSON shape.

A reader turns one trace (or one agent invocation, or one Inspect sample) into a ``dict`` with the
fields of :class:`~harness.transcripts.models.Transcript`, and hands it to the loader as a
:class:`~harness.traces.loader.RawRecord`, so the records are validated exactly like JSONL.
The agent's tool calls become the transcript's ``steps`` (built by :mod:`.steps` from the model
calls and the tools' runs the reader finds), and the tools the trace declares its ``tools``.
Several transcripts of one conversation (a session's traces) become one with ``turns``
(:mod:`.sessions`). A trace in which no query or response can be found becomes a record carrying its
:class:`~harness.errors.TranscriptError` ("FILE:LINE: trace ID: no query found (...)"), which the
loader raises or skips under ``--on-bad-record`` like any bad record: never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TranscriptError


@dataclass(slots=True)
class Extracted:
    """One transcript found in a trace file, before validation."""

    line: int
    label: str  # how a message names it: "trace 4bf9…", "sample 3 (epoch 1)"
    id: str
    query: str | None = None
    response: str | None = None
    contexts: list[str] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    total_ms: float | None = None
    #: the agent's tool calls as a transcript's ``steps`` entries (``Step.as_dict``), in order
    steps: list[dict[str, Any]] = field(default_factory=list)
    #: the tools the trace says the agent had, as a transcript's ``tools`` entries
    tools: list[dict[str, Any]] = field(default_factory=list)
    reference: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: where the query and response were looked for, for the message when they are missing
    query_sources: str = ""
    response_sources: str = ""
    #: the session (conversation) the trace belongs to, as its ecosystem names it (OTel
    #: ``gen_ai.conversation.id``, OpenInference ``session.id``, Langfuse ``sessionId``, LangSmith
    #: thread metadata, MLflow's session tag; None when the trace names none), and when the
    #: transcript started (epoch seconds): :mod:`.sessions` groups and orders by them. The session
    #: is written as ``metadata.session_id``, so a transcript read back keeps it.
    session: str | None = None
    start_s: float | None = None
    #: the span its verdict goes back to (the root or agent span), when the format has span ids
    span_id: str | None = None
    #: a conversation's turns (:mod:`.sessions`), as a transcript's ``turns`` entries; they hold
    #: the steps, so ``steps`` is then not written
    turns: list[dict[str, Any]] | None = None
    #: the turns before this one that its first model call received, ``(user, answer)`` each
    #: (:mod:`.history`; OTLP): :mod:`.sessions` puts them first, with no trace or span
    earlier: list[tuple[str, str | None]] = field(default_factory=list)
    #: why a conversation cannot be read whole (one of its turns lacks its query or response)
    refusal: str | None = None

    @property
    def tool_calls(self) -> int:
        """The number of tool calls: the steps' (one home; a transcript counts its steps too)."""
        return len(self.steps)

    def problem(self) -> str | None:
        if self.refusal is not None:
            return self.refusal
        missing = [
            f"no {name} found (looked in {sources})"
            for name, value, sources in (("query", self.query, self.query_sources), ("response", self.response, self.response_sources))
            if value is None or not value.strip()
        ]
        return "; ".join(missing) or None

    def record(self) -> dict[str, Any]:
        """The transcript's fields, leaving out what the trace does not say."""
        out: dict[str, Any] = {"id": self.id, "query": self.query, "response": self.response}
        if self.contexts:
            out["contexts"] = self.contexts
        if self.reference is not None:
            out["reference"] = self.reference
        timings: dict[str, float | None] = {}
        if self.total_ms is not None:
            timings["total_ms"] = round(self.total_ms, 3)
        if self.spans:
            out["spans"] = self.spans
            # A kind of model call or API call the trace holds no span of is unknown (null), not
            # 0 ms: tracing that does not instrument HTTP or retrieval records no API spans.
            # (Tool time is known: the steps say which tools ran.)
            kinds = {s["kind"] for s in self.spans}
            timings.update({f"{kind}_ms": None for kind in ("llm", "api") if kind not in kinds})
        if timings:
            out["timings"] = timings
        if self.turns is not None:
            out["turns"] = self.turns
        else:
            out["steps"] = self.steps  # written when empty too: the trace says no tool was called
        if self.tools:
            out["tools"] = self.tools
        metadata = self.metadata | ({"session_id": self.session} if self.session is not None else {})
        if metadata:
            out["metadata"] = metadata
        return out

    def error(self, path: str) -> TranscriptError | None:
        problem = self.problem()
        return TranscriptError(path, self.line, self.label, problem) if problem else None


def span(kind: str, name: str, start_s: float, end_s: float) -> dict[str, Any]:
    """A transcript span; a clock that ran backwards gives an empty span, not a bad record."""
    return {"kind": kind, "name": name, "start": start_s, "end": max(start_s, end_s)}


def text_of(value: Any) -> str | None:
    """Plain text of a content value: a string, a list of parts, or JSON shown as canonical JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [t for t in (_part_text(p) for p in value) if t]
        return "\n".join(texts) if texts else None
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _part_text(part: dict[str, Any]) -> str | None:
    for key in ("text", "content"):
        if isinstance(part.get(key), str):
            return part[key]
    return None


def first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v is not None and v.strip()), None)


def last(values: Iterable[str | None]) -> str | None:
    found = None
    for v in values:
        if v is not None and v.strip():
            found = v
    return found


def unique(texts: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(t for t in texts if t is not None and t.strip()))
