"""Shared pieces of the end-to-end tests of ``harness run``: files, config, server, outputs.

Every end-to-end test starts its own :class:`tests.judge_server.JudgeServer` on 127.0.0.1, writes
its transcripts and a ``harness.toml`` into ``tmp_path``, runs the harness (library, CLI runner or
subprocess) and then reads back what the run wrote: judgments.jsonl, results.jsonl, summary.json
and the rows of the SQLite cache.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.judge_server import JudgeServer

if TYPE_CHECKING:
    from rich.console import Console

    from harness.planning import RunOptions
    from harness.runner import RunOutcome

#: The variable the test judges read their key from; tests monkeypatch it.
ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "HARNESS_E2E_KEY"
KEY = "sk-e2e-test-0123456789abcdef"

IN_PRICE = 0.15
OUT_PRICE = 0.60


async def run_and_show(options: RunOptions, console: Console) -> RunOutcome:
    """A run as ``harness run`` makes it: the library runs (with the progress bar on ``console``
    when ``options.progress``), then the terminal renders the outcome."""
    from harness.runner import run_evaluation
    from harness.terminal.run import RunProgress, show_run

    with RunProgress(console, options.progress) as bar:
        outcome = await run_evaluation(options, on_start=bar.on_start, on_judgment=bar.on_judgment)
    show_run(outcome, console)
    return outcome


def harness_env(bin_dir: Path, drop: tuple[str, ...] = ("OPENAI_", "ANTHROPIC_", "HARNESS_"), **variables: str) -> dict[str, str]:
    """The environment of shell commands that call ``harness`` as a user would: a ``harness`` shim
    in ``bin_dir`` (made here; it runs this interpreter's ``-m harness``) first on PATH, this
    checkout on PYTHONPATH, none of the caller's variables whose names start with ``drop``, then
    ``variables``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "harness"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT), **variables)
    return env


@contextmanager
def judge_key() -> Iterator[None]:
    """``$KEY_ENV`` set to ``KEY`` within the block and put back after it: for a module-scoped
    fixture that runs the harness, since it is set up before conftest.py's ``judge_env``."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        yield


@contextmanager
def serve(**kwargs: Any) -> Iterator[JudgeServer]:
    server = JudgeServer(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_run(project: Path, out: str, *extra: str, rubrics: Iterable[str] = ("relevance",)) -> subprocess.Popen[str]:
    """``python -m harness run`` in ``project`` (its transcripts.jsonl, harness.toml, cache.sqlite), a
    subprocess a test can signal: the interrupt tests and the gate's tests on runs stopped part-way."""
    argv = [sys.executable, "-m", "harness", "run", "transcripts.jsonl", "--out", out, "--config", "harness.toml"]
    argv += ["--cache", "cache.sqlite", "--no-progress", *(a for rubric in rubrics for a in ("--rubric", rubric)), *extra]
    env = {**os.environ, KEY_ENV: KEY, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_requests(server: JudgeServer, proc: subprocess.Popen[str], n: int, timeout: float = 20.0) -> None:
    """Until ``server`` has had ``n`` requests; the run killed and the test failed after ``timeout``."""
    deadline = time.monotonic() + timeout
    while server.count() < n:
        if proc.poll() is not None:
            raise AssertionError(f"harness exited early ({proc.returncode}): {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"only {server.count()} requests after {timeout:g} s")
        time.sleep(0.01)


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str]:
    """The run's exit code and stderr; killed, and the test failed, past ``timeout``."""
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise AssertionError(f"harness did not finish within {timeout} s: {stderr}") from None
    return proc.returncode, stderr


def stop_after(server: JudgeServer, proc: subprocess.Popen[str], requests: int, signum: int, timeout: float = 60.0) -> tuple[int, str]:
    """Signal the run once ``server`` has had ``requests`` requests; its exit code and stderr."""
    wait_for_requests(server, proc, requests, timeout=30.0)
    proc.send_signal(signum)
    return finish(proc, timeout)


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def judge(
    name: str,
    base_url: str,
    *,
    model: str = "judge-model",
    prices: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """One ``[[judges]]`` table; priced at IN_PRICE/OUT_PRICE unless ``prices=False``."""
    table: dict[str, Any] = {
        "name": name,
        "model": model,
        "base_url": base_url,
        "api_key_env": KEY_ENV,
    }
    if prices:
        table |= {"input_price_per_1m": IN_PRICE, "output_price_per_1m": OUT_PRICE}
    # Short backoff budget is not configurable; keep attempts modest so faults stay fast.
    table.setdefault("max_attempts", 4)
    table |= fields
    return table


def write_config(
    path: Path,
    judges: list[dict[str, Any]],
    composites: Mapping[str, Mapping[str, float]] | None = None,
    **top: Any,
) -> Path:
    lines = [f"{key} = {_toml_value(value)}" for key, value in top.items()]
    for table in judges:
        lines.append("")
        lines.append("[[judges]]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in table.items())
    for name, weights in (composites or {}).items():
        lines.append("")
        lines.append(f"[composites.{name}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in weights.items())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cost(
    prompt_tokens: int,
    completion_tokens: int,
    in_price: float = IN_PRICE,
    out_price: float = OUT_PRICE,
) -> float:
    return (prompt_tokens * in_price + completion_tokens * out_price) / 1_000_000


def chat_requests(server: JudgeServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"] == "/v1/chat/completions"]


def user_prompt(request: Mapping[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["body"]["messages"]) if m["role"] == "user")


def cache_rows(path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(path)
    try:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM judgments ORDER BY key")]
    finally:
        db.close()


def integrity(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


@dataclass
class Outputs:
    """What one run wrote to its --out directory."""

    out: Path

    @property
    def judgments(self) -> list[dict[str, Any]]:
        return read_jsonl(self.out / "judgments.jsonl")

    @property
    def results(self) -> list[dict[str, Any]]:
        return read_jsonl(self.out / "results.jsonl")

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text(encoding="utf-8"))

    def by_key(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        rows = self.judgments
        keyed = {(j["transcript_id"], j["rubric"], j["judge"]): j for j in rows}
        assert len(keyed) == len(rows), "one judgment per (transcript, rubric, judge)"
        return keyed


def replay_view(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The fields a replay must reproduce exactly."""
    return [
        (
            r["transcript_id"],
            r["rubric"],
            r["judge"],
            r["status"],
            r["score"],
            r["raw_output"],
        )
        for r in rows
    ]


#: How far a number in a golden JSON file may move: relative 1e-9 (and 1e-12 absolute, for values near
#: zero). A float computed by numpy/scipy in another order or version differs in its last digits
#: (0.9486504723346827 against 0.9486504723346828), never at the ninth.
GOLDEN_REL_TOL = 1e-9
GOLDEN_ABS_TOL = 1e-12

_NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:[eE]([-+]?\d+))?")
_RULE = re.compile(r"[\u2500-\u257f]+")  # a table's rule (box drawing): its length follows the columns


def _json_differences(golden: Any, found: Any, where: str = "$") -> list[str]:
    """Where ``found`` differs from ``golden``: numbers at GOLDEN_REL_TOL (int stays int, float
    stays float), everything else equal, keys in the same order."""
    if isinstance(golden, bool) or isinstance(found, bool) or not isinstance(golden, int | float) or not isinstance(found, int | float):
        if type(golden) is not type(found):
            return [f"{where}: {golden!r} became {found!r}"]
        if isinstance(golden, dict):
            if list(golden) != list(found):
                return [f"{where}: keys {list(golden)} became {list(found)}"]
            return [d for key in golden for d in _json_differences(golden[key], found[key], f"{where}.{key}")]
        if isinstance(golden, list):
            if len(golden) != len(found):
                return [f"{where}: {len(golden)} items became {len(found)}"]
            return [d for i, (g, f) in enumerate(zip(golden, found)) for d in _json_differences(g, f, f"{where}[{i}]")]
        return [] if golden == found else [f"{where}: {golden!r} became {found!r}"]
    if type(golden) is not type(found) or not math.isclose(golden, found, rel_tol=GOLDEN_REL_TOL, abs_tol=GOLDEN_ABS_TOL):
        return [f"{where}: {golden!r} became {found!r}"]
    return []


def _printed_tokens(text: str) -> list[tuple[str, list[tuple[float, float]]]]:
    """A text's words (split on any whitespace, so where a line wraps does not count), each as its
    letters with every number masked, and the numbers, each with one unit in its last printed place
    (0 for a whole number: compared exactly)."""
    tokens = []
    for word in text.split():
        if _RULE.fullmatch(word):
            tokens.append(("\u2500", []))
            continue
        numbers = []
        for match in _NUMBER.finditer(word):
            decimals, exponent = len(match.group(1) or ""), int(match.group(2) or 0)
            # a whole number (a count) exactly; one with decimals within a unit of its last one
            numbers.append((float(match.group(0)), 10.0 ** (exponent - decimals) if decimals else 0.0))
        tokens.append((_NUMBER.sub("#", word), numbers))
    return tokens


def _text_differences(golden: str, found: str) -> list[str]:
    """Where the printed ``found`` differs from ``golden``: the same words in the same order, each
    number within one unit of its last printed digit (a value on a rounding edge printed the other
    way: 0.924 against 0.925), whitespace and line breaks free, a rule of any length."""
    g, f = _printed_tokens(golden), _printed_tokens(found)
    words_g, words_f = golden.split(), found.split()
    for i, ((gs, gn), (fs, fn)) in enumerate(zip(g, f)):
        # (a == b first: a hex digest such as 6e416 reads as a float that overflows to inf)
        same = gs == fs and len(gn) == len(fn) and all(u == v and (a == b or abs(a - b) <= u * (1 + 1e-9)) for (a, u), (b, v) in zip(gn, fn))
        if not same:
            return [f"word {i + 1}: {words_g[i]!r} became {words_f[i]!r} (after {' '.join(words_g[max(0, i - 6) : i])!r})"]
    if len(g) != len(f):
        return [f"{len(g)} words became {len(f)}: {' '.join((words_g if len(g) > len(f) else words_f)[min(len(g), len(f)) :][:8])!r} ..."]
    return []


def golden_differences(name: str, golden: str, found: str) -> list[str]:
    """How ``found`` differs from the golden text of file ``name`` (nothing when it matches): a
    ``.json`` file compares parsed, numbers at relative GOLDEN_REL_TOL; any other compares as
    printed text, by :func:`_text_differences`."""
    if name.endswith(".json"):
        return _json_differences(json.loads(golden), json.loads(found))
    return _text_differences(golden, found)


def assert_golden(found: dict[str, str], folder: Path) -> None:
    """Each text of ``found`` matches the file of its name in ``folder`` (with HARNESS_WRITE_GOLDEN=1
    the files are written from ``found`` first: what a change must not move).

    Tolerance, stated: a ``.json`` file is compared parsed, each number within a relative 1e-9
    (GOLDEN_REL_TOL; 1e-12 absolute near zero) of the golden one and of the same type, strings,
    keys and their order exactly; a table (any other file) word by word, whitespace and line breaks
    ignored, each printed number within one unit of its last printed digit. A float that differs in
    its 16th digit with another numpy, or a note that wraps at another width, is the same output;
    a changed digit the reader sees, word or field is not (tests/test_golden.py)."""
    if os.environ.get("HARNESS_WRITE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in found.items():
            (folder / name).write_text(text, encoding="utf-8")
    for name, text in found.items():
        differences = golden_differences(name, (folder / name).read_text(encoding="utf-8"), text)
        assert not differences, f"{folder.name}/{name}: " + "; ".join(differences[:5])
