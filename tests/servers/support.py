"""Shared pieces of the trace-server tests: the judge, the CLI, polling a server, comparing transcripts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from typer.testing import CliRunner

from harness.cli import app
from harness.traces.reader import iter_records
from tests.e2e_support import judge, serve, write_config
from tests.servers.servers import ROOT

T = TypeVar("T")
QUESTIONS = ["What is the weather in Paris?", "Should I take an umbrella in Paris today?"]
RUBRICS = ["relevance", "faithfulness"]


def cli(*args: str | Path) -> Any:
    """``harness ARGS`` through typer's runner; stderr apart from stdout."""
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def judge_config(tmp: Path, base_url: str) -> Path:
    return write_config(tmp / "harness.toml", [judge("judge", base_url, max_concurrency=4)])


def judged_run(tmp: Path, traces: Path) -> Path:
    """``harness run`` on ``traces`` against a local judge server, with the test rubrics and the
    cache ``tmp/c.sqlite``; the run's folder (``tmp/run``)."""
    with serve() as judge_server:
        config = judge_config(tmp, judge_server.base_url)
        rubrics = sum((["--rubric", r] for r in RUBRICS), [])
        run = cli("run", traces, "--out", tmp / "run", "--config", config, "--cache", tmp / "c.sqlite", *rubrics, "--no-progress")
        assert run.exit_code == 0, run.output
    return tmp / "run"


def wait_for(probe: Callable[[], T | None], timeout_s: float = 60.0, what: str = "the server") -> T:
    """``probe()`` until it returns something truthy (servers ingest asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not get there within {timeout_s:.0f} s")
        time.sleep(0.25)


def records(path: Path, fmt: str) -> list[dict[str, Any]]:
    out = []
    for _, text, error in iter_records(path, fmt):
        assert error is None, error
        out.append(json.loads(text))
    return out


def to_microseconds(record: dict[str, Any]) -> dict[str, Any]:
    """A transcript with its span and step times to the microsecond (Phoenix stores microseconds)."""
    copy = json.loads(json.dumps(record))
    for timed in [*(copy.get("spans") or []), *(copy.get("steps") or [])]:
        for key in ("start", "end"):
            if timed.get(key) is not None:
                timed[key] = round(timed[key], 6)
    if copy.get("timings", {}).get("total_ms") is not None:
        copy["timings"]["total_ms"] = round(copy["timings"]["total_ms"], 2)
    return copy


def judgments(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "judgments.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def cached_keys(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    try:
        return {k for (k,) in db.execute("SELECT key FROM judgments")}
    except sqlite3.OperationalError:
        return set()
    finally:
        db.close()


def chat_prompts(server: Any) -> list[str]:
    return [json.dumps(r["body"]["messages"], sort_keys=True) for r in server.requests if r["path"] == "/v1/chat/completions"]


def sync_args(source: str, tmp: Path, config: Path, *extra: str | Path, rubrics: Sequence[str] = RUBRICS) -> list[str | Path]:
    """``harness sync`` on ``source`` into ``tmp/passes`` with the cache ``tmp/c.sqlite``, the
    test rubrics (or ``rubrics``) and no settling time."""
    return [
        "sync",
        source,
        "--out",
        tmp / "passes",
        "--config",
        config,
        "--cache",
        tmp / "c.sqlite",
        *sum((["--rubric", r] for r in rubrics), []),
        "--settle",
        "0s",
        *extra,
    ]


#: How long a killed sync pass may take to cache its first three judgments: a child Python that
#: imports the harness, pulls a handful of traces and judges three at 0.3 s each needs a few seconds
#: alone and well under a minute on a loaded 2-core machine; the rest is headroom, not a wait for
#: anything expected (a child that fails exits and is reported at once, below).
FIRST_JUDGMENTS_S = 120.0


def killed_sync_pass(source: str, tmp: Path, config: Path) -> set[str]:
    """Starts a ``harness sync`` pass (:func:`sync_args`, one judgment at a time) in a child
    process, kills it with SIGKILL (its whole session) once three judgments are cached, and returns
    the cache's keys at the kill: what a resumed pass must not pay for again.

    The child's output goes to ``tmp/sync-pass.log``. A child that exits before three judgments
    are cached fails the test at once with that log (it used to be discarded, so a pass that failed
    on start looked like a slow one and the test waited out the whole budget saying nothing); one
    still short of them after FIRST_JUDGMENTS_S gets SIGABRT first, so faulthandler
    (``-X faulthandler``) prints where each of its threads was."""
    args = [str(a) for a in sync_args(source, tmp, config, "--concurrency", "1")]
    log_path = tmp / "sync-pass.log"
    with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
        child = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "harness", *args],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_tail() -> str:
        return log_path.read_text(encoding="utf-8", errors="replace")[-3000:]

    def three_cached() -> bool:
        if len(cached_keys(tmp / "c.sqlite")) >= 3:
            return True
        if child.poll() is not None:
            raise AssertionError(f"the sync pass exited with {child.returncode} before three judgments were cached:\n{log_tail()}")
        return False

    try:
        try:
            wait_for(three_cached, timeout_s=FIRST_JUDGMENTS_S, what="the first pass's judgments")
        except AssertionError as exc:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGABRT)  # faulthandler: every thread's stack into the log
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(10)
            raise AssertionError(f"{exc}\n--- the sync pass's output:\n{log_tail()}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    return cached_keys(tmp / "c.sqlite")
