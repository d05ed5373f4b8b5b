#!/usr/bin/env python
"""The whole ``harness run`` command, start-up included, against a local judge server.

    python bench/command.py                      # N = 2,000 judgments, L = 50 ms, C = 64, 5 repeats
    python bench/command.py -n 2000 --latency 0.05 --concurrency 64 --repeats 5

Unlike ``bench/throughput.py`` (which times ``run_evaluation`` inside one warm process), this times
what a user waits for: ``python -m harness run DATA --config CFG --out OUT --no-progress`` as a
subprocess, from exec to exit, so interpreter start, imports, reading the input, judging and
writing the outputs all count. The judge is ``tests.judge_server`` in its own process, answering
after ``--latency`` seconds. Each repeat uses a fresh cache and output directory, so every call
goes to the server; the run is checked (exit 0, N judgments scored, the server saw N requests).
It prints each run and the median's ratio to the ideal N·L/C (the issue's target: ≤ 1.25×), and
``harness --help`` alone (the cost every command pays before it starts).

Each repeat also runs the floor, interleaved: ``bench/raw_client.py``, a raw aiohttp script as a
whole process, sending the same request bodies (rendered beforehand from the same transcripts),
and the medians of both are printed side by side (issue 27: wall <= 1.1x, CPU <= 2x the script's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.throughput import RUBRICS, ServerProcess, compile_harness, request_bodies, write_config, write_transcripts


def timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, the child's CPU seconds (user + sys: much less moved by a loaded machine), result."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    return time.perf_counter() - started, _children_cpu() - cpu_before, done


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="judgments (transcripts × 4 rubrics)")
    parser.add_argument("--latency", type=float, default=0.05, help="judge latency, seconds")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ideal = args.n * args.latency / args.concurrency
    compile_harness()
    helps = [timed([sys.executable, "-m", "harness", "--help"])[:2] for _ in range(args.repeats)]
    print(
        f"harness --help: median {statistics.median(h[0] for h in helps):.3f} s wall, {statistics.median(h[1] for h in helps):.3f} s CPU over {len(helps)}"
    )
    walls: list[float] = []
    cpus: list[float] = []
    raw_walls: list[float] = []
    raw_cpus: list[float] = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        work = Path(tmp)
        data = write_transcripts(work / "data.jsonl", args.n // len(RUBRICS))
        with ServerProcess(args.latency, work) as server:
            config = write_config(work / "harness.toml", server.base_url, args.concurrency)
            bodies = work / "bodies.jsonl"
            bodies.write_text("".join(json.dumps(b) + "\n" for b in request_bodies(data, config)), encoding="utf-8")
            for repeat in range(args.repeats):
                server.reset()
                raw_argv = [sys.executable, str(ROOT / "bench" / "raw_client.py"), str(bodies), server.base_url, str(args.concurrency)]
                raw_wall, raw_cpu, raw = timed([*raw_argv, str(work / f"raw-{repeat}.jsonl")])
                if raw.returncode != 0 or server.stats()["requests"] != args.n:
                    raise SystemExit(f"raw script: exit {raw.returncode}, {server.stats()['requests']} requests: {raw.stderr[-1000:]}")
                raw_walls.append(raw_wall)
                raw_cpus.append(raw_cpu)
                server.reset()
                out = work / f"out-{repeat}"
                options = ("--config", config, "--out", out, "--cache", work / f"cache-{repeat}.sqlite", "--no-progress")
                argv = [sys.executable, "-m", "harness", "run", str(data), *map(str, options)]
                wall, cpu, done = timed(argv)
                if done.returncode != 0:
                    raise SystemExit(f"harness run exited {done.returncode}: {done.stderr[-2000:]}")
                summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
                requests = server.stats()["requests"]
                if summary["judgments"].get("scored") != args.n or requests != args.n:
                    raise SystemExit(f"expected {args.n} scored judgments and requests, got {summary['judgments']}, {requests}")
                walls.append(wall)
                cpus.append(cpu)
                print(
                    f"  run {repeat + 1}: {wall:.3f} s = {wall / ideal:.3f}x ideal (in-run wall_time_s {summary['wall_time_s']:.3f}), CPU {cpu:.3f} s; "
                    f"raw script {raw_wall:.3f} s, CPU {raw_cpu:.3f} s"
                )
    median = statistics.median(walls)
    print(
        f"harness run, N={args.n}, L={args.latency * 1000:g} ms, C={args.concurrency}: ideal {ideal:.3f} s, "
        f"median {median:.3f} s = {median / ideal:.3f}x ideal (target <= 1.25x), CPU median {statistics.median(cpus):.3f} s; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    raw_wall, raw_cpu, cpu = statistics.median(raw_walls), statistics.median(raw_cpus), statistics.median(cpus)
    print(
        f"raw aiohttp script (whole process, same requests): median {raw_wall:.3f} s = {raw_wall / ideal:.3f}x ideal, CPU median {raw_cpu:.3f} s "
        f"({raw_cpu / args.n * 1000:.3f} ms a judgment); harness/raw: wall {median / raw_wall:.3f}x (target <= 1.1x), "
        f"CPU {cpu / raw_cpu:.3f}x (target <= 2x; {cpu / args.n * 1000:.3f} ms a judgment)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
