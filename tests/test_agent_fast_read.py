"""An agent-only run's reading (``transcripts.fast``): the same ``Resolved`` as the model's, the
same records refused with the same messages; and the run's rows the same either way.

The oracle is :class:`~harness.transcripts.models.Transcript` itself: every record below is read
both ways and compared field by field (``conversation`` apart: the fast reading leaves it out).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import TranscriptError
from harness.traces.loader import iter_checked, iter_resolved_for_agent
from harness.transcripts import fast
from harness.transcripts.fast import AgentReader
from harness.transcripts.models import Transcript
from tests.test_agent_run import EXAMPLE

pytestmark = pytest.mark.timeout(300)


def _call(cid: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


BASE: dict[str, Any] = {
    "id": "t1",
    "task": "weather",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in pune and eur to inr?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "weather", '{"city": "pune"}'), _call("b", "convert", '{"from": "eur"}')]},
        {"role": "tool", "tool_call_id": "b", "content": "92.1"},
        {"role": "tool", "tool_call_id": "a", "content": "31 C", "is_error": False},
        {"role": "assistant", "content": "", "tool_calls": [_call("c", "search", "{not json")]},
        {"role": "tool", "tool_call_id": "c", "content": "boom", "status": "error"},
        {"role": "assistant", "content": "31 C and 92.1"},
    ],
    "reference_trajectory": [
        {"any_order": [{"name": "weather", "arguments": {"city": "pune"}}, {"name": "convert"}]},
        {"name": "search", "optional": True},
    ],
}

#: records the fast reading takes: each must resolve as the model resolves it
TAKEN: list[dict[str, Any]] = [
    BASE,
    {**BASE, "query": "given", "response": "given too", "reference": "gold", "metadata": {"agent_model": "m-1", "x": [1, 2.5]}},
    {
        **BASE,
        "metadata": {"model": "m-2"},
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}, {"name": "convert"}],
    },
    {**BASE, "reference_trajectory": [{"name": "weather", "arguments": {"city": "pune"}, "match": {"mode": "fields", "fields": ["city"]}}]},
    {**BASE, "reference_trajectory": [{"one_of": [{"name": "weather"}, {"name": "search"}]}]},
    # the reference as agentevals' message list, and as tau2 gold actions
    {**BASE, "reference_trajectory": [{"role": "assistant", "tool_calls": [_call("x", "weather", '{"city": "pune"}')]}]},
    {**BASE, "reference_trajectory": [{"action_id": "1", "name": "weather", "arguments": {"city": "pune"}, "compare_args": ["city"]}]},
    # no results, an orphan result, a call without an id, a nameless call, arguments as an object
    {
        "id": "t2",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": "fetch"}}, {"id": "q", "function": {"name": "calc", "arguments": {"x": 1}}}, {"id": "n"}],
            },
            {"role": "tool", "content": "first"},
            {"role": "tool", "tool_call_id": "nope", "content": "orphan"},
            {"role": "function", "name": "calc", "tool_call_id": "q", "content": None},
        ],
    },
    {"id": "t3", "query": "q", "response": "r"},
    {"id": "t4", "query": "q", "messages": [{"role": "assistant", "content": "hello"}]},
    {"id": "t5", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]},
    {**BASE, "reference_trajectory": None, "tools": None, "metadata": None},
]

#: records it leaves to the model (another shape, or refused by the model's checks)
LEFT: list[dict[str, Any]] = [
    {**BASE, "id": 7},
    {**BASE, "id": "  "},
    {**BASE, "task": ""},
    {**BASE, "extra": 1},
    {**BASE, "timings": {"total_ms": 5}},
    {**BASE, "contexts": ["c"]},
    {**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    {**BASE, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]},
    {**BASE, "messages": [{"role": "assistant", "content": "b"}]},
    {"id": "t9"},
    {**BASE, "tools": [{"name": "weather"}, {"name": "weather"}]},
    {**BASE, "reference_trajectory": [{"name": ""}]},
    {**BASE, "messages": [{"role": "user", "content": "go", "tool_calls": [{"id": "a", "function": {"name": "f"}, "extra_key": 1}]}]},
]


def _fields(resolved: Any) -> dict[str, Any]:
    out = {f.name: getattr(resolved, f.name) for f in dataclasses.fields(resolved) if f.name != "conversation"}
    out["turns"] = resolved.turns
    return out


@pytest.mark.parametrize("record", TAKEN, ids=lambda r: str(r.get("id")))
def test_taken_records_resolve_as_the_model_resolves_them(record: dict[str, Any]) -> None:
    line = json.dumps(record).encode()
    got = AgentReader().resolve(line)
    assert got is not None, "the fast reading should take this record"
    assert got.conversation is None
    assert _fields(got) == _fields(Transcript.model_validate_json(line).resolved())


@pytest.mark.parametrize("record", LEFT, ids=lambda r: str(r.get("id")))
def test_other_records_are_left_to_the_model(record: dict[str, Any]) -> None:
    assert AgentReader().resolve(json.dumps(record)) is None


def test_a_reference_repeated_is_validated_once_and_shared() -> None:
    reader = AgentReader()
    first = reader.resolve(json.dumps(BASE))
    second = reader.resolve(json.dumps({**BASE, "id": "t2"}))
    assert first is not None and second is not None
    assert first.reference_trajectory is second.reference_trajectory
    assert first.reference_trajectory == Transcript.model_validate(BASE).resolved().reference_trajectory


def test_a_reference_with_null_is_not_shared_by_its_text() -> None:
    """orjson writes NaN as null: a text holding null is validated each time (the model reads the
    NaN reference as its own value, not as the null one)."""
    reader = fast.Validated(lambda value: (value,))
    nan, null = [{"a": float("nan")}], [{"a": None}]
    assert reader(nan)[0] is nan and reader(null)[0] is null


def test_a_nan_argument_is_read_as_the_model_reads_it() -> None:
    line = json.dumps({**BASE, "reference_trajectory": [{"name": "weather", "arguments": {"x": float("nan")}}]})
    got, want = AgentReader().resolve(line), Transcript.model_validate_json(line).resolved()
    assert got is not None and got.reference_trajectory is not None and want.reference_trajectory is not None
    assert repr(got.reference_trajectory) == repr(want.reference_trajectory)
    assert "nan" in repr(got.reference_trajectory)


def _lines(tmp_path: Path, records: list[Any]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    "bad",
    [
        {**BASE, "id": "  "},
        {**BASE, "task": ""},
        {**BASE, "messages": [{"role": "assistant", "content": "b"}]},
        {**BASE, "reference_trajectory": [{"name": ""}]},
        {**BASE, "tools": [{"name": "w"}, {"name": "w"}]},
        {**BASE, "messages": [{"role": "robot", "content": "b"}]},
        '{"id": "t1", "messages": [',
        {**BASE, "id": "t0"},  # a repeated id (the first record is t0 too)
    ],
)
def test_bad_records_are_refused_with_the_models_message(tmp_path: Path, bad: Any) -> None:
    path = _lines(tmp_path, [{**BASE, "id": "t0"}, bad])
    problems: list[str] = []
    for reader in (iter_checked, iter_resolved_for_agent):
        with pytest.raises(TranscriptError) as caught:
            list(reader(path, "fail", []))
        problems.append(str(caught.value))
    assert problems[0] == problems[1]
    skipped: list[list[str]] = []
    for reader in (iter_checked, iter_resolved_for_agent):
        bad_found: list[TranscriptError] = []
        ids = [r.id for _, r in reader(path, "skip", bad_found)]
        assert ids == ["t0"]
        skipped.append([str(e) for e in bad_found])
    assert skipped[0] == skipped[1]


def test_an_agent_only_run_writes_the_same_rows_read_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "agent_runs.jsonl"
    data.write_bytes(EXAMPLE.read_bytes() + _lines(tmp_path, [{**r, "id": f"x{i}"} for i, r in enumerate(TAKEN)]).read_bytes())
    outs = []
    for name, resolve in (("fast", AgentReader.resolve), ("model", lambda self, text: None)):
        monkeypatch.setattr(AgentReader, "resolve", resolve)
        out = tmp_path / name
        result = CliRunner().invoke(app, ["run", str(data), "--agent-only", "--out", str(out), "--no-progress"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outs.append(out)
    for file in ("results.jsonl", "judgments.jsonl"):
        assert (outs[0] / file).read_bytes() == (outs[1] / file).read_bytes()
    summaries = [json.loads((out / "summary.json").read_text()) for out in outs]
    for summary in summaries:
        summary.pop("wall_time_s", None)
        summary.pop("out", None)
    assert summaries[0] == summaries[1]


@pytest.mark.parametrize("record", TAKEN + LEFT, ids=lambda r: str(r.get("id")))
def test_the_plain_reading_gives_the_validators_dicts_or_none(record: dict[str, Any]) -> None:
    """``_plain`` (orjson and type checks) either gives exactly what ``_RECORD`` validates, or
    leaves the line to it."""
    line = json.dumps(record).encode()
    got = fast._plain(line)
    try:
        want = fast._RECORD.validate_json(line)
    except ValueError:
        assert got is None
        return
    assert got is None or got == want


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": "a", "metadata": {"x": 1e400}}',  # infinity: orjson refuses, pydantic reads inf
        b'{"id": "a", "metadata": {"x": 123456789012345678901234567890}}',  # past 64 bits
        b'{"id": "a\\ud800"}',  # a lone surrogate
        b'{"id": "a", "messages": [{"role": "tool", "is_error": 0, "content": "x"}]}',  # lax bool
        b'{"id": "a", "messages": [{"role": "tool", "status": "weird", "content": "x"}]}',
        b'{"id": "a", "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}',
        b"[1]",
    ],
)
def test_lines_the_plain_reading_leaves_to_the_validator(line: bytes) -> None:
    assert fast._plain(line) is None
