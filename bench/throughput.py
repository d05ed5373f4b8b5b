#!/usr/bin/env python
"""Throughput benchmark of ``harness run`` against a local judge server (issue 8).

    python bench/throughput.py                 # every case, N as in issue 8, 3 repeats (medians)
    python bench/throughput.py --quick         # smaller N, 1 repeat (about a minute)
    python bench/throughput.py --case zero-latency --repeats 5
    python bench/throughput.py --case zero-latency --profile bench/profiles   # + a py-spy profile

Each live case starts its own judge server (``python -m tests.judge_server``) in a separate
process, so the harness's CPU is measured alone, and stops it at the end whatever happens. In one
invocation it times, on the same prompts:

- harness: the real run path, in-process: ``run_evaluation`` on a JSONL of N/4 distinct
  transcripts × 4 rubrics, one judge (provider default), a fresh cache file per run, outputs
  written; wall clock and this process's CPU (``time.process_time``: user+sys, all threads);
- sdk: a plain ``openai.AsyncOpenAI`` (max_retries=0) loop, ``asyncio.Semaphore(C)`` +
  ``asyncio.gather``, sending the very request bodies the harness renders;
- aiohttp: a raw aiohttp loop with the same bodies, the HTTP floor this server and machine allow;
- ideal: N·L/C.

The offline case builds a cache of N judgments directly (rendered and keyed by the harness's own
``make_entry``) and times the whole ``python -m harness run --offline`` command as a subprocess
(CPU from ``RUSAGE_CHILDREN``). Every run is checked: exit code 0, N judgments scored, and for
live runs the server saw exactly N requests. Every run has a time limit, and a case stops
repeating once ``--budget`` seconds are spent (at least one round always runs), so each case ends
by itself. The machine's load average is printed per case: on a shared machine wall times move
with the neighbours, CPU seconds much less.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import gc
import hashlib
import json
import os
import random
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``harness``, ``bench`` and ``tests`` importable
    sys.path.insert(0, str(ROOT))

import aiohttp

from bench.offline_replay import offline_run_argv, store_judgments
from harness.judges.protocol import request_body
from harness.planning import RunOptions, build_plan, make_entry
from harness.runner import run_evaluation
from harness.traces.loader import iter_transcripts

RUBRICS = ("relevance", "faithfulness", "hallucination", "contextual_relevance")
MODEL = "gpt-4o-mini"
IN_PRICE, OUT_PRICE = 0.15, 0.60
#: The offline case needs no server; its cache is keyed on this (never contacted) endpoint.
OFFLINE_URL = "http://127.0.0.1:9/v1"


@dataclass(frozen=True)
class Case:
    name: str
    number: int
    n: int  # judgments
    quick_n: int
    latency_s: float | None  # None: offline replay, no server
    concurrency: int
    target: str

    def ideal(self, n: int) -> float | None:
        return None if self.latency_s is None else n * self.latency_s / self.concurrency


CASES = (
    Case("latency", 1, 5_000, 1_000, 0.05, 64, "harness <= 1.25x ideal"),
    Case("zero-latency", 2, 5_000, 1_000, 0.0, 64, "harness judgments/s >= 3x SDK"),
    Case("slow-remote", 3, 5_000, 1_000, 0.2, 256, "harness <= 1.25x ideal, server sees 256 in flight"),
    Case("offline-replay", 4, 100_000, 20_000, None, 256, "whole `run --offline` command < 10 s"),
)


@dataclass
class Measure:
    wall_s: float
    cpu_s: float
    n: int
    server_cpu_s: float | None = None
    max_in_flight: int | None = None
    #: seconds from the start to the server's first request, and from its last answer to the end
    lead_s: float | None = None
    tail_s: float | None = None

    @property
    def per_s(self) -> float:
        return self.n / self.wall_s

    @property
    def cpu_per_1k(self) -> float:
        return self.cpu_s / self.n * 1000


@dataclass
class Result:
    case: Case
    n: int
    runs: dict[str, list[Measure]] = field(default_factory=dict)
    setup_s: float = 0.0

    def median(self, side: str, attr: str) -> float | None:
        values = [getattr(m, attr) for m in self.runs.get(side, []) if getattr(m, attr) is not None]
        return statistics.median(values) if values else None


class BenchError(RuntimeError):
    """A run that did not do what was asked (wrong count, bad exit code): the figures are void."""


# --- the judge server, in another process -----------------------------------------------------


class ServerProcess:
    """``python -m tests.judge_server`` in a child process; always stopped by ``__exit__``."""

    def __init__(self, latency_s: float, workdir: Path) -> None:
        self.latency_s = latency_s
        self.log = workdir / f"server-{latency_s:g}.log"
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.root = ""

    def command(self) -> list[str]:
        """The server's command line (a subclass may serve other replies)."""
        return [sys.executable, "-m", "tests.judge_server", "--port", "0", "--latency", str(self.latency_s)]

    def __enter__(self) -> Self:
        self._stderr = self.log.open("w")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        try:
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], 30)
            line = self.proc.stdout.readline().strip() if ready else ""
            if not line.startswith("http://"):
                raise BenchError(f"judge server did not start (see {self.log}): {line!r}")
            self.base_url = line
            self.root = line.removesuffix("/v1")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: the server stops serving and exits 0
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        self._stderr.close()

    def _call(self, path: str, method: str = "GET") -> dict[str, Any]:
        request = urllib.request.Request(self.root + path, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        return self._call("/_stats")

    def reset(self) -> dict[str, Any]:
        return self._call("/_reset", "POST")


# --- inputs -----------------------------------------------------------------------------------

_WORD_TEXT = (
    "fund nav growth equity index return risk ratio expense yield bond debt market cap sector "
    "allocation portfolio benchmark volatility sharpe alpha beta dividend payout scheme plan direct "
    "regular units price date previous change percent annual monthly quarterly tax exit load lock "
    "period manager inception assets liquidity credit rating duration maturity interest inflation "
    "currency rupee dollar gold silver commodity small mid large flexi hybrid arbitrage balanced "
    "advantage value momentum quality dynamic passive active tracking error holdings top weight"
)
_WORDS = tuple(_WORD_TEXT.split())


def _text(rng: random.Random, words: int, tag: str) -> str:
    return f"{tag} " + " ".join(rng.choice(_WORDS) for _ in range(words)) + "."


def write_transcripts(path: Path, count: int, seed: int = 0) -> Path:
    """``count`` distinct transcripts (query, response, 3 contexts): every rendered prompt differs."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(count):
            rng = random.Random(f"{seed}:{i}")
            record = {
                "id": f"t{seed}-{i:06d}",
                "query": _text(rng, 14, f"Q{i}:") + "?",
                "response": _text(rng, 45, f"A{i}:"),
                "contexts": [_text(rng, 60, f"C{i}.{k}:") for k in range(3)],
                "timings": {
                    "total_ms": rng.randint(500, 5000),
                    "llm_ms": rng.randint(100, 2000),
                    "tool_ms": rng.randint(0, 2000),
                    "api_ms": rng.randint(0, 300),
                },
                "tool_calls": rng.randint(0, 4),
            }
            fh.write(json.dumps(record) + "\n")
    return path


def write_config(path: Path, base_url: str, concurrency: int) -> Path:
    path.write_text(
        f"rubrics = {json.dumps(list(RUBRICS))}\n\n"
        "[[judges]]\n"
        'name = "bench"\n'
        f'model = "{MODEL}"\n'
        f'base_url = "{base_url}"\n'
        'api_key_env = ""\n'
        f"max_concurrency = {concurrency}\n"
        "max_attempts = 6\n"
        "timeout_s = 60\n"
        f"input_price_per_1m = {IN_PRICE}\n"
        f"output_price_per_1m = {OUT_PRICE}\n",
        encoding="utf-8",
    )
    return path


def planned_jobs(data: Path, config: Path) -> list[Any]:
    """Every job the harness plans for ``data``: same rendering and cache keys as ``run``."""
    plan = build_plan(RunOptions(input=data, config=config, rubrics=list(RUBRICS)), require_keys=False)
    assert plan.rubrics is not None
    return [job for _, record in iter_transcripts(data) for job in make_entry(record.resolved(), plan.rubrics, plan.judges).jobs]


def request_bodies(data: Path, config: Path) -> list[dict[str, Any]]:
    return [request_body(MODEL, job.request) for job in planned_jobs(data, config)]


def populate_cache(cache: Path, data: Path, config: Path) -> int:
    """Write one cached judgment per planned job straight into SQLite, as a live run would have."""
    rows = []
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for job in planned_jobs(data, config):
        rng = random.Random(job.key)
        score = round(rng.random(), 2)
        text = f"Score: {score:.2f}"  # what tests.judge_server answers
        pt, ct = rng.randint(150, 400), 2
        rows.append(
            (
                job.key,
                job.judge.model,
                job.judge.endpoint,
                job.rubric.name,
                job.rubric.version,
                text,
                pt,
                ct,
                round(rng.uniform(200, 900), 3),
                (pt * IN_PRICE + ct * OUT_PRICE) / 1e6,
                1,
                "scored",
                score,
                now,
            )
        )
    return store_judgments(cache, rows)


# --- the three contenders ---------------------------------------------------------------------


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float, tuple[float, float]]:
    gc.collect()
    wall0, cpu0, epoch0 = time.perf_counter(), time.process_time(), time.time()
    value = fn()
    return value, time.perf_counter() - wall0, time.process_time() - cpu0, (epoch0, time.time())


def _check_server(server: ServerProcess, n: int, side: str, before: dict[str, Any], m: Measure, span: tuple[float, float]) -> Measure:
    after = server.stats()
    if after["requests"] != n:
        raise BenchError(f"{side}: the server saw {after['requests']} requests, expected {n}")
    m.server_cpu_s = after["cpu_s"] - before["cpu_s"]
    m.max_in_flight = after["max_in_flight"]
    m.lead_s = after["first_request_at"] - span[0]
    m.tail_s = span[1] - after["last_answer_at"]
    return m


def run_harness(data: Path, config: Path, workdir: Path, tag: str, n: int, server: ServerProcess | None, timeout_s: float) -> Measure:
    """The real run path in-process: ``run_evaluation`` with a fresh cache, outputs written."""
    before = server.reset() if server else None
    options = RunOptions(
        input=data, out=workdir / f"out-{tag}", config=config, cache=workdir / f"fresh-{tag}.sqlite", rubrics=list(RUBRICS), progress=False
    )

    async def bounded() -> Any:
        async with asyncio.timeout(timeout_s):
            return await run_evaluation(options)

    outcome, wall, cpu, span = _timed(lambda: asyncio.run(bounded()))
    scored = outcome.summary.judgments.get("scored", 0)
    if outcome.exit_code != 0 or scored != n:
        raise BenchError(f"harness: exit code {outcome.exit_code}, {scored} of {n} judgments scored: {outcome.message}")
    m = Measure(wall, cpu, n)
    return _check_server(server, n, "harness", before, m, span) if server and before is not None else m


def run_sdk(url: str, bodies: Sequence[dict[str, Any]], concurrency: int, server: ServerProcess, timeout_s: float) -> Measure:
    """The plain openai SDK: a semaphore and gather, nothing else."""
    import openai  # here, not at the top: the SDK takes a second to import, and tests import this module

    before = server.reset()

    async def main() -> list[str | None]:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict[str, Any]) -> str | None:
            async with gate:
                completion = await client.chat.completions.create(**body)
                return completion.choices[0].message.content

        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.gather(*(one(b) for b in bodies))
        finally:
            await client.close()

    replies, wall, cpu, span = _timed(lambda: asyncio.run(main()))
    if sum(1 for r in replies if r) != len(bodies):
        raise BenchError("sdk: some replies were empty")
    return _check_server(server, len(bodies), "sdk", before, Measure(wall, cpu, len(bodies)), span)


def run_aiohttp(url: str, bodies: Sequence[dict[str, Any]], concurrency: int, server: ServerProcess, timeout_s: float) -> Measure:
    """A raw aiohttp loop (json.dumps, post, json.loads): the HTTP floor on this machine."""
    before = server.reset()

    async def main() -> list[str]:
        connector = aiohttp.TCPConnector(limit=concurrency)
        gate = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(connector=connector, headers={"Content-Type": "application/json"}) as session:

            async def one(body: dict[str, Any]) -> str:
                async with gate, session.post(f"{url}/chat/completions", data=json.dumps(body).encode()) as response:
                    raw = await response.read()
                    response.raise_for_status()
                return json.loads(raw)["choices"][0]["message"]["content"]

            async with asyncio.timeout(timeout_s):
                return await asyncio.gather(*(one(b) for b in bodies))

    replies, wall, cpu, span = _timed(lambda: asyncio.run(main()))
    if sum(1 for r in replies if r) != len(bodies):
        raise BenchError("aiohttp: some replies were empty")
    return _check_server(server, len(bodies), "aiohttp", before, Measure(wall, cpu, len(bodies)), span)


def run_offline_command(data: Path, config: Path, cache: Path, out: Path, n: int, timeout_s: float) -> Measure:
    """The whole ``python -m harness run --offline`` command; CPU is the child's user+sys."""
    cmd = offline_run_argv(data, config, cache, out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        hint = " (cache keys differ from the ones built: was harness/ edited meanwhile?)" if done.returncode == 3 else ""
        raise BenchError(f"offline run exited {done.returncode}{hint}: {done.stderr.strip()[-300:]}")
    summary = json.loads((out / "summary.json").read_text())
    scored, hits = summary["judgments"].get("scored", 0), summary["judges"]["bench"]["cache_hits"]
    if scored != n or hits != n:
        raise BenchError(f"offline run: {scored} scored, {hits} cache hits, expected {n}")
    return Measure(wall, cpu, n)


def run_startup() -> Measure:
    """Interpreter start and the harness's imports: the fixed cost in every command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "--help"], cwd=ROOT, capture_output=True, timeout=60, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Measure(wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1)


# --- profiling (optional; py-spy is a dev tool, not a dependency) ----------------------------

#: py-spy samples per second; low enough that the profiled run is not much slower.
PROFILE_RATE = 400


def _frame_name(frame: str) -> str:
    """``write_entry (harness/outputs/writer.py:127)`` -> ``harness/outputs/writer.py:write_entry``."""
    name, _, where = frame.rpartition(" (")
    if not name:
        return frame
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    if "/harness/" in path and not path.startswith("harness/"):
        path = "harness/" + path.split("/harness/", 1)[1]
    return f"{path}:{name}"


def summarise_profile(raw: Path, keep: Callable[[list[str]], bool] = lambda stack: True, top: int = 30) -> tuple[str, list[str], list[str]]:
    """From py-spy's collapsed stacks: a header, then the top self and inclusive shares of CPU
    samples per file:function (inclusive: only harness/ and aiosqlite functions)."""
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = dropped = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count, stack = int(count_text), stack_text.split(";")
        if not keep(stack):
            dropped += count
            continue
        total += count
        names = [_frame_name(f) for f in stack]
        self_counts[names[-1]] = self_counts.get(names[-1], 0) + count
        for name in set(names):
            incl_counts[name] = incl_counts.get(name, 0) + count
    header = f"{total} samples of the GIL holder at {PROFILE_RATE}/s ({dropped} samples outside the run left out)"
    total = total or 1
    own = [f"  {c / total:6.1%}  {n}" for n, c in sorted(self_counts.items(), key=lambda kv: -kv[1])[:top]]
    ours = [(n, c) for n, c in incl_counts.items() if n.startswith("harness/") or "aiosqlite" in n]
    under = [f"  {c / total:6.1%}  {n}" for n, c in sorted(ours, key=lambda kv: -kv[1])[:top]]
    return header, own, under


def profile_command(cmd: list[str], directory: Path, name: str, timeout_s: float, keep: Callable[[list[str]], bool] = lambda stack: True) -> None:
    """Run ``cmd`` under ``py-spy record`` (the thread holding the GIL) and summarise it."""
    if shutil.which("py-spy") is None:
        raise BenchError("--profile needs py-spy: pip install py-spy")
    directory.mkdir(parents=True, exist_ok=True)
    raw = directory / f"{name}.collapsed.txt"
    started = time.perf_counter()
    # --gil: sample only the thread holding the GIL, i.e. Python code actually running; threads
    # blocked on a queue (aiosqlite's) or the loop in epoll are not counted. SQLite's own C work
    # runs without the GIL and is left out.
    done = subprocess.run(
        ["py-spy", "record", "--gil", "--rate", str(PROFILE_RATE), "--format", "raw", "--output", str(raw), "--", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"profiled run failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    header, own, under = summarise_profile(raw, keep)
    head = [f"{name}: profiled wall {wall:.2f} s; {header}"]
    self_title = ["self (where the CPU is spent), file:function"]
    under_title = ["inclusive (CPU spent under each), harness/ and aiosqlite functions"]
    lines = [*head, "", *self_title, *own, "", *under_title, *under]
    (directory / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _say("\n".join(["", *head, *self_title, *own[:15], *under_title, *under[:15]]))
    _say(f"    (all of it in {directory}/{name}.txt; {raw.name} opens in speedscope or flamegraph.pl)")


def _in_run(stack: list[str]) -> bool:
    # The run itself, not the child's imports: the event loop under harness_child (every task of
    # the run), or a worker thread (aiosqlite's, asyncio.to_thread's).
    return any(f.startswith("harness_child ") for f in stack) or stack[0].startswith("Thread._bootstrap ")


def _in_command(stack: list[str]) -> bool:
    # ``harness run`` itself (under cli.run), not the interpreter start and imports before it.
    return any(f.startswith("run (") and "harness/cli/run.py" in f for f in stack) or stack[0].startswith("Thread._bootstrap ")


def harness_child(spec: str) -> int:
    """``--harness-child JSON``: one in-process run, as ``run_harness`` does it (for the profiler)."""
    args = json.loads(spec)
    options = RunOptions(
        input=Path(args["input"]),
        out=Path(args["out"]),
        config=Path(args["config"]),
        cache=Path(args["cache"]),
        rubrics=list(RUBRICS),
        progress=False,
        offline=args.get("offline", False),
    )
    outcome = asyncio.run(run_evaluation(options))
    return outcome.exit_code


# --- cases ------------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(text, flush=True)


def _line(side: str, m: Measure, ideal: float | None) -> str:
    x = f" ({m.wall_s / ideal:4.2f}x ideal)" if ideal else ""
    extra = ""
    if m.server_cpu_s is not None:
        extra = (
            f", server CPU {m.server_cpu_s:5.2f} s, max in flight {m.max_in_flight}, "
            f"first request after {m.lead_s:.2f} s, {m.tail_s:.2f} s after the last answer"
        )
    return f"    {side:8} {m.wall_s:7.2f} s{x} {m.per_s:8.0f}/s  CPU {m.cpu_s:6.2f} s = {m.cpu_per_1k:5.3f} s/1k{extra}"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min)"


def live_case(case: Case, n: int, repeats: int, sides_wanted: Sequence[str], budget_s: float, workdir: Path, profile_dir: Path | None) -> Result:
    result = Result(case, n)
    ideal = case.ideal(n)
    assert case.latency_s is not None and ideal is not None
    timeout_s = max(120.0, 25 * ideal)
    data = write_transcripts(workdir / f"{case.name}.jsonl", n // len(RUBRICS))
    warm_data = write_transcripts(workdir / f"{case.name}-warm.jsonl", 16, seed=1)
    with ServerProcess(case.latency_s, workdir) as server:
        config = write_config(workdir / f"{case.name}.toml", server.base_url, case.concurrency)
        started = time.perf_counter()
        bodies = request_bodies(data, config)
        assert len(bodies) == n, (len(bodies), n)
        # Warm-up (untimed): imports, first connections, the server's own first requests.
        run_harness(warm_data, config, workdir, f"{case.name}-warm", 64, server, 60)
        run_sdk(server.base_url, request_bodies(warm_data, config), case.concurrency, server, 60)
        result.setup_s = time.perf_counter() - started
        runners: dict[str, Callable[[int], Measure]] = {
            "harness": lambda r: run_harness(data, config, workdir, f"{case.name}-{r}", n, server, timeout_s),
            "sdk": lambda r: run_sdk(server.base_url, bodies, case.concurrency, server, timeout_s),
            "aiohttp": lambda r: run_aiohttp(server.base_url, bodies, case.concurrency, server, timeout_s),
        }
        rounds = _rounds(repeats, budget_s)
        for r in rounds:  # interleaved, so machine noise spreads over every side
            for side in sides_wanted:
                m = runners[side](r)
                result.runs.setdefault(side, []).append(m)
                _say(_line(side, m, ideal))
        _say(f"    {_load()}")
        if profile_dir is not None:
            spec = {
                "input": str(data),
                "config": str(config),
                "out": str(workdir / f"out-{case.name}-profile"),
                "cache": str(workdir / f"fresh-{case.name}-profile.sqlite"),
            }
            server.reset()
            profile_command(
                [sys.executable, str(Path(__file__).resolve()), "--harness-child", json.dumps(spec)],
                profile_dir,
                case.name,
                timeout_s * 3,
                keep=_in_run,
            )
    return result


def _rounds(repeats: int, budget_s: float) -> Any:
    """0, 1, ... repeats-1, stopping early once a further round would overrun the budget."""
    started = time.perf_counter()
    for r in range(repeats):
        spent = time.perf_counter() - started
        if r and spent / r * (r + 1) > budget_s:
            _say(f"    (stopped after {r} of {repeats} repeats: --budget {budget_s:g} s)")
            return
        yield r


def offline_case(case: Case, n: int, repeats: int, budget_s: float, workdir: Path, profile_dir: Path | None) -> Result:
    result = Result(case, n)
    data = write_transcripts(workdir / f"{case.name}.jsonl", n // len(RUBRICS))
    config = write_config(workdir / f"{case.name}.toml", OFFLINE_URL, case.concurrency)
    cache = workdir / f"{case.name}.sqlite"
    started = time.perf_counter()
    rows = populate_cache(cache, data, config)
    assert rows == n, (rows, n)
    result.setup_s = time.perf_counter() - started
    _say(f"    cache of {rows} judgments built in {result.setup_s:.1f} s")
    startup = run_startup()
    _say(f"    of each command below, start-up alone (`python -m harness --help`): {startup.wall_s:.2f} s wall, {startup.cpu_s:.2f} s CPU")
    for r in _rounds(repeats, budget_s):
        m = run_offline_command(data, config, cache, workdir / f"out-{case.name}-{r}", n, timeout_s=180)
        result.runs.setdefault("harness", []).append(m)
        _say(_line("harness", m, None))
    _say(f"    {_load()}")
    if profile_dir is not None:  # the very command timed above; start-up is measured apart
        cmd = offline_run_argv(data, config, cache, workdir / f"out-{case.name}-profile")
        profile_command(cmd, profile_dir, case.name, 600, keep=_in_command)
    return result


# --- report -----------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def verdict(res: Result) -> str:
    case, ideal = res.case, res.case.ideal(res.n)
    wall = res.median("harness", "wall_s")
    if wall is None:
        return "-"
    if case.number in (1, 3):
        ok = ideal is not None and wall <= 1.25 * ideal
        if case.number == 3:
            ok = ok and (res.median("harness", "max_in_flight") or 0) >= case.concurrency
        return "PASS" if ok else "MISS"
    if case.number == 2:
        sdk = res.median("sdk", "per_s")
        return "-" if sdk is None else ("PASS" if (res.median("harness", "per_s") or 0) >= 3 * sdk else "MISS")
    return "PASS" if wall < 10 else "MISS"


def _wall_cell(res: Result, side: str, ideal: float | None) -> str:
    w = res.median(side, "wall_s")
    if w is None:
        return "-"
    return f"{w:.2f} ({w / ideal:.2f}x)" if ideal else f"{w:.2f}"


def table(results: list[Result], floor: bool) -> str:
    head = ["case", "N", "L ms", "C", "ideal s", "harness s (x)", "SDK s (x)"]
    if floor:
        head.append("aiohttp s (x)")
    head += ["harness/s", "h/SDK thrpt", "CPU s/1k h", "CPU s/1k SDK", "srv CPU s/1k h", "max in flight", "target"]
    rows = [head]
    for res in results:
        case, ideal = res.case, res.case.ideal(res.n)
        h_rate, s_rate = res.median("harness", "per_s"), res.median("sdk", "per_s")
        srv = res.median("harness", "server_cpu_s")
        row = [
            f"{case.number} {case.name}",
            f"{res.n:,}",
            "-" if case.latency_s is None else f"{case.latency_s * 1000:g}",
            str(case.concurrency) if case.latency_s is not None else "-",
            _fmt(ideal, ".2f"),
            _wall_cell(res, "harness", ideal),
            _wall_cell(res, "sdk", ideal),
        ]
        if floor:
            row.append(_wall_cell(res, "aiohttp", ideal))
        row += [
            _fmt(h_rate, ",.0f"),
            _fmt(h_rate / s_rate if h_rate and s_rate else None, ".2f"),
            _fmt(res.median("harness", "cpu_per_1k"), ".3f"),
            _fmt(res.median("sdk", "cpu_per_1k"), ".3f"),
            _fmt(srv / res.n * 1000 if srv is not None else None, ".3f"),
            _fmt(res.median("harness", "max_in_flight"), ".0f"),
            verdict(res),
        ]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def harness_version() -> tuple[str, str]:
    """(git HEAD plus "+dirty" when harness/ or prompts/ differ from it, a hash of their files):
    others may edit the harness while a benchmark runs, and figures must say what they measured."""
    digest = hashlib.sha256()
    for path in sorted([*ROOT.glob("harness/**/*.py"), *ROOT.glob("prompts/**/*.md")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "harness", "prompts"], capture_output=True, text=True, check=False).stdout.strip()
    return f"{head or 'unknown'}{'+dirty' if dirty else ''}", digest.hexdigest()[:12]


def compile_harness() -> None:
    """Write the bytecode of harness/ (and the test servers) as an install would: with
    PYTHONDONTWRITEBYTECODE set, or after an edit, each timed command would otherwise compile the
    modules changed since their .pyc, a cost no installed copy pays."""
    for path in (ROOT / "harness", ROOT / "tests" / "judge_server.py", ROOT / "tests" / "batch_server.py"):
        ok = compileall.compile_dir(path, quiet=1) if path.is_dir() else compileall.compile_file(path, quiet=1)
        if not ok:
            raise BenchError(f"could not compile {path}")


def _interrupt(signum: int, frame: object) -> None:
    # SIGTERM as Ctrl-C: inside asyncio.run its SIGINT handler cancels the run cleanly first.
    signal.raise_signal(signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Throughput of `harness run` against a local judge server (issue 8).")
    parser.add_argument("--quick", action="store_true", help="smaller N (1,000 live, 20,000 offline) and 1 repeat")
    parser.add_argument(
        "--case", action="append", choices=[c.name for c in CASES] + [str(c.number) for c in CASES], help="run only this case (repeatable)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per side (default 3; 1 with --quick); medians are quoted")
    parser.add_argument("-n", type=int, default=None, help="override N (judgments; a multiple of 4)")
    parser.add_argument("--sides", default="harness,sdk,aiohttp", help="comma-separated contenders to time (default harness,sdk,aiohttp)")
    parser.add_argument(
        "--budget",
        type=float,
        default=150.0,
        metavar="S",
        help="stop repeating a case once a further round would take it past S seconds (default 150)",
    )
    parser.add_argument(
        "--profile", type=Path, default=None, metavar="DIR", help="after timing, profile one more harness run per case with py-spy into DIR"
    )
    parser.add_argument("--harness-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write every measurement as JSON")
    args = parser.parse_args(argv)
    if args.harness_child:
        return harness_child(args.harness_child)
    repeats = args.repeats or (1 if args.quick else 3)
    compile_harness()
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not sides or set(sides) - {"harness", "sdk", "aiohttp"}:
        parser.error("--sides takes a comma-separated subset of harness, sdk, aiohttp")
    chosen = [c for c in CASES if not args.case or c.name in args.case or str(c.number) in args.case]

    # SIGTERM behaves like Ctrl-C: unwind through every finally, so the server is always stopped.
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`cmd &`)
    signal.signal(signal.SIGTERM, _interrupt)
    import openai  # for its version; imported where used (see run_sdk)

    results: list[Result] = []
    version, fingerprint = harness_version()
    _say(
        f"harness throughput benchmark: harness at {version} (files {fingerprint}), {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, openai {openai.__version__}, aiohttp {aiohttp.__version__}, repeats {repeats}"
    )
    status = 0
    try:
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
            workdir = Path(tmp)
            for case in chosen:
                n = args.n or (case.quick_n if args.quick else case.n)
                n -= n % len(RUBRICS)
                ideal = case.ideal(n)
                _say(
                    f"\n[{case.number}] {case.name}: N={n:,}"
                    + ("" if case.latency_s is None else f", L={case.latency_s * 1000:g} ms, C={case.concurrency}, ideal {ideal:.2f} s")
                    + f" — target: {case.target}"
                )
                if case.latency_s is None:
                    res = offline_case(case, n, repeats, args.budget, workdir, args.profile)
                else:
                    res = live_case(case, n, repeats, sides, args.budget, workdir, args.profile)
                results.append(res)
    except KeyboardInterrupt:
        _say("\ninterrupted: the judge server was stopped")
        status = 130
    except BenchError as exc:
        _say(f"\nerror: {exc}")
        status = 1
    now = harness_version()
    if now[1] != fingerprint:
        _say(
            f"\nWARNING: harness/ or prompts/ changed during this benchmark ({version} {fingerprint} -> {now[0]} {now[1]}): "
            "the figures mix versions; run it again"
        )
        status = status or 1
    if not results:
        return status
    _say(
        "\nmedians over repeats; x = multiple of the ideal N·L/C; CPU = user+sys of the client process "
        "(the server runs in its own process; 'srv CPU' is its share)"
    )
    _say(table(results, "aiohttp" in sides))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "harness": version,
                    "files": fingerprint,
                    "cases": [
                        {
                            "case": r.case.name,
                            "n": r.n,
                            "latency_s": r.case.latency_s,
                            "concurrency": r.case.concurrency,
                            "ideal_s": r.case.ideal(r.n),
                            "verdict": verdict(r),
                            "runs": {side: [vars(m) for m in ms] for side, ms in r.runs.items()},
                        }
                        for r in results
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
