#!/usr/bin/env python
"""Where the CPU of one judgment goes: the whole ``harness run`` command under py-spy, by stage.

    python bench/profile_judgment.py                     # N = 2,000, L = 50 ms, C = 64
    python bench/profile_judgment.py -n 20000 --out bench/profiles

The judge is ``tests.judge_server`` in its own process (so its CPU is not counted); the command is
``python -m harness run`` from exec to exit, sampled by ``py-spy record --gil`` (the thread
holding the GIL: Python code actually running, in any thread; time in epoll and SQLite's own C work
without the GIL is not counted). Each sample goes to the stage of the innermost frame that names
one (``STAGES``, first match from the leaf up), so ``json.dumps`` called by the HTTP judge is
"JSON encode", not "aiohttp". It prints the stages with their shares and the process's CPU per
judgment, and writes the raw stacks (speedscope, flamegraph.pl) to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.throughput import RUBRICS, ServerProcess, write_config, write_transcripts

#: (stage, path fragments): a frame whose file holds one of the fragments belongs to the stage.
#: Checked from the innermost frame outwards, stages in this order for each frame.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("JSON encode/decode (stdlib json, orjson)", ("json/encoder.py", "json/decoder.py", "json/__init__.py", "harness/jsonlines.py")),
    ("retries (tenacity / retry.py)", ("tenacity/", "harness/judges/retry.py")),
    ("cache: SQLite writer and reads", ("aiosqlite/", "sqlite3/", "harness/cache/")),
    ("output rows and summary", ("harness/outputs/", "harness/metrics/")),
    ("reply reading and verdict", ("harness/judges/protocol.py", "harness/usage.py", "harness/runner/verdict.py", "harness/rubrics/")),
    ("HTTP judge (http.py, base.py)", ("harness/judges/",)),
    ("aiohttp request path (client, connector, parser, yarl, multidict)", ("aiohttp/", "yarl/", "multidict/", "aiohappyeyeballs/")),
    ("engine and calls (queues, workers, rate limiter)", ("harness/runner/",)),
    ("reading input, rendering, keys (planning, transcripts)", ("harness/planning/", "harness/transcripts/", "harness/cost/")),
    ("event loop (asyncio)", ("asyncio/", "uvloop/")),
    ("start-up: imports and configuration", ("<frozen importlib", "harness/cli/", "harness/config.py", "tomllib/")),
)


def _path(frame: str) -> str:
    return frame.rpartition(" (")[2].rstrip(")")


def stage_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        where = _path(frame)
        for stage, fragments in STAGES:
            if any(fragment in where for fragment in fragments):
                return stage
    return "other (interpreter, stdlib)"


def summarise(raw: Path) -> tuple[int, dict[str, int], dict[str, int]]:
    """Total samples, samples per stage, and self samples per file:function (top ones)."""
    stages: dict[str, int] = {}
    leaves: dict[str, int] = {}
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count, stack = int(count_text), stack_text.split(";")
        total += count
        stage = stage_of(stack)
        stages[stage] = stages.get(stage, 0) + count
        leaf = stack[-1]
        name, _, where = leaf.rpartition(" (")
        short = where.rstrip(")").rsplit(":", 1)[0].split("site-packages/")[-1].split("python3.11/")[-1]
        leaves[f"{short}:{name}"] = leaves.get(f"{short}:{name}", 0) + count
    return total, stages, leaves


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="judgments (transcripts x 4 rubrics)")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=None, help="keep the raw stacks here")
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        raise SystemExit("needs py-spy: pip install py-spy")
    with tempfile.TemporaryDirectory(prefix="harness-profile-") as tmp:
        work = Path(tmp)
        data = write_transcripts(work / "data.jsonl", args.n // len(RUBRICS))
        raw = (args.out or work) / "judgment.collapsed.txt"
        raw.parent.mkdir(parents=True, exist_ok=True)
        with ServerProcess(args.latency, work) as server:
            config = write_config(work / "harness.toml", server.base_url, args.concurrency)
            run = [sys.executable, "-m", "harness", "run", str(data), "--config", str(config), "--out", str(work / "out")]
            run += ["--cache", str(work / "cache.sqlite"), "--no-progress"]
            # The same command unprofiled first, for its CPU (py-spy's sampling adds its own).
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(run, cwd=ROOT, check=True, capture_output=True, timeout=600)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            server.reset()
            shutil.rmtree(work / "out")
            (work / "cache.sqlite").unlink()
            spy = ["py-spy", "record", "--gil", "--rate", str(args.rate), "--format", "raw", "--output", str(raw), "--", *run]
            subprocess.run(spy, cwd=ROOT, check=True, capture_output=True, timeout=600)
            if server.stats()["requests"] != args.n:
                raise SystemExit(f"the profiled run sent {server.stats()['requests']} requests, expected {args.n}")
        total, stages, leaves = summarise(raw)
    print(
        f"harness run, N={args.n}, L={args.latency * 1000:g} ms, C={args.concurrency}: {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"= {cpu / args.n * 1000:.3f} ms per judgment (start-up included); load average {os.getloadavg()[0]:.2f}"
    )
    print(f"\n{total} py-spy samples of the GIL holder at {args.rate}/s, by stage:")
    for stage, count in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  {count / total:6.1%}  {stage}")
    print("\ntop functions (self):")
    for name, count in sorted(leaves.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {count / total:6.1%}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
