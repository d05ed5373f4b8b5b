#!/usr/bin/env python
"""Many workers on one shared cache against one worker, at judge latency 50 ms (issue 15).

    python bench/workers.py                  # N = 2,000 judgments, C = 4 per worker, 3 repeats, medians (about 5 min)
    python bench/workers.py --concurrency 16 --repeats 1

Starts a PostgreSQL server (``tests/postgres_server.py``: initdb + pg_ctl on a temporary directory)
and the judge server (``python -m tests.judge_server --latency 0.05``) in its own process, then
times whole ``python -m harness run`` commands, launched together and timed until the last exits:

- 1 worker, PostgreSQL cache: the baseline;
- 4 workers ``--shard i/4``, one PostgreSQL cache;
- 4 workers on the same unsharded file, one PostgreSQL cache: the claims split the work;
- 1 worker and 4 sharded workers on one SQLite file.

Each worker has ``max_concurrency`` C (default 4: a per-process allowance, as a provider's per-key
limit would be; small enough that one worker is bound by the judge's latency, not by this shared
machine's CPU). CPU is the workers' user+sys (``RUSAGE_CHILDREN``), imports included; the judge server's
CPU comes from its ``/_stats``: it is one process serving every worker. Every run gets a fresh database or file, and is checked: exit code 0 for every worker,
and the judge server received exactly N requests (each judgment paid once). Prints medians and
the ratio of each to the baseline, and the ideal N·L/(workers·C) next to them.
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
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.postgres_server import PostgresServer

LATENCY_S = 0.05
RUBRICS = ["relevance", "faithfulness"]


def start_judge() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.judge_server", "--port", "0", "--latency", str(LATENCY_S)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def stats(url: str, reset: bool = False) -> dict[str, float]:
    base = url.rsplit("/v1", 1)[0]
    request = urllib.request.Request(f"{base}/_reset" if reset else f"{base}/_stats", method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def write_inputs(folder: Path, n_transcripts: int, judge_url: str, concurrency: int) -> tuple[Path, Path]:
    data = folder / "data.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        for i in range(n_transcripts):
            row = {
                "id": f"t{i}",
                "query": f"q{i} What does the factsheet say?",
                "response": f"r{i} The answer.",
                "contexts": [f"c{i} The factsheet."],
            }
            fh.write(json.dumps(row) + "\n")
    config = folder / "harness.toml"
    config.write_text(
        f'rubrics = {json.dumps(RUBRICS)}\n\n[[judges]]\nname = "j"\nmodel = "judge-model"\nbase_url = "{judge_url}"\n'
        f"max_concurrency = {concurrency}\ninput_price_per_1m = 0.15\noutput_price_per_1m = 0.6\n",
        encoding="utf-8",
    )
    return data, config


def run_workers(folder: Path, data: Path, config: Path, cache: str, workers: int, sharded: bool, tag: str) -> tuple[float, float]:
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    procs = []
    for i in range(1, workers + 1):
        args = [sys.executable, "-m", "harness", "run", str(data), "--config", str(config), "--cache", cache, "--no-progress"]
        args += ["--out", str(folder / f"{tag}-{i}")]
        if sharded and workers > 1:
            args += ["--shard", f"{i}/{workers}"]
        procs.append(subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate(timeout=600)[1] for p in procs]
    elapsed = time.perf_counter() - started
    bad = [(p.returncode, e) for p, e in zip(procs, errors) if p.returncode != 0]
    if bad:
        raise SystemExit(f"{tag}: a worker failed: {bad[0]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4, help="max_concurrency C of each worker")
    parser.add_argument("--judgments", type=int, default=2000, help="N (even: 2 rubrics per transcript)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.judgments
    postgres = PostgresServer().start()
    judge, judge_url = start_judge()
    folder = Path(tempfile.mkdtemp(prefix="harness-bench-workers-"))
    try:
        data, config = write_inputs(folder, n // len(RUBRICS), judge_url, args.concurrency)
        cases = [
            ("1 worker, PostgreSQL", "pg", 1, True),
            ("4 workers --shard i/4, PostgreSQL", "pg", 4, True),
            ("4 workers, same file, PostgreSQL (claims)", "pg", 4, False),
            ("1 worker, SQLite", "sqlite", 1, True),
            ("4 workers --shard i/4, SQLite", "sqlite", 4, True),
        ]
        times: dict[str, list[float]] = {name: [] for name, *_ in cases}
        cpus: dict[str, list[float]] = {name: [] for name, *_ in cases}
        judge_cpus: dict[str, list[float]] = {name: [] for name, *_ in cases}
        for repeat in range(args.repeats):
            for index, (name, store, workers, sharded) in enumerate(cases):
                cache = postgres.new_database() if store == "pg" else str(folder / f"c{repeat}-{index}.sqlite")
                judge_cpu = stats(judge_url, reset=True)["cpu_s"]
                elapsed, cpu = run_workers(folder, data, config, cache, workers, sharded, f"r{repeat}c{index}")
                after = stats(judge_url)
                got = after["requests"]
                judge_cpus[name].append(after["cpu_s"] - judge_cpu)
                if got != n:
                    raise SystemExit(f"{name}: the judge received {got} requests for {n} judgments")
                times[name].append(elapsed)
                cpus[name].append(cpu)
                print(f"  {name}: {elapsed:.2f} s, CPU {cpu:.1f} s, judge server CPU {after['cpu_s'] - judge_cpu:.1f} s", flush=True)
        base = statistics.median(times[cases[0][0]])
        load = os.getloadavg()[0]
        print(
            f"\nN = {n:,} judgments, judge latency {LATENCY_S * 1000:.0f} ms, C = {args.concurrency} per worker, medians of {args.repeats}, load {load:.1f}"
        )
        print(f"{'case':45} {'wall s':>8} {'judg./s':>9} {'vs 1 worker':>12} {'ideal s':>8} {'CPU s':>7} {'judge CPU s':>12}")
        for name, _store, workers, _ in cases:
            median = statistics.median(times[name])
            ideal = n * LATENCY_S / (workers * args.concurrency)
            cpu = statistics.median(cpus[name])
            print(
                f"{name:45} {median:8.2f} {n / median:9.0f} {base / median:11.2f}x {ideal:8.2f} {cpu:7.1f} {statistics.median(judge_cpus[name]):12.1f}"
            )
    finally:
        judge.terminate()
        judge.communicate(timeout=30)
        postgres.stop()


if __name__ == "__main__":
    main()
