"""The pytest plugin, run as a user runs it: the sample project tests/pytest_plugin_project/ in a
subprocess, with ``pytest`` and ``pytest -n 2``, online and offline, against a scripted judge server.

The server answers every prompt with the quality written in the answer (``quality=0.35``) and a
sentence of reasons, after 0.3 s, so two xdist workers asking at once overlap. Every run checks the
exit code, the outcome line, and what the server was asked: a prompt is paid once across runs and
workers, a rerun and an offline run ask nothing, ``-k`` and ``-x`` leave the rest unasked.

The plugin loads through its ``pytest11`` entry point when the harness is installed with its
metadata (pip install -e .); otherwise (the package on PYTHONPATH only) with ``-p harness.pytest_plugin``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from harness import testing
from tests.analysis_support import RUBRIC_OF_LINE
from tests.e2e_support import KEY, user_prompt
from tests.judge_server import JudgeServer
from tests.prompt_blocks import rubric_of

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "pytest_plugin_project"
WALL_S = 240
_QUALITY = re.compile(r"quality=([0-9.]+)")
_ID = re.compile(r"\[([\w-]+)\] ")
#: (transcript, rubric) prompts of each test of the sample project
SHARED = {"nav", "ter", "aum", "exit"}
EACH = {f"each-{i}" for i in range(4)}
ALL_PROMPTS = {(t, "relevance") for t in SHARED | EACH | {"vague"}} | {(t, "faithfulness") for t in SHARED}

pytestmark = pytest.mark.timeout(900)


def _reply(body: dict[str, Any]) -> str:
    prompt = user_prompt({"body": body})
    quality = float(_QUALITY.search(prompt).group(1))  # type: ignore[union-attr]
    words = "answers the question directly" if quality >= 0.6 else "hedges and never answers the question"
    return json.dumps({"score": quality, "reason": f"The response {words}."})


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    srv = JudgeServer(reply=_reply, latency_s=0.3)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _asked(server: JudgeServer, since: int) -> list[tuple[str, str]]:
    """(transcript id, rubric) of each chat request after the first ``since`` requests."""
    out = []
    for request in server.requests[since:]:
        if request["path"] != "/v1/chat/completions":
            continue
        prompt = user_prompt(request)
        out.append((_ID.search(prompt).group(1), rubric_of(request["body"], RUBRIC_OF_LINE)))  # type: ignore[union-attr]
    return out


def plugin_args() -> list[str]:
    installed = any(e.name == "harness" and e.value == "harness.pytest_plugin" for e in entry_points(group="pytest11"))
    return [] if installed else ["-p", "harness.pytest_plugin"]


def project(tmp: Path, name: str) -> Path:
    path = tmp / name
    shutil.copytree(SAMPLE, path, ignore=shutil.ignore_patterns(".harness", "__pycache__"))
    return path


def run_pytest(
    path: Path, server: JudgeServer, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, str]]]:
    before = len(server.requests)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HARNESS_", "PYTEST_", "SAMPLE_"))}
    assert server.base_url is not None
    environ.update(OPENAI_BASE_URL=server.base_url, SAMPLE_JUDGE_KEY=KEY, PYTHONPATH=str(ROOT), SAMPLE_LOG=str(path / "log.jsonl"), **(env or {}))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *plugin_args(), *args],
        cwd=path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=WALL_S,
        check=False,
    )
    return done, _asked(server, before)


def outcome(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.strip().splitlines()[-1].split(" in ")[0].strip("= ")


def test_online_then_rerun_then_offline_pay_once(server: JudgeServer, tmp_path: Path) -> None:
    path = project(tmp_path, "serial")
    first, asked = run_pytest(path, server)
    assert first.returncode == 1, first.stdout + first.stderr
    assert outcome(first) == "2 failed, 7 passed"
    assert sorted(asked) == sorted(ALL_PROMPTS)  # every prompt once: the tests sharing answers paid once

    # pytest's own report: the scores and the judge's words, from assert_judged and from `judged >= X`
    out = first.stdout
    assert "JudgedBelow: 1 of 1 transcript(s) missed relevance >= 0.7 (judge mini, model scripted-mini)" in out
    assert 'MISS vague: 0.35; judge said: {"score": 0.35, "reason": "The response hedges and never answers the question."}' in out
    comparison = out[out.index("_ test_a_vague_answer_by_comparison _") :]
    assert "assert 1 of 1 transcript(s) missed relevance >= 0.7 (judge mini, model scripted-mini)" in comparison
    assert "MISS vague: 0.35; judge said:" in comparison
    assert (path / ".harness" / "judgments.sqlite").is_file()  # the cache beside harness.toml

    again, asked = run_pytest(path, server)
    assert (again.returncode, outcome(again), asked) == (1, "2 failed, 7 passed", [])

    offline, asked = run_pytest(path, server, "--harness-offline")
    assert (offline.returncode, outcome(offline), asked) == (1, "2 failed, 7 passed", [])
    # offline, an answer never judged is not paid for, and the failure says why
    (path / "test_new.py").write_text(
        "from harness.testing import assert_judged\n\n"
        "def test_new():\n"
        '    assert_judged([{"id": "new", "query": "q?", "response": "new (quality=0.9)"}], rubric="relevance", at_least=0.5)\n',
        encoding="utf-8",
    )
    new, asked = run_pytest(path, server, "test_new.py", env={"HARNESS_OFFLINE": "1"})
    assert (new.returncode, asked) == (1, [])
    assert "MISS new: not in the cache, and judging is offline (--harness-offline): run this test once online" in new.stdout


def test_xdist_two_workers_pay_once(server: JudgeServer, tmp_path: Path) -> None:
    path = project(tmp_path, "xdist")
    done, asked = run_pytest(path, server, "-n", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert outcome(done) == "2 failed, 7 passed"
    assert sorted(asked) == sorted(ALL_PROMPTS)
    # The two tests of the same answers started together on the two workers: one held the claims,
    # the other waited for its judgments (read from the cache), and each answer was paid once.
    log = {r["test"]: r for r in map(json.loads, (path / "log.jsonl").read_text(encoding="utf-8").splitlines())}
    a, b = log["test_shared_answers_are_relevant"], log["test_shared_answers_again"]
    assert {a["worker"], b["worker"]} == {"gw0", "gw1"}
    assert a["start"] < b["end"] and b["start"] < a["end"], (a, b)
    assert a["cached"] + b["cached"] >= 4

    again, asked = run_pytest(path, server, "-n", "2", "--harness-offline")
    assert (again.returncode, outcome(again), asked) == (1, "2 failed, 7 passed", [])


def test_k_and_x_leave_the_rest_unpaid(server: JudgeServer, tmp_path: Path) -> None:
    path = project(tmp_path, "select")
    done, asked = run_pytest(path, server, "-k", "each_answer")
    assert (done.returncode, outcome(done)) == (0, "4 passed, 5 deselected")
    assert sorted(asked) == sorted((t, "relevance") for t in EACH)
    done, asked = run_pytest(path, server, "-x")
    assert done.returncode == 1 and outcome(done) == "1 failed, 3 passed"
    # the three tests before the first failure, and the failing one: nothing after -x stopped
    assert sorted(asked) == sorted({(t, "faithfulness") for t in SHARED} | {(t, "relevance") for t in SHARED | {"vague"}})


def test_settings_come_from_the_options_the_ini_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(testing.ENV_CONFIG, raising=False)
    assert testing.Settings.from_env({}) == testing.Settings(None, None, False)
    (tmp_path / "harness.toml").write_text("", encoding="utf-8")
    assert testing.Settings.from_env({"HARNESS_OFFLINE": "1", "HARNESS_CACHE": "c.sqlite"}) == testing.Settings(
        Path("harness.toml"), "c.sqlite", True
    )
    with pytest.raises(testing.UserInputError, match=r"^assert_judged: give at_least=X or at_most=X$"):
        testing.assert_judged([], rubric="relevance")
    with pytest.raises(testing.UserInputError, match=r"harness.toml has no \[\[judges\]\]; name one with judge="):
        testing.judge([{"id": "a", "query": "q", "response": "r"}], rubric="relevance", using=testing.Settings(Path("harness.toml")))


def test_the_plugin_is_an_entry_point() -> None:
    """pip install is enough: pytest finds the plugin through the package's pytest11 entry point."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"harness": "harness.pytest_plugin"}
    assert any(r.startswith("pytest-xdist") for r in project["optional-dependencies"]["test"])
