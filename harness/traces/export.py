"""Write a run's verdicts back: OpenTelemetry ``gen_ai.evaluation.result`` events, CSV or Parquet.

``otel`` writes OTLP JSON logs (one ``ExportLogsServiceRequest`` per line, as the OpenTelemetry
SDK's JSON file exporter does), one log record per judgment, shaped as the GenAI semantic
conventions' ``gen_ai.evaluation.result`` event: ``eventName``, the judged trace's ``traceId`` and
the judged span's ``spanId`` (remembered in the transcript's metadata when it was read from a
trace), and the attributes ``gen_ai.evaluation.name`` (the rubric), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` and ``gen_ai.evaluation.explanation``; a failed judgment carries
``error.type``. Collector ``otlpjsonfile`` receivers and most backends ingest the file as is.

``csv`` (stdlib) and ``parquet`` (needs pyarrow) write one row per judgment with the trace ids.

The deterministic agent metrics of results.jsonl (``agent``: trajectory match, failed steps, ...)
are exported after the judgments, one event or row each, with no judge: ``harness.kind`` is
``agent_metric`` and ``harness.steps`` lists the indices of the steps behind the value.
"""

from __future__ import annotations

import csv
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..jsonlines import iter_json_objects
from .loader import iter_transcripts

EXPORT_FORMATS = ("otel", "csv", "parquet")
EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = {"name": "harness", "version": "0.1.0"}
_BATCH = 512
COLUMNS = (
    "transcript_id",
    "trace_id",
    "span_id",
    "judge",
    "rubric",
    "rubric_version",
    "status",
    "score",
    "label",
    "reason",
    "error",
    "latency_ms",
    "cost_usd",
    "cached",
)


@dataclass(slots=True)
class ExportResult:
    path: Path
    judgments: int
    linked: int  # judgments whose transcript names its trace and span
    #: the agent metrics exported beside the judgments (events or rows with no judge)
    agent_metrics: int = 0


def _run_input(run_dir: Path, given: Path | None) -> Path | None:
    if given is not None:
        return given
    summary = run_dir / "summary.json"
    try:
        recorded = json.loads(summary.read_text(encoding="utf-8")).get("input")
    except (OSError, json.JSONDecodeError):
        return None
    return Path(recorded) if recorded else None


def trace_links(input_path: Path | None, input_format: str) -> dict[str, tuple[str, str]]:
    """``transcript id -> (trace id, span id)`` for transcripts read from traces."""
    if input_path is None or not input_path.is_file():
        return {}
    links = {}
    for _, record in iter_transcripts(input_path, on_bad="skip", format=input_format):
        meta = record.metadata or {}
        if isinstance(meta.get("trace_id"), str) and isinstance(meta.get("span_id"), str):
            links[record.id] = (meta["trace_id"], meta["span_id"])
    return links


def _judgments(run_dir: Path) -> Iterator[dict[str, Any]]:
    path = run_dir / "judgments.jsonl"
    if not path.is_file():
        raise UserInputError(f"{run_dir}: not a run directory (no judgments.jsonl)")
    for _, row in iter_json_objects(path):
        yield row


def _agent_rows(run_dir: Path) -> Iterator[dict[str, Any]]:
    """results.jsonl's agent metrics, as rows shaped like a judgment's with no judge."""
    path = run_dir / "results.jsonl"
    if not path.is_file():
        return
    for _, row in iter_json_objects(path):
        agent = row.get("agent")
        if not isinstance(agent, dict):
            continue
        reasons = row.get("agent_unscored") or {}
        behind = row.get("agent_steps") or {}
        for name, value in agent.items():
            yield {
                "transcript_id": row["transcript_id"],
                "judge": None,
                "rubric": name,
                "status": "scored" if value is not None else "unscored",
                "score": value,
                "reason": reasons.get(name),
                "steps": behind.get(name) or [],
            }


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _explanation(row: dict[str, Any]) -> str | None:
    if row.get("status") == "scored":
        return row.get("raw_output")
    return f"{row.get('status')}: {row.get('reason') or row.get('error') or ''}".rstrip(": ")


def evaluation_record(row: dict[str, Any], link: tuple[str, str] | None, now_ns: int) -> dict[str, Any]:
    """One judgment as an OTLP/JSON LogRecord of the ``gen_ai.evaluation.result`` event."""
    attributes = [_attr("gen_ai.evaluation.name", row["rubric"])]
    if row.get("score") is not None:
        attributes.append(_attr("gen_ai.evaluation.score.value", float(row["score"])))
    if row.get("label") is not None:
        attributes.append(_attr("gen_ai.evaluation.score.label", row["label"]))
    if (explanation := _explanation(row)) is not None:
        attributes.append(_attr("gen_ai.evaluation.explanation", explanation))
    if row.get("status") == "failed":
        attributes.append(_attr("error.type", (row.get("error") or "judge_error").split(":")[0]))
    attributes += [
        _attr("harness.status", row.get("status") or ""),
        _attr("harness.transcript_id", row["transcript_id"]),
    ]
    if row.get("judge") is not None:
        attributes += [_attr("harness.judge", row["judge"]), _attr("harness.rubric_version", row.get("rubric_version") or "")]
    else:
        attributes.append(_attr("harness.kind", "agent_metric"))
        if row.get("steps"):
            attributes.append({"key": "harness.steps", "value": {"arrayValue": {"values": [{"intValue": str(i)} for i in row["steps"]]}}})
    score = row.get("score")
    body = f"{row['rubric']}: {score if score is not None else row.get('label') or row.get('status')}"
    record: dict[str, Any] = {
        "timeUnixNano": str(now_ns),
        "observedTimeUnixNano": str(now_ns),
        "severityNumber": 9,
        "severityText": "INFO",
        "body": {"stringValue": body},
        "attributes": attributes,
        "eventName": EVENT_NAME,
    }
    if link is not None:
        record["traceId"], record["spanId"] = link
        record["flags"] = 1
    return record


def _request(records: list[dict[str, Any]]) -> str:
    resource = {"attributes": [_attr("service.name", "harness")]}
    doc = {"resourceLogs": [{"resource": resource, "scopeLogs": [{"scope": SCOPE, "logRecords": records}]}]}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def write_otel(rows: Iterator[dict[str, Any]], links: dict[str, tuple[str, str]], out: Path) -> tuple[int, int]:
    count = linked = 0
    now_ns = time.time_ns()
    batch: list[dict[str, Any]] = []
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            link = links.get(row["transcript_id"])
            batch.append(evaluation_record(row, link, now_ns))
            count, linked = count + 1, linked + (link is not None)
            if len(batch) >= _BATCH:
                fh.write(_request(batch) + "\n")
                batch = []
        if batch:
            fh.write(_request(batch) + "\n")
    return count, linked


def _table_rows(rows: Iterator[dict[str, Any]], links: dict[str, tuple[str, str]]) -> Iterator[dict[str, Any]]:
    for row in rows:
        trace_id, span_id = links.get(row["transcript_id"], (None, None))
        yield {**{c: row.get(c) for c in COLUMNS}, "trace_id": trace_id, "span_id": span_id}


def write_csv(rows: Iterator[dict[str, Any]], links: dict[str, tuple[str, str]], out: Path) -> tuple[int, int]:
    count = linked = 0
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for row in _table_rows(rows, links):
            writer.writerow(row)
            count, linked = count + 1, linked + (row["trace_id"] is not None)
    return count, linked


def write_parquet(rows: Iterator[dict[str, Any]], links: dict[str, tuple[str, str]], out: Path) -> tuple[int, int]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserInputError("--format parquet needs pyarrow (pip install pyarrow); --format csv needs nothing") from None
    table_rows = list(_table_rows(rows, links))
    pq.write_table(pa.Table.from_pylist(table_rows) if table_rows else pa.table({c: [] for c in COLUMNS}), out)
    return len(table_rows), sum(r["trace_id"] is not None for r in table_rows)


_WRITERS = {"otel": (write_otel, "evaluations.otlp.jsonl"), "csv": (write_csv, "judgments.csv"), "parquet": (write_parquet, "judgments.parquet")}


def export_run(run_dir: Path, fmt: str, out: Path | None = None, input: Path | None = None, input_format: str = "auto") -> ExportResult:
    """Export ``run_dir``'s judgments as ``fmt``; trace ids come from the run's input file."""
    if fmt not in _WRITERS:
        raise UserInputError(f"unknown --format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
    if not run_dir.is_dir():
        raise UserInputError(f"{run_dir}: no such run directory")
    writer, default_name = _WRITERS[fmt]
    path = out or run_dir / default_name
    rows = _judgments(run_dir)
    first = next(rows, None)  # checks the run directory before anything is written
    links = trace_links(_run_input(run_dir, input), input_format)
    agent = [0, 0]  # agent metric rows written, and of those linked to their trace

    def agent_rows() -> Iterator[dict[str, Any]]:
        for row in _agent_rows(run_dir):
            agent[0] += 1
            agent[1] += row["transcript_id"] in links
            yield row

    count, linked = writer(itertools.chain(_chain(first, rows), agent_rows()), links, path)
    return ExportResult(path=path, judgments=count - agent[0], linked=linked - agent[1], agent_metrics=agent[0])


def _chain(first: dict[str, Any] | None, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if first is not None:
        yield first
        yield from rows
