"""Langfuse's public API: observations from ``/api/public/v2/observations``, verdicts as scores.

Authentication is HTTP Basic with the project's public and secret keys; the keys name the project
(``GET /api/public/projects``), and a project named in the source must be theirs.

Pull: the root observations (``isRootObservation=true``) whose ``startTime`` is in the window give
the traces; then every observation of each trace (``traceId``, the ``core,basic,io,model,usage``
field groups), cursor-paged. The v2 API returns ``input``/``output`` as JSON text: they are decoded
to what the UI's export holds. Each trace is written as one observation listing
(``{"data": [...]}``), which the ``langfuse`` reader reads as an exported file.

Write: ``POST /api/public/scores`` (a list; 202, or 207 with the rejected ones' messages), one
score per verdict: ``id`` the verdict's key (Langfuse upserts a score on its id and timestamp),
``traceId``, ``observationId`` the judged observation, ``name`` the rubric, a NUMERIC value (or a
CATEGORICAL label), ``comment`` the judge's reply, ``metadata``. The project's scores of those
traces are read first (``GET /api/public/v3/scores``): an unchanged one is not sent, a changed one
is sent with its first timestamp, so it replaces itself. A conversation's verdict of a session
(``Verdict.conversation``) is a session score: ``sessionId`` instead of ``traceId``, read back
by ``sessionId``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..errors import ServerRefused
from .base import Existing, PulledTrace, TraceServer, Window, epoch, iso
from .verdicts import SOURCE, Verdict

_OBSERVATIONS = "/api/public/v2/observations"
_PAGE = 1000
_SCORE_BATCH = 100
_TRACES_PER_SCORE_QUERY = 20


def _decoded(value: Any) -> Any:
    """The v2 API's JSON text of an input or output, as the object it encodes (text stays text)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


class Langfuse(TraceServer):
    kind = "langfuse"
    format = "langfuse"
    verdict_name = "scores"

    async def check(self) -> None:
        answer = await self.http.get("/api/public/projects") or {}
        names = [str(p.get("name")) for p in answer.get("data") or [] if isinstance(p, dict)]
        if self.source.project and self.source.project not in names:
            raise ServerRefused(
                f"langfuse at {self.source.base_url}: the keys belong to project {', '.join(map(repr, names)) or '(none)'}, not {self.source.project!r}"
            )

    async def _observations(self, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        cursor = None
        while True:
            page = await self.http.get(_OBSERVATIONS, {**params, "limit": _PAGE, "cursor": cursor}) or {}
            for item in page.get("data") or []:
                yield item
            cursor = (page.get("meta") or {}).get("cursor")
            if not cursor:
                return

    async def pull(self, window: Window) -> AsyncIterator[PulledTrace]:
        starts: dict[str, float] = {}
        bounds = {
            "fromStartTime": iso(window.start_s) if window.start_s is not None else None,
            "toStartTime": iso(window.end_s) if window.end_s is not None else None,
        }
        async for root in self._observations({"isRootObservation": True, "fields": "core,basic", **bounds}):
            start = epoch(root.get("startTime"))
            trace_id = root.get("traceId")
            if isinstance(trace_id, str) and start is not None:
                starts[trace_id] = min(start, starts.get(trace_id, start))
        for trace_id in sorted(starts, key=lambda t: (starts[t], t)):
            observations = []
            async for item in self._observations({"traceId": trace_id, "fields": "core,basic,io,model,usage"}):
                observations.append({**item, "input": _decoded(item.get("input")), "output": _decoded(item.get("output"))})
            yield PulledTrace(trace_id, starts[trace_id], [{"data": observations}])

    async def existing(self, verdicts: Sequence[Verdict]) -> dict[str, Existing]:
        keys = {v.key for v in verdicts}
        traces = sorted({v.trace_id for v in verdicts if _session_of(v) is None})
        found: dict[str, Existing] = {}
        queries = [{"traceId": ",".join(traces[first : first + _TRACES_PER_SCORE_QUERY])} for first in range(0, len(traces), _TRACES_PER_SCORE_QUERY)]
        sessions = sorted({v.session for v in verdicts if v.session is not None and _session_of(v) is not None})
        queries += [{"sessionId": session} for session in sessions]
        for query in queries:
            cursor = None
            while True:
                page = await self.http.get("/api/public/v3/scores", {**query, "fields": "details", "limit": 100, "cursor": cursor}) or {}
                for score in page.get("data") or []:
                    if score.get("id") in keys:
                        meta = score.get("metadata") or {}
                        found[score["id"]] = Existing(score["id"], meta.get("harness_fingerprint"), score.get("timestamp"))
                cursor = (page.get("meta") or {}).get("cursor")
                if not cursor:
                    break
        return found

    async def write(self, verdicts: Sequence[Verdict], existing: dict[str, Existing]) -> None:
        bodies = [score(v, existing.get(v.key)) for v in verdicts]
        for first in range(0, len(bodies), _SCORE_BATCH):
            answer = await self.http.post("/api/public/scores", bodies[first : first + _SCORE_BATCH]) or {}
            if answer.get("rejected"):
                errors = "; ".join(str(e.get("message")) for e in answer.get("errors") or [] if isinstance(e, dict))
                raise ServerRefused(f"langfuse at {self.source.base_url}: {answer['rejected']} score(s) rejected: {errors or 'no detail'}")


def _session_of(verdict: Verdict) -> str | None:
    """The session a conversation's verdict is a score of (None: a trace's score)."""
    return verdict.session if verdict.conversation else None


def score(verdict: Verdict, old: Existing | None) -> dict[str, Any]:
    session = _session_of(verdict)
    body: dict[str, Any] = {
        "id": verdict.key,
        **({"sessionId": session} if session is not None else {"traceId": verdict.trace_id}),
        "name": verdict.rubric,
        "value": verdict.score if verdict.score is not None else verdict.label,
        "dataType": "NUMERIC" if verdict.score is not None else "CATEGORICAL",
        "metadata": verdict.metadata(),
        "environment": SOURCE,
    }
    if verdict.span_id and session is None:
        body["observationId"] = verdict.span_id
    if verdict.reason is not None:
        body["comment"] = verdict.reason
    if old is not None and old.extra:
        body["timestamp"] = old.extra  # the same id and timestamp: Langfuse replaces the score
    return body
