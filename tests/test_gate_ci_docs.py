"""The CI jobs of docs/guide/ci.md, run as written: the GitHub Actions workflow's ``run:`` commands
and the GitLab CI job's ``script:`` lines, in a directory laid out as the repository they expect.

The test plays the CI runner: it checks out the "repository" (a harness.toml whose judge is a
scripted judge server on 127.0.0.1, the baseline's and the candidate's transcripts in evals/), restores
the judgment cache as the workflow's cache step says (its ``path`` copied from the last job), runs
each command with bash as GitHub does (``bash -e``), and reads what the commands wrote. Only the
install step is not run (the harness under test is on PATH). It checks that the cache key covers
the files the run reads, that the gate passes an unchanged agent and fails a regressed one with
exit 6, that $GITHUB_STEP_SUMMARY gets the summary, and that a second job with the cache restored
sends the judge no request.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e_support import KEY, KEY_ENV, harness_env, judge, write_config, write_jsonl
from tests.scripted_judges import ScriptedJudgeServer

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "ci.md"
N = 30
RUBRICS = ("relevance", "faithfulness")

pytestmark = pytest.mark.timeout(600)


def yaml_blocks() -> dict[str, Any]:
    """The page's YAML blocks by the file their first line names."""
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    named = {}
    for block in blocks:
        first = block.splitlines()[0]
        assert first.startswith("# "), f"a YAML block of {PAGE.name} does not name its file: {first!r}"
        named[first[2:].strip()] = yaml.safe_load(block)
    assert set(named) == {".github/workflows/agent-eval.yml", ".gitlab-ci.yml"}
    return named


def is_install(command: str) -> bool:
    return command.strip().startswith("pip install")


def github_steps() -> tuple[list[str], dict[str, Any]]:
    """The workflow's run: commands in order (the install left out) and its cache step."""
    workflow = yaml_blocks()[".github/workflows/agent-eval.yml"]
    (job,) = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert sum(map(is_install, runs)) == 1
    (cache,) = [step for step in job["steps"] if str(step.get("uses", "")).startswith("actions/cache@")]
    return [r for r in runs if not is_install(r)], cache


def gitlab_script() -> tuple[list[str], dict[str, Any]]:
    job = yaml_blocks()[".gitlab-ci.yml"]["agent-eval"]
    lines = job["script"]
    assert sum(map(is_install, lines)) == 1
    return [line for line in lines if not is_install(line)], job


def transcripts(qualities: list[float], prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i:02d}",
            "query": f"Question {i}: what does the factsheet say about fund {i}?",
            "response": f"{prefix} answer to question {i}, quality={q:.2f}",
            "contexts": [f"Factsheet of fund {i}."],
        }
        for i, q in enumerate(qualities)
    ]


@dataclass
class Repo:
    """A checkout of the repository the CI jobs run in."""

    path: Path
    env: dict[str, str]

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        # GitHub runs a step's run: as `bash -e {0}`; GitLab runs each script line in one shell
        return subprocess.run(["bash", "-e", "-c", command], cwd=self.path, env=self.env, capture_output=True, text=True, timeout=300, check=False)


def checkout(tmp: Path, name: str, scripted_server: ScriptedJudgeServer, candidate_shift: float, cache_from: Path | None) -> Repo:
    repo = tmp / name
    (repo / "evals").mkdir(parents=True)
    base = [0.70 + 0.25 * ((i * 7) % N) / N for i in range(N)]
    write_jsonl(repo / "evals" / "baseline.jsonl", transcripts(base, "Baseline"))
    cand = [q + candidate_shift + (0.01 if i % 2 else -0.01) for i, q in enumerate(base)]
    write_jsonl(repo / "evals" / "candidate.jsonl", transcripts(cand, "Candidate"))
    assert scripted_server.base_url is not None
    write_config(repo / "harness.toml", [judge("honest", scripted_server.base_url, model="honest")], rubrics=list(RUBRICS))
    if cache_from is not None:  # actions/cache restoring its path
        shutil.copytree(cache_from / "cache", repo / "cache")
    env = harness_env(
        repo.parent / f"{name}-bin",
        ("OPENAI_", "ANTHROPIC_", "HARNESS_", "GITHUB_"),
        COLUMNS="100",
        NO_COLOR="1",
        CI="true",
        GITHUB_STEP_SUMMARY=str(repo.parent / f"{name}-step-summary.md"),
        **{KEY_ENV: KEY},
    )
    return Repo(repo, env)


def chat_count(scripted_server: ScriptedJudgeServer) -> int:
    return sum(1 for r in scripted_server.requests if r["path"] == "/v1/chat/completions")


def run_all(repo: Repo, commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    done = []
    for command in commands:
        done.append(repo.run(command))
        if done[-1].returncode != 0:
            break  # a failed step ends the job
    return done


def test_the_cache_step_covers_what_the_job_reads() -> None:
    commands, cache = github_steps()
    assert cache["with"]["path"].rstrip("/") == "cache"  # harness.toml's default cache/judgments.sqlite
    key = cache["with"]["key"]
    patterns = re.findall(r"'([^']+)'", re.search(r"hashFiles\((.*?)\)", key).group(1))  # type: ignore[union-attr]
    read = {w for c in commands for w in re.findall(r"[\w./-]+\.(?:jsonl|toml)", c)}
    covered = {p for p in read if any(Path(p).match(pattern) for pattern in patterns)}
    assert read == covered == {"harness.toml", "evals/baseline.jsonl", "evals/candidate.jsonl"}
    assert key.startswith(cache["with"]["restore-keys"])  # a changed key restores the latest cache under the prefix
    _, job = gitlab_script()
    assert job["cache"]["paths"] == ["cache/"] and job["artifacts"]["reports"]["junit"] == "gate.xml"


def test_github_workflow_pays_once_and_gates(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    commands, _ = github_steps()
    first = checkout(tmp_path, "first", scripted_server, 0.0, None)
    before = chat_count(scripted_server)
    done = run_all(first, commands)
    assert [d.returncode for d in done] == [0] * len(commands), [d.stderr for d in done]
    paid = chat_count(scripted_server) - before
    assert paid == 2 * N * len(RUBRICS)  # both runs' transcripts, every rubric, once
    gate_out = done[-1].stdout
    assert gate_out.rstrip().endswith("gate passed (3 checks)")
    summary = Path(first.env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith("### ✅ harness gate passed (3 checks)")
    root = ET.parse(first.path / "gate.xml").getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "0")

    # The next job on the same transcripts: a fresh checkout, the cache restored. Nothing is paid.
    second = checkout(tmp_path, "second", scripted_server, 0.0, first.path)
    before = chat_count(scripted_server)
    done = run_all(second, commands)
    assert [d.returncode for d in done] == [0] * len(commands)
    assert chat_count(scripted_server) == before
    for run in ("baseline", "candidate"):
        stats = json.loads((second.path / "runs" / run / "summary.json").read_text(encoding="utf-8"))["judges"]["honest"]
        assert (stats["calls"], stats["cache_hits"]) == (0, N * len(RUBRICS))
        assert stats["cost_usd"] == 0.0
    assert (second.path / "gate.xml").read_text(encoding="utf-8").count("<testcase") == 3

    # A regressed candidate: only its transcripts are paid (the baseline's come from the cache), and
    # the gate stops the job with exit 6, its failures in the JUnit XML and the step summary.
    third = checkout(tmp_path, "third", scripted_server, -0.15, second.path)
    before = chat_count(scripted_server)
    done = run_all(third, commands)
    assert [d.returncode for d in done] == [0] * (len(commands) - 1) + [6]
    assert chat_count(scripted_server) - before == N * len(RUBRICS)
    root = ET.parse(third.path / "gate.xml").getroot()
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == [
        "answer_correctness (judge honest) drops at most 0.05 from the baseline",
        "relevance (judge honest) not worse than the baseline",
    ]
    assert "❌ harness gate FAILED (2 of 3 checks)" in Path(third.env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")


def test_gitlab_job_pays_nothing_with_its_cache(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    lines, _ = gitlab_script()
    first = checkout(tmp_path, "gl-first", scripted_server, 0.0, None)
    done = run_all(first, lines)
    assert [d.returncode for d in done] == [0] * len(lines), [d.stderr for d in done]
    assert (first.path / "gate.md").read_text(encoding="utf-8").startswith("### ✅ harness gate passed (3 checks)")
    second = checkout(tmp_path, "gl-second", scripted_server, 0.0, first.path)
    before = chat_count(scripted_server)
    done = run_all(second, lines)
    assert [d.returncode for d in done] == [0] * len(lines)
    assert chat_count(scripted_server) == before
