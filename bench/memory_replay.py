#!/usr/bin/env python
"""Peak memory of an offline replay of 1,000,000 transcripts × 1 rubric (issue 7, point 8).

    python bench/memory_replay.py                     # N = 1,000,000 (a few minutes), target < 500 MB
    python bench/memory_replay.py -n 200000           # smaller
    python bench/memory_replay.py --workdir /tmp/mem  # keep (and on a rerun reuse) data and cache

It writes N distinct transcripts (id, query, response) as JSONL, fills a cache for the
``relevance`` rubric directly (every job planned with the harness's own ``make_entry``, so the
rendering and cache keys are exactly ``run``'s, and written to SQLite as a live run would have
stored it), then runs the whole command

    python -m harness run DATA --config CONFIG --cache CACHE --offline --rubric relevance --out OUT --no-progress

as a child process and reports its peak resident set (``ru_maxrss`` of that child, from
``os.wait4``) and wall time, with the RSS sampled from /proc every 0.25 s so a figure that grows
with N shows as a slope rather than a plateau. The run is checked: exit code 0, N judgments
scored, N cache hits, N lines in judgments.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``harness`` and ``bench`` importable
    sys.path.insert(0, str(ROOT))

from bench.offline_replay import offline_run_argv, store_judgments
from harness.planning import RunOptions, build_plan, make_entry
from harness.traces.loader import iter_transcripts

TARGET_MB = 500
RUBRIC = "relevance"
#: Never contacted: --offline constructs no judge. The cache is keyed on it.
OFFLINE_URL = "http://127.0.0.1:9/v1"


def write_transcripts(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "id": f"conv-{i:07d}",
                        "query": f"What is the expense ratio of fund {i}, and has it changed this year?",
                        "response": f"Fund {i} charges 0.{i % 90 + 10}% a year; it was lowered in March.",
                        "timings": {"total_ms": 900 + i % 700, "llm_ms": 400 + i % 300, "tool_ms": 300, "api_ms": 120},
                        "tool_calls": i % 4,
                    }
                )
                + "\n"
            )


def write_config(path: Path) -> None:
    path.write_text(
        "[[judges]]\n"
        'name = "bench"\n'
        'model = "gpt-4o-mini"\n'
        f'base_url = "{OFFLINE_URL}"\n'
        'api_key_env = ""\n'
        "input_price_per_1m = 0.15\n"
        "output_price_per_1m = 0.60\n",
        encoding="utf-8",
    )


def cache_rows(data: Path, config: Path) -> Iterator[tuple[object, ...]]:
    """One stored judgment per planned job, as a live run against tests.judge_server stores it."""
    plan = build_plan(RunOptions(input=data, config=config, rubrics=[RUBRIC]), require_keys=False)
    assert plan.rubrics is not None
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for i, (_, record) in enumerate(iter_transcripts(data)):
        for job in make_entry(record.resolved(), plan.rubrics, plan.judges).jobs:
            score = (i * 37 % 101) / 100
            yield (
                job.key,
                job.judge.model,
                job.judge.endpoint,
                job.rubric.name,
                job.rubric.version,
                f'{{"score": {score}}}',
                180 + i % 50,
                6,
                350.0,
                (180 * 0.15 + 6 * 0.6) / 1e6,
                1,
                "scored",
                score,
                now,
            )


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def replay(data: Path, config: Path, cache: Path, out: Path, log: Path) -> tuple[int, float, float, list[tuple[float, float]]]:
    """Run the command; (exit code, wall s, peak RSS MB, [(t, RSS MB)] samples)."""
    argv = offline_run_argv(data, config, cache, out, RUBRIC)
    samples: list[tuple[float, float]] = []
    started = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.25):
                if (mb := rss_mb(proc.pid)) is not None:
                    samples.append((time.perf_counter() - started, mb))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, nobody else's
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, wall, usage.ru_maxrss / 1024, samples  # ru_maxrss is in KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="transcripts (default 1,000,000)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep data and cache here (reused when N matches)")
    args = parser.parse_args()
    n = args.n

    with tempfile.TemporaryDirectory(prefix="harness-memory-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, config, cache = work / f"transcripts-{n}.jsonl", work / "harness.toml", work / f"cache-{n}.sqlite"
        write_config(config)
        if not data.exists() or not cache.exists():
            cache.unlink(missing_ok=True)
            t = time.perf_counter()
            write_transcripts(data, n)
            print(f"wrote {n:,} transcripts ({data.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s", flush=True)
            t = time.perf_counter()
            rows = store_judgments(cache, cache_rows(data, config))
            print(f"cached {rows:,} judgments ({cache.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s", flush=True)
        out = work / "out"
        code, wall, peak, samples = replay(data, config, cache, out, work / "stderr.txt")
        if code != 0:
            print(f"the replay exited {code}: {(work / 'stderr.txt').read_text()[-2000:]}", file=sys.stderr)
            return 1
        summary = json.loads((out / "summary.json").read_text())
        scored, hits = summary["judgments"].get("scored", 0), summary["judges"]["bench"]["cache_hits"]
        with (out / "judgments.jsonl").open("rb") as fh:
            lines = sum(1 for _ in fh)
        if not scored == hits == lines == n:
            print(f"expected {n} judgments: {scored} scored, {hits} cache hits, {lines} lines", file=sys.stderr)
            return 1

        curve = "  ".join(f"{t:.0f}s:{mb:.0f}" for t, mb in samples[:: max(1, len(samples) // 12)])
        print(f"RSS MB over time: {curve}")
        verdict = "PASS" if peak < TARGET_MB else "FAIL"
        print(
            f"offline replay of {n:,} transcripts x 1 rubric: peak RSS {peak:.0f} MB (target < {TARGET_MB} MB) {verdict}, "
            f"wall {wall:.1f} s, {n / wall:,.0f} judgments/s"
        )
        return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
