"""The hot path's JSON (issue 27): orjson where a judgment passes, the standard library's
behaviour kept at every edge (the oracle here is ``json`` itself)."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
from pathlib import Path

import pytest

from harness.errors import OutputError
from harness.jsonlines import decode_json
from harness.judges.base import JudgeRequest
from harness.judges.http import encode_body
from harness.outputs.files import StagedFile, dumps, dumps_line
from harness.outputs.writer import judgment_line
from harness.planning import Judgment
from harness.planning.judgment import _FLOAT_FIELDS, _SCALAR_FLOAT_FIELDS
from harness.runner.session import collector_tuned

ROW = {
    "transcript_id": "t-é-\u2028-😀",
    "score": 0.75,
    "error": None,
    "nested": {"a": [1, 2.5, None, "x"], "b": {"c": True}},
    "big": 2**40,
}


def test_output_row_decodes_to_what_the_standard_library_wrote() -> None:
    line = dumps_line(ROW)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(dumps(ROW)) == ROW


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["top", "nested", "list"])
def test_output_row_refuses_non_finite_numbers_as_dumps_does(bad: float, where: str) -> None:
    row: dict[str, object] = {"ok": None, "score": 1.0}
    if where == "top":
        row["score"] = bad
    elif where == "nested":
        row["scores"] = {"judge": {"rubric": bad}}
    else:
        row["values"] = [1.0, bad]
    with pytest.raises(OutputError, match="non-finite"):
        dumps_line(row)


def test_output_row_past_orjson_integers_falls_back() -> None:
    row = {"n": 2**70}
    assert json.loads(dumps_line(row)) == row


def test_staged_rows_reach_the_file_only_on_commit(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    target.write_text("previous\n")
    staged = StagedFile(target)
    for i in range(5000):  # more than one block
        staged.write_bytes(dumps_line({"i": i, "text": "x" * 300}))
    staged.write("text row é\n")
    assert target.read_text() == "previous\n"
    staged.commit()
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["i"] for line in lines[:-1]] == list(range(5000))
    assert lines[-1] == "text row é"


@pytest.mark.parametrize(
    "raw",
    [b'{"a": NaN}', b'{"a": 123456789012345678901234567890}', b'{"a": "\\ud83d\\ude00 paired"}', b'{"a": 1.5e3, "b": [true, null]}'],
)
def test_reply_decoding_accepts_what_json_accepts(raw: bytes | str) -> None:
    got, want = decode_json(raw), json.loads(raw)
    assert repr(got) == repr(want)


@pytest.mark.parametrize("kind", [bytes, str])
def test_a_lone_surrogate_decodes_to_the_replacement_character(kind: type) -> None:
    """json decodes an unpaired ``\\ud800`` escape into text no UTF-8 file or database can hold
    (a judge's reply holding one could be neither written to judgments.jsonl nor cached): each
    becomes U+FFFD, in values and keys, at any depth; a pair escaped whole stays one character."""
    text = '{"reply": "Score: 0.7 \\ud800", "\\udfff": [{"x": "a\\udc00b\\ud83d\\ude00"}], "n": 12345678901234567890123}'
    raw = text.encode() if kind is bytes else text
    got = decode_json(raw)
    assert got == {"reply": "Score: 0.7 \ufffd", "\ufffd": [{"x": "a\ufffdb\U0001f600"}], "n": 12345678901234567890123}
    json.dumps(got, ensure_ascii=False).encode("utf-8")  # holdable as UTF-8 now
    assert decode_json('{"a": "x\ud800y"}') == {"a": "x\ufffdy"}  # a surrogate in text itself
    assert decode_json(b'{"a": "\\\\ud800 is how one is written"}') == {"a": "\\ud800 is how one is written"}  # an escaped backslash: no surrogate


@pytest.mark.parametrize("raw", [b'{"a": 1', b"not json", b'{"a": 1}}', b""])
def test_reply_decoding_errors_are_the_standard_librarys(raw: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        decode_json(raw)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(raw)
    assert str(ours.value) == str(theirs.value)


def test_request_body_bytes_decode_to_the_body() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": 'é \u2028 "q" \n'}], "max_tokens": 5, "temperature": 0.0}
    assert json.loads(encode_body(body)) == body


def test_request_body_with_a_lone_surrogate_fails_as_before() -> None:
    body = {"messages": [{"role": "user", "content": "\ud800"}]}
    with pytest.raises(UnicodeEncodeError):
        json.dumps(body, ensure_ascii=False).encode()
    with pytest.raises(UnicodeEncodeError):
        encode_body(body)


# -- judgments.jsonl rows: orjson on the dataclass, the checked path's refusals kept ----------


def _judgment(**fields: object) -> Judgment:
    return Judgment(transcript_id="t-é", rubric="relevance", rubric_version="2", judge="j", status="scored", **fields)  # type: ignore[arg-type]


def test_judgment_row_is_the_standard_librarys_row_of_as_dict() -> None:
    j = _judgment(score=0.75, raw_output="Score: 0.75", cost_usd=1e-6, latency_ms=12.5, sample_scores=[0.5, None], score_distribution={"1": 0.25})
    line = judgment_line(j)
    assert line.endswith(b"\n") and list(json.loads(line)) == list(j.as_dict())
    assert json.loads(line) == json.loads(dumps(j.as_dict()))


def test_judgment_fields_that_can_hold_a_float_are_all_checked() -> None:
    assert set(_FLOAT_FIELDS) == {*_SCALAR_FLOAT_FIELDS, "sample_scores", "score_distribution"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("field", [*_SCALAR_FLOAT_FIELDS, "sample_scores", "score_distribution"])
def test_judgment_row_refuses_non_finite_numbers(bad: float, field: str) -> None:
    value: object = [0.5, bad] if field == "sample_scores" else {"1": bad} if field == "score_distribution" else bad
    j = _judgment(**{field: value})
    assert j.non_finite() == field
    with pytest.raises(OutputError, match="non-finite"):
        judgment_line(j)


def test_request_with_messages_is_dataclasses_replace() -> None:
    """``with_messages`` lists the fields by position: a field added to JudgeRequest without it
    fails here (every field set to a value other than its default)."""
    full = JudgeRequest(
        ({"role": "user", "content": "a"},),
        max_tokens=7,
        temperature=0.3,
        seed=5,
        token_param="max_completion_tokens",
        send_temperature=False,
        reasoning_effort="low",
        schema={"type": "object"},
        n=3,
        top_logprobs=4,
        fixed_prefix=2,
        key="old",
        system_role="developer",
        chosen_role="developer",
    )
    assert all(getattr(full, f.name) != f.default for f in dataclasses.fields(JudgeRequest))
    messages = ({"role": "user", "content": "b"},)
    assert full.with_messages(messages, "new") == dataclasses.replace(full, messages=messages, key="new")


def test_a_runs_collector_settings_are_put_back_even_on_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collector_tuned():
        assert gc.get_threshold()[0] > before[0] and gc.get_freeze_count() > 0
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_overlapping_runs_share_the_collector_setting_and_the_last_puts_it_back() -> None:
    # Two runs that overlap without nesting (two threads, as tests/test_matrix.py's two workers):
    # the first to end must not put the thresholds back under the other, nor leave them tuned.
    before = gc.get_threshold()
    first, second = collector_tuned(), collector_tuned()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] > before[0] and gc.get_freeze_count() > 0  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
