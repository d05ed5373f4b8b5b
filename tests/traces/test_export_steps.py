"""``harness export`` puts what is found about a step on that step's span: the span of the tool's
run when the trace has one, else an ``execute_tool`` span it creates under the transcript's span.
The trace is written by the real OpenTelemetry SDK; the created spans are checked against the
SDK's own encoding, and a trace holding them reads back (``harness import``) to the same steps."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.planning import RunOptions
from harness.runner import run_evaluation
from harness.traces.export import EVENT_NAME
from harness.traces.loader import iter_transcripts
from tests.e2e_support import read_jsonl
from tests.traces.support import deadline

pytestmark = pytest.mark.timeout(120)

ENV = {"COLUMNS": "400", "NO_COLOR": "1"}


def unwrapped(output: str) -> str:
    """The output with its line breaks read as spaces: the CLI's console, made when its module is
    first imported, wraps at 80 columns whatever ``COLUMNS`` a later invocation sets, and a long
    temp path (xdist's) wraps a message."""
    return " ".join(output.split())


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
}
T0 = 1_760_000_000_000_000_000  # ns
MS = 1_000_000


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def _response(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": text}]}


def write_trace(path: Path) -> dict[str, str]:
    """An agent's trace through the SDK's OTLP JSON file exporter; returns the span ids by name.

    Model call 1 asks get_weather(city=Paris) [c1] and lookup(q=umbrella) [c2]; model call 2 asks
    get_weather(city=Paris) again [c3] and get_weather(town=Paris) [c4]. c1 and c3 run in
    execute_tool spans (c1 fails); c2 and c4 have no span, their results come back as tool
    messages. So: step 0 failed (own span), step 1 an undeclared tool (no span), step 2 a repeat
    of step 0 (own span), step 3 breaks the schema (no span)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = provider.get_tracer("agent")
    ids: dict[str, str] = {}
    user = {"role": "user", "parts": [{"type": "text", "content": "Should I take an umbrella in Paris?"}]}
    turns = [
        ([user], [_call("c1", "get_weather", {"city": "Paris"}), _call("c2", "lookup", {"q": "umbrella"})]),
        (
            [user, _response("c1", "timeout"), _response("c2", "rain likely")],
            [_call("c3", "get_weather", {"city": "Paris"}), _call("c4", "get_weather", {"town": "Paris"})],
        ),
        ([user, _response("c3", "light rain"), _response("c4", "missing city")], [{"type": "text", "content": "Take an umbrella."}]),
    ]
    with tracer.start_as_current_span(
        "invoke_agent weather", start_time=T0, end_on_exit=False, attributes={"gen_ai.operation.name": "invoke_agent"}
    ) as agent:
        ids["agent"] = format(agent.get_span_context().span_id, "016x")
        at = T0 + MS
        for n, (inputs, outputs) in enumerate(turns):
            chat = tracer.start_span(
                "chat agent-model",
                start_time=at,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "agent-model",
                    "gen_ai.input.messages": json.dumps(inputs),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": outputs}]),
                    "gen_ai.tool.definitions": json.dumps([WEATHER]),
                },
            )
            chat.end(end_time=at + 100 * MS)
            at += 110 * MS
            for call_id in {0: ["c1"], 1: ["c3"]}.get(n, []):
                tool = tracer.start_span(
                    "execute_tool get_weather",
                    start_time=at,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "get_weather",
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.call.arguments": json.dumps({"city": "Paris"}),
                        "gen_ai.tool.call.result": "light rain" if call_id == "c3" else "",
                    },
                )
                if call_id == "c1":
                    tool.set_status(Status(StatusCode.ERROR, "timeout"))
                tool.end(end_time=at + 50 * MS)
                ids[call_id] = format(tool.get_span_context().span_id, "016x")
                at += 60 * MS
        agent.end(end_time=at)
    provider.shutdown()
    trace._TRACER_PROVIDER = None  # the SDK's global is untouched: this provider was never set
    return ids


def _attrs(record: dict[str, Any]) -> dict[str, Any]:
    """Attributes as plain values (an intValue is a JSON string in OTLP/JSON)."""
    return {a["key"]: int(a["value"]["intValue"]) if "intValue" in a["value"] else next(iter(a["value"].values())) for a in record["attributes"]}


def _spans(path: Path) -> list[dict[str, Any]]:
    return [s for doc in read_jsonl(path) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_step_findings_go_on_each_step_span(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    ids = write_trace(trace_file)
    trace_id = read_jsonl(trace_file)[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    direct = [t.resolved() for _, t in iter_transcripts(trace_file, format="otel")]
    assert len(direct) == 1
    steps = direct[0].steps
    assert steps is not None
    assert [(s.name, s.call_id, s.span_id, s.failed) for s in steps] == [
        ("get_weather", "c1", ids["c1"], True),
        ("lookup", "c2", None, False),
        ("get_weather", "c3", ids["c3"], False),
        ("get_weather", "c4", None, False),
    ]

    out = tmp_path / "run"
    options = RunOptions(input=trace_file, out=out, format="otel", agent_only=True, progress=False)
    outcome = asyncio.run(asyncio.wait_for(run_evaluation(options), timeout=60))
    assert outcome.exit_code == 0, outcome.message
    (row,) = read_jsonl(out / "results.jsonl")
    behind = row["agent_steps"]
    assert (behind["failed_steps"], behind["undeclared_tools"], behind["repeated_calls"], behind["schema_violations"]) == ([0], [1], [2], [3])

    with deadline(60):
        done = CliRunner().invoke(app, ["export", str(out), "--format", "otel"], env=ENV)
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())  # read unwrapped: a long temp path wraps the lines
    assert "4 step findings, 4 on their step's span" in said
    assert "(2 execute_tool spans for steps whose trace recorded no run)" in said
    records = [r for d in read_jsonl(out / "evaluations.otlp.jsonl") for rl in d["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    metrics = [r for r in records if _attrs(r)["harness.kind"] == "agent_metric"]
    findings = [r for r in records if _attrs(r)["harness.kind"] == "agent_step_finding"]
    # the transcript's metrics stay on the transcript's span
    assert metrics and all((r["traceId"], r["spanId"]) == (trace_id, ids["agent"]) for r in metrics)
    assert all(r["eventName"] == EVENT_NAME for r in findings)
    created = {s["attributes"][2]["value"]["stringValue"]: s for s in _spans(out / "evaluations.spans.otlp.jsonl")}
    assert sorted(created) == ["c2", "c4"]
    on = {(_attrs(r)["gen_ai.evaluation.name"], _attrs(r)["harness.step"]): (r["traceId"], r["spanId"]) for r in findings}
    assert on == {
        ("failed_steps", 0): (trace_id, ids["c1"]),
        ("undeclared_tools", 1): (trace_id, created["c2"]["spanId"]),
        ("repeated_calls", 2): (trace_id, ids["c3"]),
        ("schema_violations", 3): (trace_id, created["c4"]["spanId"]),
    }
    failed = next(r for r in findings if _attrs(r)["gen_ai.evaluation.name"] == "failed_steps")
    assert _attrs(failed)["gen_ai.evaluation.explanation"] == "step 0 (get_weather): the call failed: timeout"
    assert (_attrs(failed)["gen_ai.tool.name"], _attrs(failed)["gen_ai.tool.call.id"], _attrs(failed)["gen_ai.evaluation.score.label"]) == (
        "get_weather",
        "c1",
        "failed",
    )
    for span in created.values():
        attrs = _attrs(span)
        assert span["parentSpanId"] == ids["agent"] and span["traceId"] == trace_id
        assert span["name"] == f"execute_tool {attrs['gen_ai.tool.name']}" and attrs["gen_ai.operation.name"] == "execute_tool"
    assert _attrs(created["c2"])["gen_ai.tool.name"] == "lookup"
    _same_as_the_otel_sdk(created["c4"])

    # a second export makes the same spans (their ids come from the transcript's span and the step)
    with deadline(60):
        again = CliRunner().invoke(app, ["export", str(out), "--format", "otel", "--out", str(tmp_path / "again.otlp.jsonl")], env=ENV)
    assert again.exit_code == 0, again.output
    assert _spans(tmp_path / "again.spans.otlp.jsonl") == _spans(out / "evaluations.spans.otlp.jsonl")

    # The trace with the created spans added reads back to the same steps: each created span is
    # the run of its call. Only what the trace did not say before is new: the span and its time.
    merged = tmp_path / "merged.jsonl"
    merged.write_text(trace_file.read_text(encoding="utf-8") + (out / "evaluations.spans.otlp.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    with deadline(60):
        imported = CliRunner().invoke(app, ["import", str(merged), "--out", str(tmp_path / "imported.jsonl")], env=ENV)
    assert imported.exit_code == 0, imported.output
    (back,) = [t.resolved() for _, t in iter_transcripts(tmp_path / "imported.jsonl", format="jsonl")]
    assert back.steps is not None and len(back.steps) == len(steps)
    for before, after in zip(steps, back.steps, strict=True):
        if before.span_id is not None:
            assert after == before
        else:
            assert after.span_id == created[before.call_id]["spanId"]
            new = ("span_id", "start_s", "end_s")
            assert {k: getattr(after, k) for k in after.__slots__ if k not in new} == {
                k: getattr(before, k) for k in before.__slots__ if k not in new
            }
    # A run of the imported file (its steps keep their span ids) exports every finding on the
    # same spans as before, and creates none: they are in the trace now.
    rerun = tmp_path / "rerun"
    options = RunOptions(input=tmp_path / "imported.jsonl", out=rerun, agent_only=True, progress=False)
    assert asyncio.run(asyncio.wait_for(run_evaluation(options), timeout=60)).exit_code == 0
    with deadline(60):
        done = CliRunner().invoke(app, ["export", str(rerun)], env=ENV)
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())  # read unwrapped
    assert "4 step findings, 4 on their step's span" in said and "execute_tool spans" not in said
    assert not (rerun / "evaluations.spans.otlp.jsonl").exists()
    records = [
        r for d in read_jsonl(rerun / "evaluations.otlp.jsonl") for rl in d["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]
    ]
    again_on = {
        (_attrs(r)["gen_ai.evaluation.name"], _attrs(r)["harness.step"]): (r["traceId"], r["spanId"])
        for r in records
        if _attrs(r)["harness.kind"] == "agent_step_finding"
    }
    assert again_on == on


def _same_as_the_otel_sdk(span: dict[str, Any]) -> None:
    """The same span through the SDK's OTLP JSON file exporter: the same span object."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    stream = io.StringIO()
    context = SpanContext(int(span["traceId"], 16), int(span["spanId"], 16), is_remote=False, trace_flags=TraceFlags(1))
    # the transcript's span, made by the agent's process: a remote parent
    parent = SpanContext(int(span["traceId"], 16), int(span["parentSpanId"], 16), is_remote=True, trace_flags=TraceFlags(1))
    readable = ReadableSpan(
        span["name"],
        context=context,
        parent=parent,
        resource=Resource({"service.name": "harness"}),
        attributes=_attrs(span),
        kind=SpanKind.INTERNAL,
        start_time=int(span["startTimeUnixNano"]),
        end_time=int(span["endTimeUnixNano"]),
        instrumentation_scope=InstrumentationScope("harness", "0.1.0"),
    )
    FileSpanExporter(stream=stream).export([readable])
    (sdk,) = [s for rs in json.loads(stream.getvalue())["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert sdk == span


def test_findings_of_a_transcript_with_no_trace_are_unlinked_and_make_no_span(tmp_path: Path) -> None:
    record = {
        "id": "plain",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "timeout", "is_error": True},
            {"role": "assistant", "content": "I could not find out."},
        ],
    }
    (tmp_path / "t.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    (tmp_path / "evaluations.spans.otlp.jsonl").write_text("an earlier export's spans\n", encoding="utf-8")
    options = RunOptions(input=tmp_path / "t.jsonl", out=tmp_path / "run", agent_only=True, progress=False)
    assert asyncio.run(asyncio.wait_for(run_evaluation(options), timeout=60)).exit_code == 0
    with deadline(60):
        done = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "evaluations.otlp.jsonl")], env=ENV)
    assert done.exit_code == 0, done.output
    assert "1 step findings, 0 on their step's span" in unwrapped(done.output)
    records = [
        r for d in read_jsonl(tmp_path / "evaluations.otlp.jsonl") for rl in d["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]
    ]
    (finding,) = [r for r in records if _attrs(r)["harness.kind"] == "agent_step_finding"]
    assert "traceId" not in finding and _attrs(finding)["gen_ai.evaluation.explanation"] == "step 0 (weather): the call failed: timeout"
    assert not (tmp_path / "evaluations.spans.otlp.jsonl").exists()  # the stale file is not left to be mistaken for this export's
