"""Hardening: no hang, no traceback, no lost output, no wrong number.

A hostile judge (the project's own server, ``tests/judge_server.py``, with its hostile fault
kinds), a full disk, a second run on the same ``--out``, odd options: each case runs the real
command in a subprocess under a wall-clock limit, so a hang fails the test, and asserts on the
exit code, the one line on stderr and what the run wrote.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.exit_codes import EXIT_CODES, EXIT_FAILED_JUDGMENTS, EXIT_INTERNAL, EXIT_IO, EXIT_OK, EXIT_USER_ERROR
from harness.outputs.files import OutDirLock
from tests.e2e_support import KEY, KEY_ENV, cache_rows, judge, read_jsonl, serve, write_config, write_jsonl
from tests.reliability.support import ROOT, cli, harness_process, run, transcripts

pytestmark = pytest.mark.timeout(120)


def one_line(stderr: str) -> str:
    """The single line a failed command prints: never a traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def marked(n: int, marker: str, tag: str = "t") -> list[dict[str, Any]]:
    return [{"id": f"{tag}{i}", "query": f"q{i} {marker}", "response": f"r{i}"} for i in range(n)]


def setup(tmp_path: Path, base_url: str, records: list[dict[str, Any]], **judge_fields: Any) -> list[str]:
    write_jsonl(tmp_path / "t.jsonl", records)
    write_config(tmp_path / "harness.toml", [judge("j", base_url, **judge_fields)])
    return ["run", "t.jsonl", "--config", "harness.toml", "--out", "out", "--rubric", "relevance", "--no-progress"]


ENV = {KEY_ENV: KEY}


# -- hostile judges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("deep", "nested deeper than 64"),
        ("deep500", "server error 500"),
        ("huge", "larger than"),
        ("trickle", "timed out"),
    ],
)
def test_a_hostile_reply_fails_its_judgment_and_the_run_ends(tmp_path: Path, kind: str, expected: str) -> None:
    """Deep JSON (200 and 5xx), a body far beyond what 64 tokens can be, a body trickled byte by
    byte: each judgment fails with a named reason after its attempts, the run ends with exit 1."""
    with serve() as server:
        args = setup(tmp_path, server.base_url or "", marked(3, f"[[fault:{kind}]]"), max_attempts=2, timeout_s=1.0)
        proc = cli(args, tmp_path, ENV, timeout=90)
        requests = server.count()
    assert proc.returncode == EXIT_FAILED_JUDGMENTS, proc.stderr
    assert "Traceback" not in proc.stderr
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert len(rows) == 3 and {r["status"] for r in rows} == {"failed"}
    assert all(expected in r["error"] for r in rows), rows[0]["error"]
    assert requests == 3 * 2  # every attempt went to the server, none more
    assert cache_rows(tmp_path / "cache" / "judgments.sqlite") == []


def test_a_redirect_is_never_followed(tmp_path: Path) -> None:
    """A 301 to another address is a fatal error naming the target, not a GET whose answer is scored."""
    with serve() as server:
        args = setup(tmp_path, server.base_url or "", marked(2, "[[fault:redirect]]"))
        proc = cli(args, tmp_path, ENV, timeout=60)
        paths = [r["path"] for r in server.requests]
    assert proc.returncode == EXIT_FAILED_JUDGMENTS, proc.stderr
    assert "/v1/redirected" not in paths and len(paths) == 2
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert {r["status"] for r in rows} == {"failed"}
    assert all("redirect to /v1/redirected not followed" in r["error"] and r["attempts"] == 1 for r in rows)


@pytest.mark.parametrize("kind", ["absurdusage", "nousage"])
def test_usage_that_is_absurd_or_missing_is_unknown_never_zero(tmp_path: Path, kind: str) -> None:
    """Usage of 10**30 / -5 tokens, or none at all: the reply is scored, its tokens and cost are
    null, the summary's cost is null and says how many calls, the terminal says unknown, not $0."""
    with serve() as server:
        args = setup(tmp_path, server.base_url or "", marked(4, f"[[fault:{kind}]]"))
        proc = cli(args, tmp_path, ENV, timeout=60)
    assert proc.returncode == EXIT_OK, proc.stderr
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert {r["status"] for r in rows} == {"scored"}
    assert all(r["prompt_tokens"] is None and r["completion_tokens"] is None and r["cost_usd"] is None for r in rows)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cost_usd"] is None
    assert summary["cost"]["total"]["unknown_cost_calls"] == 4
    assert summary["judges"]["j"]["cost_unknown_judgments"] == 4
    assert "cost unknown (usage unknown: 4)" in proc.stdout and summary["judges"]["j"]["usage_unknown"] == 4
    assert "$0.000000" not in proc.stderr
    stored = cache_rows(tmp_path / "cache" / "judgments.sqlite")
    assert len(stored) == 4 and all(r["prompt_tokens"] is None and r["cost_usd"] is None for r in stored)


# -- any error ends the run: written, one line, a documented code ----------------------------------


@pytest.mark.asyncio
async def test_an_unexpected_error_mid_run_ends_it_with_what_is_done_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception from a callback (the terminal's progress hook) on the 30th judgment: the run
    returns (no hang) with exit 70, the finished transcripts written, the summary saying why."""
    from harness.planning import RunOptions
    from harness.runner.session import run_evaluation

    seen = 0

    def boom(_judgment: object) -> None:
        nonlocal seen
        seen += 1
        if seen == 30:
            raise RuntimeError("progress display broke")

    with serve() as server:
        write_jsonl(tmp_path / "t.jsonl", transcripts(200))
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "", max_concurrency=4)])
        options = RunOptions(
            input=tmp_path / "t.jsonl", out=tmp_path / "out", config=tmp_path / "harness.toml", cache=tmp_path / "c.sqlite", rubrics=["relevance"]
        )
        outcome = await run_evaluation(options, on_judgment=boom)
    assert outcome.exit_code == EXIT_INTERNAL
    assert "internal error: RuntimeError: progress display broke" in outcome.message
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["aborted"].startswith("internal error: RuntimeError")
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert 0 < len(rows) < 200
    assert [r["transcript_id"] for r in rows] == [f"t{i}" for i in range(len(rows))]  # in order, none torn


def _full_disk(limit: int) -> Any:
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


def test_a_full_disk_ends_the_run_with_exit_5_and_one_line(tmp_path: Path) -> None:
    """The cache cannot grow past a file-size limit: the run ends (no hang) with exit 5 and one line
    naming the file problem; the cache keeps what it committed."""
    long_reply = "Score: 0.5\n" + "reasoning " * 400
    with serve(reply=lambda body: long_reply) as server:
        args = setup(tmp_path, server.base_url or "", transcripts(300), max_concurrency=8)
        proc = cli(args, tmp_path, ENV, timeout=90, preexec_fn=_full_disk(256 * 1024))
    assert proc.returncode == EXIT_IO, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("error:") or "write failed" in x]
    assert line, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "file-size limit" in proc.stderr or "too large" in proc.stderr or "no space" in proc.stderr, proc.stderr


@pytest.mark.timeout(60)
def test_sigterm_ends_a_run_stuck_on_a_hanging_judge(tmp_path: Path) -> None:
    """SIGTERM twice always works: the first stops dispatching, the second cancels calls in flight."""
    with serve(hang_s=120) as server:
        args = setup(tmp_path, server.base_url or "", marked(4, "[[fault:hang]]"), timeout_s=100)
        with harness_process(args, tmp_path, ENV, stderr=subprocess.PIPE) as proc:
            deadline = 30.0
            import time

            start = time.monotonic()
            while server.count() < 4 and time.monotonic() - start < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert (tmp_path / "out" / "summary.json").is_file()


# -- earlier outputs are never lost -------------------------------------------------------------


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if not p.name.startswith(".")}


@pytest.mark.asyncio
async def test_a_run_that_fails_to_start_leaves_the_previous_outputs_as_they_were(tmp_path: Path) -> None:
    with serve() as server:
        write_jsonl(tmp_path / "transcripts.jsonl", transcripts(5))
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "")])
        first, _, _ = await run(tmp_path, rubrics=["relevance"])
        assert first.exit_code == EXIT_OK
        before = _snapshot(tmp_path / "out")
        (tmp_path / "broken.sqlite").write_bytes(b"this is not a database" * 100)
        from harness.errors import CacheError

        with pytest.raises(CacheError):
            await run(tmp_path, rubrics=["relevance"], cache=tmp_path / "broken.sqlite")
    assert _snapshot(tmp_path / "out") == before
    assert [p.name for p in (tmp_path / "out").iterdir() if ".tmp-" in p.name] == []


def test_two_runs_on_one_out_cannot_interleave(tmp_path: Path) -> None:
    """While one run holds --out, another is refused with one line and exit 5, writing nothing."""
    with serve() as server:
        args = setup(tmp_path, server.base_url or "", transcripts(3))
        (tmp_path / "out").mkdir()
        lock = OutDirLock(tmp_path / "out")
        try:
            proc = cli(args, tmp_path, ENV, timeout=60)
        finally:
            lock.release()
        assert server.count() == 0
    assert proc.returncode == EXIT_IO
    assert "another harness run is writing this directory" in one_line(proc.stderr)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".harness.lock"]


@pytest.mark.asyncio
async def test_files_an_earlier_run_left_are_removed(tmp_path: Path) -> None:
    """skipped.jsonl and report.html of an earlier run, and a killed run's temporary files, do not
    survive a run that does not write them."""
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "")])
        write_jsonl(tmp_path / "transcripts.jsonl", [*transcripts(3), '{"id": "bad"'])
        first, _, _ = await run(tmp_path, rubrics=["relevance"], on_bad_record="skip")
        assert (tmp_path / "out" / "skipped.jsonl").is_file()
        (tmp_path / "out" / "report.html").write_text("old report")
        (tmp_path / "out" / ".judgments.jsonl.tmp-99999").write_text("torn")
        write_jsonl(tmp_path / "transcripts.jsonl", transcripts(3))
        second, _, _ = await run(tmp_path, rubrics=["relevance"])
    assert second.exit_code == EXIT_OK
    assert sorted(second.removed_stale) == ["report.html", "skipped.jsonl"]
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [".harness.lock", "judgments.jsonl", "results.jsonl", "summary.json"]


@pytest.mark.asyncio
async def test_a_new_run_in_an_earlier_runs_directory_removes_what_was_derived_from_it(tmp_path: Path) -> None:
    """Exports, inference and a labels design made from the earlier run describe its judgments: a
    new run in that --out removes them (named in the outcome); a file the harness did not write (a
    user's labels) stays, and so does labels/ holding it."""
    from harness.traces.export import export_run

    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "")])
        write_jsonl(tmp_path / "transcripts.jsonl", transcripts(3))
        first, _, _ = await run(tmp_path, rubrics=["relevance"])
        assert first.exit_code == EXIT_OK
        out = tmp_path / "out"
        export_run(out, "csv")
        export_run(out, "otel")
        for name in ("judgments.parquet", "inference.json", "labels/design.json", "labels/to_label.jsonl", "labels/to_label.csv"):
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_text("of the earlier run")
        (out / "labels" / "mine.jsonl").write_text('{"transcript_id": "t0", "relevance": 1}\n')
        (out / "notes.txt").write_text("mine")
        write_jsonl(tmp_path / "transcripts.jsonl", transcripts(2, tag="u"))
        second, _, _ = await run(tmp_path, rubrics=["relevance"])
    assert second.exit_code == EXIT_OK
    assert sorted(second.removed_stale) == [
        "evaluations.otlp.jsonl",
        "inference.json",
        "judgments.csv",
        "judgments.parquet",
        "labels/design.json",
        "labels/to_label.csv",
        "labels/to_label.jsonl",
    ]
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert names == [".harness.lock", "judgments.jsonl", "labels", "labels/mine.jsonl", "notes.txt", "results.jsonl", "summary.json"]


# -- options validated once, wherever they come from ----------------------------------------------


@pytest.mark.parametrize(
    ("extra", "env", "needle"),
    [
        (["--concurrency", "100000"], {}, "max_concurrency"),
        (["--concurrency", "0"], {}, "--concurrency"),
        (["--model", "m", "--base-url", "ftp://example.com/v1"], {}, "is not an http:// or https:// URL"),
        ([], {"OPENAI_BASE_URL": "file:///etc/passwd"}, "$OPENAI_BASE_URL"),
        ([], {KEY_ENV: KEY + "\n"}, "leading or trailing whitespace"),
        ([], {KEY_ENV: "sk-a\x01bcdefgh"}, "control or non-ASCII"),
        ([], {KEY_ENV: "5"}, "cannot be told from ordinary text"),
        (["--out", "afile"], {}, "exists and is not a directory"),
        (["--cache", "adir"], {}, "is a directory"),
        (["--config", "adir"], {}, "is a directory"),
        (["--input-fifo"], {}, "is a FIFO"),
        (["--input-dir"], {}, "is a directory"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, extra: list[str], env: dict[str, str], needle: str) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    with serve() as server:
        url = server.base_url or ""
        if "OPENAI_BASE_URL" in env:
            write_jsonl(tmp_path / "t.jsonl", transcripts(2))
            write_config(tmp_path / "harness.toml", [{"name": "j", "model": "m", "api_key_env": KEY_ENV}])
            args = ["run", "t.jsonl", "--config", "harness.toml", "--out", "out"]
        else:
            args = setup(tmp_path, url, transcripts(2))
        if "--model" in extra:
            args = ["run", "t.jsonl", "--out", "out", *extra]
        elif extra == ["--input-fifo"]:
            os.mkfifo(tmp_path / "fifo")
            args[1] = "fifo"
        elif extra == ["--input-dir"]:
            args[1] = "adir"
        else:
            for flag, value in zip(extra[::2], extra[1::2], strict=True):
                if flag in args:
                    args[args.index(flag) + 1] = value
                else:
                    args += [flag, value]
        proc = cli(args, tmp_path, {**ENV, **env}, timeout=30)
        assert server.count() == 0
    assert proc.returncode == EXIT_USER_ERROR, proc.stderr
    assert needle in one_line(proc.stderr)
    if extra != ["--out", "afile"]:
        assert not (tmp_path / "out").exists()


def test_offline_replays_a_cache_on_read_only_media(tmp_path: Path) -> None:
    """A cache whose directory cannot be written (no -shm can be made) still replays with --offline."""
    if os.geteuid() == 0:
        pytest.skip("root writes read-only directories; the immutable open is shown by its URI instead")
    with serve() as server:
        args = setup(tmp_path, server.base_url or "", transcripts(3))
        assert cli(args, tmp_path, ENV, timeout=60).returncode == EXIT_OK
    cache_dir = tmp_path / "cache"
    for p in cache_dir.iterdir():
        p.chmod(0o444)
    cache_dir.chmod(0o555)
    try:
        proc = cli([*args[:-1], "--offline", "--out", "out2"], tmp_path, ENV, timeout=60)
    finally:
        cache_dir.chmod(0o755)
    assert proc.returncode == EXIT_OK, proc.stderr


def test_a_read_only_cache_directory_is_opened_immutable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cache import store

    monkeypatch.setattr(store.os, "access", lambda path, mode: False)
    assert store.read_only_uri(tmp_path / "c.sqlite").endswith("?mode=ro&immutable=1")


# -- exit codes ----------------------------------------------------------------------------------


def test_the_docs_exit_code_table_matches_the_harness() -> None:
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    section = page[page.index("| exit code |") :]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        code, meaning = (cell.strip() for cell in line.strip("|").split("|")[:2])
        rows[int(code)] = meaning
    assert rows == EXIT_CODES


def _few_fds(limit: int) -> Any:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return preexec


def test_running_out_of_file_descriptors_is_named_with_the_fix(tmp_path: Path) -> None:
    """With 40 descriptors and 64 connections wanted, the run ends with exit 5 and says so, naming
    the fix, instead of declaring the judge down."""
    with serve(latency_s=0.5) as server:
        args = setup(tmp_path, server.base_url or "", transcripts(200), max_concurrency=64)
        proc = cli(args, tmp_path, ENV, timeout=90, preexec_fn=_few_fds(40))
    assert proc.returncode == EXIT_IO, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "file descriptors" in proc.stderr and "ulimit -n" in proc.stderr and "--concurrency" in proc.stderr
    assert "refused" not in proc.stderr and "is the server running" not in proc.stderr


@pytest.mark.timeout(60)
def test_ctrl_c_before_judging_starts_exits_130_in_one_line(tmp_path: Path) -> None:
    """Ctrl-C while the input is still being read (standard input left open): exit 130, one line."""
    import time

    with harness_process(
        ["estimate", "-", "--model", "gpt-4o-mini", "--no-cache"],
        tmp_path,
        {"OPENAI_API_KEY": "sk-unused-key-000"},
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # A shell's background job starts with SIGINT ignored, and a child inherits that: give it
        # the default disposition, as a terminal would, so Ctrl-C reaches it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:
        assert proc.stdin is not None
        proc.stdin.write('{"id": "a", "query": "q", "response": "r"}\n')
        proc.stdin.flush()
        # Wait until it is blocked reading standard input (its imports done), however loaded the
        # machine: the kernel says where a sleeping process waits.
        wchan = Path(f"/proc/{proc.pid}/wchan")
        deadline = time.monotonic() + 120
        while "pipe" not in (wchan.read_text() if wchan.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert one_line(stderr) == "interrupted"
