"""Bad trace input: one-line messages naming file, line or trace, and field; nothing silently dropped."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import TranscriptError, UserInputError
from harness.traces.loader import iter_transcripts, scan
from tests.traces.support import INSPECT_JSON, LANGSMITH, OTEL, deadline

ENV = {"COLUMNS": "400", "NO_COLOR": "1"}


def unwrapped(output: str) -> str:
    """The output with its line breaks read as spaces: the CLI's console, made when its module is
    first imported, wraps at 80 columns whatever ``COLUMNS`` a later invocation sets, and a long
    temp path (xdist's) wraps a message."""
    return " ".join(output.split())


def _strip_input_messages(tmp_path: Path, trace_index: int) -> tuple[Path, str]:
    """OTEL with the user messages removed from every span of one trace: no query can be found."""
    lines = OTEL.read_text(encoding="utf-8").splitlines()
    trace_ids = list(dict.fromkeys(json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] for line in lines))
    victim = trace_ids[trace_index]
    out = []
    for line in lines:
        doc = json.loads(line)
        for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            if span["traceId"] == victim:
                span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.input.messages"]
        out.append(json.dumps(doc))
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path, victim


def test_trace_without_query_fails_naming_the_trace(tmp_path: Path) -> None:
    path, victim = _strip_input_messages(tmp_path, 0)
    with pytest.raises(TranscriptError) as info:
        scan(path)
    message = str(info.value)
    assert message.startswith(f"{path}:")
    assert f"trace {victim}: no query found (looked in gen_ai.input.messages" in message
    assert "\n" not in message


def test_trace_without_query_is_listed_under_skip_never_dropped(tmp_path: Path) -> None:
    path, victim = _strip_input_messages(tmp_path, 1)
    result = scan(path, on_bad="skip")
    assert result.good == 2
    assert [e.field for e in result.bad] == [f"trace {victim}"]
    assert [t.id for _, t in iter_transcripts(path, on_bad="skip")] and victim not in [t.id for _, t in iter_transcripts(path, on_bad="skip")]


def test_invalid_json_line_names_file_and_line(tmp_path: Path) -> None:
    lines = OTEL.read_text(encoding="utf-8").splitlines()
    lines.insert(2, '{"resourceSpans": [')
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=rf"^{path}:3: <json>: invalid JSON"):
        scan(path, format="otel")


def test_span_without_trace_id_names_the_field(tmp_path: Path) -> None:
    doc = json.loads(OTEL.read_text(encoding="utf-8").splitlines()[0])
    del doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=r":1: resourceSpans\.0\.scopeSpans\.0\.spans\.0\.traceId: required field is missing"):
        scan(path, format="otel")


def test_forced_format_on_the_wrong_file_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match=r":1: resourceSpans: required field is missing \(not an OTLP JSON trace export\)"):
        scan(LANGSMITH, format="otel")
    with pytest.raises(TranscriptError, match=r":1: eval: required field is missing"):
        scan(OTEL, format="inspect")


def test_inspect_json_without_samples_and_a_broken_eval_zip(tmp_path: Path) -> None:
    log = json.loads(INSPECT_JSON.read_text(encoding="utf-8"))
    del log["samples"]
    path = tmp_path / "header-only.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    with pytest.raises(TranscriptError, match=r":1: samples: required field is missing"):
        scan(path, format="inspect")
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(TranscriptError, match=r"broken\.eval:1: <file>: not a readable \.eval log"):
        scan(broken)


def test_inspect_sample_without_output_is_reported(tmp_path: Path) -> None:
    log = json.loads(INSPECT_JSON.read_text(encoding="utf-8"))
    sample = log["samples"][1]
    sample["output"] = {"model": "m", "choices": [], "completion": ""}
    sample["messages"] = [m for m in sample["messages"] if m["role"] != "assistant"]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    result = scan(path, on_bad="skip")
    assert result.good == 1
    assert str(result.bad[0]).startswith(f"{path}:2: sample {sample['id']} (epoch 1): no response found")


def test_unknown_format_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="unknown --format 'zipkin'"):
        scan(OTEL, format="zipkin")


def test_cli_prints_one_line_and_exits_2_never_a_traceback(tmp_path: Path) -> None:
    path, victim = _strip_input_messages(tmp_path, 0)
    with deadline(60):
        result = CliRunner().invoke(app, ["import", str(path), "--out", str(tmp_path / "t.jsonl")], env=ENV)
    assert result.exit_code == 2
    assert "Traceback" not in unwrapped(result.output)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert re.fullmatch(rf"error: {re.escape(str(path))}:\d+: trace {victim}: no query found \(looked in [^)]+\)", lines[0])
    assert not (tmp_path / "t.jsonl").exists()  # nothing half-written
    with deadline(60):
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(path),
                "--out",
                str(tmp_path / "out"),
                "--format",
                "otel",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--no-progress",
            ],
            env=ENV,
        )
    assert result.exit_code == 2 and f"trace {victim}: no query found" in unwrapped(result.output) and "Traceback" not in unwrapped(result.output)


def test_cli_import_skip_lists_each_bad_trace(tmp_path: Path) -> None:
    path, victim = _strip_input_messages(tmp_path, 2)
    with deadline(60):
        result = CliRunner().invoke(app, ["import", str(path), "--out", str(tmp_path / "t.jsonl"), "--on-bad-record", "skip"], env=ENV)
    assert result.exit_code == 0, result.output
    assert f"skipped: {path}:" in unwrapped(result.output) and f"trace {victim}: no query found" in unwrapped(result.output)
    assert "2 transcripts from otel, 1 skipped" in unwrapped(result.output)
    assert len((tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()) == 2


def test_zstd_eval_without_zipfile_zstd_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tests.traces.support import INSPECT_EVAL

    with zipfile.ZipFile(INSPECT_EVAL) as z:
        compressed = any(i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) for i in z.infolist())
    assert compressed  # the fixture is what inspect writes: zstd members
    monkeypatch.setitem(sys.modules, "zipfile_zstd", None)  # import fails as when it is not installed
    if sys.version_info >= (3, 14):
        pytest.skip("zipfile reads zstd itself from Python 3.14 on")
    with pytest.raises(TranscriptError, match=r"zstd-compressed: pip install 'harness\[traces\]'"):
        scan(INSPECT_EVAL)


def test_an_mlflow_attribute_nested_past_the_limit_stays_text() -> None:
    """MLflow keeps every span attribute as JSON text; one nested past MAX_INPUT_DEPTH is kept as
    the text it is (json.loads raised RecursionError through the reader before)."""
    from harness.traces.mlflow import _value

    deep = "[" * 100_000 + "]" * 100_000
    assert _value(deep) == deep
    assert _value('{"a": [1, "x"]}') == {"a": [1, "x"]}
    assert _value("not json") == "not json"
