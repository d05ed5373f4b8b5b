"""LangSmith's REST API: runs from ``POST /runs/query``, verdicts as feedback on the judged run.

The key goes in ``x-api-key``; the project is found by name (``GET /sessions?name=``, an empty
list: no such project).

Pull: the root runs (``is_root``) of the project whose ``start_time`` is in the window (the lower
bound as ``start_time``, the upper as the filter ``lt(start_time, "...")``) give the traces; then
each trace's runs (``trace``), cursor-paged (``cursors.next``). Each run is written as one line, as
the SDK serialises a ``Run``, which the ``langsmith`` reader reads as an exported file.

Write: ``POST /feedback`` per verdict: ``id`` the verdict's key, ``run_id`` the judged run,
``trace_id``, ``key`` the rubric, ``score`` (or ``value``, a label), ``comment`` the judge's reply,
``feedback_source`` ``{"type": "model", "metadata": ...}``. The runs' feedback is read first
(``GET /feedback?run=``): one with the same key and content is left alone; one whose content
changed is updated in place (``PATCH /feedback/{id}``: score, value, comment).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..errors import ServerRefused
from .base import Existing, PulledTrace, TraceServer, Window, epoch, iso
from .verdicts import Verdict

_PAGE = 100
_RUNS_PER_FEEDBACK_QUERY = 20


def content(score: float | None, value: Any, comment: str | None) -> str:
    """What a feedback says, as compared (PATCH cannot change its source's metadata)."""
    return hashlib.sha256(json.dumps([score, value, comment], default=str).encode()).hexdigest()[:16]


class LangSmith(TraceServer):
    kind = "langsmith"
    format = "langsmith"
    verdict_name = "feedback"

    session_id: str | None = None

    async def check(self) -> None:
        answer = await self.http.get("/sessions", {"name": self.source.project, "limit": 1})
        projects = answer if isinstance(answer, list) else []
        if not projects:
            raise ServerRefused(f"langsmith at {self.source.base_url}: no project named {self.source.project!r} for this key")
        self.session_id = str(projects[0]["id"])

    async def _runs(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        cursor = None
        while True:
            page = await self.http.post("/runs/query", {**body, "limit": _PAGE, **({"cursor": cursor} if cursor else {})}) or {}
            for run in page.get("runs") or []:
                yield run
            cursor = (page.get("cursors") or {}).get("next")
            if not cursor:
                return

    async def pull(self, window: Window) -> AsyncIterator[PulledTrace]:
        if self.session_id is None:
            await self.check()
        query: dict[str, Any] = {"session": [self.session_id], "is_root": True}
        if window.start_s is not None:
            query["start_time"] = iso(window.start_s)
        if window.end_s is not None:
            query["filter"] = f'lt(start_time, "{iso(window.end_s)}")'
        starts: dict[str, float] = {}
        async for root in self._runs(query):
            start = epoch(root.get("start_time"))
            trace_id = str(root.get("trace_id") or root.get("id"))
            if start is not None and window.holds(start):
                starts[trace_id] = min(start, starts.get(trace_id, start))
        for trace_id in sorted(starts, key=lambda t: (starts[t], t)):
            runs = [run async for run in self._runs({"session": [self.session_id], "trace": trace_id})]
            runs.sort(key=lambda r: str(r.get("dotted_order") or r.get("start_time") or ""))
            yield PulledTrace(trace_id, starts[trace_id], runs)

    def fingerprint(self, verdict: Verdict) -> str:
        return content(verdict.score, verdict.label, verdict.reason)

    async def existing(self, verdicts: Sequence[Verdict]) -> dict[str, Existing]:
        keys = {v.key for v in verdicts}
        runs = sorted({v.span_id for v in verdicts if v.span_id})
        found: dict[str, Existing] = {}
        for first in range(0, len(runs), _RUNS_PER_FEEDBACK_QUERY):
            offset = 0
            while True:
                page = await self.http.get("/feedback", {"run": runs[first : first + _RUNS_PER_FEEDBACK_QUERY], "limit": _PAGE, "offset": offset})
                items = page if isinstance(page, list) else []
                for item in items:
                    if str(item.get("id")) in keys:
                        found[str(item["id"])] = Existing(str(item["id"]), content(item.get("score"), item.get("value"), item.get("comment")))
                if len(items) < _PAGE:
                    break
                offset += len(items)
        return found

    async def write(self, verdicts: Sequence[Verdict], existing: dict[str, Existing]) -> None:
        for verdict in verdicts:
            if verdict.key in existing:
                await self.http.patch(f"/feedback/{verdict.key}", {"score": verdict.score, "value": verdict.label, "comment": verdict.reason})
            else:
                await self.http.post("/feedback", feedback(verdict))


def feedback(verdict: Verdict) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": verdict.key,
        "run_id": verdict.span_id,
        "trace_id": verdict.trace_id,
        "key": verdict.rubric,
        "comment": verdict.reason,
        "feedback_source": {"type": "model", "metadata": verdict.metadata()},
    }
    if verdict.score is not None:
        body["score"] = verdict.score
    if verdict.label is not None:
        body["value"] = verdict.label
    return body
