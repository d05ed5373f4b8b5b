"""Phoenix end to end: a real Phoenix server on 127.0.0.1, traces written into it by OpenInference's
OpenAI instrumentation (an agent calling a tool), pulled, judged by the local judge server, written
back as span annotations and read back through Phoenix's own client; continuous evaluation with
``harness sync``, including a pass killed mid-run and resumed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import serve
from tests.servers.servers import ServerProcess, temporary_server, write_traces
from tests.servers.support import (
    QUESTIONS,
    chat_prompts,
    cli,
    judge_config,
    judged_run,
    judgments,
    killed_sync_pass,
    records,
    sync_args,
    to_microseconds,
    wait_for,
)
from tests.traces.support import deadline

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def phoenix() -> Iterator[ServerProcess]:
    with deadline(560), temporary_server("phoenix") as server:
        yield server


def _source(server: ServerProcess, project: str) -> str:
    return f"phoenix://127.0.0.1:{server.port}/{project}"


def _roots(server: ServerProcess, project: str) -> list[dict[str, Any]]:
    import urllib.request

    url = f"{server.url}/v1/projects/{project}/spans/otlpv1?parent_id=null&limit=1000"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return list(json.loads(answer.read())["data"])
    except OSError:
        return []


def _written(server: ServerProcess, project: str, questions: list[str], tmp: Path) -> list[str]:
    """Traces written by the agent, once Phoenix has ingested every root span."""
    before = len(_roots(server, project))
    ids = write_traces("phoenix", server.url, project, questions, tmp)
    wait_for(lambda: len(_roots(server, project)) >= before + len(questions), what="Phoenix's ingestion")
    time.sleep(1.0)  # the child spans of the last trace, queued with its root
    return ids


def _annotations(server: ServerProcess, project: str, span_ids: list[str]) -> list[Any]:
    from phoenix.client import Client

    return list(Client(base_url=server.url).spans.get_span_annotations(span_ids=span_ids, project_identifier=project))


def test_a_pulled_trace_is_the_transcript_of_the_exported_file(phoenix: ServerProcess, tmp_path: Path) -> None:
    project = f"pull-{uuid.uuid4().hex[:8]}"
    ids = _written(phoenix, project, QUESTIONS, tmp_path / "exported.jsonl")
    result = cli("pull", _source(phoenix, project), "--out", tmp_path / "pulled.jsonl", "--since", "1h")
    assert result.exit_code == 0, result.output
    assert "2 traces, --format openinference" in result.output
    pulled = records(tmp_path / "pulled.jsonl", "openinference")
    exported = records(tmp_path / "exported.jsonl", "openinference")
    # the same transcripts (Phoenix keeps span times to the microsecond), in the order they ran
    assert [to_microseconds(r) for r in pulled] == [to_microseconds(r) for r in exported]
    assert [r["id"] for r in pulled] == ids
    for record, question in zip(pulled, QUESTIONS):
        assert record["query"] == question
        assert len(record["steps"]) == 1 and [s["kind"] for s in record["spans"]] == ["llm", "tool", "llm"]
        assert record["contexts"] == ["Paris: light rain, 14 C"]
    # a window that ends before the traces holds none
    result = cli("pull", _source(phoenix, project), "--out", tmp_path / "none.jsonl", "--until", "1h")
    assert result.exit_code == 0 and records(tmp_path / "none.jsonl", "openinference") == []


def test_verdicts_become_span_annotations_once(phoenix: ServerProcess, tmp_path: Path) -> None:
    project = f"push-{uuid.uuid4().hex[:8]}"
    _written(phoenix, project, QUESTIONS, tmp_path / "exported.jsonl")
    source = _source(phoenix, project)
    assert cli("pull", source, "--out", tmp_path / "traces.jsonl").exit_code == 0
    rows = judgments(judged_run(tmp_path, tmp_path / "traces.jsonl"))
    assert len(rows) == 4 and all(r["status"] == "scored" for r in rows)

    first = cli("push", tmp_path / "run", "--to", source)
    assert first.exit_code == 0, first.output
    assert "4 span annotations written, 0 updated, 0 already there" in first.output

    links = {r["id"]: r["metadata"]["span_id"] for r in records(tmp_path / "traces.jsonl", "openinference")}
    annotations = _annotations(phoenix, project, list(links.values()))
    assert len(annotations) == 4
    by = {(a["span_id"], a["name"]): a for a in annotations}
    for row in rows:
        a = by[(links[row["transcript_id"]], row["rubric"])]
        assert a["annotator_kind"] == "LLM" and a["identifier"] == "harness:judge"
        assert a["result"]["score"] == pytest.approx(row["score"])
        assert a["result"]["explanation"] == row["raw_output"]
        meta = a["metadata"]
        assert meta["judge"] == "judge" and meta["judge_model"] == "judge-model" and meta["rubric"] == row["rubric"]
        assert meta["cost_usd"] == pytest.approx(row["cost_usd"]) and meta["rubric_version"] == row["rubric_version"]
        assert meta["transcript_id"] == row["transcript_id"]

    second = cli("push", tmp_path / "run", "--to", source)
    assert second.exit_code == 0, second.output
    assert "0 span annotations written, 0 updated, 4 already there" in second.output
    assert len(_annotations(phoenix, project, list(links.values()))) == 4


def test_an_unknown_project_is_one_line_with_the_servers_answer(phoenix: ServerProcess, tmp_path: Path) -> None:
    result = cli("pull", _source(phoenix, "no-such-project"), "--out", tmp_path / "x.jsonl")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: phoenix at http://127.0.0.1:")
    assert "404: Project with name no-such-project not found (check the project and the URL)" in lines[0]
    assert not (tmp_path / "x.jsonl").exists()


def test_sync_judges_only_what_is_new_and_writes_it_back(phoenix: ServerProcess, tmp_path: Path) -> None:
    project = f"sync-{uuid.uuid4().hex[:8]}"
    source = _source(phoenix, project)
    _written(phoenix, project, QUESTIONS, tmp_path / "a.jsonl")
    with serve() as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        first = cli(*sync_args(source, tmp_path, config))
        assert first.exit_code == 0, first.output
        assert "pulled 2 new traces" in first.output and "4 span annotations written" in first.output
        assert "judged 2 traces" in first.output
        assert len(chat_prompts(judge_server)) == 4

        _written(phoenix, project, ["Is it windy in Paris?"], tmp_path / "b.jsonl")
        second = cli(*sync_args(source, tmp_path, config))
        assert second.exit_code == 0, second.output
        assert "pulled 1 new traces" in second.output and "2 span annotations written, 0 updated, 0 already there" in second.output
        assert len(chat_prompts(judge_server)) == 6  # only the new trace was judged

        third = cli(*sync_args(source, tmp_path, config))
        assert third.exit_code == 0 and "pulled 0 new traces" in third.output and len(chat_prompts(judge_server)) == 6
    spans = [r["span_id"] for r in _roots(phoenix, project)]
    assert len(_annotations(phoenix, project, spans)) == 6


def test_a_killed_sync_pass_resumes_without_paying_twice(phoenix: ServerProcess, tmp_path: Path) -> None:
    project = f"kill-{uuid.uuid4().hex[:8]}"
    source = _source(phoenix, project)
    questions = [f"What is the weather in city {i}?" for i in range(6)]
    _written(phoenix, project, questions, tmp_path / "a.jsonl")
    with serve(latency_s=0.3) as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        cached_at_kill = killed_sync_pass(source, tmp_path, config)
        asked_before = chat_prompts(judge_server)
        assert 3 <= len(cached_at_kill) < 12 and not list((tmp_path / "passes").glob("*/run/summary.json"))

        resumed = cli(*sync_args(source, tmp_path, config))
        assert resumed.exit_code == 0, resumed.output
        asked_after = chat_prompts(judge_server)[len(asked_before) :]
    # the resumed pass asked only what the killed one had not cached
    assert len(asked_after) == 12 - len(cached_at_kill)
    assert len(set(asked_before) | set(asked_after)) == 12
    assert "12 span annotations written, 0 updated, 0 already there" in resumed.output
    spans = [r["span_id"] for r in _roots(phoenix, project)]
    assert len(_annotations(phoenix, project, spans)) == 12
    # and the next pass finds nothing new: the cursor moved past them after the write-back
    again = cli(*sync_args(source, tmp_path, config))
    assert "pulled 0 new traces" in again.output and len(_annotations(phoenix, project, spans)) == 12
