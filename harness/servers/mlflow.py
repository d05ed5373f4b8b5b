"""MLflow tracking server: traces from ``/api/3.0/mlflow/traces``, verdicts as assessments (feedback).

Pull: the experiment is found by name (``experiments/get-by-name``); ``traces/search`` lists the
traces whose ``timestamp_ms`` (the trace's start) is in the window, oldest first; ``traces/batchGet``
returns each with its spans, as OpenTelemetry proto JSON, when the server keeps them in its
tracking store; otherwise (a server whose tracing goes through its artifact store, as with its
basic-auth app) they are the trace's ``traces.json`` artifact, read through the server's artifact
proxy. Each is written as the document ``Trace.to_json()`` writes (``info`` and ``data.spans``, base64 ids, attribute values as JSON text),
which the ``mlflow`` reader reads as an exported file. Traces still in progress are left for a
later pull.

Write: an assessment per verdict, ``POST /api/3.0/mlflow/traces/{trace_id}/assessments``: a
feedback named after the rubric on the judged span (``span_id``), ``feedback.value`` the score (or
label), ``rationale`` the judge's reply, ``source`` ``LLM_JUDGE`` with the judge's name, and the
metadata (judge, model, cost, rubric version, run, key, fingerprint). MLflow gives assessments its
own ids, so the trace's assessments are read first (``GET traces/{id}``, its info): one with the verdict's
key and fingerprint is left alone, one with the key only is updated in place (PATCH).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

from ..errors import ServerRefused, ServerUnavailable
from .base import Existing, PulledTrace, TraceServer, Window, epoch
from .verdicts import Verdict

_PAGE = 500
_TRACES_PER_REQUEST = 20
_TRACES_PATH = "/api/3.0/mlflow/traces"
_SPANS_LOCATION, _TRACKING_STORE, _ARTIFACTS = "mlflow.trace.spansLocation", "TRACKING_STORE", "mlflow.artifactLocation"


def _b64(hex_id: str | None) -> str | None:
    if not hex_id:
        return None
    try:
        return base64.b64encode(bytes.fromhex(hex_id)).decode()
    except ValueError:
        return hex_id


def _id_hex(raw: str | None) -> str | None:
    """Span ids come back from the REST API as base64 (proto3 JSON bytes)."""
    if not raw:
        return None
    try:
        return base64.b64decode(raw, validate=True).hex()
    except ValueError:
        return raw


def any_value(value: dict[str, Any] | None) -> Any:
    """An OpenTelemetry proto JSON AnyValue (snake_case keys) as a Python value."""
    if not value:
        return None
    for key in ("string_value", "bool_value", "double_value", "bytes_value"):
        if key in value:
            return value[key]
    if "int_value" in value:
        return int(value["int_value"])
    if "array_value" in value:
        return [any_value(v) for v in (value["array_value"] or {}).get("values") or []]
    if "kvlist_value" in value:
        return {kv["key"]: any_value(kv.get("value")) for kv in (value["kvlist_value"] or {}).get("values") or []}
    return None


def span_dict(span: dict[str, Any]) -> dict[str, Any]:
    """A REST span (OpenTelemetry proto JSON) as ``Span.to_dict()`` writes it."""
    attributes = {}
    for item in span.get("attributes") or []:
        value = any_value(item.get("value"))
        attributes[item["key"]] = json.dumps(value, ensure_ascii=False)
    status = span.get("status") or {}
    return {
        "trace_id": span.get("trace_id"),
        "span_id": span.get("span_id"),
        "parent_span_id": span.get("parent_span_id") or None,
        "name": span.get("name") or "",
        "start_time_unix_nano": int(span.get("start_time_unix_nano") or 0),
        "end_time_unix_nano": int(span.get("end_time_unix_nano") or 0),
        "events": span.get("events") or [],
        "status": {"code": status.get("code") or "STATUS_CODE_UNSET", "message": status.get("message") or ""},
        "attributes": attributes,
    }


def trace_document(trace: dict[str, Any]) -> dict[str, Any]:
    info = dict(trace.get("trace_info") or {})
    spans = sorted((span_dict(s) for s in trace.get("spans") or []), key=lambda s: (s["start_time_unix_nano"], s["span_id"] or ""))
    return {"info": info, "data": {"spans": spans}}


class MLflow(TraceServer):
    kind = "mlflow"
    format = "mlflow"
    verdict_name = "assessments"

    experiment_id: str | None = None

    async def check(self) -> None:
        answer = await self.http.get("/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": self.source.project})
        experiment = (answer or {}).get("experiment") or {}
        if not experiment.get("experiment_id"):
            raise ServerUnavailable(f"mlflow at {self.source.base_url}: experiments/get-by-name answered without an experiment id")
        self.experiment_id = str(experiment["experiment_id"])

    async def pull(self, window: Window) -> AsyncIterator[PulledTrace]:
        if self.experiment_id is None:
            await self.check()
        clauses = []
        if window.start_s is not None:
            clauses.append(f"trace.timestamp_ms >= {int(window.start_s * 1000)}")
        if window.end_s is not None:
            clauses.append(f"trace.timestamp_ms < {int(window.end_s * 1000)}")
        infos: list[tuple[float, str, dict[str, Any]]] = []
        token = None
        while True:
            body: dict[str, Any] = {
                "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": self.experiment_id}}],
                "max_results": _PAGE,
                "order_by": ["timestamp_ms ASC"],
            }
            if clauses:
                body["filter"] = " AND ".join(clauses)
            if token:
                body["page_token"] = token
            page = await self.http.post(f"{_TRACES_PATH}/search", body) or {}
            for info in page.get("traces") or []:
                start = epoch(info.get("request_time"))
                if info.get("state") == "IN_PROGRESS" or start is None or not window.holds(start):
                    continue
                infos.append((start, str(info["trace_id"]), info))
            token = page.get("next_page_token")
            if not token:
                break
        infos.sort(key=lambda item: (item[0], item[1]))
        for first in range(0, len(infos), _TRACES_PER_REQUEST):
            batch = infos[first : first + _TRACES_PER_REQUEST]
            in_store = [t for _, t, info in batch if (info.get("tags") or {}).get(_SPANS_LOCATION) == _TRACKING_STORE]
            answer = await self.http.get(f"{_TRACES_PATH}/batchGet", {"trace_ids": in_store}) if in_store else {}
            by_id = {str((t.get("trace_info") or {}).get("trace_id")): trace_document(t) for t in (answer or {}).get("traces") or []}
            for start, trace_id, info in batch:
                document = by_id.get(trace_id) or (None if trace_id in in_store else await self._from_artifacts(info))
                if document is not None:
                    yield PulledTrace(trace_id, start, [document])

    async def _from_artifacts(self, info: dict[str, Any]) -> dict[str, Any]:
        """A trace whose spans the server keeps as an artifact (``traces.json``, ``Span.to_dict()``
        each), as an MLflow server whose tracing goes through its artifact store does."""
        location = str((info.get("tags") or {}).get(_ARTIFACTS, ""))
        if not location.startswith("mlflow-artifacts:"):
            raise ServerRefused(
                f"mlflow at {self.source.base_url}: trace {info.get('trace_id')} keeps its spans at {location or 'no location'}, "
                "which the tracking server does not serve (only mlflow-artifacts: locations are read)"
            )
        path = location.removeprefix("mlflow-artifacts:").lstrip("/")
        data = await self.http.get(f"/api/2.0/mlflow-artifacts/artifacts/{quote(path)}/traces.json") or {}
        spans = sorted(data.get("spans") or [], key=lambda s: (int(s.get("start_time_unix_nano") or 0), str(s.get("span_id"))))
        return {"info": info, "data": {"spans": spans}}

    async def existing(self, verdicts: Sequence[Verdict]) -> dict[str, Existing]:
        keys = {v.key for v in verdicts}
        found: dict[str, Existing] = {}
        #: the experiment each trace is in, where the server says
        experiments: dict[str, str] = {}
        trace_ids = sorted({v.trace_id for v in verdicts})
        for trace_id in trace_ids:
            answer = await self.http.get(f"{_TRACES_PATH}/{quote(trace_id, safe='')}") or {}
            info = (answer.get("trace") or {}).get("trace_info") or {}
            if (experiment := _experiment_of(info)) is not None:
                experiments[trace_id] = experiment
            for assessment in info.get("assessments") or []:
                meta = assessment.get("metadata") or {}
                if meta.get("harness_key") in keys and assessment.get("valid", True) is not False:
                    found[meta["harness_key"]] = Existing(str(assessment.get("assessment_id")), meta.get("harness_fingerprint"))
        self._refuse_another_experiment(trace_ids, experiments)
        return found

    def _refuse_another_experiment(self, trace_ids: list[str], experiments: dict[str, str]) -> None:
        """A trace id is the server's, not the experiment's: ``GET traces/{id}`` answers for a trace
        of any experiment. A target experiment that holds none of the run's traces is a mistake
        (the wrong experiment named), refused in one line before anything is written, as Phoenix
        refuses a project without the spans; a trace whose experiment the server does not say is
        not held against it."""
        if self.experiment_id is None or not trace_ids or len(experiments) < len(trace_ids):
            return
        if any(experiment == self.experiment_id for experiment in experiments.values()):
            return
        elsewhere = sorted(set(experiments.values()))
        raise ServerRefused(
            f"mlflow at {self.source.base_url}: experiment {self.source.project!r} holds none of the run's {len(trace_ids)} traces "
            f"(they are in experiment id {', '.join(elsewhere)}); push to the experiment the traces were pulled from"
        )

    async def write(self, verdicts: Sequence[Verdict], existing: dict[str, Existing]) -> None:
        for verdict in verdicts:
            path = f"{_TRACES_PATH}/{quote(verdict.trace_id, safe='')}/assessments"
            body = assessment(verdict)
            if (old := existing.get(verdict.key)) is not None:
                await self.http.patch(f"{path}/{quote(old.server_id, safe='')}", {"assessment": body, "update_mask": "feedback,rationale,metadata"})
            else:
                await self.http.post(path, {"assessment": body})


def _experiment_of(info: dict[str, Any]) -> str | None:
    """The experiment id of a trace's info (MLflow 3's ``trace_location``, else 2's ``experiment_id``)."""
    location = (info.get("trace_location") or {}).get("mlflow_experiment") or {}
    experiment = location.get("experiment_id") or info.get("experiment_id")
    return str(experiment) if experiment else None


def assessment(verdict: Verdict) -> dict[str, Any]:
    body: dict[str, Any] = {
        "assessment_name": verdict.rubric,
        "trace_id": verdict.trace_id,
        "source": {"source_type": "LLM_JUDGE", "source_id": verdict.judge},
        "feedback": {"value": verdict.score if verdict.score is not None else verdict.label},
        # MLflow's metadata is a string map
        "metadata": {k: v if isinstance(v, str) else json.dumps(v) for k, v in verdict.metadata().items()},
    }
    if verdict.span_id:
        body["span_id"] = verdict.span_id
    if verdict.reason is not None:
        body["rationale"] = verdict.reason
    return body
