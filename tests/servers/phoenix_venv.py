"""The virtual environment Phoenix's server runs in for tests/servers/test_phoenix.py.

``arize-phoenix`` pins anthropic < 2 (through pydantic-ai), which the test extra's anthropic >= 2.10
forbids, so the server cannot be installed beside the harness: it gets its own virtual environment,
made outside the checkout (the tests never write in it) and shared by every checkout of the
machine: ``$HARNESS_TEST_CACHE`` or ``~/.cache/harness-tests``, one folder per Phoenix version.
It is a venv of its own (no system site-packages, so what the harness's environment installs
cannot break it), filled from ``phoenix-constraints.txt`` beside this file (the versions the tests
passed with; ``python -m tests.servers.phoenix_venv --lock`` writes it from the venv). A stamp file
written after the install says the venv is whole: an interrupted install is made again.

    python -m tests.servers.phoenix_venv          # make it if missing (scripts/test does)

``HARNESS_PHOENIX_PYTHON`` names another interpreter that has arize-phoenix instead.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

PHOENIX_VERSION = "20.26.1"
CONSTRAINTS = Path(__file__).resolve().parent / "phoenix-constraints.txt"
#: the command that makes the venv (what scripts/test runs), named by the tests when it is missing
MAKE_COMMAND = "python -m tests.servers.phoenix_venv"


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_TEST_CACHE") or Path.home() / ".cache" / "harness-tests")


def venv_dir() -> Path:
    return cache_root() / f"phoenix-{PHOENIX_VERSION}"


def _stamp() -> Path:
    return venv_dir() / "harness-complete"


def python() -> Path:
    """The interpreter that runs Phoenix's server (``HARNESS_PHOENIX_PYTHON``, else the venv's);
    an AssertionError naming the command that makes it when there is none: the tests fail, never skip."""
    named = os.environ.get("HARNESS_PHOENIX_PYTHON")
    if named:
        if not Path(named).exists():
            raise AssertionError(f"HARNESS_PHOENIX_PYTHON={named} does not exist")
        return Path(named)
    if not _stamp().exists():
        raise AssertionError(f"Phoenix's virtual environment {venv_dir()} is missing or incomplete: {MAKE_COMMAND} makes it (scripts/test does)")
    return venv_dir() / "bin" / "python"


def make() -> Path:
    """The venv, made unless it is whole (2 min of CPU on a new machine: 33 min of wall time on a 2-core machine at load 20)."""
    if _stamp().exists():
        return venv_dir()
    venv_dir().parent.mkdir(parents=True, exist_ok=True)
    # One maker at a time (two test sessions, or a CI run beside a developer's): the second waits,
    # then finds the stamp.
    with open(venv_dir().parent / f"{venv_dir().name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp().exists():
            return venv_dir()
        print(f"making Phoenix's virtual environment {venv_dir()} (arize-phoenix=={PHOENIX_VERSION})", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv_dir())], check=True)
        pip = [str(venv_dir() / "bin" / "python"), "-m", "pip", "install", "-q"]
        constraints = ["-c", str(CONSTRAINTS)] if CONSTRAINTS.exists() else []
        subprocess.run([*pip, *constraints, f"arize-phoenix=={PHOENIX_VERSION}"], check=True)
        _stamp().write_text(f"arize-phoenix=={PHOENIX_VERSION}\n", encoding="utf-8")
    return venv_dir()


def lock() -> None:
    """Write phoenix-constraints.txt from the venv's packages (after the Phoenix tests passed)."""
    frozen = subprocess.run(
        [str(make() / "bin" / "python"), "-m", "pip", "freeze", "--exclude-editable"], check=True, capture_output=True, text=True
    ).stdout
    header = "# The versions Phoenix's test server ran with (tests/servers/phoenix_venv.py; python -m tests.servers.phoenix_venv --lock).\n"
    CONSTRAINTS.write_text(header + "".join(f"{line}\n" for line in frozen.splitlines() if "==" in line), encoding="utf-8")
    print(f"wrote {CONSTRAINTS}", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:] == ["--lock"]:
        lock()
    elif sys.argv[1:]:
        raise SystemExit(f"usage: {MAKE_COMMAND} [--lock]")
    else:
        make()
