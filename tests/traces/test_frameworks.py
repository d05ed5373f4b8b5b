"""Multi-turn traces written by six more agent frameworks (``tests/fixtures/traces/conversations.py``),
read back against the ground truth their tools and the script logged (``conversations_truth.json``).

For each fixture, each trace is one user turn of the conversation: its user text, its answer and its
tool calls (name, arguments, result, or the error the tool raised) must read back equal to what was
logged, and every trace must carry the session id the framework was given. Nothing here needs the
frameworks: the files are committed.
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
}
#: traces that do not record that a tool failed: AutoGen's instrumentor ends the TOOL span OK with
#: the error text as its output (AutoGen's ``is_error`` is not written), so the reader sees a
#: result; the test pins that, so a reader that starts guessing failures from text fails it
UNRECORDED_FAILURES = {"autogen_openinference.jsonl"}


def test_six_frameworks_each_with_a_conversation_of_two_turns_or_more() -> None:
    assert set(TRUTH) == set(FORMATS)
    for fixture, truth in TRUTH.items():
        assert len(truth["turns"]) >= 2, fixture
        assert (FIXTURES / fixture).stat().st_size < 250_000, fixture


@pytest.mark.parametrize("fixture", sorted(TRUTH))
def test_every_turn_reads_back_as_the_tools_and_the_script_logged_it(fixture: str) -> None:
    path = FIXTURES / fixture
    assert detect_format(path) == FORMATS[fixture]
    truth = TRUTH[fixture]
    transcripts = [t for _, t in iter_transcripts(path)]
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
            if "error" in call and fixture in UNRECORDED_FAILURES:
                assert not step.get("failed") and step.get("result") == call["error"], step
            elif "error" in call:
                assert step.get("failed") is True and call["error"] in step["error"], step
            else:
                assert not step.get("failed") and step.get("result") == call["result"], step
        assert transcript.metadata is not None and transcript.metadata["session_id"] == truth["session_id"]


@pytest.mark.parametrize("fixture", sorted(TRUTH))
def test_the_session_id_is_on_the_per_trace_record(fixture: str) -> None:
    """What the grouping of traces into sessions reads: ``Extracted.session_id`` of each trace."""
    from harness.traces.reader import extracted

    found = list(extracted(FIXTURES / fixture, FORMATS[fixture]))
    assert [e.session_id for e in found] == [TRUTH[fixture]["session_id"]] * len(TRUTH[fixture]["turns"])


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
