"""A session's verdicts written back (harness/servers/verdicts.py): a run judged per turn over a
3-trace Langfuse session puts each turn's score on its own trace and observation and the
conversation's score on the session (a Langfuse session score), once; the same for a run over
three agent invocations in one OTLP trace names each turn's span (the verdicts Phoenix, MLflow and
LangSmith receive)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness.servers.verdicts import read_verdicts
from tests.e2e_support import serve
from tests.servers.fakes import PUBLIC_KEY, SECRET_KEY, FakeLangfuse
from tests.servers.support import cli, judge_config
from tests.traces.test_sessions import SESSION, TURNS, _otel_turn, _otlp_file, _span_id, _trace_id, langfuse

pytestmark = pytest.mark.timeout(120)


def _run_per_turn(tmp: Path, source: Path, fmt: str) -> Path:
    with serve() as judge_server:
        config = judge_config(tmp, judge_server.base_url)
        run = cli(
            "run",
            source,
            "--format",
            fmt,
            "--out",
            tmp / "run",
            "--config",
            config,
            "--cache",
            tmp / "c.sqlite",
            "--rubric",
            "relevance",
            "--turns",
            "all",
            "--no-progress",
        )
        assert run.exit_code == 0, run.output
    return tmp / "run"


def test_a_session_judged_per_turn_scores_each_turn_and_the_session_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
    run_dir = _run_per_turn(tmp_path, langfuse(tmp_path / "session.json"), "langfuse")
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    (conversation,) = results
    with FakeLangfuse([]) as fake:
        target = f"langfuse://127.0.0.1:{fake.port}/weather"
        first = cli("push", run_dir, "--to", target)
        assert first.exit_code == 0, first.output
        assert "4 scores written, 0 updated, 0 already there" in first.output
        scores = list(fake.scores.values())
        turns = sorted((s for s in scores if "traceId" in s), key=lambda s: s["metadata"]["turn"])
        assert [(s["traceId"], s["observationId"], s["metadata"]["turn"], s["metadata"]["session_id"]) for s in turns] == [
            (f"lf-trace-{k}", f"lf-root-{k}", k, SESSION) for k in (1, 2, 3)
        ]
        (session,) = [s for s in scores if "traceId" not in s]
        assert session["sessionId"] == SESSION and "observationId" not in session
        assert session["metadata"]["scope"] == "conversation" and session["name"] == "relevance"
        assert session["value"] == pytest.approx(conversation["scores"]["judge"]["relevance"])
        assert session["value"] == pytest.approx(sum(s["value"] for s in turns) / 3)  # the run's rule: the mean
        again = cli("push", run_dir, "--to", target)
        assert "0 scores written, 0 updated, 4 already there" in again.output and len(fake.scores) == 4


def test_turns_of_one_trace_are_verdicts_on_each_turns_span(tmp_path: Path) -> None:
    spans = [s for k in range(3) for s in _otel_turn(k, _trace_id(0), None)]
    run_dir = _run_per_turn(tmp_path, _otlp_file(tmp_path / "one.jsonl", spans, random.Random(1)), "otel")
    found = read_verdicts(run_dir, input_format="otel")
    turns = sorted((v for v in found.verdicts if not v.conversation), key=lambda v: v.turn or 0)
    assert [(v.trace_id, v.span_id, v.turn) for v in turns] == [(_trace_id(0), _span_id(k, 1), k + 1) for k in range(3)]
    (whole,) = [v for v in found.verdicts if v.conversation]
    # no session id: the conversation's verdict goes on the first turn's span, its metadata saying so
    assert (whole.trace_id, whole.span_id, whole.session) == (_trace_id(0), _span_id(0, 1), None)
    assert whole.metadata()["scope"] == "conversation" and "turn" not in whole.metadata()
    assert len({v.key for v in found.verdicts}) == 4
    assert TURNS  # the conversation the spans were built from


def test_pull_one_session_keeps_only_its_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.servers.fakes import LANGSMITH_KEY, FakeLangSmith
    from tests.traces.test_sessions import langsmith

    monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)
    mine = [json.loads(line) for line in langsmith(tmp_path / "mine.jsonl").read_text(encoding="utf-8").splitlines()]
    other = []
    for run in mine[:2]:  # one more trace, of another thread
        moved = {**run, "id": run["id"].replace("-4000-", "-4111-"), "trace_id": run["trace_id"].replace("-4000-", "-4111-")}
        if moved.get("parent_run_id"):
            moved["parent_run_id"] = moved["parent_run_id"].replace("-4000-", "-4111-")
        if "extra" in moved:
            moved["extra"] = {"metadata": {"thread_id": "another"}}
        other.append(moved)
    with FakeLangSmith(mine + other) as fake:
        source = f"langsmith://127.0.0.1:{fake.port}/weather"
        every = cli("pull", source, "--out", tmp_path / "all.jsonl", "--since", "2026-01-01T00:00:00")
        one = cli("pull", source, "--out", tmp_path / "one.jsonl", "--since", "2026-01-01T00:00:00", "--session", SESSION)
    assert every.exit_code == 0 and "4 traces" in every.output, every.output
    assert one.exit_code == 0 and "3 traces" in one.output, one.output
    from harness.traces.loader import iter_transcripts

    (conversation,) = [t for _, t in iter_transcripts(tmp_path / "one.jsonl", format="langsmith")]
    assert conversation.id == SESSION and [t.user for t in conversation.turns or ()] == [t[0] for t in TURNS]
    # the whole window: the session as one conversation, and the other thread's one trace as it is
    assert sorted(t.id for _, t in iter_transcripts(tmp_path / "all.jsonl", format="langsmith")) == [other[0]["trace_id"], SESSION]
