"""The hot path's JSON (issue 27): orjson where a judgment passes, the standard library's
behaviour kept at every edge (the oracle here is ``json`` itself)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.errors import OutputError
from harness.jsonlines import decode_json
from harness.judges.http import encode_body
from harness.outputs.files import StagedFile, dumps, dumps_line

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
    [b'{"a": NaN}', b'{"a": 123456789012345678901234567890}', '{"a": "\\ud800"}', b'{"a": 1.5e3, "b": [true, null]}'],
)
def test_reply_decoding_accepts_what_json_accepts(raw: bytes | str) -> None:
    got, want = decode_json(raw), json.loads(raw)
    assert repr(got) == repr(want)


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
