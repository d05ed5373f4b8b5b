"""Edges of the guarantees: input read whole or refused, templates that say what they mean, key
masking that never changes a reply, rate limits that hold per request, numbers that are finite."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.errors import RubricError, TranscriptError, UserInputError
from harness.exit_codes import EXIT_OK, EXIT_USER_ERROR
from harness.jsonlines import iter_json_objects
from harness.judges.protocol import REDACTED, decode_json, redact
from harness.outputs.files import dumps
from harness.rubrics.rubric import parse_rubric
from harness.traces.loader import scan
from harness.usage import Budget, checked_usage, openai_usage
from tests.e2e_support import KEY_ENV, judge, read_jsonl, serve, write_config, write_jsonl
from tests.reliability.support import cli, transcripts

pytestmark = pytest.mark.timeout(120)

DEEP = "[" * 5000 + "]" * 5000


# -- input is read whole or refused --------------------------------------------------------------


def test_data_after_the_json_array_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(transcripts(2)) + '\n{"id": "lost", "query": "q", "response": "r"}\n')
    with pytest.raises(TranscriptError, match=r"t\.json:2: <file>: data after the JSON array"):
        scan(path)
    path.write_text(json.dumps(transcripts(2)) + "\n\n  \n")  # trailing whitespace is fine
    assert scan(path).good == 2


@pytest.mark.parametrize("shape", ["jsonl", "array"])
def test_deeply_nested_records_are_one_line_errors(tmp_path: Path, shape: str) -> None:
    record = '{"id": "a", "query": "q", "response": "r", "metadata": {"x": ' + DEEP + "}}"
    path = tmp_path / "t.jsonl"
    path.write_text(record + "\n" if shape == "jsonl" else f"[{record}]")
    with pytest.raises(TranscriptError) as info:
        scan(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_deeply_nested_labels_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"transcript_id": "a"}\n' + DEEP + "\n")
    with pytest.raises(UserInputError, match=r"labels\.jsonl:2: <json>: nested too deeply"):
        list(iter_json_objects(path))


def test_a_directory_or_fifo_is_named_as_such_by_every_reader(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for reader in (scan, lambda p: list(iter_json_objects(p))):
        with pytest.raises(UserInputError, match="is a FIFO"):
            reader(tmp_path / "fifo")
        with pytest.raises(UserInputError, match="is a directory"):
            reader(tmp_path / "dir")


# -- templates say what they mean ----------------------------------------------------------------

HEADER = '+++\nname = "x"\nversion = "1"\nscale = [0, 1]\ninputs = ["query"]\n+++\n'


@pytest.mark.parametrize(
    "template",
    [
        "{{query}} {{Query}}",
        "{{query}} {{ RESPONSE }}",
        "{{query}} {{answer}}",
        "{{query}} {{ query.text }}",
        "{{query}} {{}}",
        "{{query}} and the {response}",
        "{ query } only",
    ],
)
def test_an_unknown_placeholder_is_an_error_at_load(template: str) -> None:
    with pytest.raises(RubricError, match=r"x\.md: template: ") as info:
        parse_rubric(HEADER + template + "\n", "x.md")
    assert "\n" not in str(info.value)


def test_json_examples_and_spaced_placeholders_still_load() -> None:
    rubric = parse_rubric(HEADER + 'Q: {{ query }}\nReply {"score": 0.5} or {score}.\n', "x.md")
    assert rubric.inputs == ("query",)


# -- masking the key never changes a reply ---------------------------------------------------------


def test_the_key_is_masked_only_where_it_stands_whole() -> None:
    key = "12345678"
    assert redact("Score: 0.12345678", key) == "Score: 0.12345678"
    assert redact("id x12345678y", key) == "id x12345678y"
    assert redact("Bearer 12345678. Score: 0.5", key) == f"Bearer {REDACTED}. Score: 0.5"
    assert redact('"key": "12345678"', key) == f'"key": "{REDACTED}"'


def test_a_short_key_is_refused_and_scores_are_untouched(tmp_path: Path) -> None:
    """A key of '5' used to be masked inside the digits of 22 of 120 scores; now it is refused
    before any call, and a real key leaves every score exactly as the server sent it."""
    with serve() as server:
        write_jsonl(tmp_path / "t.jsonl", transcripts(30))
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "")])
        args = ["run", "t.jsonl", "--config", "harness.toml", "--out", "out", "--no-progress", "--rubric", "relevance"]
        refused = cli(args, tmp_path, {KEY_ENV: "5"}, timeout=60)
        assert server.count() == 0
        ok = cli(args, tmp_path, {KEY_ENV: "sk-5555555555"}, timeout=60)
        sent = {r["body"]["messages"][-1]["content"]: r for r in server.requests}
    assert refused.returncode == EXIT_USER_ERROR and "cannot be told from ordinary text" in refused.stderr
    assert ok.returncode == EXIT_OK, ok.stderr
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert len(rows) == 30 == len(sent)
    assert all(REDACTED not in r["raw_output"] and r["raw_output"].startswith("Score: 0.") for r in rows)


# -- usage and bodies are bounded ------------------------------------------------------------------


def test_usage_is_checked_against_the_request() -> None:
    budget = Budget(100 + 65536, 64 + 16)

    def check(usage: object) -> tuple[int | None, int | None]:
        checked = checked_usage(openai_usage(usage), budget)
        return (None, None) if checked is None else (checked.prompt, checked.completion)

    assert check({"prompt_tokens": 10, "completion_tokens": 5}) == (10, 5)
    assert check({"prompt_tokens": 10**30, "completion_tokens": 5}) == (None, None)
    assert check({"prompt_tokens": 10, "completion_tokens": -1}) == (None, None)
    assert check({"prompt_tokens": 10, "completion_tokens": 500}) == (None, None)
    assert check({"prompt_tokens": 1.5, "completion_tokens": 5}) == (None, None)
    assert check({"prompt_tokens": True, "completion_tokens": 5}) == (None, None)
    assert check(None) == (None, None)


def test_json_nesting_is_bounded_before_decoding() -> None:
    with pytest.raises(ValueError, match="nested deeper than 64"):
        decode_json(DEEP)
    assert decode_json('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')["a"].startswith("[")
    assert decode_json("[" * 64 + "]" * 64) is not None


def test_no_file_holds_a_non_finite_number() -> None:
    from harness.errors import OutputError

    with pytest.raises(OutputError, match="non-finite"):
        dumps({"x": float("inf")})
    assert dumps({"x": 1.5}) == '{"x": 1.5}'


# -- limits hold per request, retries included ------------------------------------------------------


def test_rpm_holds_for_every_request_including_retries(tmp_path: Path) -> None:
    """rpm = 12 (a burst of 12, then one every 5 s): one judgment answered 429 (Retry-After 0.05 s) 14 times sends
    15 requests; the 13th to 15th must each wait for the limiter. Before, retries bypassed it and
    all 15 went out at once."""
    with serve() as server:
        write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "query": "q [[fault:429:14]]", "response": "r"}])
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "", rpm=12, max_attempts=15)])
        args = ["run", "t.jsonl", "--config", "harness.toml", "--out", "out", "--no-progress", "--rubric", "relevance"]
        started = time.monotonic()
        proc = cli(args, tmp_path, {KEY_ENV: "sk-rate-limit-test"}, timeout=100)
        elapsed = time.monotonic() - started
        count = server.count()
    assert proc.returncode == EXIT_OK, proc.stderr
    assert count == 15
    assert elapsed >= 3 * 5.0 - 0.5  # three requests past the burst, 5 s apart at 12 per minute


@pytest.mark.parametrize(
    "extra",
    [
        '"timings": {"total_ms": 1e999}',
        '"timings": {"total_ms": 1e300}',
        '"spans": [{"kind": "llm", "start": 0, "end": 1e308}]',
    ],
)
def test_non_finite_or_overflowing_timings_are_refused_where_read(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "query": "q", "response": "r", ' + extra + "}\n")
    with pytest.raises(TranscriptError, match=r"t\.jsonl:1: (timings|spans)") as info:
        scan(path)
    assert "\n" not in str(info.value)


def test_dash_reads_standard_input(tmp_path: Path) -> None:
    """``-`` is standard input, read whole before validation (estimate: no network at all)."""
    import os
    import subprocess
    import sys

    from tests.reliability.support import ROOT

    records = "\n".join(json.dumps(r) for r in transcripts(7)) + "\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "OPENAI_API_KEY": "sk-unused-key-000"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "estimate", "-", "--model", "gpt-4o-mini", "--no-cache", "--json", "--rubric", "relevance"],
        cwd=tmp_path,
        env=env,
        input=records,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    assert json.loads(proc.stdout)["transcripts"] == 7


def test_bands_are_not_broken_by_float_rounding() -> None:
    from harness.suites.clmpi import interpretation

    assert 0.1 + 0.7 < 0.8  # the float sum that used to fall into the band below
    assert interpretation(0.1 + 0.7) == "Excellent"
    assert interpretation(0.6 - 1e-6) == "Fair"


def test_a_bounded_scores_interval_stays_within_its_scale() -> None:
    from harness.metrics.run import _Series

    series = _Series()
    series.values.extend([1.0, 1.0, 1.0, 0.0])  # a t-interval of these reaches above 1
    assert series.as_summary().ci95[1] > 1.0  # type: ignore[index]
    low, high = series.as_summary((0.0, 1.0)).ci95  # type: ignore[misc]
    assert 0.0 <= low <= high <= 1.0


def test_suite_text_normalisation_is_unicode_aware() -> None:
    from harness.suites.clmpi import normalise_answer
    from harness.suites.simulation import normalize_item

    assert normalise_answer("«Paris»!") == normalise_answer("paris") == "paris"
    assert normalise_answer("The Café") == "café"
    assert normalize_item("Café Crème!") == "cafe creme"  # ORA folds accents (issue 23)
