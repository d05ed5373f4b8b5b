"""Arize Phoenix: spans from ``/v1/projects/{project}/spans/otlpv1``, verdicts as span annotations.

Pull: the root spans (``parent_id=null``) whose start is in the window give the traces; then every
span of those traces, whatever its start. Phoenix answers spans in OTLP's shape with snake_case
keys; each trace is written as one OTLP/JSON ``ExportTraceServiceRequest`` line (camelCase, hex ids,
nanosecond strings), which the OpenInference/OTel GenAI readers read as an exported file.

Write: ``POST /v1/span_annotations?sync=true``, one annotation per verdict on the span it judged:
``name`` the rubric, ``annotator_kind`` LLM, ``result`` {score, label, explanation: the judge's
reply}, ``metadata`` (judge, model, cost, rubric version, run, key, fingerprint), and
``identifier`` ``harness:<judge>``. Phoenix upserts on (name, span, identifier), so a second write
replaces rather than adds; the existing annotations are read first so unchanged ones are not sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

from ..errors import ServerUnavailable
from .base import Existing, PulledTrace, TraceServer, Window, iso
from .verdicts import SOURCE, Verdict

_PAGE = 1000
#: traces whose spans are asked in one request (each a query parameter)
_TRACES_PER_REQUEST = 25
_SPANS_PER_REQUEST = 50
_VALUE_KEYS = {
    "string_value": "stringValue",
    "bool_value": "boolValue",
    "int_value": "intValue",
    "double_value": "doubleValue",
    "bytes_value": "bytesValue",
}


def any_value(value: dict[str, Any] | None) -> dict[str, Any]:
    """Phoenix's snake_case AnyValue as OTLP/JSON's (``intValue`` as a string, as proto3 JSON writes it)."""
    for key, camel in _VALUE_KEYS.items():
        if value and value.get(key) is not None:
            return {camel: str(value[key]) if key == "int_value" else value[key]}
    if value and value.get("array_value") is not None:
        return {"arrayValue": {"values": [any_value(v) for v in value["array_value"].get("values") or []]}}
    if value and value.get("kvlist_value") is not None:
        return {"kvlistValue": {"values": attributes(value["kvlist_value"].get("values") or [])}}
    return {}


def attributes(items: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"key": item["key"], "value": any_value(item.get("value"))} for item in items or [] if item.get("key")]


def otlp_span(span: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": span["trace_id"],
        "spanId": span["span_id"],
        "name": span.get("name") or "",
        "startTimeUnixNano": str(span.get("start_time_unix_nano") or 0),
        "endTimeUnixNano": str(span.get("end_time_unix_nano") or span.get("start_time_unix_nano") or 0),
        "attributes": attributes(span.get("attributes")),
    }
    if span.get("parent_span_id"):
        out["parentSpanId"] = span["parent_span_id"]
    events = [
        {"name": e.get("name") or "", "timeUnixNano": str(e.get("time_unix_nano") or 0), "attributes": attributes(e.get("attributes"))}
        for e in span.get("events") or []
    ]
    if events:
        out["events"] = events
    status = span.get("status") or {}
    if status.get("code") is not None:
        out["status"] = {"code": status["code"], **({"message": status["message"]} if status.get("message") else {})}
    return out


def otlp_document(spans: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(spans, key=lambda s: (int(s["startTimeUnixNano"]), s["spanId"]))
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "phoenix"}, "spans": ordered}]}]}


class Phoenix(TraceServer):
    kind = "phoenix"
    format = "openinference"
    verdict_name = "span annotations"

    @property
    def _project(self) -> str:
        return quote(self.source.project, safe="")

    async def check(self) -> None:
        await self.http.get(f"/v1/projects/{self._project}")

    async def _spans(self, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        cursor = None
        while True:
            page = await self.http.get(f"/v1/projects/{self._project}/spans/otlpv1", {**params, "limit": _PAGE, "cursor": cursor})
            if not isinstance(page, dict) or not isinstance(page.get("data"), list):
                raise ServerUnavailable(f"phoenix at {self.source.base_url}: a span page without data")
            for span in page["data"]:
                yield span
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def pull(self, window: Window) -> AsyncIterator[PulledTrace]:
        starts: dict[str, float] = {}
        bounds = {
            "start_time": iso(window.start_s) if window.start_s is not None else None,
            "end_time": iso(window.end_s) if window.end_s is not None else None,
        }
        async for root in self._spans({"parent_id": "null", **bounds}):
            start = int(root.get("start_time_unix_nano") or 0) / 1e9
            starts[root["trace_id"]] = min(start, starts.get(root["trace_id"], start))
        order = sorted(starts, key=lambda t: (starts[t], t))
        for first in range(0, len(order), _TRACES_PER_REQUEST):
            batch = order[first : first + _TRACES_PER_REQUEST]
            spans: dict[str, list[dict[str, Any]]] = {t: [] for t in batch}
            async for span in self._spans({"trace_id": batch}):
                spans.setdefault(span["trace_id"], []).append(otlp_span(span))
            for trace_id in batch:
                yield PulledTrace(trace_id, starts[trace_id], [otlp_document(spans[trace_id])])

    async def existing(self, verdicts: Sequence[Verdict]) -> dict[str, Existing]:
        keys = {v.key for v in verdicts}
        span_ids = sorted({v.span_id for v in verdicts if v.span_id})
        found: dict[str, Existing] = {}
        for first in range(0, len(span_ids), _SPANS_PER_REQUEST):
            cursor = None
            while True:
                page = await self.http.get(
                    f"/v1/projects/{self._project}/span_annotations",
                    {"span_ids": span_ids[first : first + _SPANS_PER_REQUEST], "limit": 1000, "cursor": cursor},
                )
                for annotation in page.get("data") or []:
                    meta = annotation.get("metadata") or {}
                    if meta.get("harness_key") in keys:
                        found[meta["harness_key"]] = Existing(str(annotation.get("id")), meta.get("harness_fingerprint"))
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return found

    async def write(self, verdicts: Sequence[Verdict], existing: dict[str, Existing]) -> None:
        body = [annotation(v) for v in verdicts if v.span_id]
        for first in range(0, len(body), 100):
            await self.http.post("/v1/span_annotations", {"data": body[first : first + 100]}, params={"sync": "true"})


def annotation(verdict: Verdict) -> dict[str, Any]:
    result: dict[str, Any] = {"explanation": verdict.reason}
    if verdict.score is not None:
        result["score"] = verdict.score
    if verdict.label is not None:
        result["label"] = verdict.label
    return {
        "span_id": verdict.span_id,
        "name": verdict.rubric,
        "annotator_kind": "LLM",
        "result": result,
        "metadata": verdict.metadata(),
        "identifier": f"{SOURCE}:{verdict.judge}",
    }
