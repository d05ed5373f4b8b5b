"""MLflow end to end: a real MLflow tracking server on 127.0.0.1 (SQLite backend), traces written by
the MLflow tracing SDK (``mlflow.start_span`` for the agent and its model calls, ``@mlflow.trace``
for the tool), pulled, judged by the local judge server, written back as assessments (feedback on
the judged span) and read back through ``MlflowClient``; continuous evaluation with ``harness sync``,
including a pass killed mid-run and resumed."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import serve
from tests.servers.servers import MLFLOW_PASSWORD, MLFLOW_USER, ServerProcess, temporary_server, write_traces
from tests.servers.support import QUESTIONS, chat_prompts, cli, judge_config, judged_run, judgments, killed_sync_pass, records, sync_args
from tests.traces.support import deadline

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def mlflow_server() -> Iterator[ServerProcess]:
    with deadline(560), temporary_server("mlflow") as server:
        yield server


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's basic auth, where the harness, the MLflow SDK and its client all read it."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", MLFLOW_USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", MLFLOW_PASSWORD)


def _auth() -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{MLFLOW_USER}:{MLFLOW_PASSWORD}".encode()).decode()}


def _source(server: ServerProcess, experiment: str) -> str:
    return f"mlflow://127.0.0.1:{server.port}/{experiment}"


def _trace_ids(server: ServerProcess, experiment: str) -> list[str]:
    try:
        url = f"{server.url}/api/2.0/mlflow/experiments/get-by-name?experiment_name={experiment}"
        with urllib.request.urlopen(urllib.request.Request(url, headers=_auth()), timeout=5) as answer:
            experiment_id = json.loads(answer.read())["experiment"]["experiment_id"]
        body = json.dumps(
            {"locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment_id}}], "max_results": 500}
        ).encode()
        request = urllib.request.Request(
            f"{server.url}/api/3.0/mlflow/traces/search", data=body, headers={"Content-Type": "application/json", **_auth()}
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            return [t["trace_id"] for t in json.loads(answer.read()).get("traces", [])]
    except OSError:
        return []


def _assessment_count(server: ServerProcess, trace_ids: list[str]) -> int:
    """The assessments on the traces, as the REST API lists them (``GET traces/{id}``)."""
    count = 0
    for trace_id in trace_ids:
        request = urllib.request.Request(f"{server.url}/api/3.0/mlflow/traces/{trace_id}", headers=_auth())
        with urllib.request.urlopen(request, timeout=10) as answer:
            count += len(json.loads(answer.read())["trace"]["trace_info"].get("assessments") or [])
    return count


def _assessments(server: ServerProcess, trace_ids: list[str]) -> list[Any]:
    from mlflow import MlflowClient

    # get_trace downloads the spans through the artifact repository, which asks the process-wide
    # tracking URI, not the client's: unset, that is MLflow's default, sqlite:///mlflow.db in the
    # working directory (the checkout), and the test passed only after a test that had set it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", server.url)
        client = MlflowClient(tracking_uri=server.url)
        return [a for trace_id in trace_ids for a in client.get_trace(trace_id).info.assessments]


def test_a_pulled_trace_is_the_transcript_of_the_exported_file(mlflow_server: ServerProcess, tmp_path: Path) -> None:
    experiment = f"pull-{uuid.uuid4().hex[:8]}"
    ids = write_traces("mlflow", mlflow_server.url, experiment, QUESTIONS, tmp_path / "exported.jsonl")
    result = cli("pull", _source(mlflow_server, experiment), "--out", tmp_path / "pulled.jsonl", "--since", "1h")
    assert result.exit_code == 0, result.output
    assert "2 traces, --format mlflow" in result.output
    pulled = records(tmp_path / "pulled.jsonl", "mlflow")
    exported = records(tmp_path / "exported.jsonl", "mlflow")  # Trace.to_json() of each, from the SDK
    assert pulled == exported
    assert [r["id"] for r in pulled] == ids
    for record, question in zip(pulled, QUESTIONS):
        assert record["query"] == question and "according to the tool, Paris: light rain" in record["response"]
        assert len(record["steps"]) == 1 and [s["kind"] for s in record["spans"]] == ["llm", "tool", "llm"]
        assert record["contexts"] == ["Paris: light rain, 14 C"]
        assert record["metadata"]["usage"] == {"input_tokens": 70, "output_tokens": 24}
    assert cli("pull", _source(mlflow_server, experiment), "--out", tmp_path / "auto.jsonl").exit_code == 0
    from harness.traces import detect_format

    assert detect_format(tmp_path / "auto.jsonl") == "mlflow"  # --format auto knows the file


def test_spans_from_the_tracking_store_or_from_the_artifact_are_the_same_transcripts(mlflow_server: ServerProcess, tmp_path: Path) -> None:
    """MLflow keeps a trace's spans in its tracking store (``traces/batchGet``) or, when the store
    did not take them, only as the trace's ``traces.json`` artifact: both are read, into the same
    transcripts."""
    import asyncio

    from harness.errors import ServerRefused
    from harness.servers.base import Window
    from harness.servers.mlflow import MLflow
    from harness.servers.operations import connect

    experiment = f"store-{uuid.uuid4().hex[:8]}"
    write_traces("mlflow", mlflow_server.url, experiment, QUESTIONS, tmp_path / "exported.jsonl")

    async def artifact(server: MLflow, info: dict[str, Any]) -> Any:
        # The SDK uploads traces.json after the trace is logged: wait for it, up to 60 s, as
        # wait_for waits for every other asynchronous ingestion.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                return await server._from_artifacts(info)
            except ServerRefused as exc:
                if "404" not in str(exc) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)

    async def both() -> tuple[list[Any], list[Any]]:
        async with connect(_source(mlflow_server, experiment)) as server:
            assert isinstance(server, MLflow)
            pulled = [trace.documents[0] async for trace in server.pull(Window())]
            return pulled, [await artifact(server, document["info"]) for document in pulled]

    from_store, from_artifacts = asyncio.run(both())
    locations = [d["info"]["tags"].get("mlflow.trace.spansLocation") for d in from_store]
    assert locations == ["TRACKING_STORE"] * len(QUESTIONS), (locations, (tmp_path / "exported-app.log").read_text(encoding="utf-8")[-3000:])
    for name, documents in (("store.jsonl", from_store), ("artifacts.jsonl", from_artifacts)):
        (tmp_path / name).write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    assert (
        records(tmp_path / "artifacts.jsonl", "mlflow")
        == records(tmp_path / "store.jsonl", "mlflow")
        == records(tmp_path / "exported.jsonl", "mlflow")
    )


def test_verdicts_become_assessments_once(mlflow_server: ServerProcess, tmp_path: Path) -> None:
    experiment = f"push-{uuid.uuid4().hex[:8]}"
    ids = write_traces("mlflow", mlflow_server.url, experiment, QUESTIONS, tmp_path / "exported.jsonl")
    source = _source(mlflow_server, experiment)
    assert cli("pull", source, "--out", tmp_path / "traces.jsonl").exit_code == 0
    rows = judgments(judged_run(tmp_path, tmp_path / "traces.jsonl"))
    assert len(rows) == 4

    first = cli("push", tmp_path / "run", "--to", source)
    assert first.exit_code == 0, first.output
    assert "4 assessments written, 0 updated, 0 already there" in first.output
    spans = {r["id"]: r["metadata"]["span_id"] for r in records(tmp_path / "traces.jsonl", "mlflow")}
    assessments = _assessments(mlflow_server, ids)
    assert len(assessments) == 4
    by = {(a.trace_id, a.name): a for a in assessments}
    for row in rows:
        a = by[(row["transcript_id"], row["rubric"])]
        assert a.span_id == spans[row["transcript_id"]]  # on the agent's root span
        assert a.value == pytest.approx(row["score"]) and a.rationale == row["raw_output"]
        assert a.source.source_type == "LLM_JUDGE" and a.source.source_id == "judge"
        assert a.metadata["judge_model"] == "judge-model" and float(a.metadata["cost_usd"]) == pytest.approx(row["cost_usd"])
        assert a.metadata["rubric_version"] == row["rubric_version"]

    second = cli("push", tmp_path / "run", "--to", source)
    assert second.exit_code == 0 and "0 assessments written, 0 updated, 4 already there" in second.output
    assert len(_assessments(mlflow_server, ids)) == 4


def test_a_push_to_an_experiment_that_holds_none_of_the_traces_is_refused(mlflow_server: ServerProcess, tmp_path: Path) -> None:
    """MLflow answers ``GET traces/{id}`` for a trace of any experiment: a push naming another
    experiment (here Default) once said "0 written, 0 updated, N already there" and exited 0."""
    experiment = f"elsewhere-{uuid.uuid4().hex[:8]}"
    ids = write_traces("mlflow", mlflow_server.url, experiment, QUESTIONS, tmp_path / "exported.jsonl")
    pulled = cli("pull", _source(mlflow_server, experiment), "--out", tmp_path / "traces.jsonl", "--since", "1h")
    assert pulled.exit_code == 0 and "2 traces, --format mlflow" in pulled.output, pulled.output
    assert len(judgments(judged_run(tmp_path, tmp_path / "traces.jsonl"))) == 4

    wrong = cli("push", tmp_path / "run", "--to", _source(mlflow_server, "Default"))
    assert wrong.exit_code == 2, wrong.output
    lines = wrong.output.strip().splitlines()
    assert len(lines) == 1 and "experiment 'Default' holds none of the run's 2 traces" in lines[0], lines
    assert _assessment_count(mlflow_server, ids) == 0  # nothing was written

    right = cli("push", tmp_path / "run", "--to", _source(mlflow_server, experiment))
    assert right.exit_code == 0 and "4 assessments written, 0 updated, 0 already there" in right.output
    assert _assessment_count(mlflow_server, ids) == 4
    assert "already there" in cli("push", tmp_path / "run", "--to", _source(mlflow_server, experiment)).output
    again = cli("push", tmp_path / "run", "--to", _source(mlflow_server, "Default"))
    assert again.exit_code == 2 and "holds none" in again.output  # the assessments on the traces do not change it


def test_an_unknown_experiment_or_a_wrong_password_is_one_line_with_the_servers_answer(
    mlflow_server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = cli("pull", _source(mlflow_server, "no-such-experiment"), "--out", tmp_path / "x.jsonl")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "404: Could not find experiment with name 'no-such-experiment'" in lines[0]
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "not-the-password")
    result = cli("push", tmp_path, "--to", _source(mlflow_server, "Default"))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "401: You are not authenticated." in lines[0] and lines[0].endswith("(check the key)")
    assert "not-the-password" not in result.output


def test_sync_passes_and_a_killed_pass_resumed(mlflow_server: ServerProcess, tmp_path: Path) -> None:
    experiment = f"sync-{uuid.uuid4().hex[:8]}"
    source = _source(mlflow_server, experiment)
    write_traces("mlflow", mlflow_server.url, experiment, [f"What is the weather in city {i}?" for i in range(5)], tmp_path / "a.jsonl")
    with serve(latency_s=0.3) as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        cached_at_kill = killed_sync_pass(source, tmp_path, config)
        asked_before = chat_prompts(judge_server)
        resumed = cli(*sync_args(source, tmp_path, config))
        assert resumed.exit_code == 0, resumed.output
        asked_after = chat_prompts(judge_server)[len(asked_before) :]
        assert len(asked_after) == 10 - len(cached_at_kill) and len(set(asked_before) | set(asked_after)) == 10
        assert "10 assessments written, 0 updated, 0 already there" in resumed.output

        write_traces("mlflow", mlflow_server.url, experiment, ["Is it windy in Paris?"], tmp_path / "b.jsonl")
        later = cli(*sync_args(source, tmp_path, config))
        assert later.exit_code == 0 and "pulled 1 new traces" in later.output and "2 assessments written" in later.output
        assert len(chat_prompts(judge_server)) == len(asked_before) + len(asked_after) + 2
    assert len(_assessments(mlflow_server, _trace_ids(mlflow_server, experiment))) == 12
