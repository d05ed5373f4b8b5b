"""Multi-turn traces written by six more agent frameworks (``tests/fixtures/traces/conversations.py``),
read back against the ground truth their tools and the script logged (``conversations_truth.json``).

For each fixture, each trace is one user turn of the conversation: read one transcript per trace
(``sessions="off"``), its user text, its answer and its tool calls (name, arguments, result, or the
error the tool raised) must read back equal to what was logged, and every trace must carry the
session id the framework was given; read as the harness reads by default (``sessions="on"``), the
traces are one conversation whose turns are those, in order. Nothing here needs the frameworks: the
files are committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.agent.steps import parse_arguments
from harness.traces import detect_format
from harness.traces.loader import iter_transcripts
from tests.traces.support import FIXTURES

TRUTH: dict[str, Any] = json.loads((FIXTURES / "conversations_truth.json").read_text(encoding="utf-8"))
#: the tools of the agents (frameworks.py); a framework's own tools (smolagents' ``final_answer``) are not logged
OUR_TOOLS = {"get_weather", "to_fahrenheit"}
#: the trace format each fixture is written in, as its exporter writes it
FORMATS = {
    "llamaindex_openinference.jsonl": "openinference",
    "autogen_openinference.jsonl": "openinference",
    "strands_otel.jsonl": "otel",
    "smolagents_openinference.jsonl": "openinference",
    "agno_openinference.jsonl": "openinference",
    "haystack_openinference.jsonl": "openinference",
}
#: traces that do not record that a tool failed: AutoGen's instrumentor ends the TOOL span OK with
#: the error text as its output (AutoGen's ``is_error`` is not written), so the reader sees a
#: result; the test pins that, so a reader that starts guessing failures from text fails it
UNRECORDED_FAILURES = {"autogen_openinference.jsonl"}
#: traces that hold no tool results at all: Haystack's instrumentor makes no TOOL spans and writes
#: the tool messages of the model's input with their role only (the results are only inside the
#: reprs of its ChatMessage objects): the calls read back, their results are unknown (None)
UNRECORDED_RESULTS = {"haystack_openinference.jsonl"}


#: fixtures the readers refuse, and why: ADK's own spans (its OpenInference instrumentor added
#: nothing with the google-adk resolved here) record the messages in vendor attributes no
#: specification describes
REFUSED = {"adk_otel.jsonl"}
READ = sorted(set(TRUTH) - REFUSED)


def test_six_frameworks_read_each_with_a_conversation_of_two_turns_or_more() -> None:
    assert set(TRUTH) == set(FORMATS) | REFUSED and len(FORMATS) == 6
    for fixture, truth in TRUTH.items():
        assert len(truth["turns"]) >= 2, fixture
        assert (FIXTURES / fixture).stat().st_size < 250_000, fixture


@pytest.mark.parametrize("fixture", sorted(REFUSED))
def test_a_trace_the_readers_cannot_read_whole_is_refused_in_one_line(fixture: str) -> None:
    from harness.errors import TranscriptError

    path = FIXTURES / fixture
    first_trace = next(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    trace_id = first_trace["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    with pytest.raises(TranscriptError) as caught:
        list(iter_transcripts(path))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and f"trace {trace_id}" in message
    assert "no query found (looked in gen_ai.input.messages" in message and "no response found" in message


@pytest.mark.parametrize("fixture", READ)
def test_every_turn_reads_back_as_the_tools_and_the_script_logged_it(fixture: str) -> None:
    path = FIXTURES / fixture
    assert detect_format(path) == FORMATS[fixture]
    truth = TRUTH[fixture]
    transcripts = [t for _, t in iter_transcripts(path, sessions="off")]
    assert len(transcripts) == len(truth["turns"])
    for transcript, turn in zip(transcripts, truth["turns"], strict=True):
        resolved = transcript.resolved()
        assert resolved.query == turn["query"]
        # the text as the trace holds it, up to the whitespace a framework adds at its ends (Strands: "\n")
        assert resolved.response is not None and resolved.response.strip() == turn["scripted_answer"]
        assert turn["scripted_answer"] in turn["answer"]  # what the framework returned holds it
        steps = [s.model_dump(exclude_none=True) for s in transcript.steps or () if s.name in OUR_TOOLS]
        assert [(s["name"], parse_arguments(s.get("arguments"))[0]) for s in steps] == [(c["name"], c["arguments"]) for c in turn["calls"]]
        for step, call in zip(steps, turn["calls"], strict=True):
            if fixture in UNRECORDED_RESULTS:
                assert step.get("result") is None and not step.get("failed"), step
            elif "error" in call and fixture in UNRECORDED_FAILURES:
                assert not step.get("failed") and step.get("result") == call["error"], step
            elif "error" in call:
                assert step.get("failed") is True and call["error"] in step["error"], step
            else:
                assert not step.get("failed") and step.get("result") == call["result"], step
        assert transcript.metadata is not None and transcript.metadata["session_id"] == truth["session_id"]


@pytest.mark.parametrize("fixture", READ)
def test_the_session_id_is_on_the_per_trace_record(fixture: str) -> None:
    """What the grouping of traces into sessions reads: ``Extracted.session`` of each trace."""
    from harness.traces.reader import extracted

    found = list(extracted(FIXTURES / fixture, FORMATS[fixture], sessions="off"))
    assert [e.session for e in found] == [TRUTH[fixture]["session_id"]] * len(TRUTH[fixture]["turns"])


@pytest.mark.parametrize("fixture", READ)
def test_a_sessions_traces_read_as_one_conversation_of_its_turns(fixture: str) -> None:
    """The default reading: the fixture's traces are one transcript (id = the session id) whose turns
    are the logged turns in order, each with its user text, answer and our tools' calls."""
    truth = TRUTH[fixture]
    (transcript,) = [t for _, t in iter_transcripts(FIXTURES / fixture)]
    assert transcript.id == truth["session_id"]
    conversation = transcript.resolved().conversation
    assert conversation is not None
    turns = conversation.turns()
    assert [t.user for t in turns] == [turn["query"] for turn in truth["turns"]]
    assert [(t.answer or "").strip() for t in turns] == [turn["scripted_answer"] for turn in truth["turns"]]
    for got, turn in zip(turns, truth["turns"], strict=True):
        calls = [(s.name, parse_arguments(s.arguments)[0]) for s in got.steps if s.name in OUR_TOOLS]
        assert calls == [(c["name"], c["arguments"]) for c in turn["calls"]]


def test_a_framework_json_wrapper_is_never_the_query(tmp_path: Path) -> None:
    """An AGENT span whose ``input.value`` is the framework's JSON (``{"task": ..., "stream": false}``)
    gives the user's text from its documented field, never the JSON."""
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "1",
        "name": "agent.run",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "AGENT"}},
            {"key": "input.value", "value": {"stringValue": json.dumps({"task": "Is it raining?", "stream": False})}},
            {"key": "input.mime_type", "value": {"stringValue": "application/json"}},
            {"key": "output.value", "value": {"stringValue": "Yes."}},
        ],
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n", encoding="utf-8")
    (transcript,) = [t for _, t in iter_transcripts(path)]
    assert (transcript.resolved().query, transcript.resolved().response) == ("Is it raining?", "Yes.")


def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    kinds = {str: "stringValue", int: "intValue", bool: "boolValue"}
    return [{"key": k, "value": {kinds[type(v)]: str(v) if isinstance(v, int) and not isinstance(v, bool) else v}} for k, v in values.items()]


def _otlp(path: Path, spans: list[dict[str, Any]]) -> Path:
    raw = []
    for index, s in enumerate(spans, start=1):
        raw.append(
            {
                "traceId": "ab" * 16,
                "spanId": f"{index:016x}",
                **({"parentSpanId": f"{s['parent']:016x}"} if "parent" in s else {}),
                "name": s["name"],
                "startTimeUnixNano": str(index * 1000),
                "endTimeUnixNano": str(index * 1000 + 500),
                "attributes": _attrs(s["attributes"]),
                "events": [{"name": n, "timeUnixNano": str(index * 1000 + 1), "attributes": _attrs(a)} for n, a in s.get("events", [])],
            }
        )
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": raw}]}]}) + "\n", encoding="utf-8")
    return path


def _read(path: Path) -> tuple[str | None, str | None, list[tuple[str, Any, Any]], str | None]:
    (t,) = [t for _, t in iter_transcripts(path)]
    steps = [(s.name, parse_arguments(s.arguments)[0], s.result) for s in t.steps or ()]
    return t.resolved().query, t.resolved().response, steps, (t.metadata or {}).get("session_id")


CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def test_otel_messages_in_the_operation_details_event(tmp_path: Path) -> None:
    """The current conventions' opt-in event carries the same messages as the span attributes."""
    first_in = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    first_out = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]}]
    second_in = [*first_in, *first_out, {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "rain"}]}]
    second_out = [{"role": "assistant", "parts": [{"type": "text", "content": "It rains."}]}]
    details = "gen_ai.client.inference.operation.details"
    path = _otlp(
        tmp_path / "t.jsonl",
        [
            {
                "name": "chat m",
                "attributes": {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-7"},
                "events": [(details, {"gen_ai.input.messages": json.dumps(first_in), "gen_ai.output.messages": json.dumps(first_out)})],
            },
            {
                "name": "chat m",
                "attributes": {"gen_ai.operation.name": "chat"},
                "events": [(details, {"gen_ai.input.messages": json.dumps(second_in), "gen_ai.output.messages": json.dumps(second_out)})],
            },
        ],
    )
    assert _read(path) == ("Weather in Paris?", "It rains.", [("get_weather", {"city": "Paris"}, "rain")], "conv-7")


def test_otel_older_per_message_events(tmp_path: Path) -> None:
    """``gen_ai.user.message``/``gen_ai.assistant.message``/``gen_ai.tool.message`` and ``gen_ai.choice``."""
    path = _otlp(
        tmp_path / "t.jsonl",
        [
            {
                "name": "chat",
                "attributes": {"gen_ai.operation.name": "chat"},
                "events": [
                    ("gen_ai.system.message", {"content": "Be brief."}),
                    ("gen_ai.user.message", {"content": "Weather in Paris?"}),
                    ("gen_ai.choice", {"message": json.dumps({"content": None, "tool_calls": [CALL]}), "index": 0}),
                ],
            },
            {
                "name": "chat",
                "attributes": {"gen_ai.operation.name": "chat"},
                "events": [
                    ("gen_ai.user.message", {"content": "Weather in Paris?"}),
                    ("gen_ai.assistant.message", {"tool_calls": json.dumps([CALL])}),
                    ("gen_ai.tool.message", {"content": "rain", "id": "c1"}),
                    ("gen_ai.choice", {"message": json.dumps({"content": "It rains."}), "index": 0}),
                ],
            },
        ],
    )
    assert _read(path) == ("Weather in Paris?", "It rains.", [("get_weather", {"city": "Paris"}, "rain")], None)


def test_otel_oldest_indexed_prompt_and_completion_attributes(tmp_path: Path) -> None:
    """``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` (with ``tool_calls.M.*``) span attributes."""
    path = _otlp(
        tmp_path / "t.jsonl",
        [
            {
                "name": "chat",
                "attributes": {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": "Weather in Paris?",
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.tool_calls.0.id": "c1",
                    "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                    "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
                },
            },
            {
                "name": "chat",
                "attributes": {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": "Weather in Paris?",
                    "gen_ai.prompt.1.role": "tool",
                    "gen_ai.prompt.1.content": "rain",
                    "gen_ai.prompt.1.tool_call_id": "c1",
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.content": "It rains.",
                    "session.id": "s-1",
                },
            },
        ],
    )
    assert _read(path) == ("Weather in Paris?", "It rains.", [("get_weather", {"city": "Paris"}, "rain")], "s-1")


def test_openinference_message_contents_and_tool_attributes(tmp_path: Path) -> None:
    """``llm.input_messages.N.message.contents.M.message_content.text``, output tool calls, and a TOOL
    span's ``tool.name``/``tool_call.function.arguments``/``output.value``."""
    oi = "openinference.span.kind"
    path = _otlp(
        tmp_path / "t.jsonl",
        [
            {
                "name": "llm",
                "attributes": {
                    oi: "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.contents.0.message_content.type": "text",
                    "llm.input_messages.0.message.contents.0.message_content.text": "Weather in Paris?",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
                },
            },
            {
                "name": "tool",
                "attributes": {
                    oi: "TOOL",
                    "tool.name": "get_weather",
                    "tool_call.id": "c1",
                    "tool_call.function.arguments": '{"city": "Paris"}',
                    "output.value": "rain",
                },
            },
            {
                "name": "llm",
                "attributes": {
                    oi: "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": "Weather in Paris?",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "It rains.",
                    "session.id": "s-2",
                },
            },
        ],
    )
    assert _read(path) == ("Weather in Paris?", "It rains.", [("get_weather", {"city": "Paris"}, "rain")], "s-2")
