"""One spelling for one idea across commands (docs/reference/commands.md, "One spelling"): a
success threshold is ``--success 'NAME>=X'`` everywhere, the old spellings still work with one
note on stderr; ``--version`` and ``-h``; results on stdout, progress and notes on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.version import __version__
from tests.analysis_support import ScriptedJudges, make_run, record
from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_config, write_jsonl
from tests.test_cli_help import commands
from tests.test_passk_cli import RESAMPLES, SEED, runs  # noqa: F401 - the module's runs, a fixture

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], terminal_width=200)


def notes(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if "deprecated" in line]


# --- --version and -h -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout == f"harness {__version__}\n"
    done = subprocess.run([sys.executable, "-m", "harness", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"harness {__version__}\n" and done.stderr == ""


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=lambda p: " ".join(p) or "harness")
def test_h_is_help_on_every_command(path: list[str]) -> None:
    short = CliRunner().invoke(app, [*path, "-h"], terminal_width=120)
    long = CliRunner().invoke(app, [*path, "--help"], terminal_width=120)
    assert short.exit_code == 0 and long.exit_code == 0
    assert short.output == long.output
    assert "-h" in long.output  # listed beside --help


# --- passk: --success, and the old --rubric/--metric with --at-least/--at-most -----------------


@pytest.mark.timeout(120)
def test_passk_success_is_the_old_rule_spelled_as_for_gate(runs: dict[str, Path]) -> None:  # noqa: F811
    common = ["--k", "1,3", "--json", "--resamples", RESAMPLES, "--seed", SEED]
    new = invoke("passk", runs["A"], "--success", "relevance>=0.7", *common)
    old = invoke("passk", runs["A"], "--rubric", "relevance", "--at-least", "0.7", *common)
    assert new.exit_code == 0 and old.exit_code == 0, (new.output, old.output)
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert notes(new) == []
    assert notes(old) == [
        "note: --rubric relevance --at-least 0.7 is deprecated; use --success 'relevance>=0.7' (docs/reference/commands.md, 'One spelling')"
    ]
    # An agent metric is found by its name, as harness gate finds it; <= is --at-most.
    new = invoke("passk", runs["B"], "--success", "repeated_calls<=0", "--k", "2", "--json")
    old = invoke("passk", runs["B"], "--metric", "repeated_calls", "--at-most", "0", "--k", "2", "--json")
    assert new.exit_code == 0 and json.loads(new.stdout) == json.loads(old.stdout)
    assert notes(old) == [
        "note: --metric repeated_calls --at-most 0 is deprecated; use --success 'repeated_calls<=0' (docs/reference/commands.md, 'One spelling')"
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--success", "relevance>0.7"), "--success relevance>0.7: expected NAME>=NUMBER or NAME<=NUMBER"),
        (("--success", "relevance>=x"), "--success relevance>=x: 'x' is not a number"),
        (("--success", "relevance>=0.7", "--at-least", "0.7"), "--success relevance>=0.7: give the rule once, without --at-least 0.7"),
        (("--success", "relevance>=3"), "--at-least 3: outside the relevance scale [0, 1]"),
    ],
)
def test_passk_success_refuses_in_one_line(runs: dict[str, Path], args: tuple[str, ...], message: str) -> None:  # noqa: F811
    result = invoke("passk", runs["A"], *args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


# --- compare and agreement: --success NAME>=X is --threshold NAME=X ---------------------------


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("spelling")
    server = ScriptedJudges()
    server.start()
    try:
        ids = [f"t{i}" for i in range(12)]
        a = {(t, r, "mini"): (0.2 + 0.05 * i) for i, t in enumerate(ids) for r in ("relevance", "hallucination")}
        b = {(t, r, "mini"): min(1.0, 0.35 + 0.05 * i) for i, t in enumerate(ids) for r in ("relevance", "hallucination")}
        run_a = make_run(tmp, "A", server, [record(t) for t in ids], a, rubrics=("relevance", "hallucination"))
        run_b = make_run(tmp, "B", server, [record(t) for t in ids], b, rubrics=("relevance", "hallucination"))
    finally:
        server.stop()
    yield run_a, run_b


@pytest.mark.timeout(120)
def test_compare_success_is_the_old_threshold_and_its_direction_is_checked(pair: tuple[Path, Path]) -> None:
    a, b = pair
    common = ["--json", "--resamples", "200"]
    new = invoke("compare", a, b, "--success", "relevance>=0.6", "--success", "hallucination<=0.4", *common)
    old = invoke("compare", a, b, "--threshold", "relevance=0.6", "--threshold", "hallucination=0.4", *common)
    default = invoke("compare", a, b, *common)
    assert new.exit_code == 0 and old.exit_code == 0, (new.output, old.output)
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert json.loads(new.stdout) != json.loads(default.stdout)  # the cut changed McNemar's pairs
    assert notes(new) == [] and len(notes(old)) == 1
    assert "--threshold relevance=0.6 is deprecated; use --success 'relevance>=X'" in notes(old)[0]
    wrong = invoke("compare", a, b, "--success", "hallucination>=0.4")
    assert wrong.exit_code == 2
    assert "--success hallucination>=0.4: lower is better on hallucination, so a score passes at hallucination<=0.4" in " ".join(wrong.output.split())
    bare = invoke("compare", a, b, "--threshold", "0.5", *common)  # every metric at once: not deprecated
    assert bare.exit_code == 0 and notes(bare) == []


# --- streams: the result on stdout, progress and notes on stderr -------------------------------


@pytest.mark.timeout(120)
def test_run_and_compare_print_their_results_on_stdout_and_the_rest_on_stderr(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", [record(f"t{i}") for i in range(3)])
    with serve() as server:
        config = write_config(tmp_path / "harness.toml", [judge("j", server.base_url or "")], rubrics=["relevance"])
        done = subprocess.run(
            [sys.executable, "-m", "harness", "run", data, "--config", config, "--out", tmp_path / "run", "--cache", tmp_path / "c.sqlite"],
            cwd=ROOT,
            env={**os.environ, KEY_ENV: KEY},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "Scores (mean with 95% CI)" in done.stdout and "Scores (mean" not in done.stderr
    assert done.stderr.strip() and done.stderr.strip() not in done.stdout  # the closing line
    a, b = pair
    compared = subprocess.run(
        [sys.executable, "-m", "harness", "compare", a, b, "--resamples", "200"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert compared.returncode == 0 and "relevance" in compared.stdout and compared.stderr == ""
