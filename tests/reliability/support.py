"""Shared pieces of the reliability suite (faults, bad input, hostile text, secrets, the cache): transcripts, runs through the library and
through the real command line, and what a run left behind.

Every test starts its own :class:`tests.judge_server.JudgeServer` on 127.0.0.1 and asserts on what
the server received as well as on what the harness wrote.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.planning import RunOptions
from harness.runner import RunOutcome
from tests.e2e_support import KEY_ENV, Outputs, run_and_show

ROOT = Path(__file__).resolve().parents[2]
RUBRICS = ("relevance", "faithfulness", "hallucination", "contextual_relevance")


def transcripts(n: int, tag: str = "t") -> list[dict[str, Any]]:
    """``n`` distinct transcripts, each feeding all four built-in rubrics; no score markers, so
    the test server answers ``Score: 0.xx`` from the prompt text."""
    return [
        {
            "id": f"{tag}{i}",
            "query": f"id={tag}{i} What is the expense ratio of fund {i}?",
            "response": f"id={tag}{i} It is 0.{i % 10}5% a year.",
            "contexts": [f"id={tag}{i} Factsheet {i}: expense ratio 0.{i % 10}5%."],
        }
        for i in range(n)
    ]


async def run(tmp_path: Path, name: str = "out", **options: Any) -> tuple[RunOutcome, Outputs, str]:
    """One ``harness run`` through the library; returns the outcome, its outputs and the terminal text."""
    options.setdefault("cache", tmp_path / "cache.sqlite")
    options.setdefault("config", tmp_path / "harness.toml")
    options.setdefault("input", tmp_path / "transcripts.jsonl")
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    outcome = await run_and_show(RunOptions(out=tmp_path / name, progress=False, **options), console)
    return outcome, Outputs(tmp_path / name), buffer.getvalue()


def harness_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a real ``python -m harness``: this one without the judge's key or an
    OpenAI endpoint, this checkout importable, wide uncoloured output, then ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    return {**base, "PYTHONPATH": str(ROOT), "COLUMNS": "400", "NO_COLOR": "1", **(env or {})}


def cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120.0, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` as a real process: its exit code, stdout and stderr. ``preexec_fn``
    runs in the child before the harness starts (to set a resource limit, say)."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=harness_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
        check=False,
    )


@contextmanager
def harness_process(args: list[str], cwd: Path, env: dict[str, str] | None = None, **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """``python -m harness ARGS`` started in the background (text mode; ``popen``: the pipes and the
    like), for a test that signals it; killed on the way out if it is still running."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=harness_env(env), text=True, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
