"""Trace files as users save them: one JSON document (indented or not), Langfuse's UI and API
shapes, bad fields, deep nesting and the record limit, for every reader and every command."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import TranscriptError
from harness.jsonlines import MAX_INPUT_DEPTH, MAX_RECORD_BYTES, json_depth_exceeds
from harness.traces import detect_format
from harness.traces.loader import iter_transcripts
from harness.traces.reader import extracted
from tests.traces.support import INSPECT_JSON, LANGFUSE, LANGSMITH, OPENINFERENCE, OTEL, deadline

ENV = {"COLUMNS": "400", "NO_COLOR": "1"}


def unwrapped(output: str) -> str:
    """The output with its line breaks read as spaces: the CLI's console, made when its module is
    first imported, wraps at 80 columns whatever ``COLUMNS`` a later invocation sets, and a long
    temp path (xdist's) wraps a message."""
    return " ".join(output.split())


DEEP = 10_000
JUDGE = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]


def _cli(args: list[str]) -> tuple[int, list[str]]:
    with deadline(120):
        result = CliRunner().invoke(app, args, env=ENV)
    assert "Traceback" not in unwrapped(result.output) and "internal error" not in unwrapped(result.output), result.output
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def _commands(path: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "import": ["import", str(path), "--out", str(tmp_path / "imported.jsonl")],
        "run": ["run", str(path), "--out", str(tmp_path / "out"), *JUDGE, "--no-progress"],
        "estimate": ["estimate", str(path), *JUDGE, "--no-cache"],
    }


def _records(path: Path, fmt: str = "auto") -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", exclude_none=True) for _, t in iter_transcripts(path, format=fmt)]


# -- Langfuse: the shapes its UI and API write ----------------------------------------------------


def _langfuse_trace() -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """One trace of the fixture (written by the real langfuse SDK): its id, observations, and the
    trace object Langfuse shows for it (input and output of the root observation)."""
    observations = json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"]
    trace_id = observations[0]["traceId"]
    mine = [o for o in observations if o["traceId"] == trace_id]
    root = next(o for o in mine if o["parentObservationId"] is None)
    trace = {"id": trace_id, "timestamp": root["startTime"], "name": root["name"], "input": root["input"], "output": root["output"]}
    return trace_id, mine, trace


def _listing_record(tmp_path: Path, observations: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "listing.json"
    path.write_text(json.dumps({"data": observations, "meta": {}}, indent=1), encoding="utf-8")
    [record] = _records(path)
    return record


def test_langfuse_ui_download_and_api_trace_read_like_the_observation_listing(tmp_path: Path) -> None:
    trace_id, observations, trace = _langfuse_trace()
    expected = _listing_record(tmp_path, observations)
    # the UI's "Download JSON": JSON.stringify({trace, observations}, null, 2)
    ui = {"trace": {**trace, "projectId": "local", "tags": []}, "observations": observations}
    # GET /api/public/traces/{id}: TraceWithFullDetails, the observations inside the trace
    api = {**trace, "htmlPath": f"/project/local/traces/{trace_id}", "latency": 0.058, "totalCost": 0, "observations": observations, "scores": []}
    shapes = {"ui-indented.json": json.dumps(ui, indent=2), "ui-one-line.json": json.dumps(ui), "api-indented.json": json.dumps(api, indent=2)}
    for name, text in shapes.items():
        path = tmp_path / name
        path.write_text(text + "\n", encoding="utf-8")
        assert _records(path) == [expected], name  # --format auto finds Langfuse too
        code, lines = _cli(["import", str(path), "--out", str(tmp_path / f"{name}.jsonl")])
        assert code == 0, lines
    assert expected["id"] == trace_id and expected["query"] == "What is the weather in Paris?"
    assert expected["contexts"] == ["Paris: light rain, 14 C"]
    # a trace whose input fills the head of the file is still found by --format auto
    question = "Why? " * 40_000
    path = tmp_path / "ui-large-input.json"
    path.write_text(json.dumps({**ui, "trace": {**ui["trace"], "input": question}}, indent=2), encoding="utf-8")
    assert detect_format(path) == "langfuse" and _records(path)[0]["query"] == question


def test_langfuse_keeps_the_model_of_its_generations(tmp_path: Path) -> None:
    _, observations, _ = _langfuse_trace()
    models = [o["model"] for o in observations if o["type"] == "GENERATION"]
    assert models and set(models) == {"agent-model"}
    assert _listing_record(tmp_path, observations)["metadata"]["model"] == "agent-model"
    observations[-1 if observations[-1]["type"] == "GENERATION" else -2] = {
        **next(o for o in reversed(observations) if o["type"] == "GENERATION"),
        "model": "judge-b",
    }
    metadata = _listing_record(tmp_path, observations)["metadata"]
    assert (metadata["model"], metadata["models"]) == ("agent-model", ["agent-model", "judge-b"])


def test_every_format_keeps_the_model() -> None:
    langsmith_models = {json.loads(line)["extra"]["metadata"].get("ls_model_name") for line in LANGSMITH.read_text(encoding="utf-8").splitlines()}
    inspect_model = json.loads(INSPECT_JSON.read_text(encoding="utf-8"))["eval"]["model"]
    for path, fmt, model in (
        (OTEL, "otel", "agent-model"),
        (OPENINFERENCE, "openinference", "agent-model"),
        (LANGSMITH, "langsmith", "agent-model"),
        (INSPECT_JSON, "inspect", inspect_model),
        (LANGFUSE, "langfuse", "agent-model"),
    ):
        assert {item.metadata.get("model") for item in extracted(path, fmt)} == {model}, fmt
    assert "agent-model" in langsmith_models


def _epoch(stamp: str, unit: float) -> float | int:
    from datetime import datetime

    seconds = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return round(seconds * unit) if unit > 1 else seconds


@pytest.mark.parametrize("unit", [1, 1e3, 1e6, 1e9])
def test_langfuse_epoch_number_times_are_read_not_dropped(tmp_path: Path, unit: float) -> None:
    _, observations, _ = _langfuse_trace()
    expected = _listing_record(tmp_path, observations)
    numeric = [{**o, "startTime": _epoch(o["startTime"], unit), "endTime": _epoch(o["endTime"], unit)} for o in observations]
    got = _listing_record(tmp_path, numeric)
    assert len(got["spans"]) == len(expected["spans"]) == 3
    for a, b in zip(got["spans"], expected["spans"], strict=True):
        assert (a["kind"], a["name"]) == (b["kind"], b["name"])
        assert a["start"] == pytest.approx(b["start"], abs=1e-3) and a["end"] == pytest.approx(b["end"], abs=1e-3)
    assert got["timings"]["total_ms"] == pytest.approx(expected["timings"]["total_ms"], abs=1.0)


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda obs: obs[1].update(startTime="yesterday"), "data.1.startTime", "not an ISO 8601 time ('yesterday')"),
        (lambda obs: obs[1].update(endTime=float("nan")), "data.1.endTime", "not a time"),
        (lambda obs: obs[1].update(endTime=[1]), "data.1.endTime", "not a time (a list"),
        (lambda obs: obs.__setitem__(2, "d066457b21c4bafa"), "data.2", "not a Langfuse observation (a str, expected an object)"),
        (lambda obs: obs[1].update(type=["GENERATION"]), "data.1.type", "expected a string, got list"),
        (lambda obs: obs[1].update(parentObservationId={"id": 1}), "data.1.parentObservationId", "expected a string, got dict"),
        (lambda obs: obs[1].update(usageDetails=[3]), "data.1.usageDetails", "expected an object, got list"),
    ],
)
def test_a_bad_langfuse_observation_is_one_line_naming_file_record_and_field(tmp_path: Path, change: Any, field: str, problem: str) -> None:
    _, observations, _ = _langfuse_trace()
    change(observations)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": observations}, indent=2), encoding="utf-8")
    for command, args in _commands(path, tmp_path).items():
        code, lines = _cli(args)
        assert code == 2 and len(lines) == 1, (command, lines)
        assert lines[0].startswith(f"error: {path}:1: {field}: {problem}"), (command, lines)


def test_a_string_observation_inside_a_trace_is_named(tmp_path: Path) -> None:
    trace_id, observations, trace = _langfuse_trace()
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({**trace, "observations": [*observations[:1], observations[1]["id"]]}, indent=2), encoding="utf-8")
    with pytest.raises(TranscriptError, match=r":1: observations\.1: not a Langfuse observation \(a str, expected an object\) \(a trace listing"):
        _records(path)


# -- one JSON document, indented or not, for every format where it applies ------------------------


def test_an_indented_document_reads_like_the_same_value_on_one_line(tmp_path: Path) -> None:
    otel_line = OTEL.read_text(encoding="utf-8").splitlines()[0]
    langsmith_root = next(line for line in LANGSMITH.read_text(encoding="utf-8").splitlines() if '"parent_run_id": null' in line)
    for fmt, line in (("otel", otel_line), ("langsmith", langsmith_root)):
        one_line, indented = tmp_path / f"{fmt}-one.json", tmp_path / f"{fmt}-indented.json"
        one_line.write_text(line + "\n", encoding="utf-8")
        indented.write_text(json.dumps(json.loads(line), indent=4) + "\n", encoding="utf-8")
        expected = [(e.id, e.query, e.response, e.contexts, e.spans, e.metadata) for e in extracted(one_line, fmt)]
        assert expected and [(e.id, e.query, e.response, e.contexts, e.spans, e.metadata) for e in extracted(indented, fmt)] == expected, fmt


def test_a_broken_indented_document_names_the_line_of_the_problem(tmp_path: Path) -> None:
    text = LANGFUSE.read_text(encoding="utf-8").splitlines()
    text[6] = text[6].rstrip(",")  # a missing comma inside the first observation
    path = tmp_path / "broken.json"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"broken\.json:8: <json>: invalid JSON \(Expecting ',' delimiter"):
        _records(path)


# -- deep nesting: one line, exit 2, for every reader and command ---------------------------------


def _deepen(text: str) -> str:
    """``text`` (a JSON object) with a 10,000-deep array added as its first member."""
    assert text.lstrip().startswith("{")
    return text.replace("{", '{"deep": ' + "[" * DEEP + "]" * DEEP + ", ", 1)


def _deep_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "otel": (OTEL, "jsonl"),
        "openinference": (OPENINFERENCE, "jsonl"),
        "langsmith": (LANGSMITH, "jsonl"),
        "langfuse": (LANGFUSE, "json"),
        "inspect": (INSPECT_JSON, "json"),
    }
    out = {}
    for fmt, (source, kind) in files.items():
        path = tmp_path / f"deep-{fmt}.{kind}"
        if kind == "jsonl":
            lines = source.read_text(encoding="utf-8").splitlines()
            lines[1] = _deepen(lines[1])
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            path.write_text(_deepen(source.read_text(encoding="utf-8")), encoding="utf-8")
        out[fmt] = path
    return out


def test_deeply_nested_values_are_one_line_errors_for_every_reader_and_command(tmp_path: Path) -> None:
    for fmt, path in _deep_files(tmp_path).items():
        line = 2 if path.suffix == ".jsonl" else 1
        for command, args in _commands(path, tmp_path).items():
            code, lines = _cli([*args, "--format", fmt])
            assert code == 2 and len(lines) == 1, (fmt, command, lines)
            assert re.fullmatch(
                rf"error: {re.escape(str(path))}:{line}: <json>: nested too deeply \(JSON nested deeper than {MAX_INPUT_DEPTH} levels\)", lines[0]
            ), (
                fmt,
                command,
                lines,
            )


def test_deep_json_inside_an_otel_message_attribute_is_not_a_crash(tmp_path: Path) -> None:
    lines = OTEL.read_text(encoding="utf-8").splitlines()
    deep = json.dumps("[" * DEEP + "]" * DEEP)
    pattern = r'("key":\s*"gen_ai\.input\.messages",\s*"value":\s*\{"stringValue":\s*)"(?:[^"\\]|\\.)*"'
    lines = [re.sub(pattern, lambda m: m.group(1) + deep, line) for line in lines]
    assert all(deep in line for line in lines if "gen_ai.input.messages" in line)
    path = tmp_path / "deep-attribute.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = _cli(["import", str(path), "--out", str(tmp_path / "t.jsonl")])
    assert code == 2 and len(out) == 1 and "no query found (looked in gen_ai.input.messages" in out[0], out


def _depth(value: Any) -> int:
    """Independent: the nesting depth of a decoded value, by recursion over it."""
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def test_the_depth_scan_agrees_with_the_decoded_depth() -> None:
    rng = random.Random(23)
    tricky = ["[", "]", '{"', "\\", '\\"[', "é[", '"]"', "\\\\"]

    def value(depth: int) -> Any:
        if depth == 0 or rng.random() < 0.2:
            return rng.choice([1, None, "".join(rng.choice(tricky) for _ in range(rng.randint(0, 4)))])
        if rng.random() < 0.5:
            return [value(depth - 1) for _ in range(rng.randint(0, 3))]
        return {"".join(rng.choice(tricky) for _ in range(2)) + str(i): value(depth - 1) for i in range(rng.randint(0, 3))}

    for _ in range(400):
        v = value(rng.randint(0, 12))
        text = json.dumps(v, ensure_ascii=rng.random() < 0.5)
        depth = _depth(v)
        for limit in (max(depth - 1, 0), depth, depth + 1):
            assert json_depth_exceeds(text, limit) == (depth > limit), (text, limit)
            assert json_depth_exceeds(text.encode("utf-8"), limit) == (depth > limit)


# -- one record limit: import never writes what run refuses ----------------------------------------


def _small_limit(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    import harness.jsonlines
    import harness.traces.reader
    import harness.transcripts.raw

    for module in (harness.jsonlines, harness.traces.reader, harness.transcripts.raw):
        monkeypatch.setattr(module, "MAX_RECORD_BYTES", limit, raising=False)


def test_import_refuses_a_transcript_run_would_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each observation is under the limit on its own line; the transcript built from them (the
    # answer and the tool's output together) is over it.
    limit = 1 << 20
    _small_limit(monkeypatch, limit)
    _, observations, _ = _langfuse_trace()
    root = next(o for o in observations if o["parentObservationId"] is None)
    tool = next(o for o in observations if o["type"] == "TOOL")
    root["output"], tool["output"] = "a" * (limit * 6 // 10), "b" * (limit * 6 // 10)
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    assert max(len(line) for line in path.read_bytes().splitlines()) < limit
    code, lines = _cli(["import", str(path), "--out", str(tmp_path / "t.jsonl")])
    assert (
        code == 2
        and len(lines) == 1
        and re.fullmatch(rf"error: {re.escape(str(path))}:1: trace \w+: record is larger than the \d+ MiB limit", lines[0])
    ), lines
    assert not (tmp_path / "t.jsonl").exists()
    code, lines = _cli(["run", str(path), "--out", str(tmp_path / "out"), *JUDGE, "--no-progress"])
    assert code == 2 and "record is larger than the" in lines[0], lines


def test_a_trace_line_over_the_limit_is_refused_by_import_and_run(tmp_path: Path) -> None:
    # A real-size answer (65 MiB, over the 64 MiB limit) in an OTel export: refused as it is read.
    first, *rest = OTEL.read_text(encoding="utf-8").splitlines()
    doc = json.loads(first)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["attributes"].append({"key": "harness.test.answer", "value": {"stringValue": "x" * (65 << 20)}})
    path = tmp_path / "huge.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh)
        fh.write("\n" + "\n".join(rest) + "\n")
    del doc, spans
    assert path.stat().st_size > MAX_RECORD_BYTES
    for command in ("import", "run"):
        code, lines = _cli(_commands(path, tmp_path)[command])
        assert code == 2 and lines == [f"error: {path}:1: <record>: record is larger than the 64 MiB limit"], (command, lines)
    assert not (tmp_path / "imported.jsonl").exists()
