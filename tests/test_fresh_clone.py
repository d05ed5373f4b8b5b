"""The README's two set-up commands, as written, on a fresh clone in a fresh virtual environment.

README.md marks them ``<!-- setup: install-and-run -->`` and ``<!-- setup: test -->``; they are read
from the README here (a change there is what this test runs). The test clones this checkout's HEAD
(what is committed: a change not yet committed is not in the clone) into ``tmp_path``, makes a
venv there with ``python -m venv`` (nothing of this environment's packages: every package comes
through pip, from the package index or pip's cache, as on a new machine), and with the venv first
on PATH, as ``source venv/bin/activate`` puts it:

- runs the install-and-run command in the clone, and checks that it installed the clone's harness
  with pandas (the README's notebook example) and that the run wrote its files;
- runs the test command on the ``readme_smoke`` tests only (``-m readme_smoke``: a few fast ones,
  so the suite does not run itself again), which must pass with nothing failed, errored or skipped.
  The command's own steps (apt packages, Phoenix's venv in ~/.cache/harness-tests) are skipped when
  what they make is there, as it is on a machine that ran the suite.

This is the one test that reaches the network: the package index, through pip, as the README's
commands do. With llama-cpp-python's wheel in pip's cache the whole test takes a few minutes; the
first install on a machine compiles llama.cpp (about 10 minutes on 2 cores), hence the limits.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_S = 2400  # the install, with llama.cpp compiled once, and the bundled judge's run
TESTS_S = 1200  # the test command's install into the venv and the smoke tests


def readme_command(name: str, readme: Path = ROOT / "README.md") -> str:
    """The one ``$ `` command of the console block just after the line with ``<!-- setup: NAME -->`` in
    the README (other comments may come between)."""
    text = readme.read_text(encoding="utf-8")
    found = re.search(rf"<!-- setup: {re.escape(name)} -->[^\n]*\n(?:<!--[^\n]*-->\n)*```console\n(.*?)```", text, re.S)
    assert found is not None, f"README.md has no console block after <!-- setup: {name} -->"
    commands = [line[2:] for line in found.group(1).splitlines() if line.startswith("$ ")]
    assert len(commands) == 1, f"the block after <!-- setup: {name} --> holds {len(commands)} commands, not one"
    return commands[0]


@pytest.mark.readme_smoke
def test_the_readme_names_both_commands() -> None:
    assert readme_command("install-and-run").startswith("pip install ")
    assert "harness run examples/" in readme_command("install-and-run")
    assert readme_command("test").startswith("scripts/test")


def _shell(command: str, cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    output = log.read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, f"$ {command}\n(exit {done.returncode}, in {cwd})\n{output[-6000:]}"
    return subprocess.CompletedProcess(done.args, done.returncode, output)


@pytest.mark.fresh_clone
@pytest.mark.timeout(INSTALL_S + TESTS_S + 300)
def test_the_readme_commands_work_on_a_fresh_clone(tmp_path: Path) -> None:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "--detach", head], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The user's shell with the venv activated; nothing that points at this checkout or this environment.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("PYTEST_")}
    env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    _shell(readme_command("install-and-run"), clone, env, tmp_path / "install.log", INSTALL_S)
    python = str(venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import harness, pandas; print(harness.__file__)"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(clone / "harness"), where.stdout
    run = clone / "runs" / "demo"
    judgments = [json.loads(line) for line in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(judgments) == 84 and {j["judge"] for j in judgments} == {"local-smollm2"}, {j["judge"] for j in judgments}
    assert json.loads((run / "summary.json").read_text(encoding="utf-8"))["rubrics"]
    assert (run / "results.jsonl").read_text(encoding="utf-8").count("\n") == 21

    tests = _shell(f"{readme_command('test')} -m readme_smoke", clone, env, tmp_path / "tests.log", TESTS_S)
    summary = tests.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary), tests.stdout[-3000:]
    assert not re.search(r"failed|error|skipped|xfail|xpass", summary), tests.stdout[-3000:]
