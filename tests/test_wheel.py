"""The wheel is the product: built, installed into a fresh venv, and run from outside the checkout.

An editable install reads the checkout (its prompts/, its undeclared packages that happen to be
installed); a wheel has only what it ships and what it declares. This builds the wheel, installs it
with its declared dependencies (from the package registry) into a new virtual environment, and from
an empty directory elsewhere runs ``harness --help``, ``harness estimate``, ``harness run`` against a
judge server on 127.0.0.1, then ``harness run --offline`` from the cache that run filled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.e2e_support import read_jsonl, serve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "transcripts.jsonl"
#: what building the wheel reads (pyproject.toml, setup.py and MANIFEST.in name the rest)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "harness", "prompts")

pytestmark = pytest.mark.timeout(900)


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENAI"))}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel built from this checkout; returns its bin/ folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the build reads: pip builds in the source tree, and setuptools writes
    # build/ and harness.egg-info/ there (the tests write nothing in the checkout).
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp / "dist"), str(source)], cwd=tmp, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("harness-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    rubric_files = {str(p.relative_to(ROOT)) for p in (ROOT / "prompts").rglob("*.md")}
    assert rubric_files, "the checkout has no rubrics to ship"
    missing = {f for f in rubric_files if f"harness/{f}" not in names}
    assert not missing, f"rubrics missing from the wheel: {sorted(missing)}"
    assert {"harness/data/prices.toml", "harness/judges/llama_worker.py"} <= names
    assert not any(n.startswith(("tests/", "prompts/")) for n in names), "only the package belongs in the wheel"

    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr
    pip = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv / "bin"


def test_wheel_runs_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    harness = str(installed / "harness")
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()[:3]
    (elsewhere / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # The installed package is the one that runs, not the checkout.
    where = _run([str(installed / "python"), "-c", "import harness; print(harness.__file__)"], cwd=elsewhere)
    assert str(installed.parent) in where.stdout, where

    shown = _run([harness, "--help"], cwd=elsewhere)
    assert shown.returncode == 0 and "estimate" in shown.stdout, shown.stderr

    with serve() as server:
        judge = ["--model", "judge-model", "--base-url", str(server.base_url)]
        estimate = _run([harness, "estimate", "t.jsonl", *judge, "--json"], cwd=elsewhere)
        assert estimate.returncode == 0, estimate.stderr
        planned = json.loads(estimate.stdout)
        assert server.count() == 0  # estimating sends nothing

        live = _run([harness, "run", "t.jsonl", *judge, "--out", "a", "--cache", "c.sqlite", "--no-progress"], cwd=elsewhere)
        assert live.returncode == 0, live.stderr
        sent = server.count()
    rows = read_jsonl(elsewhere / "a" / "judgments.jsonl")
    # Three transcripts, each judged on every built-in rubric it can feed (shipped in the wheel).
    assert {r["rubric"] for r in rows} >= {"relevance", "faithfulness"}
    assert len(rows) == sent > 0 and all(r["status"] == "scored" for r in rows)
    # The estimate planned exactly the calls the run then made.
    assert planned["transcripts"] == 3
    assert sum(line["requests"] for line in planned["lines"]) == sent

    # The server is gone: the offline replay answers every judgment from the cache, identically.
    replay = _run([harness, "run", "t.jsonl", *judge, "--out", "b", "--cache", "c.sqlite", "--offline", "--no-progress"], cwd=elsewhere)
    assert replay.returncode == 0, replay.stderr
    again = read_jsonl(elsewhere / "b" / "judgments.jsonl")
    assert [(r["transcript_id"], r["rubric"], r["score"]) for r in again] == [(r["transcript_id"], r["rubric"], r["score"]) for r in rows]
    assert all(r["cached"] for r in again)


def test_wheel_without_local_extra_says_what_to_install(installed: Path, tmp_path: Path) -> None:
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()[:1]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _run([str(installed / "harness"), "run", "t.jsonl", "--out", "o", "--no-progress"], cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    message = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(message) == 1 and "pip install 'harness[local]'" in message[0], result.stderr
