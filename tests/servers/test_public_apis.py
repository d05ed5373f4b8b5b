"""Langfuse and LangSmith through their documented public APIs, against the local fakes of
``tests/servers/fakes.py`` (no real server can run here): pulled traces equal the exported files'
transcripts, verdicts become Langfuse scores and LangSmith feedback once (read back through
LangSmith's own SDK), rate limits and 5xx are ridden out with bounded attempts, and a wrong key or
project is one line quoting the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.servers.fakes import LANGSMITH_KEY, PUBLIC_KEY, SECRET_KEY, FakeLangfuse, FakeLangSmith
from tests.servers.support import cli, judged_run, judgments, records
from tests.traces.support import LANGFUSE, LANGSMITH

pytestmark = pytest.mark.timeout(120)


def observations() -> list[dict[str, Any]]:
    return list(json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"])


def runs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LANGSMITH.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)


def _calls(fake: Any, prefix: str) -> int:
    return sum(1 for r in fake.requests if r["path"].startswith(prefix))


# -- Langfuse -----------------------------------------------------------------------------------


def test_langfuse_pull_rides_out_rate_limits_and_is_the_exported_transcripts(tmp_path: Path) -> None:
    with FakeLangfuse(observations()) as fake:
        fake.fail("/api/public/v2/observations", 429, times=2, retry_after="0.05")
        fake.fail("/api/public/v2/observations", 503, times=1)
        result = cli("pull", f"langfuse://127.0.0.1:{fake.port}/weather", "--out", tmp_path / "pulled.jsonl")
        assert result.exit_code == 0, result.output
        # 1 listing of roots + 1 listing per trace, and the 3 scripted faults retried
        assert _calls(fake, "/api/public/v2/observations") == 3 + 3
    pulled = records(tmp_path / "pulled.jsonl", "langfuse")
    assert pulled == records(LANGFUSE, "langfuse")
    assert all(len(r["steps"]) == 1 and r["contexts"] == ["Paris: light rain, 14 C"] for r in pulled)


def test_langfuse_scores_are_written_once_and_replaced_when_a_verdict_changes(tmp_path: Path) -> None:
    source = None
    with FakeLangfuse(observations()) as fake:
        source = f"langfuse://127.0.0.1:{fake.port}/weather"
        assert cli("pull", source, "--out", tmp_path / "traces.jsonl").exit_code == 0
        run_dir = judged_run(tmp_path, tmp_path / "traces.jsonl")
        rows = judgments(run_dir)
        fake.fail("/api/public/scores", 429, times=1, retry_after="0.05")
        first = cli("push", run_dir, "--to", source)
        assert first.exit_code == 0, first.output
        assert "4 scores written, 0 updated, 0 already there" in first.output
        roots = {r["id"]: r["metadata"]["span_id"] for r in records(tmp_path / "traces.jsonl", "langfuse")}
        stored = {(s["traceId"], s["name"]): s for s in fake.scores.values()}
        assert len(fake.scores) == 4
        for row in rows:
            score = stored[(row["transcript_id"], row["rubric"])]
            assert score["observationId"] == roots[row["transcript_id"]] and score["dataType"] == "NUMERIC"
            assert score["value"] == pytest.approx(row["score"]) and score["comment"] == row["raw_output"]
            assert score["metadata"]["judge"] == "judge" and score["metadata"]["cost_usd"] == pytest.approx(row["cost_usd"])

        second = cli("push", run_dir, "--to", source)
        assert "0 scores written, 0 updated, 4 already there" in second.output and len(fake.scores) == 4

        # a verdict that changed (here by hand) replaces its score: same id, same timestamp
        changed = [dict(r, score=0.123) if i == 0 else r for i, r in enumerate(rows)]
        (run_dir / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed), encoding="utf-8")
        third = cli("push", run_dir, "--to", source)
        assert "0 scores written, 1 updated, 3 already there" in third.output
        assert len(fake.scores) == 4
        assert stored.keys() == {(s["traceId"], s["name"]) for s in fake.scores.values()}
        assert any(s["value"] == 0.123 for s in fake.scores.values())


def test_langfuse_wrong_key_or_project_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLangfuse(observations()) as fake:
        wrong_project = cli("pull", f"langfuse://127.0.0.1:{fake.port}/other", "--out", tmp_path / "x.jsonl")
        assert wrong_project.exit_code == 2
        assert wrong_project.output.strip().splitlines() == [
            f"error: langfuse at http://127.0.0.1:{fake.port}: the keys belong to project 'weather', not 'other'"
        ]
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong")
        wrong_key = cli("pull", f"langfuse://127.0.0.1:{fake.port}/weather", "--out", tmp_path / "x.jsonl")
        assert wrong_key.exit_code == 2
        lines = wrong_key.output.strip().splitlines()
        assert len(lines) == 1 and "401: Invalid credentials. Confirm that you've configured the correct host. (check the key)" in lines[0]
        assert "sk-lf-wrong" not in wrong_key.output
        assert _calls(fake, "/api/public/projects") == 2  # a refusal is never retried


def test_a_server_quoting_the_key_back_is_never_shown_saying_it(tmp_path: Path) -> None:
    import base64

    with FakeLangfuse(observations()) as fake, FakeLangSmith(runs()) as smith:
        fake.fail("/api/public/projects", 403, echo=True)
        result = cli("pull", f"langfuse://127.0.0.1:{fake.port}/weather", "--out", tmp_path / "x.jsonl")
        basic = base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
        assert result.exit_code == 2 and "bad credentials: ***" in result.output
        assert SECRET_KEY not in result.output and PUBLIC_KEY not in result.output and basic not in result.output
        smith.fail("/sessions", 401, echo=True)
        result = cli("pull", f"langsmith://127.0.0.1:{smith.port}/weather", "--out", tmp_path / "x.jsonl")
        assert result.exit_code == 2 and "bad credentials: ***" in result.output and LANGSMITH_KEY not in result.output


def test_a_server_that_keeps_failing_is_given_up_after_bounded_attempts(tmp_path: Path) -> None:
    from harness.servers.http import MAX_ATTEMPTS

    with FakeLangfuse(observations()) as fake:
        fake.fail("/api/public/v2/observations", 429, times=1000, retry_after="0")
        result = cli("pull", f"langfuse://127.0.0.1:{fake.port}/weather", "--out", tmp_path / "x.jsonl")
        assert result.exit_code == 5
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "rate limited (429): Rate limit exceeded" in lines[0]
        assert _calls(fake, "/api/public/v2/observations") == MAX_ATTEMPTS
    assert not (tmp_path / "x.jsonl").exists()


# -- LangSmith ----------------------------------------------------------------------------------


def test_langsmith_pull_push_and_feedback_read_back_through_the_sdk(tmp_path: Path) -> None:
    from langsmith import Client

    with FakeLangSmith(runs()) as fake:
        source = f"langsmith://127.0.0.1:{fake.port}/weather"
        fake.fail("/runs/query", 500, times=1)
        result = cli("pull", source, "--out", tmp_path / "traces.jsonl")
        assert result.exit_code == 0, result.output
        pulled = records(tmp_path / "traces.jsonl", "langsmith")
        assert pulled == records(LANGSMITH, "langsmith")
        assert all(len(r["steps"]) == 1 for r in pulled)

        run_dir = judged_run(tmp_path, tmp_path / "traces.jsonl")
        rows = judgments(run_dir)
        fake.fail("/feedback", 429, times=1, retry_after="0.05")
        first = cli("push", run_dir, "--to", source)
        assert first.exit_code == 0, first.output
        assert "4 feedback written, 0 updated, 0 already there" in first.output

        root_runs = [r["metadata"]["run_id"] for r in pulled]
        client = Client(api_url=fake.base_url, api_key=LANGSMITH_KEY)
        feedback = list(client.list_feedback(run_ids=root_runs))
        assert len(feedback) == 4
        by = {(str(f.run_id), f.key): f for f in feedback}
        for row in rows:
            run_id = next(r["metadata"]["run_id"] for r in pulled if r["id"] == row["transcript_id"])
            f = by[(run_id, row["rubric"])]
            assert f.score == pytest.approx(row["score"]) and f.comment == row["raw_output"]
            assert str(f.trace_id) == row["transcript_id"]
            assert f.feedback_source is not None and f.feedback_source.type == "model"
            assert f.feedback_source.metadata["judge_model"] == "judge-model"

        second = cli("push", run_dir, "--to", source)
        assert "0 feedback written, 0 updated, 4 already there" in second.output
        assert len(list(client.list_feedback(run_ids=root_runs))) == 4


def test_langsmith_wrong_key_or_project_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLangSmith(runs()) as fake:
        unknown = cli("pull", f"langsmith://127.0.0.1:{fake.port}/nope", "--out", tmp_path / "x.jsonl")
        assert unknown.exit_code == 2
        assert unknown.output.strip().splitlines() == [f"error: langsmith at http://127.0.0.1:{fake.port}: no project named 'nope' for this key"]
        monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2_wrong")
        wrong = cli("pull", f"langsmith://127.0.0.1:{fake.port}/weather", "--out", tmp_path / "x.jsonl")
        assert wrong.exit_code == 2
        assert wrong.output.strip().splitlines() == [
            f"error: langsmith at http://127.0.0.1:{fake.port}: GET /sessions: 401: Invalid token (check the key)"
        ]
