"""Every reader against the committed fixtures, which the real libraries wrote (generate.py).

Expected values come from the raw files, read here with plain json, not from the readers.
"""

from __future__ import annotations

import json
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

from harness.traces import detect_format
from harness.traces.loader import iter_transcripts, scan
from tests.traces.support import (
    INSPECT_EVAL,
    INSPECT_JSON,
    LANGFUSE,
    LANGSMITH,
    OPENINFERENCE,
    OTEL,
    PYDANTIC_AI,
    QUESTIONS,
    TOOL_RESULT,
    raw_spans,
    union_ms,
)


def _load(path: Path, fmt: str = "auto") -> list:
    return [t for _, t in iter_transcripts(path, format=fmt)]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (OTEL, "otel"),
        (OPENINFERENCE, "openinference"),
        (INSPECT_EVAL, "inspect"),
        (INSPECT_JSON, "inspect"),
        (LANGSMITH, "langsmith"),
        (LANGFUSE, "langfuse"),
    ],
)
def test_auto_detects_each_format_by_content(path: Path, expected: str, tmp_path: Path) -> None:
    assert detect_format(path) == expected
    renamed = tmp_path / "no-extension"  # by content, never by file name
    renamed.write_bytes(path.read_bytes())
    assert detect_format(renamed) == expected


def test_our_own_jsonl_is_still_jsonl() -> None:
    examples = Path(__file__).parents[2] / "examples" / "transcripts.jsonl"
    assert detect_format(examples) == "jsonl"
    assert scan(examples).good == scan(examples, format="jsonl").good > 0


def test_otel_genai_one_transcript_per_agent_span_or_trace() -> None:
    spans = raw_spans(OTEL)
    agents = [s for s in spans if s["attrs"].get("gen_ai.operation.name") == "invoke_agent"]
    transcripts = _load(OTEL, "otel")
    assert [t.id for t in transcripts[:2]] == [a["traceId"] for a in agents]
    for t, agent in zip(transcripts, agents, strict=False):
        r = t.resolved()
        assert r.query in QUESTIONS
        assert r.response == f"Answer to {r.query!r}: according to the tool, {TOOL_RESULT}."
        assert r.contexts == (TOOL_RESULT,)
        mine = [s for s in spans if s["traceId"] == agent["traceId"]]
        chats = [(s["start"], s["end"]) for s in mine if s["attrs"].get("gen_ai.operation.name") == "chat"]
        tools = [(s["start"], s["end"]) for s in mine if s["attrs"].get("gen_ai.operation.name") == "execute_tool"]
        assert len(chats) == 2 and len(tools) == 1
        assert r.performance.llm_ms == pytest.approx(union_ms(chats), abs=1e-3)
        assert r.performance.tool_ms == pytest.approx(union_ms(tools), abs=1e-3)
        assert r.performance.total_ms == pytest.approx((agent["end"] - agent["start"]) * 1000, abs=1e-3)
        assert r.performance.tool_calls == 1
        assert t.metadata["trace_id"] == agent["traceId"] and t.metadata["span_id"] == agent["spanId"]
        usage_in = sum(int(s["attrs"]["gen_ai.usage.input_tokens"]) for s in mine if "gen_ai.usage.input_tokens" in s["attrs"])
        assert t.metadata["usage"]["input_tokens"] == usage_in
    bare = transcripts[2]  # the trace with one chat span and no agent
    assert bare.resolved().query == "Say hello." and bare.resolved().contexts is None
    assert bare.metadata["span_name"].startswith("chat")
    assert len(transcripts) == 3


def test_openinference_agent_spans_tools_and_tokens() -> None:
    spans = raw_spans(OPENINFERENCE)
    agents = [s for s in spans if s["attrs"].get("openinference.span.kind") == "AGENT"]
    transcripts = _load(OPENINFERENCE, "openinference")
    assert len(transcripts) == 3
    for t, agent in zip(transcripts, agents, strict=False):
        r = t.resolved()
        assert r.query == agent["attrs"]["input.value"]
        assert r.response == agent["attrs"]["output.value"]
        assert r.contexts == (TOOL_RESULT,)
        mine = [s for s in spans if s["traceId"] == agent["traceId"]]
        llm = [(s["start"], s["end"]) for s in mine if s["attrs"].get("openinference.span.kind") == "LLM"]
        assert r.performance.llm_ms == pytest.approx(union_ms(llm), abs=1e-3)
        assert r.performance.tool_calls == 1
        prompt = sum(int(s["attrs"]["llm.token_count.prompt"]) for s in mine if "llm.token_count.prompt" in s["attrs"])
        assert t.metadata["usage"]["input_tokens"] == prompt
        assert (t.metadata["trace_id"], t.metadata["span_id"]) == (agent["traceId"], agent["spanId"])
    assert transcripts[2].resolved().query == "Say hello."


def _inspect_samples(path: Path) -> list[dict]:
    if zipfile.is_zipfile(path):
        import zipfile_zstd  # noqa: F401

        with zipfile.ZipFile(path) as z:
            return [json.loads(z.read(n)) for n in sorted(z.namelist()) if n.startswith("samples/")]
    return json.loads(path.read_text(encoding="utf-8"))["samples"]


@pytest.mark.parametrize("path", [INSPECT_EVAL, INSPECT_JSON])
def test_inspect_one_transcript_per_sample(path: Path) -> None:
    samples = _inspect_samples(path)
    transcripts = _load(path, "inspect")
    assert [t.id for t in transcripts] == [s["id"] for s in samples]
    for t, sample in zip(transcripts, samples, strict=True):
        r = t.resolved()
        assert r.query == sample["input"]
        assert r.response == sample["output"]["completion"]
        assert r.reference == sample["target"]
        assert r.contexts == (TOOL_RESULT,)
        models = [e for e in sample["events"] if e["event"] == "model"]
        stamps = [(datetime.fromisoformat(e["timestamp"]).timestamp(), datetime.fromisoformat(e["completed"]).timestamp()) for e in models]
        assert r.performance.llm_ms == pytest.approx(union_ms(stamps), abs=1e-3)
        assert r.performance.total_ms == pytest.approx(sample["total_time"] * 1000)
        assert r.performance.tool_calls == 1
        assert t.metadata["scores"] == {name: s["value"] for name, s in sample["scores"].items()}


def test_langsmith_one_transcript_per_trace() -> None:
    runs = [json.loads(line) for line in LANGSMITH.read_text(encoding="utf-8").splitlines()]
    roots = [r for r in runs if r["parent_run_id"] is None]
    transcripts = _load(LANGSMITH, "langsmith")
    assert [t.id for t in transcripts] == [r["trace_id"] for r in roots]
    for t, root in zip(transcripts, roots, strict=True):
        r = t.resolved()
        assert r.query == root["inputs"]["question"]
        assert r.response == root["outputs"]["output"]
        assert r.contexts == (TOOL_RESULT,)
        assert r.performance.tool_calls == 1
        assert t.metadata["run_id"] == root["id"]


def test_runs_in_any_order_still_group_by_trace(tmp_path: Path) -> None:
    lines = LANGSMITH.read_text(encoding="utf-8").splitlines()
    shuffled = tmp_path / "runs.jsonl"
    shuffled.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    assert sorted(t.id for t in _load(shuffled)) == sorted(t.id for t in _load(LANGSMITH))


def test_langfuse_observations_one_transcript_per_trace() -> None:
    observations = json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"]
    roots = [o for o in observations if o.get("parentObservationId") is None]
    transcripts = _load(LANGFUSE, "langfuse")
    assert [t.id for t in transcripts] == [r["traceId"] for r in roots]
    for t, root in zip(transcripts, roots, strict=True):
        r = t.resolved()
        assert r.query == root["input"]["args"][0]
        assert r.response == root["output"]
        assert r.contexts == (TOOL_RESULT,)
        mine = [o for o in observations if o["traceId"] == root["traceId"]]
        gens = [(_iso(o["startTime"]), _iso(o["endTime"])) for o in mine if o["type"] == "GENERATION"]
        assert r.performance.llm_ms == pytest.approx(union_ms(gens), abs=1e-3)
        assert r.performance.tool_calls == 1
        assert (t.metadata["trace_id"], t.metadata["span_id"]) == (root["traceId"], root["id"])


def test_langfuse_trace_objects_with_observations(tmp_path: Path) -> None:
    """The UI's trace export: one trace object per line, observations inside, input/output on the trace."""
    observations = json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"]
    traces = {}
    for o in observations:
        traces.setdefault(o["traceId"], {"id": o["traceId"], "observations": []})["observations"].append(o)
    for trace in traces.values():
        root = next(o for o in trace["observations"] if o.get("parentObservationId") is None)
        trace |= {"input": root["input"]["args"][0], "output": root["output"], "name": root["name"]}
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in traces.values()), encoding="utf-8")
    assert detect_format(path) == "langfuse"
    assert [t.resolved() for t in _load(path)] == [t.resolved() for t in _load(LANGFUSE)]


def _iso(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_one_pretty_printed_otlp_document_reads_like_the_jsonl(tmp_path: Path) -> None:
    docs = [json.loads(line) for line in OTEL.read_text(encoding="utf-8").splitlines()]
    merged = {"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(merged, indent=2), encoding="utf-8")
    assert detect_format(path) == "otel"
    assert [t.resolved() for t in _load(path)] == [t.resolved() for t in _load(OTEL)]


@pytest.mark.parametrize("path", [OTEL, OPENINFERENCE, PYDANTIC_AI], ids=["otel", "openinference", "pydantic_ai"])
def test_a_trace_without_api_spans_has_unknown_api_time_not_zero(path: Path) -> None:
    """API latency (HTTP, embeddings, retrieval) is measured from API spans; a trace that has none
    says nothing about it: api_ms is unknown (None, "—"), as in a JSONL record without it, never 0.0.
    The record says so itself (``"api_ms": null``), so `harness import` keeps it unknown."""
    transcripts = _load(path)
    without = [t for t in transcripts if not any(s.kind == "api" for s in t.spans or ())]
    assert without, "the fixture should have a trace without API spans"
    for t in transcripts:
        perf = t.resolved().performance
        api = [(s.start_s, s.end_s) for s in t.spans or () if s.kind == "api"]
        if api:
            assert perf.api_ms == pytest.approx(union_ms(api), abs=1e-3)
        else:
            assert perf.api_ms is None and t.timings is not None and "api_ms" in t.timings.model_fields_set
        assert perf.llm_ms is not None  # every fixture trace has model calls
