"""``harness run`` through its command line (typer's CliRunner), against a real judge server.

The assertions are on what the command wrote (judgments.jsonl, results.jsonl, summary.json,
skipped.jsonl, the cache) and on what the server received, as well as on exit codes and messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import (
    KEY,
    KEY_ENV,
    Outputs,
    cache_rows,
    closed_port_url,
    judge,
    read_jsonl,
    serve,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer

#: Wide enough that rich never wraps a message or a path.
ENV = {"COLUMNS": "400", "NO_COLOR": "1"}


@pytest.fixture
def project(tmp_path: Path, judge_server: JudgeServer) -> Path:
    """transcripts.jsonl (4 records, 2 with contexts) and harness.toml with one priced judge."""
    assert judge_server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", [good(i, contexts=i < 2) for i in range(4)])
    write_config(tmp_path / "harness.toml", [judge("mini", judge_server.base_url)])
    return tmp_path


def good(i: int, contexts: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"t{i}",
        "query": f"Question {i}? [[score=0.{i + 1}]]",
        "response": f"Answer {i}.",
    }
    if contexts:
        row["contexts"] = [f"Context {i}."]
    return row


def invoke(
    tmp_path: Path,
    *args: str,
    out: str = "out",
    config: bool = True,
    cache: bool = True,
) -> Any:
    argv = [
        "run",
        str(tmp_path / "transcripts.jsonl"),
        "--out",
        str(tmp_path / out),
        "--no-progress",
    ]
    if config:
        argv += ["--config", str(tmp_path / "harness.toml")]
    if cache:
        argv += ["--cache", str(tmp_path / "cache.sqlite")]
    return CliRunner().invoke(app, [*argv, *args], env=ENV)


def test_run_writes_outputs_and_exits_0(project: Path, judge_server: JudgeServer) -> None:
    result = invoke(project)

    assert result.exit_code == 0, result.output
    out = Outputs(project / "out")
    assert len(out.judgments) == 2 * 4 + 2 * 1 + 2 * 3  # default rubrics: all four
    assert judge_server.count() == 10
    assert [r["transcript_id"] for r in out.results] == ["t0", "t1", "t2", "t3"]
    assert out.summary["judgments"] == {"scored": 10, "unscored": 6}
    # The console wraps at its width, which a long temp path (xdist's) can pass: read the line unwrapped.
    assert f"wrote {project / 'out'}/judgments.jsonl" in result.output.replace("\n", "")
    assert "Scores (mean with 95% CI)" in result.output
    # The key went to the server and nowhere else.
    assert {r["headers"]["Authorization"] for r in judge_server.requests} == {f"Bearer {KEY}"}
    for path in [*(project / "out").iterdir(), project / "cache.sqlite"]:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in result.output


def test_rubric_limit_and_concurrency_options(tmp_path: Path) -> None:
    with serve(latency_s=0.05) as judge_server:
        assert judge_server.base_url
        write_jsonl(tmp_path / "transcripts.jsonl", [good(i) for i in range(8)])
        write_config(tmp_path / "harness.toml", [judge("mini", judge_server.base_url)])
        result = invoke(
            tmp_path,
            "--rubric",
            "faithfulness",
            "--rubric",
            "relevance",
            "--limit",
            "6",
            "--concurrency",
            "2",
        )
    assert result.exit_code == 0, result.output
    out = Outputs(tmp_path / "out")
    assert {(j["transcript_id"], j["rubric"]) for j in out.judgments} == {(f"t{i}", r) for i in range(6) for r in ("faithfulness", "relevance")}
    assert judge_server.count() == 12 and judge_server.max_in_flight == 2
    assert set(out.summary["rubrics"]) == {"faithfulness", "relevance"}
    assert out.results[0]["composites"]["mini"]["answer_correctness"] is not None


def test_adhoc_judge_from_the_command_line(tmp_path: Path, judge_server: JudgeServer) -> None:
    assert judge_server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", [good(0, contexts=False)])
    result = invoke(
        tmp_path,
        "--model",
        "adhoc-model",
        "--base-url",
        judge_server.base_url,
        "--api-key-env",
        KEY_ENV,
        config=False,
    )
    assert result.exit_code == 0, result.output
    [j] = Outputs(tmp_path / "out").judgments
    assert (j["judge"], j["rubric"], j["score"]) == ("adhoc-model", "relevance", 0.1)
    assert j["cost_usd"] is None  # an ad-hoc judge has no price
    assert judge_server.requests[0]["body"]["model"] == "adhoc-model"
    assert judge_server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def test_judge_without_prices_says_unknown(tmp_path: Path, judge_server: JudgeServer) -> None:
    assert judge_server.base_url
    write_jsonl(tmp_path / "transcripts.jsonl", [good(0, contexts=False)])
    write_config(tmp_path / "harness.toml", [judge("free", judge_server.base_url, prices=False)])
    result = invoke(tmp_path)
    assert result.exit_code == 0, result.output
    assert "cost unknown" in result.output and "$0.000000" not in result.output
    summary = Outputs(tmp_path / "out").summary
    assert summary["cost_usd"] is None and summary["judges"]["free"]["cost_usd"] is None


def test_failed_judgments_exit_1_with_the_count(project: Path, judge_server: JudgeServer) -> None:
    rows = [good(i, contexts=False) for i in range(4)]
    rows[0]["query"] += " [[fault:400]]"
    rows[2]["query"] += " [[fault:401]]"
    write_jsonl(project / "transcripts.jsonl", rows)
    result = invoke(project)
    assert result.exit_code == 1
    assert "2 judgment(s) failed" in result.output
    out = Outputs(project / "out")
    assert [j["status"] for j in out.judgments] == [
        "failed",
        "scored",
        "failed",
        "scored",
    ]
    assert out.summary["judgments"]["failed"] == 2
    assert judge_server.count() == 4


def test_unreachable_judge_is_one_clear_message(project: Path, judge_server: JudgeServer) -> None:
    write_jsonl(project / "transcripts.jsonl", [good(i, contexts=False) for i in range(12)])
    write_config(
        project / "harness.toml",
        [judge("down", closed_port_url(), max_attempts=6, max_concurrency=2)],
    )
    result = invoke(project)
    assert result.exit_code == 1
    assert "12 judgment(s) failed" in result.output
    assert result.output.count("is the server running?") == 1
    assert "Traceback" not in result.output
    out = Outputs(project / "out")
    assert sum(j["attempts"] for j in out.judgments) <= 4
    assert out.summary["judges"]["down"]["requests"] == sum(j["attempts"] for j in out.judgments)


def test_typo_in_line_3_exits_2_before_any_call(project: Path, judge_server: JudgeServer) -> None:
    path = project / "transcripts.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"response"', '"respnse"')
    path.write_text("\n".join(lines) + "\n")

    result = invoke(project)

    assert result.exit_code == 2
    assert f"{path}:3: respnse: unknown field" in result.output
    assert "Traceback" not in result.output
    assert judge_server.count() == 0
    assert not (project / "out" / "judgments.jsonl").exists()
    assert not (project / "cache.sqlite").exists() or cache_rows(project / "cache.sqlite") == []


def test_bad_json_and_bad_value_name_the_line_and_field(project: Path, judge_server: JudgeServer) -> None:
    path = project / "transcripts.jsonl"
    write_jsonl(
        path,
        [
            good(0),
            '{"id": "t1", "query": "q", "response": "r", "contexts": "not a list"}',
        ],
    )
    result = invoke(project)
    assert result.exit_code == 2
    assert f"{path}:2: contexts" in result.output
    write_jsonl(path, [good(0), good(1), '{"id": "t2", "query": "q",'])
    result = invoke(project)
    assert result.exit_code == 2
    assert f"{path}:3: <json>: invalid JSON" in result.output
    assert judge_server.count() == 0


def test_no_user_text_is_rendered_as_an_emoji(project: Path, judge_server: JudgeServer) -> None:
    # Line 100 is ":100:" in a message, which rich renders as an emoji unless its console is told
    # not to; a judge's name may hold ":100:" too, and the run's tables print it.
    path = project / "transcripts.jsonl"
    write_jsonl(path, [*(good(i) for i in range(99)), '{"id": "t99", "query": "q",'])
    result = invoke(project)
    assert result.exit_code == 2
    assert f"{path}:100: <json>: invalid JSON" in result.output and "\N{HUNDRED POINTS SYMBOL}" not in result.output
    write_jsonl(path, [good(0)])
    assert judge_server.base_url
    write_config(project / "harness.toml", [judge("j:100:", judge_server.base_url)])
    result = invoke(project)
    assert result.exit_code == 0, result.output
    assert "j:100:" in result.output and "\N{HUNDRED POINTS SYMBOL}" not in result.output


def test_every_console_of_the_cli_is_made_in_one_place() -> None:
    # cli/common.make_console turns rich's emoji codes off; a Console made anywhere else would not.
    import ast

    root = Path(__file__).resolve().parents[1] / "harness"
    made = []
    for file in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Console":
                made.append(f"{file.relative_to(root)}:{node.lineno}")
    assert len(made) == 1 and made[0].startswith("cli/common.py:"), made


def test_on_bad_record_skip_judges_the_good_and_lists_the_bad(project: Path, judge_server: JudgeServer) -> None:
    path = project / "transcripts.jsonl"
    rows: list[Any] = [good(i, contexts=False) for i in range(4)]
    rows[2] = '{"id": "t2", "query": "q", "respnse": "r"}'
    write_jsonl(path, rows)

    result = invoke(project, "--on-bad-record", "skip")

    assert result.exit_code == 0, result.output
    out = Outputs(project / "out")
    assert [j["transcript_id"] for j in out.judgments] == ["t0", "t1", "t3"]
    assert judge_server.count() == 3
    assert read_jsonl(project / "out" / "skipped.jsonl") == [{"file": str(path), "line": 3, "field": "respnse", "problem": "unknown field"}]
    assert out.summary["skipped_records"] == 1
    assert "skipped 1 bad record(s)" in result.output


def test_offline_cache_miss_exits_3_naming_the_count(project: Path, judge_server: JudgeServer) -> None:
    assert invoke(project, "--rubric", "relevance").exit_code == 0
    before = judge_server.count()
    write_jsonl(project / "transcripts.jsonl", [good(i) for i in range(6)])

    result = invoke(project, "--rubric", "relevance", "--offline", out="replay")

    assert result.exit_code == 3
    assert "offline: 2 judgment(s) were not in the cache" in result.output
    assert judge_server.count() == before
    statuses = [(j["transcript_id"], j["status"], j["reason"]) for j in Outputs(project / "replay").judgments]
    assert statuses[4:] == [
        ("t4", "unscored", "cache_miss"),
        ("t5", "unscored", "cache_miss"),
    ]
    assert {s[1] for s in statuses[:4]} == {"scored"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rubric", "nonsense"], "unknown rubric 'nonsense'"),
        (
            ["--refresh", "--no-cache"],
            "--refresh and --no-cache cannot be used together",
        ),
        (["--offline", "--refresh"], "--offline replays from the cache"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--on-bad-record", "ignore"], "'ignore' is not one of 'fail', 'skip'"),
    ],
)
def test_user_errors_exit_2_with_one_line(project: Path, judge_server: JudgeServer, args: list[str], message: str) -> None:
    result = invoke(project, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert judge_server.count() == 0


def test_missing_transcripts_file_and_bad_config(project: Path, judge_server: JudgeServer) -> None:
    (project / "transcripts.jsonl").unlink()
    result = invoke(project)
    assert result.exit_code == 2 and "no such file" in result.output
    (project / "harness.toml").write_text('[[judges]]\nname = "x"\nmodel = "m"\ntemprature = 0.5\n')
    write_jsonl(project / "transcripts.jsonl", [good(0)])
    result = invoke(project)
    assert result.exit_code == 2
    assert f"{project / 'harness.toml'}: judges[0].temprature: unknown key" in result.output
    assert judge_server.count() == 0
