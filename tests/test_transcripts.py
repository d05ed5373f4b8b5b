"""Transcript records: the ``FILE:LINE: field: problem`` errors, both file forms, ``messages``,
span-derived latencies (seed 003, "Performance Metrics") and the streaming reader."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import TranscriptError, UserInputError
from harness.rubrics.inputs import inputs_of, present_inputs
from harness.traces.loader import iter_raw, iter_transcripts, scan
from harness.transcripts import Transcript, union_ms
from harness.transcripts import raw as raw_reader

GOOD = {"id": "a", "query": "What is 2+2?", "response": "4"}


def jsonl(path: Path, *records: dict[str, Any] | str | bytes) -> Path:
    """Write one line per record: dicts as JSON, str/bytes as given."""
    with path.open("wb") as fh:
        for record in records:
            if isinstance(record, dict):
                record = json.dumps(record)
            if isinstance(record, str):
                record = record.encode("utf-8")
            fh.write(record + b"\n")
    return path


def error_of(path: Path, **kwargs: Any) -> TranscriptError:
    with pytest.raises(TranscriptError) as info:
        scan(path, **kwargs)
    return info.value


def assert_place(exc: TranscriptError, path: Path, line: int, field: str, problem: str) -> None:
    """``str(exc)`` is exactly ``FILE:LINE: field: problem`` with ``problem`` matched as a regex."""
    text = str(exc)
    assert re.fullmatch(rf"{re.escape(str(path))}:{line}: {re.escape(field)}: {problem}", text), text
    assert "\n" not in text
    assert (exc.path, exc.line, exc.field) == (str(path), line, field)


# --- bad input: every case names file, line and field ---------------------------------------------


def test_malformed_json_names_its_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, '{"id": "b", "query": "q",')
    assert_place(error_of(path), path, 2, "<json>", r"invalid JSON \(.+\)")


def test_missing_id(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, {"query": "q", "response": "r"})
    assert_place(error_of(path), path, 2, "id", "required field is missing")


def test_unknown_field_is_named(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {**GOOD, "respnse": "typo"})
    assert_place(error_of(path), path, 1, "respnse", "unknown field")


def test_unknown_nested_field_has_dotted_path(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {**GOOD, "timings": {"total_ms": 5, "llm": 3}})
    assert_place(error_of(path), path, 1, "timings.llm", "unknown field")


@pytest.mark.parametrize(
    ("patch", "field", "problem"),
    [
        ({"query": 5}, "query", "Input should be a valid string"),
        ({"timings": {"total_ms": "slow"}}, "timings.total_ms", "Input should be a valid number.*"),
        ({"timings": {"llm_ms": -1}}, "timings.llm_ms", "Input should be greater than or equal to 0"),
        ({"contexts": "one string"}, "contexts", "Input should be a valid (list|array)"),
        ({"tool_calls": -2}, "tool_calls", ".*must be >= 0.*"),
        ({"id": True}, "id", "Input should be a valid string"),
        ({"spans": [{"kind": "db", "start": 1, "end": 2}]}, "spans.0.kind", "Input should be 'llm', 'tool' or 'api'"),
    ],
)
def test_wrong_type(tmp_path: Path, patch: dict[str, Any], field: str, problem: str) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, {**GOOD, "id": "b", **patch})
    assert_place(error_of(path), path, 2, field, problem)


def test_validator_messages_read_plainly(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {**GOOD, "spans": [{"kind": "llm", "start": 2.0, "end": 1.0}]})
    assert_place(error_of(path), path, 1, "spans.0", "end is before start")


def test_several_problems_in_one_record_are_counted(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {"id": "a", "query": 1, "response": 2, "x": 3})
    exc = error_of(path)
    assert exc.line == 1
    assert exc.problem.endswith("(and 2 more problems in this record)")


def test_integer_ids_are_text(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {**GOOD, "id": 7})
    [(line, record)] = list(iter_transcripts(path))
    assert (line, record.id) == (1, "7")


def test_duplicate_id_names_the_first_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, {**GOOD, "id": "b"}, "", {**GOOD, "id": "b"})
    assert_place(error_of(path), path, 4, "id", re.escape("duplicate id 'b' (first on line 2)"))
    with pytest.raises(TranscriptError, match=r"t\.jsonl:4: id: duplicate id 'b'"):
        list(iter_transcripts(path))


class _Colliding(str):
    """An id whose hash is its first letter's: ids of one letter collide in ``SeenIds``."""

    def __hash__(self) -> int:
        return ord(self[0])


class _Record:
    def __init__(self, rid: str) -> None:
        self.id = rid


def _unique(path: Path, on_bad: str = "fail") -> tuple[list[tuple[int, str]], list[str], int]:
    """``_iter_unique`` of ``path`` with ids whose hashes collide: the records it yields, its
    refusals, and how many records ``value`` read (each once, and once more on a re-read)."""
    from harness.traces.loader import _iter_unique

    calls = 0

    def value(raw: Any) -> _Record:
        nonlocal calls
        calls += 1
        data = json.loads(raw.text)
        if "id" not in data:
            raise TranscriptError(str(path), raw.line, "id", "field required")
        return _Record(_Colliding(data["id"]))

    bad: list[TranscriptError] = []
    got = [(line, r.id) for line, r in _iter_unique(path, on_bad, bad, "jsonl", "off", value)]  # type: ignore[arg-type]
    return got, [str(e) for e in bad], calls


def test_ids_whose_hashes_collide_are_not_refused(tmp_path: Path) -> None:
    """Ids are kept as hashes; a hash seen again is confirmed against the ids read so far (read
    once more, once a pass): distinct ids that share a hash pass, a true duplicate is refused
    naming the first line of its id, bad records are passed over in the re-read as in the pass."""
    path = jsonl(tmp_path / "t.jsonl", {"id": "a1"}, {"x": 1}, {"id": "b1"}, {"id": "a2"}, {"id": "a3"}, {"id": "b1"}, {"id": "a2"}, {"id": "c"})
    got, bad, calls = _unique(path, "skip")
    assert got == [(1, "a1"), (3, "b1"), (4, "a2"), (5, "a3"), (8, "c")]
    first, second = str(path) + ":6: id: duplicate id 'b1' (first on line 3)", str(path) + ":7: id: duplicate id 'a2' (first on line 4)"
    assert bad == [str(path) + ":2: id: field required", first, second]
    assert calls == 8 + 3  # one re-read, of the three records before a2 (the first repeated hash)
    path = jsonl(tmp_path / "u.jsonl", {"id": "a1"}, {"id": "a2"}, {"id": "a1"})
    with pytest.raises(TranscriptError, match=re.escape("u.jsonl:3: id: duplicate id 'a1' (first on line 1)")):
        _unique(path)


def test_seen_ids_keep_every_hash() -> None:
    """``SeenIds.add`` is True for each new id and False for each again, across the table's
    growth; a few bytes an id."""
    from harness.traces.seen import SeenIds

    seen = SeenIds(capacity=8)
    ids = [f"run-{i}" for i in range(50_000)]
    assert all(seen.add(i) for i in ids)
    assert len(seen) == len(ids)
    assert not any(seen.add(i) for i in ids[::7])
    assert seen.add("another") and len(seen) == len(ids) + 1
    assert len(seen._table) * 8 <= 32 * len(ids) * 1.4


def test_non_utf8_bytes_in_jsonl(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, b'{"id": "b", "query": "caf\xe9", "response": "r"}')
    assert_place(error_of(path), path, 2, "<record>", r"is not valid UTF-8 \(byte 25\)")


def test_non_utf8_bytes_in_json_array_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'[\n  {"id": "a", "query": "q", "response": "r"},\n  {"id": "b", "query": "caf\xe9", "response": "r"}\n]\n')
    assert_place(error_of(path), path, 3, "<file>", "is not valid UTF-8")


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"[]", b"  [\n]\n"])
def test_empty_file_is_refused_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserInputError) as info:
        scan(path)
    assert str(info.value) == f"{path}: holds no transcripts"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="no such file"):
        scan(tmp_path / "nope.jsonl")


def test_record_that_is_not_an_object(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", GOOD, "[1, 2]")
    assert_place(error_of(path), path, 2, "<record>", "Input should be an object")


def test_record_without_conversation(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {"id": "a"})
    assert_place(error_of(path), path, 1, "<record>", ".*needs `query` and `response`, or a `messages` list")


ARRAY_WITH_BAD_ELEMENT = """[
  {"id": "a", "query": "q", "response": "r"},
  {"id": "b",
   "query": "q",
   "response": "r"},

  {"id": "c",
   "query": "q",
   "response": "r", "extra": 1},
  {"id": "d", "query": "q", "response": "r"}
]
"""


def test_json_array_bad_element_names_the_line_it_starts_on(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(ARRAY_WITH_BAD_ELEMENT)
    assert_place(error_of(path), path, 7, "extra", "unknown field")
    result = scan(path, on_bad="skip")
    assert result.good == 3
    assert [(e.line, e.field) for e in result.bad] == [(7, "extra")]


def test_json_array_malformed_element_names_the_line_of_the_fault(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[\n  {"id": "a", "query": "q", "response": "r"},\n  {"id": "b", "query": "q",\n   "response": }\n]\n')
    assert_place(error_of(path), path, 4, "<json>", "Expecting value")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ('[\n {"id": "a", "query": "q", "response": "r"}\n {"id": "b", "query": "q", "response": "r"}\n]', 3, "expected ',' or ']' between records"),
        ('{"id": "a"} [', 1, None),  # JSONL, not an array: the line is invalid JSON
        ('[\n {"id": "a", "query": "q", "response": "r"},\n', 3, "Expecting value"),
    ],
)
def test_json_array_structure_errors(tmp_path: Path, text: str, line: int, problem: str | None) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    exc = error_of(path)
    assert exc.line == line, str(exc)
    if problem is not None:
        assert exc.problem == problem


def test_ten_megabyte_response_is_accepted_in_both_forms(tmp_path: Path) -> None:
    big = "word " * (2 * 1024 * 1024)  # 10 MiB
    record = {**GOOD, "response": big}
    as_lines = jsonl(tmp_path / "big.jsonl", record, {**GOOD, "id": "b"})
    as_array = tmp_path / "big.json"
    as_array.write_text("[\n" + json.dumps(record) + ",\n" + json.dumps({**GOOD, "id": "b"}) + "\n]\n")
    for path in (as_lines, as_array):
        assert scan(path).good == 2
        records = list(iter_transcripts(path))
        assert [line for line, _ in records] == ([1, 2] if path is as_lines else [2, 3])
        assert records[0][1].response == big


def test_bom_at_the_start_is_allowed(tmp_path: Path) -> None:
    lines = tmp_path / "bom.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n")
    array = tmp_path / "bom.json"
    array.write_bytes(b"\xef\xbb\xbf[" + json.dumps(GOOD).encode() + b"]")
    for path in (lines, array):
        [(line, record)] = list(iter_transcripts(path))
        assert (line, record.id) == (1, "a")


# --- both file forms give the same records ---------------------------------------------------------

RECORDS: list[dict[str, Any]] = [
    {
        "id": "r1",
        "query": "Capital of France?",
        "response": "Paris {not a placeholder} $1",
        "contexts": ["Paris is the capital.", {"doc": 1, "text": "é"}],
    },
    {"id": 2, "query": "q", "response": "r", "timings": {"total_ms": 10, "llm_ms": 4}, "metadata": {"k": [1, 2]}},
    {"id": "r3", "messages": [{"role": "user", "content": "hi\nthere"}, {"role": "assistant", "content": "hello ✓"}]},
    {"id": "r4", "query": "q", "response": "r", "spans": [{"kind": "llm", "start": 1.0, "end": 2.0}], "tool_calls": 0, "reference": "ref"},
]


def test_json_array_and_jsonl_give_identical_records(tmp_path: Path) -> None:
    as_lines = jsonl(tmp_path / "t.jsonl", *RECORDS)
    as_array = tmp_path / "t.json"
    as_array.write_text(json.dumps(RECORDS, indent=2, ensure_ascii=False), encoding="utf-8")
    from_lines = [record for _, record in iter_transcripts(as_lines)]
    from_array = [record for _, record in iter_transcripts(as_array)]
    assert [r.model_dump() for r in from_lines] == [r.model_dump() for r in from_array]
    assert [r.resolved() for r in from_lines] == [r.resolved() for r in from_array]
    assert len(from_lines) == len(RECORDS)
    # r3's messages say it made no tool call: an empty trajectory, which a trajectory rubric can
    # judge; and they are a conversation, which a conversation rubric can (issue 43)
    assert scan(as_lines).inputs_seen == scan(as_array).inputs_seen == {"query", "response", "contexts", "reference", "trajectory", "conversation"}


def test_json_array_lines_point_at_each_element(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(RECORDS, indent=2, ensure_ascii=False), encoding="utf-8")
    text = path.read_text(encoding="utf-8").splitlines()
    for line, record in iter_transcripts(path):
        assert text[line - 1].strip() == "{", (line, record.id)
        assert text[line].strip().startswith('"id": '), (line, record.id)


def test_json_array_elements_split_across_read_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small reads put chunk boundaries inside elements, strings and multi-byte characters."""
    monkeypatch.setattr(raw_reader, "_CHUNK", 7)
    records = [{"id": f"r{i}", "query": "é€𝄞" * i, "response": "ü" * (i + 1)} for i in range(12)]
    path = tmp_path / "t.json"
    path.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n", encoding="utf-8")
    got = list(iter_transcripts(path))
    assert [line for line, _ in got] == list(range(2, 14))
    assert [r.model_dump(exclude_none=True) for _, r in got] == records


def test_json_array_with_non_object_number_elements_split_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raw_reader, "_CHUNK", 3)
    path = tmp_path / "t.json"
    path.write_text("[12345678, 2]")
    raw = [r.text for r in iter_raw(path)]
    assert raw == ["12345678", "2"]


# --- messages ------------------------------------------------------------------------------------


def test_messages_give_query_response_contexts_and_tool_calls() -> None:
    record = Transcript.model_validate(
        {
            "id": "m",
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                        {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": {"city": "Rome"}}},
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "Paris: 18C"},
                {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "Rome: 24C"}]},
                {"role": "assistant", "content": "Paris is 18C."},
                {"role": "user", "content": "And tomorrow?"},
                {"role": "assistant", "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "forecast"}}]},
                {"role": "tool", "tool_call_id": "c3", "content": "Sunny"},
                {"role": "assistant", "content": "Sunny in both."},
            ],
        }
    )
    resolved = record.resolved()
    assert resolved.query == "Weather in Paris and Rome?"
    assert resolved.response == "Sunny in both."
    assert resolved.contexts == ("Paris: 18C", "Rome: 24C", "Sunny")
    assert resolved.performance.tool_calls == 3
    assert present_inputs(resolved) == {"query", "response", "contexts", "trajectory", "conversation"}
    # no timing data at all: latencies are unknown, never 0
    assert (resolved.performance.total_ms, resolved.performance.llm_ms) == (None, None)


def test_explicit_fields_win_over_messages() -> None:
    record = Transcript.model_validate(
        {
            "id": "m",
            "query": "explicit q",
            "contexts": ["explicit ctx"],
            "tool_calls": 7,
            "messages": [
                {"role": "user", "content": "from messages"},
                {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
                {"role": "tool", "content": "tool out"},
                {"role": "assistant", "content": "final"},
            ],
        }
    )
    resolved = record.resolved()
    assert (resolved.query, resolved.response, resolved.contexts) == ("explicit q", "final", ("explicit ctx",))
    assert resolved.performance.tool_calls == 7


def test_messages_without_tools_have_no_contexts_and_zero_tool_calls() -> None:
    record = Transcript.model_validate({"id": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    resolved = record.resolved()
    assert resolved.contexts is None
    assert resolved.performance.tool_calls == 0
    assert "contexts" not in present_inputs(resolved)


def test_messages_without_a_user_message_is_an_error(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {"id": "m", "messages": [{"role": "assistant", "content": "hello"}]})
    assert_place(error_of(path), path, 1, "<record>", ".*no user message.*")


def test_unknown_message_role(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", {"id": "m", "messages": [{"role": "robot", "content": "x"}]})
    exc = error_of(path)
    assert (exc.line, exc.field) == (1, "messages.0.role")


def test_json_contexts_render_as_canonical_json() -> None:
    record = Transcript.model_validate({**GOOD, "contexts": [{"b": 1, "a": "é"}, "plain"]})
    assert record.resolved().contexts == ('{"a": "é", "b": 1}', "plain")


# --- performance from spans (seed 003) -----------------------------------------------------------

# Seed 003's worked examples, all on one afternoon: LLM 12:00:01.000-12:00:02.200, tool
# 12:00:01.500-12:00:04.300, API 12:00:02.000-12:00:02.230.
SEED_SPANS = [
    {"kind": "llm", "name": "groq", "start": "2024-05-01T12:00:01.000Z", "end": "2024-05-01T12:00:02.200Z"},
    {"kind": "tool", "name": "search", "start": "2024-05-01T12:00:01.500Z", "end": "2024-05-01T12:00:04.300Z"},
    {"kind": "api", "name": "weather", "start": "2024-05-01T12:00:02.000Z", "end": "2024-05-01T12:00:02.230Z"},
]


def test_seed_latencies_from_iso_spans() -> None:
    perf = Transcript.model_validate({**GOOD, "spans": SEED_SPANS}).resolved().performance
    assert perf.llm_ms == 1200.0  # (2.200 - 1.000) x 1000
    assert perf.tool_ms == 2800.0  # (4.300 - 1.500) x 1000
    assert perf.api_ms == 230.0  # (2.230 - 2.000) x 1000, exactly: no float noise
    assert perf.total_ms == 3300.0  # envelope: first start 1.000 to last end 4.300
    assert perf.tool_calls == 1


def test_seed_latencies_from_epoch_spans() -> None:
    t0 = 1714564800.0  # 2024-05-01T12:00:00Z
    spans = [
        {"kind": "llm", "start": t0 + 1.0, "end": t0 + 2.2},
        {"kind": "tool", "start": t0 + 1.5, "end": t0 + 4.3},
        {"kind": "api", "start": t0 + 2.0, "end": t0 + 2.23},
        {"kind": "llm", "name": "whole run", "start": t0, "end": t0 + 0.5},
    ]
    perf = Transcript.model_validate({**GOOD, "spans": spans}).resolved().performance
    assert (perf.llm_ms, perf.tool_ms, perf.api_ms) == (1700.0, 2800.0, 230.0)
    assert perf.total_ms == 4300.0


def test_overlapping_spans_count_once() -> None:
    spans = [
        {"kind": "tool", "start": 1.0, "end": 3.0},
        {"kind": "tool", "start": 2.0, "end": 4.0},  # overlaps the first: 1.0-4.0
        {"kind": "tool", "start": 2.5, "end": 2.6},  # inside both
        {"kind": "tool", "start": 5.0, "end": 5.5},  # disjoint
        {"kind": "llm", "start": 0.0, "end": 1.0},
        {"kind": "llm", "start": 1.0, "end": 2.0},  # touching: 0.0-2.0
    ]
    perf = Transcript.model_validate({**GOOD, "spans": spans}).resolved().performance
    assert perf.tool_ms == 3500.0
    assert perf.llm_ms == 2000.0
    assert perf.api_ms == 0.0  # spans recorded, no API call: 0 ms, not unknown
    assert perf.total_ms == 5500.0
    assert perf.tool_calls == 4


def test_union_ms_by_hand() -> None:
    assert union_ms([]) == 0.0
    assert union_ms([(0.0, 1.0)]) == 1000.0
    assert union_ms([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0)]) == 3000.0
    assert union_ms([(0.0, 10.0), (1.0, 2.0), (3.0, 4.0)]) == 10000.0


def test_timings_win_over_spans_field_by_field() -> None:
    record = Transcript.model_validate({**GOOD, "spans": SEED_SPANS, "timings": {"llm_ms": 999.5, "total_ms": 4230}})
    perf = record.resolved().performance
    assert perf.llm_ms == 999.5
    assert perf.total_ms == 4230.0
    assert (perf.tool_ms, perf.api_ms) == (2800.0, 230.0)


def test_tool_call_count_sources() -> None:
    spans = [{"kind": "tool", "start": 0, "end": 1}, {"kind": "tool", "start": 1, "end": 2}]
    from_spans = Transcript.model_validate({**GOOD, "spans": spans}).resolved().performance
    explicit = Transcript.model_validate({**GOOD, "spans": spans, "tool_calls": 5}).resolved().performance
    as_list = Transcript.model_validate({**GOOD, "tool_calls": [{"function": {"name": "a"}}]}).resolved().performance
    nothing = Transcript.model_validate(GOOD).resolved().performance
    assert (from_spans.tool_calls, explicit.tool_calls, as_list.tool_calls, nothing.tool_calls) == (2, 5, 1, None)


# --- skip mode -----------------------------------------------------------------------------------


def test_scan_skip_collects_every_problem_and_keeps_good_records(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "t.jsonl",
        GOOD,
        "{not json",
        {"query": "q", "response": "r"},
        {**GOOD, "id": "b"},
        b'{"id": "c", "query": "\xff", "response": "r"}',
        {**GOOD, "id": "a"},
        {**GOOD, "id": "d", "bogus": True},
        {**GOOD, "id": "e", "contexts": ["c"]},
    )
    result = scan(path, on_bad="skip")
    assert result.good == 3
    assert [(e.line, e.field) for e in result.bad] == [(2, "<json>"), (3, "id"), (5, "<record>"), (6, "id"), (7, "bogus")]
    assert all(str(e).startswith(f"{path}:{e.line}: {e.field}: ") for e in result.bad)
    assert "first on line 1" in str(result.bad[3])
    assert result.inputs_seen == {"query", "response", "contexts"}
    kept = [(line, record.id) for line, record in iter_transcripts(path, on_bad="skip")]
    assert kept == [(1, "a"), (4, "b"), (8, "e")]
    with pytest.raises(TranscriptError):
        list(iter_transcripts(path))


def test_scan_limit_counts_good_records(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", *({**GOOD, "id": str(i)} for i in range(10)), "{broken")
    assert scan(path, limit=3).good == 3


def test_file_of_only_bad_records_in_skip_mode_reports_them(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "t.jsonl", "{", "}")
    result = scan(path, on_bad="skip")
    assert (result.good, len(result.bad)) == (0, 2)


# --- streaming -----------------------------------------------------------------------------------


def _write_big(path: Path, n: int, as_array: bool) -> int:
    filler = "lorem ipsum dolor sit amet " * 8
    with path.open("w", encoding="utf-8") as fh:
        if as_array:
            fh.write("[\n")
        for i in range(n):
            line = json.dumps({"id": f"t{i}", "query": f"question {i}", "response": filler})
            fh.write((",\n" if as_array and i else "") + line + ("" if as_array else "\n"))
        if as_array:
            fh.write("\n]\n")
    return path.stat().st_size


@pytest.mark.parametrize("as_array", [False, True], ids=["jsonl", "array"])
def test_iter_raw_streams_without_reading_the_file_whole(tmp_path: Path, as_array: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ("big.json" if as_array else "big.jsonl")
    size = _write_big(path, 40_000, as_array)
    assert size > 10 * 2**20
    monkeypatch.setattr(raw_reader, "_CHUNK", 1 << 16)  # the array reader's read size
    tracemalloc.start()
    try:
        count = 0
        for raw in iter_raw(path):
            count += 1
            assert len(raw.text) < 400
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 40_000
    # A few read chunks and a record or two in memory, never the file.
    assert peak < 2**20, (peak, size)


def test_json_array_splitting_does_not_depend_on_the_read_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each element costs its own length, not a copy of the rest of the read buffer: with 4 MiB
    reads, splitting takes about as much CPU as with 64 KiB reads (copying the buffer per element
    made it ~60 times slower)."""
    import time

    path = tmp_path / "big.json"
    _write_big(path, 10_000, as_array=True)
    took = {}
    for chunk in (1 << 16, 1 << 22):
        monkeypatch.setattr(raw_reader, "_CHUNK", chunk)
        start = time.process_time()
        assert sum(1 for _ in iter_raw(path)) == 10_000
        took[chunk] = time.process_time() - start
    assert took[1 << 22] < max(0.5, 5 * took[1 << 16]), took


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    elements=st.lists(_json_values, max_size=6),
    chunk=st.integers(min_value=1, max_value=40),
    indent=st.sampled_from([None, 1, "\t"]),
)
def test_json_array_reader_agrees_with_json_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elements: list[Any], chunk: int, indent: Any
) -> None:
    monkeypatch.setattr(raw_reader, "_CHUNK", chunk)
    path = tmp_path / "t.json"
    text = json.dumps(elements, indent=indent, ensure_ascii=False)
    path.write_text(text, encoding="utf-8")
    raw = list(iter_raw(path))
    assert [json.loads(r.text) for r in raw] == elements
    lines = text.split("\n")
    for r in raw:  # each element's first character is on the line it names
        first = r.text[0] if isinstance(r.text, str) else chr(r.text[0])
        assert first in lines[r.line - 1]


@pytest.mark.parametrize(
    "record",
    [
        {"id": "a", "query": "q", "response": "r"},
        {"id": "b", "query": "  ", "response": "r", "contexts": [], "reference": "\n"},
        {"id": "c", "query": "q", "response": "", "contexts": [""], "reference": "ref"},
        {"id": "d", "query": "q", "response": "r", "contexts": [{"doc": 1}]},
        {"id": "e", "messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "ctx"}, {"role": "assistant", "content": "a"}]},
        {"id": "f", "messages": [{"role": "user", "content": "q"}], "response": "r"},
        # what the transcript says about its agent: given, even empty, is present
        {"id": "g", "query": "q", "response": "r", "steps": [], "tools": [], "reference_trajectory": []},
        {"id": "h", "query": "q", "response": "r", "steps": [{"name": "search"}], "tools": [{"name": "search"}]},
        {"id": "i", "query": "q", "response": "r", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
        {"id": "j", "query": "q", "response": "r", "tool_calls": 2},
        {"id": "k", "query": "q", "response": "r", "spans": [{"kind": "tool", "name": "f", "start": 1, "end": 2}]},
        {"id": "l", "query": "q", "response": "r", "spans": [{"kind": "llm", "start": 1, "end": 2}]},
        {"id": "m", "query": "q", "response": "r", "reference_trajectory": [{"name": "f"}]},
    ],
)
def test_present_inputs_without_resolving_equals_the_resolved_ones(record: dict[str, object]) -> None:
    transcript = Transcript.model_validate(record)
    assert inputs_of(transcript) == present_inputs(transcript.resolved())


def test_present_inputs_of_agent_records() -> None:
    def present(**fields: object) -> set[str]:
        return set(inputs_of(Transcript.model_validate({"id": "a", "query": "q", "response": "r", **fields})))

    assert present() == {"query", "response"}
    assert present(steps=[]) == {"query", "response", "trajectory"}
    assert present(tool_calls=2) == {"query", "response"}  # a count says nothing of the calls
    assert present(spans=[{"kind": "tool", "name": "f", "start": 1, "end": 2}]) == {"query", "response", "trajectory"}
    assert present(spans=[{"kind": "llm", "start": 1, "end": 2}]) == {"query", "response"}
    assert present(tools=[], reference_trajectory=[{"any_order": [{"name": "f"}]}]) == {"query", "response", "tools", "reference_trajectory"}
