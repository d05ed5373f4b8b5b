"""Bad input is one line naming the file, the line and the field, exit code 2,
no traceback, and not one request at the judge.

Each case runs the real command (``python -m harness run`` in a subprocess), so stderr is what a
user sees, against a judge server that must receive nothing. tests/test_transcripts.py checks the
reader's messages case by case; here the whole command is held to them.
"""

from __future__ import annotations

import json
import re
import subprocess
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import TranscriptError
from harness.traces.loader import scan
from harness.transcripts import MAX_RECORD_BYTES
from harness.transcripts import raw as raw_reader
from tests.e2e_support import (
    KEY,
    KEY_ENV,
    cache_rows,
    chat_requests,
    judge,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer
from tests.reliability.support import cli, transcripts

GOOD = transcripts(3)


def lines(path: Path, *rows: dict | str | bytes) -> None:
    with path.open("wb") as fh:
        for row in rows:
            data = json.dumps(row).encode() if isinstance(row, dict) else row.encode() if isinstance(row, str) else row
            fh.write(data + b"\n")


def big_response(size: int) -> bytes:
    """One JSONL record whose response field alone is ``size`` bytes."""
    head = b'{"id": "big", "query": "Summarise the filing.", "response": "'
    return head + b"x" * size + b'"}'


def write_oversized(path: Path) -> None:
    with path.open("wb") as fh:
        fh.write(big_response(MAX_RECORD_BYTES + 1) + b"\n")


#: name -> (write the transcripts file, the message, as a regex after "error: ")
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "malformed-json": (
        lambda p: lines(p, GOOD[0], '{"id": "t1", "query": "q",', GOOD[2]),
        r"{file}:2: <json>: invalid JSON \(.+\)",
    ),
    "missing-id": (
        lambda p: lines(p, GOOD[0], {"query": "q", "response": "r"}),
        r"{file}:2: id: required field is missing",
    ),
    "duplicate-id": (
        lambda p: lines(p, GOOD[0], GOOD[1], GOOD[0]),
        r"{file}:3: id: duplicate id 't0' \(first on line 1\)",
    ),
    "non-utf8": (
        lambda p: lines(p, GOOD[0], b'{"id": "t1", "query": "caf\xe9?", "response": "r"}'),
        r"{file}:2: <record>: is not valid UTF-8 \(byte \d+\)",
    ),
    "unknown-field": (
        lambda p: lines(p, GOOD[0], {**GOOD[1], "respnse": "typo"}),
        r"{file}:2: respnse: unknown field",
    ),
    # A 10 MB response is within the limit: the reader accepts line 1 and stops at line 2.
    "10MB-then-bad": (
        lambda p: lines(p, big_response(10 * 1000 * 1000), {"id": "t1", "query": "q", "response": 5}),
        r"{file}:2: response: Input should be a valid string",
    ),
    "over-the-limit": (
        write_oversized,
        rf"{{file}}:1: <record>: record is larger than the {MAX_RECORD_BYTES // 2**20} MiB limit",
    ),
    # A response is required when a rubric that reads it is judged (here all four built-in ones).
    "no-response": (
        lambda p: lines(p, GOOD[0], {"id": "t1", "query": "q", "contexts": ["c"]}, GOOD[2]),
        r"{file}:2: response: required field is missing \(rubric 'faithfulness' judges it\)",
    ),
    "blank-response": (
        lambda p: lines(p, GOOD[0], {**GOOD[1], "response": " "}, {**GOOD[2], "response": ""}),
        r"{file}:2: response: is required and must not be empty \(rubric 'faithfulness' judges it; 1 more record lacks it\)",
    ),
    "messages-without-final-answer": (
        lambda p: lines(
            p,
            GOOD[0],
            {
                "id": "t1",
                "messages": [
                    {"role": "user", "content": "What is the NAV?"},
                    {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "nav", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "NAV 10.2"},
                ],
            },
        ),
        r"{file}:2: response: is required, and `messages` has no final assistant message with text to take it from "
        r"\(rubric 'faithfulness' judges it\)",
    ),
    "empty-file": (lambda p: p.write_bytes(b""), r"{file}: holds no transcripts"),
    "blank-lines-only": (lambda p: p.write_bytes(b"\n  \n\n"), r"{file}: holds no transcripts"),
}


def assert_one_clean_line(result: subprocess.CompletedProcess[str], pattern: str) -> None:
    code, stdout, stderr = result.returncode, result.stdout, result.stderr
    assert code == 2, (code, stderr[-2000:])
    assert "Traceback" not in stderr and "Traceback" not in stdout
    said = [line for line in stderr.splitlines() if line.strip()]
    assert len(said) == 1, said
    assert re.fullmatch("error: " + pattern, said[0]), said[0]
    assert stdout == ""


@pytest.mark.parametrize("case", list(CASES))
def test_bad_transcripts_file(tmp_path: Path, judge_server: JudgeServer, case: str) -> None:
    assert judge_server.base_url
    write, pattern = CASES[case]
    path = tmp_path / "transcripts.jsonl"
    write(path)
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url)])

    result = cli(
        ["run", "transcripts.jsonl", "--config", "harness.toml", "--out", "out", "--cache", "cache.sqlite", "--no-progress"],
        cwd=tmp_path,
        env={KEY_ENV: KEY},
    )

    assert_one_clean_line(result, pattern.format(file=re.escape("transcripts.jsonl")))
    assert judge_server.count() == 0
    assert not (tmp_path / "out" / "judgments.jsonl").exists()
    assert not (tmp_path / "cache.sqlite").exists() or cache_rows(tmp_path / "cache.sqlite") == []


@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        ('[[judges]]\nname = "j"\nmodel = "m"\nbase_url = "{url}"\ntemprature = 0.5\n', r"{file}: judges\[0\]\.temprature: unknown key"),
        ('cahce = "x.sqlite"\n\n[[judges]]\nname = "j"\nmodel = "m"\nbase_url = "{url}"\n', r"{file}: cahce: unknown key"),
        (
            '[[judges]]\nname = "j"\nmodel = "m"\nbase_url = "{url}"\n\n[composites.mix]\nrelevance = 0.5\nfaithfulness = 0.4\n',
            r"{file}: composites: .*sum to 1.*",
        ),
        # A remote judge whose key variable is not set: refused before anything runs.
        (
            '[[judges]]\nname = "remote"\nmodel = "m"\nbase_url = "https://judge.example.com/v1"\napi_key_env = "HARNESS_REL_UNSET_KEY"\n',
            (
                r"{file}: judges\[0\]\.api_key_env: environment variable HARNESS_REL_UNSET_KEY is not set "
                r"\(judge 'remote' at https://judge\.example\.com/v1\)"
            ),
        ),
    ],
    ids=["unknown-judge-key", "unknown-top-level-key", "bad-composite", "missing-api-key-variable"],
)
def test_bad_config(tmp_path: Path, judge_server: JudgeServer, config: str, pattern: str) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", GOOD)
    (tmp_path / "harness.toml").write_text(config.format(url=judge_server.base_url), encoding="utf-8")

    result = cli(["run", "transcripts.jsonl", "--config", "harness.toml", "--out", "out", "--no-progress"], cwd=tmp_path)

    assert_one_clean_line(result, pattern.format(file=re.escape("harness.toml")))
    assert judge_server.count() == 0
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_a_ten_megabyte_response_is_judged_and_a_refusing_judge_is_a_failed_judgment(tmp_path: Path, judge_server: JudgeServer) -> None:
    """Accepted by the reader and sent; this server takes at most 1 MiB (aiohttp's default), as a
    real judge's context window would refuse it: one failed judgment with the HTTP error, no crash."""
    assert judge_server.base_url
    lines(tmp_path / "transcripts.jsonl", big_response(10 * 1000 * 1000), GOOD[0])
    write_config(tmp_path / "harness.toml", [judge("j", judge_server.base_url)])

    result = cli(
        ["run", "transcripts.jsonl", "--config", "harness.toml", "--out", "out", "--cache", "cache.sqlite", "--rubric", "relevance", "--no-progress"],
        cwd=tmp_path,
        env={KEY_ENV: KEY},
    )

    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "1 judgment(s) failed" in result.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "judgments.jsonl").read_text().splitlines()]
    assert [(j["transcript_id"], j["status"]) for j in rows] == [("big", "failed"), ("t0", "scored")]
    assert rows[0]["reason"] == "fatal" and "HTTP 413" in rows[0]["error"] and rows[0]["attempts"] == 1
    assert len(chat_requests(judge_server)) == 2


@pytest.mark.parametrize("form", ["jsonl", "json-array"])
def test_an_oversized_record_is_refused_without_reading_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    """The limit exists so a corrupt file (say a binary with no newline) cannot exhaust memory:
    the reader stops after the limit instead of reading the whole line first."""
    monkeypatch.setattr(raw_reader, "MAX_RECORD_BYTES", 1 << 20)
    path = tmp_path / f"corrupt.{'jsonl' if form == 'jsonl' else 'json'}"
    with path.open("wb") as fh:
        fh.write(b'{"id": "a", "response": "' if form == "jsonl" else b'[{"id": "a", "response": "')
        fh.write(b"x" * (32 << 20))  # 32 MiB without a newline or an end
    problem = "record is larger than the 1 MiB limit" if form == "jsonl" else "record is too large or malformed"
    tracemalloc.start()
    try:
        with pytest.raises(TranscriptError, match=rf"{re.escape(path.name)}:1: <record>: {problem}"):
            scan(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB while refusing a 32 MiB record"
