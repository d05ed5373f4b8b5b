"""The agent's steps read back from every trace format.

The framework fixtures (``tests/fixtures/traces/frameworks.py``) were written by pydantic-ai, the
OpenAI Agents SDK and LangGraph running real tools against a scripted model: the steps read back
must be the calls the script made the model ask for (names, arguments, ids, turns, parallel
groups, order), with what the tools themselves logged (results, and the error of the one that
raised). The expected values come from that script, the tools' log and the raw files read here
with plain json, never from the readers.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.agent.steps import Step
from harness.traces.importer import import_traces
from harness.traces.loader import iter_transcripts
from harness.traces.reader import extracted
from harness.traces.steps import Executed, Requested, Result, Turn, assemble, declared, tool_spec
from harness.transcripts.models import Transcript
from tests.fixtures.traces.agent_server import SCRIPT
from tests.traces.support import (
    FRAMEWORK_CALLS,
    INSPECT_EVAL,
    INSPECT_JSON,
    LANGFUSE,
    LANGGRAPH,
    LANGSMITH,
    OPENAI_AGENTS,
    OPENINFERENCE,
    OTEL,
    PYDANTIC_AI,
    TOOL_RESULT,
    raw_spans,
)

FRAMEWORKS = [
    pytest.param(PYDANTIC_AI, "otel", id="pydantic-ai/otel-genai"),
    pytest.param(PYDANTIC_AI, "openinference", id="pydantic-ai/openinference"),
    pytest.param(OPENAI_AGENTS, "openinference", id="openai-agents/openinference"),
    pytest.param(LANGGRAPH, "langsmith", id="langgraph/langsmith"),
]
#: the calls the scripted model asked for, in order: (call id, tool, arguments, turn)
ASKED = [(call_id, name, args, turn) for turn, calls in enumerate(SCRIPT) for call_id, name, args in calls]
DECLARED = {
    "get_weather": ("Current weather of a city.", {"city"}),
    "to_fahrenheit": ("A temperature in degrees Celsius, in degrees Fahrenheit.", {"celsius"}),
}


def _load(path: Path, fmt: str) -> list[Transcript]:
    return [t for _, t in iter_transcripts(path, format=fmt)]


def _one(path: Path, fmt: str) -> Transcript:
    (transcript,) = _load(path, fmt)
    return transcript


def _steps(path: Path, fmt: str) -> tuple[Step, ...]:
    steps = _one(path, fmt).resolved().steps
    assert steps is not None
    return steps


def _parsed(arguments: Any) -> Any:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def _iso(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _raw_tool_times(path: Path, fmt: str) -> list[tuple[float, float]]:
    """The tools' (start, end) read from the raw file: tool spans or tool runs."""
    if fmt == "langsmith":
        runs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return sorted((_iso(r["start_time"]), _iso(r["end_time"])) for r in runs if r["run_type"] == "tool")
    key, value = ("gen_ai.operation.name", "execute_tool") if fmt == "otel" else ("openinference.span.kind", "TOOL")
    return sorted((s["start"], s["end"]) for s in raw_spans(path) if s["attrs"].get(key) == value)


@pytest.mark.parametrize(("path", "fmt"), FRAMEWORKS)
def test_framework_steps_are_the_calls_the_script_asked_for(path: Path, fmt: str) -> None:
    steps = _steps(path, fmt)
    assert [(s.call_id, s.name, s.arguments, s.turn) for s in steps] == ASKED
    # the two calls of the first response are one parallel group, the third its own
    assert [s.group for s in steps] == [0, 0, 1]
    assert [s.index for s in steps] == [0, 1, 2]
    assert all(s.arguments_error is None for s in steps)


@pytest.mark.parametrize(("path", "fmt"), FRAMEWORKS)
def test_framework_steps_carry_what_the_tools_returned_and_raised(path: Path, fmt: str) -> None:
    steps = _steps(path, fmt)
    log = json.loads(FRAMEWORK_CALLS.read_text(encoding="utf-8"))[path.name]
    assert len(log) == len(steps) == 3
    for call in log:
        (step,) = [s for s in steps if s.name == call["name"] and s.arguments == call["arguments"]]
        if "error" in call:
            assert step.failed
            assert step.error is not None and call["error"] in step.error
            assert step.result is not None and call["error"] in step.result  # what the model was told
        else:
            assert (step.failed, step.error, step.result) == (False, None, call["result"])
    assert _one(path, fmt).resolved().performance.tool_calls == 3


@pytest.mark.parametrize(("path", "fmt"), FRAMEWORKS)
def test_framework_step_times_are_the_tool_spans(path: Path, fmt: str) -> None:
    steps = _steps(path, fmt)
    times = sorted((s.start_s, s.end_s) for s in steps)
    assert times == [pytest.approx(t, abs=1e-6) for t in _raw_tool_times(path, fmt)]
    assert all(s.start_s is not None and s.end_s is not None and s.start_s <= s.end_s for s in steps)
    first_turn_start = min(s.start_s for s in steps if s.turn == 0 and s.start_s is not None)
    assert all(s.start_s is not None and s.start_s > first_turn_start for s in steps if s.turn == 1)


@pytest.mark.parametrize(("path", "fmt"), FRAMEWORKS)
def test_framework_traces_declare_the_agents_tools(path: Path, fmt: str) -> None:
    tools = _one(path, fmt).resolved().tools
    assert tools is not None
    found = {t.name: (t.description, set((t.parameters or {}).get("properties", {}))) for t in tools}
    assert found == DECLARED


def test_one_file_in_two_conventions_reads_the_same_steps() -> None:
    """pydantic-ai's spans carry its OTel GenAI attributes and OpenInference's, side by side."""
    as_otel = [s.as_dict() for s in _steps(PYDANTIC_AI, "otel")]
    assert as_otel == [s.as_dict() for s in _steps(PYDANTIC_AI, "openinference")]


@pytest.mark.parametrize(("path", "fmt"), FRAMEWORKS)
def test_import_writes_the_steps_and_they_read_back_the_same(path: Path, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "imported.jsonl"
    assert import_traces(path, out, fmt).written == 1
    (line,) = out.read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    # arguments as the model wrote them (JSON text), or the object a framework recorded
    assert [(s["id"], s["name"], _parsed(s["arguments"]), s["turn"], s["group"]) for s in record["steps"]] == [
        (call_id, name, args, turn, turn) for call_id, name, args, turn in ASKED
    ]
    assert [s.get("failed", False) for s in record["steps"]] == [False, True, False]
    assert "tool_calls" not in record  # the count is the steps'
    assert {t["name"] for t in record["tools"]} == set(DECLARED)
    back = Transcript.model_validate(record).resolved()
    direct = _one(path, fmt).resolved()
    assert back.steps is not None and direct.steps is not None
    assert [s.as_dict() for s in back.steps] == [s.as_dict() for s in direct.steps]
    assert back.tools == direct.tools
    assert back.performance == direct.performance


# The fixtures of generate.py: one get_weather call per agent run, each reader on its own format.


def _check_single_step(step: Step, *, name: str, call_id: str, arguments: Any, start: float, end: float) -> None:
    assert (step.name, step.call_id, step.arguments, step.result) == (name, call_id, arguments, TOOL_RESULT)
    assert (step.turn, step.group, step.failed, step.error) == (0, 0, False, None)
    assert (step.start_s, step.end_s) == (pytest.approx(start, abs=1e-6), pytest.approx(end, abs=1e-6))


def test_otel_genai_steps_are_the_execute_tool_spans() -> None:
    spans = raw_spans(OTEL)
    transcripts = _load(OTEL, "otel")
    for t in transcripts[:2]:
        (tool,) = [s for s in spans if s["traceId"] == t.metadata["trace_id"] and s["attrs"].get("gen_ai.operation.name") == "execute_tool"]
        a = tool["attrs"]
        (step,) = t.resolved().steps or ()
        _check_single_step(
            step,
            name=a["gen_ai.tool.name"],
            call_id=a["gen_ai.tool.call.id"],
            arguments=json.loads(a["gen_ai.tool.call.arguments"]),
            start=tool["start"],
            end=tool["end"],
        )
    assert transcripts[2].resolved().steps == ()  # the bare chat: no tool called, said so
    assert transcripts[2].resolved().performance.tool_calls == 0


def test_openinference_steps_are_the_tool_spans_with_the_llm_call_ids() -> None:
    spans = raw_spans(OPENINFERENCE)
    transcripts = _load(OPENINFERENCE, "openinference")
    for t in transcripts[:2]:
        mine = [s for s in spans if s["traceId"] == t.metadata["trace_id"]]
        (tool,) = [s for s in mine if s["attrs"].get("openinference.span.kind") == "TOOL"]
        asked = next(s for s in mine if "llm.output_messages.0.message.tool_calls.0.tool_call.id" in s["attrs"])["attrs"]
        (step,) = t.resolved().steps or ()
        _check_single_step(
            step,
            name=tool["attrs"]["tool.name"],
            call_id=asked["llm.output_messages.0.message.tool_calls.0.tool_call.id"],
            arguments=json.loads(tool["attrs"]["input.value"]),
            start=tool["start"],
            end=tool["end"],
        )
        llm_tool = json.loads(asked["llm.tools.0.tool.json_schema"])["function"]
        (declared,) = t.resolved().tools or ()
        assert (declared.name, declared.description, declared.parameters) == (llm_tool["name"], llm_tool["description"], llm_tool["parameters"])


def _inspect_samples(path: Path) -> list[dict[str, Any]]:
    from tests.traces.test_readers import _inspect_samples as samples

    return samples(path)


@pytest.mark.parametrize("path", [INSPECT_EVAL, INSPECT_JSON])
def test_inspect_steps_are_the_tool_events(path: Path) -> None:
    for t, sample in zip(_load(path, "inspect"), _inspect_samples(path), strict=True):
        (event,) = [e for e in sample["events"] if e["event"] == "tool"]
        (step,) = t.resolved().steps or ()
        _check_single_step(
            step,
            name=event["function"],
            call_id=event["id"],
            arguments=event["arguments"],
            start=_iso(event["timestamp"]),
            end=_iso(event["completed"]),
        )
        offered = next(e for e in sample["events"] if e["event"] == "model")["tools"]
        assert [(x.name, x.description, x.parameters) for x in t.resolved().tools or ()] == [
            (o["name"], o["description"], o["parameters"]) for o in offered
        ]


def test_langsmith_steps_are_the_tool_runs() -> None:
    runs = [json.loads(line) for line in LANGSMITH.read_text(encoding="utf-8").splitlines()]
    for t in _load(LANGSMITH, "langsmith"):
        mine = [r for r in runs if r["trace_id"] == t.id]
        (tool,) = [r for r in mine if r["run_type"] == "tool"]
        asked = next(r for r in mine if r["run_type"] == "llm")["outputs"]["choices"][0]["message"]["tool_calls"][0]
        (step,) = t.resolved().steps or ()
        _check_single_step(
            step, name=tool["name"], call_id=asked["id"], arguments=tool["inputs"], start=_iso(tool["start_time"]), end=_iso(tool["end_time"])
        )


def test_langfuse_steps_are_the_tool_observations() -> None:
    observations = json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"]
    for t in _load(LANGFUSE, "langfuse"):
        mine = [o for o in observations if o["traceId"] == t.id]
        (tool,) = [o for o in mine if o["type"] == "TOOL"]
        asked = next(o for o in mine if o["type"] == "GENERATION")["output"]["tool_calls"][0]
        (step,) = t.resolved().steps or ()
        _check_single_step(
            step, name=tool["name"], call_id=asked["id"], arguments=tool["input"]["kwargs"], start=_iso(tool["startTime"]), end=_iso(tool["endTime"])
        )


# A failed tool in each existing format: the fixture with the failure written in as the format writes it.


def test_otel_failed_tool_span(tmp_path: Path) -> None:
    lines = []
    for line in OTEL.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    if s["name"].startswith("execute_tool"):
                        s["status"] = {"code": "STATUS_CODE_ERROR", "message": "weather service down"}
        lines.append(json.dumps(doc))
    path = tmp_path / "failed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for t in _load(path, "otel")[:2]:
        (step,) = t.resolved().steps or ()
        assert (step.failed, step.error, step.result) == (True, "weather service down", TOOL_RESULT)


def test_an_exception_event_without_a_status_is_a_failure_and_names_the_error(tmp_path: Path) -> None:
    lines = []
    for line in OPENINFERENCE.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    if any(a["key"] == "openinference.span.kind" and a["value"].get("stringValue") == "TOOL" for a in s["attributes"]):
                        s.pop("status", None)
                        s["events"] = [
                            {
                                "timeUnixNano": s["endTimeUnixNano"],
                                "name": "exception",
                                "attributes": [{"key": "exception.message", "value": {"stringValue": "timeout"}}],
                            }
                        ]
        lines.append(json.dumps(doc))
    path = tmp_path / "failed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    steps = [s for t in _load(path, "openinference") for s in t.resolved().steps or ()]
    assert [(s.failed, s.error) for s in steps] == [(True, "timeout")] * 2


@pytest.mark.parametrize("error", [{"type": "timeout", "message": "timed out after 30 s"}, {"type": "unknown", "message": ""}])
def test_inspect_tool_event_error(error: dict[str, str], tmp_path: Path) -> None:
    log = json.loads(INSPECT_JSON.read_text(encoding="utf-8"))
    for sample in log["samples"]:
        for event in sample["events"]:
            if event["event"] == "tool":
                event["error"] = error
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    for t in _load(path, "inspect"):
        (step,) = t.resolved().steps or ()
        assert (step.failed, step.error, step.call_id) == (True, error["message"] or error["type"], "call_1")


def test_langsmith_tool_run_error(tmp_path: Path) -> None:
    runs = [json.loads(line) for line in LANGSMITH.read_text(encoding="utf-8").splitlines()]
    for run in runs:
        if run["run_type"] == "tool":
            run["error"] = "ValueError('no such city')Traceback (most recent call last):\n  File \"tool.py\", line 3\nValueError: no such city"
            run["outputs"] = None
    path = tmp_path / "failed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    for t in _load(path, "langsmith"):
        (step,) = t.resolved().steps or ()
        # the tool run says why it failed; what the model was told comes from the next model call's input
        assert (step.failed, step.error, step.result) == (True, "ValueError('no such city')", TOOL_RESULT)


def test_langfuse_error_level_tool(tmp_path: Path) -> None:
    listing = json.loads(LANGFUSE.read_text(encoding="utf-8"))
    for o in listing["data"]:
        if o["type"] == "TOOL":
            o |= {"level": "ERROR", "statusMessage": "rate limited", "output": None}
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(listing), encoding="utf-8")
    for t in _load(path, "langfuse"):
        (step,) = t.resolved().steps or ()
        assert (step.failed, step.error, step.call_id) == (True, "rate limited", "call_1")


def test_the_tool_call_count_is_the_steps_in_every_reader() -> None:
    for path, fmt in [(OTEL, "otel"), (OPENINFERENCE, "openinference"), (INSPECT_EVAL, "inspect"), (LANGSMITH, "langsmith"), (LANGFUSE, "langfuse")]:
        for item in extracted(path, fmt):
            assert item.tool_calls == len(item.steps) == len(item.record()["steps"])


# assemble(): the rules of harness/traces/steps.py on hand-made turns and runs.


def test_parallel_runs_without_ids_are_matched_by_their_arguments_whatever_order_they_started() -> None:
    turn = Turn(0.0, 1.0, (Requested("get", '{"city": "Paris"}'), Requested("get", '{"city": "Rome"}')))
    runs = [Executed("get", {"city": "Rome"}, "sunny", start_s=1.1, end_s=1.5), Executed("get", {"city": "Paris"}, "rain", start_s=1.2, end_s=1.4)]
    steps = assemble([turn, Turn(2.0, 3.0)], runs)
    assert [(s.arguments, s.result, s.turn, s.group) for s in steps] == [({"city": "Paris"}, "rain", 0, 0), ({"city": "Rome"}, "sunny", 0, 0)]


def test_runs_without_model_calls_are_grouped_by_overlap() -> None:
    runs = [Executed("a", start_s=0.0, end_s=2.0), Executed("b", start_s=1.0, end_s=3.0), Executed("c", start_s=3.0, end_s=4.0)]
    steps = assemble([], runs)
    assert [(s.name, s.turn, s.group) for s in steps] == [("a", None, 0), ("b", None, 0), ("c", None, 1)]


def test_an_unrequested_run_belongs_to_the_model_call_that_ended_before_it() -> None:
    turns = [Turn(0.0, 1.0, (Requested("a", "{}", "c1"),)), Turn(3.0, 4.0)]
    runs = [
        Executed("a", {}, "x", call_id="c1", start_s=1.5, end_s=1.6),
        Executed("b", {}, "y", start_s=1.7, end_s=1.8),
        Executed("z", start_s=4.5, end_s=5.0),
    ]
    steps = assemble(turns, runs)
    assert [(s.name, s.turn, s.group) for s in steps] == [("a", 0, 0), ("b", 0, 0), ("z", 1, 1)]


def test_a_call_never_seen_to_run_takes_its_result_from_the_next_model_input() -> None:
    asked = Turn(0.0, 1.0, (Requested("a", '{"q": 1}', "c1"), Requested("b", "{", "c2")))
    answered = Turn(2.0, 3.0, (), (Result("c2", "b's result", True), Result("c1", "a's result")))
    repeated = Turn(4.0, 5.0, (), (Result("c1", "a's result"), Result("c2", "b's result", True)))
    steps = assemble([asked, answered, repeated], [])
    assert [(s.name, s.result, s.failed, s.error) for s in steps] == [("a", "a's result", False, None), ("b", "b's result", True, "b's result")]
    assert (steps[1].arguments, steps[1].arguments_raw) == (None, "{")  # kept as written
    assert steps[1].arguments_error is not None
    # without ids, by position: the history repeats, so the j-th result is the j-th call's
    anonymous = [
        Turn(0.0, 1.0, (Requested("a"), Requested("b"))),
        Turn(2.0, 3.0, (), (Result(None, "ra"), Result(None, "rb"))),
        Turn(4.0, 5.0, (Requested("c"),), (Result(None, "ra"), Result(None, "rb"))),
        Turn(6.0, 7.0, (), (Result(None, "ra"), Result(None, "rb"), Result(None, "rc"))),
    ]
    assert [(s.name, s.result, s.turn, s.group) for s in assemble(anonymous, [])] == [("a", "ra", 0, 0), ("b", "rb", 0, 0), ("c", "rc", 2, 1)]


def test_a_run_is_never_matched_to_a_call_asked_after_it_started() -> None:
    turns = [Turn(0.0, 1.0), Turn(2.0, 3.0, (Requested("a", "{}"),))]
    steps = assemble(turns, [Executed("a", {}, "early", start_s=1.5, end_s=1.6)])
    assert [(s.name, s.turn, s.result) for s in steps] == [("a", 0, "early"), ("a", 1, None)]


def test_model_calls_inside_a_tool_are_not_turns(tmp_path: Path) -> None:
    """A tool that asks a model itself: its chat span is under the tool span, not an agent turn."""
    docs = [json.loads(line) for line in PYDANTIC_AI.read_text(encoding="utf-8").splitlines()]
    spans = [s for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    tool = next(s for s in spans if s["name"] == "execute_tool to_fahrenheit")
    chat = next(s for s in spans if s["name"].startswith("chat"))
    inner = {
        **chat,
        "spanId": "00000000000000aa",
        "parentSpanId": tool["spanId"],
        "startTimeUnixNano": tool["startTimeUnixNano"],
        "endTimeUnixNano": tool["endTimeUnixNano"],
    }
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [*spans, inner]}]}]}
    path = tmp_path / "nested.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    for fmt in ("otel", "openinference"):
        assert [s.as_dict() for s in _steps(path, fmt)] == [s.as_dict() for s in _steps(PYDANTIC_AI, fmt)]


def test_declared_tools_in_every_spelling_traces_use() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    spellings = [
        {"type": "function", "function": {"name": "w", "description": "d", "parameters": schema}},  # OpenAI
        {"type": "function", "name": "w", "description": "d", "parameters": schema},  # gen_ai.tool.definitions
        {"name": "w", "description": "d", "input_schema": schema},  # Anthropic
        {"name": "w", "description": "d", "parameters_json_schema": schema, "strict": None},  # pydantic-ai
    ]
    for spelling in spellings:
        assert tool_spec(spelling) == {"name": "w", "description": "d", "parameters": schema}
    assert tool_spec(schema, "w", "d") == {"name": "w", "description": "d", "parameters": schema}  # a bare schema, named apart
    assert tool_spec({"city": "Paris"}, "w") == {"name": "w"}  # arguments are not a schema
    assert tool_spec(schema) is None  # no name, no tool
    assert declared([tool_spec(None, "w", "d"), tool_spec(spellings[0]), None]) == [{"name": "w", "description": "d", "parameters": schema}]


def test_inspect_model_calls_of_the_scorer_are_not_turns(tmp_path: Path) -> None:
    log = json.loads(INSPECT_JSON.read_text(encoding="utf-8"))
    for sample in log["samples"]:
        model = next(e for e in sample["events"] if e["event"] == "model")
        sample["events"] += [{"event": "span_begin", "type": "scorers", "name": "scorers", "id": "s"}, model]  # a model-graded scorer
    path = tmp_path / "scored.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    assert [[s.as_dict() for s in t.resolved().steps or ()] for t in _load(path, "inspect")] == [
        [s.as_dict() for s in t.resolved().steps or ()] for t in _load(INSPECT_JSON, "inspect")
    ]


def _kv(values: dict[str, Any]) -> list[dict[str, Any]]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, dict):
            return {"kvlistValue": {"values": _kv(v)}}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    return [{"key": k, "value": value(v)} for k, v in values.items()]


def test_otel_older_message_events_give_steps_without_tool_spans(tmp_path: Path) -> None:
    """The older GenAI conventions: a ``gen_ai.choice`` event's tool calls, a ``gen_ai.tool.message`` event's result."""
    call = {"id": "c9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}

    def chat(span_id: str, start: int, events: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "traceId": "0" * 31 + "1",
            "spanId": span_id,
            "name": "chat m",
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 10),
            "attributes": _kv({"gen_ai.operation.name": "chat"}),
            "events": [{"name": n, "timeUnixNano": str(start), "attributes": _kv(a)} for n, a in events],
        }

    spans = [
        chat(
            "00000000000000a1",
            100,
            [("gen_ai.user.message", {"content": "Weather in Oslo?"}), ("gen_ai.choice", {"message": {"tool_calls": [call]}})],
        ),
        chat(
            "00000000000000a2",
            200,
            [
                ("gen_ai.user.message", {"content": "Weather in Oslo?"}),
                ("gen_ai.tool.message", {"id": "c9", "content": "snow"}),
                ("gen_ai.choice", {"message": {"content": "Snow."}}),
            ],
        ),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n", encoding="utf-8")
    (step,) = _steps(path, "otel")
    assert step.as_dict() == {"name": "get_weather", "arguments": '{"city": "Oslo"}', "result": "snow", "turn": 0, "group": 0, "id": "c9"}
    assert step.arguments == {"city": "Oslo"}
