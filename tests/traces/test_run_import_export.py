"""End to end: `harness run --format otel` against a real judge server on 127.0.0.1, then
`harness export` back to OTel (checked against the OpenTelemetry SDK's own encoding), CSV and
Parquet, and `harness import` round-tripping through JSONL."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.planning import RunOptions
from harness.runner import run_evaluation
from harness.traces.export import EVENT_NAME
from tests.e2e_support import judge, read_jsonl, serve, write_config
from tests.test_report import page_data, page_details
from tests.traces.support import INSPECT_EVAL, OTEL, QUESTIONS, TOOL_RESULT, deadline, raw_spans

ENV = {"COLUMNS": "400", "NO_COLOR": "1"}


def unwrapped(output: str) -> str:
    """The output with its line breaks read as spaces: the CLI's console, made when its module is
    first imported, wraps at 80 columns whatever ``COLUMNS`` a later invocation sets, and a long
    temp path (xdist's) wraps a message."""
    return " ".join(output.split())


async def _run(tmp_path: Path, base_url: str, source: Path, fmt: str) -> Path:
    config = write_config(tmp_path / "harness.toml", [judge("mini", base_url)])
    out = tmp_path / "out"
    options = RunOptions(
        input=source, out=out, config=config, cache=tmp_path / "cache.sqlite", progress=False, format=fmt, rubrics=["faithfulness", "relevance"]
    )
    outcome = await asyncio.wait_for(run_evaluation(options), timeout=120)
    assert outcome.exit_code == 0, outcome.message
    return out


async def test_run_format_otel_judges_each_trace(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        out = await _run(tmp_path, server.base_url, OTEL, "otel")
        prompts = [json.dumps(r["body"]["messages"]) for r in server.requests if r["path"].endswith("/chat/completions")]
    agents = [s for s in raw_spans(OTEL) if s["attrs"].get("gen_ai.operation.name") == "invoke_agent"]
    results = read_jsonl(out / "results.jsonl")
    judgments = read_jsonl(out / "judgments.jsonl")
    assert [r["transcript_id"] for r in results][:2] == [a["traceId"] for a in agents]
    assert len(results) == 3
    # relevance for all three; faithfulness only where a tool result gave contexts (the agent traces)
    assert sorted((j["rubric"], j["status"]) for j in judgments if j["status"] == "scored") == sorted(
        [("relevance", "scored")] * 3 + [("faithfulness", "scored")] * 2
    )
    assert all(results[i]["performance"]["tool_calls"] == 1 for i in range(2))
    assert any(QUESTIONS[0] in p and TOOL_RESULT in p for p in prompts)  # query and tool result reached the judge

    # Write-back: one gen_ai.evaluation.result event per judgment, on the judged trace and span.
    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(out), "--format", "otel"], env=ENV)
    assert result.exit_code == 0, result.output
    agent_values = [(r["transcript_id"], name, value) for r in results for name, value in (r.get("agent") or {}).items()]
    assert agent_values  # the traces' tool calls give the agent metrics, exported after the judgments
    said = " ".join(result.output.split())  # read unwrapped: a long temp path wraps the line
    assert f"{len(judgments)} judgments, {len(judgments)} linked to their trace and span; {len(agent_values)} agent metrics" in said
    docs = read_jsonl(out / "evaluations.otlp.jsonl")
    records = [r for d in docs for rl in d["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    assert len(records) == len(judgments) + len(agent_values)
    records, agent_records = records[: len(judgments)], records[len(judgments) :]
    for record, (tid, name, value) in zip(agent_records, agent_values, strict=True):
        attrs = {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}
        assert (attrs["harness.kind"], attrs["gen_ai.evaluation.name"], attrs.get("gen_ai.evaluation.score.value")) == ("agent_metric", name, value)
        assert "harness.judge" not in attrs and attrs["harness.transcript_id"] == tid
        if tid in {s["traceId"] for s in agents}:
            assert record["traceId"] == tid
    roots = {s["traceId"]: s["spanId"] for s in agents}
    for record, j in zip(records, judgments, strict=True):
        attrs = {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}
        assert record["eventName"] == EVENT_NAME
        assert attrs["gen_ai.evaluation.name"] == j["rubric"]
        assert attrs.get("gen_ai.evaluation.score.value") == j["score"]
        if j["transcript_id"] in roots:
            assert (record["traceId"], record["spanId"]) == (j["transcript_id"], roots[j["transcript_id"]])
        if j["status"] == "scored":
            assert attrs["gen_ai.evaluation.explanation"] == j["raw_output"]
        else:
            assert attrs["gen_ai.evaluation.explanation"].startswith(j["status"])
    _same_as_the_otel_sdk(records[0])

    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(out), "--format", "csv"], env=ENV)
    assert result.exit_code == 0, result.output
    with (out / "judgments.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["transcript_id"], r["rubric"], r["judge"]) for r in rows[len(judgments) :]] == [(t, n, "") for t, n, _ in agent_values]
    rows = rows[: len(judgments)]
    assert [(r["transcript_id"], r["rubric"], r["status"]) for r in rows] == [(j["transcript_id"], j["rubric"], j["status"]) for j in judgments]
    assert [float(r["score"]) if r["score"] else None for r in rows] == [j["score"] for j in judgments]
    assert {r["trace_id"] for r in rows} == {j["transcript_id"] for j in judgments}

    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(out), "--format", "parquet"], env=ENV)
    if importlib.util.find_spec("pyarrow") is None:
        assert result.exit_code == 2
        assert result.output.strip() == "error: --format parquet needs pyarrow (pip install pyarrow); --format csv needs nothing"
    else:
        import pyarrow.parquet as pq

        assert result.exit_code == 0, result.output
        assert pq.read_table(out / "judgments.parquet").num_rows == len(judgments) + len(agent_values)


def _same_as_the_otel_sdk(record: dict) -> None:
    """Emit the same event through the OpenTelemetry SDK and its OTLP JSON file exporter: same record."""
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    stream = io.StringIO()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(stream=stream)))
    attrs = {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}
    provider.get_logger("harness", "0.1.0").emit(
        LogRecord(
            timestamp=int(record["timeUnixNano"]),
            observed_timestamp=int(record["observedTimeUnixNano"]),
            trace_id=int(record["traceId"], 16),
            span_id=int(record["spanId"], 16),
            trace_flags=1,
            severity_text="INFO",
            severity_number=SeverityNumber.INFO,
            body=record["body"]["stringValue"],
            attributes=attrs,
            event_name=EVENT_NAME,
        )
    )
    provider.shutdown()
    sdk = json.loads(stream.getvalue())["resourceLogs"][0]["scopeLogs"][0]
    assert sdk["scope"] == {"name": "harness", "version": "0.1.0"}
    assert sdk["logRecords"] == [record]


async def test_run_inspect_log_with_reference(tmp_path: Path) -> None:
    with serve() as server:
        assert server.base_url
        out = await _run(tmp_path, server.base_url, INSPECT_EVAL, "auto")
    assert [r["transcript_id"] for r in read_jsonl(out / "results.jsonl")] == ["paris", "umbrella"]
    # The report reads the texts back from the .eval log the run named in summary.json.
    with deadline(120):
        result = CliRunner().invoke(app, ["report", str(out)], env=ENV)
    assert result.exit_code == 0, result.output
    data, details = page_data(out / "report.html"), page_details(out / "report.html")
    assert [d["texts"]["query"] for d in details] == QUESTIONS and data["meta"]["notes"] == []
    # No trace and span ids in an Inspect log: the export says so instead of inventing them.
    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(out)], env=ENV)
    assert result.exit_code == 0 and "0 linked to their trace and span" in unwrapped(result.output)
    records = [r for d in read_jsonl(out / "evaluations.otlp.jsonl") for r in d["resourceLogs"][0]["scopeLogs"][0]["logRecords"]]
    assert records and all("traceId" not in r for r in records)


def test_import_writes_what_run_reads(tmp_path: Path) -> None:
    target = tmp_path / "transcripts.jsonl"
    with deadline(60):
        result = CliRunner().invoke(app, ["import", str(OTEL), "--out", str(target)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "3 transcripts from otel, 0 skipped" in unwrapped(result.output)
    from harness.traces.loader import iter_transcripts

    imported = [t for _, t in iter_transcripts(target, format="jsonl")]
    direct = [t for _, t in iter_transcripts(OTEL)]
    assert imported == direct
    assert [t.resolved() for t in imported] == [t.resolved() for t in direct]


def test_export_of_a_missing_run_is_one_line(tmp_path: Path) -> None:
    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(tmp_path / "nope")], env=ENV)
    assert result.exit_code == 2 and result.output.strip() == f"error: {tmp_path / 'nope'}: no such run directory"
    (tmp_path / "empty").mkdir()
    with deadline(60):
        result = CliRunner().invoke(app, ["export", str(tmp_path / "empty"), "--format", "xml"], env=ENV)
    assert result.exit_code == 2 and "'xml' is not one of 'otel', 'csv', 'parquet'" in unwrapped(result.output)
