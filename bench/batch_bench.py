"""100,000 judgments through ``harness batch``: submit to the local batch server, collect, replay.

    python bench/batch_bench.py                # 50,000 transcripts × 2 rubrics = 100,000 judgments
    python bench/batch_bench.py --transcripts 5000 --repeats 1

Each step is the real command run as a subprocess (``python -m harness ...``), timed on the wall
clock, with its CPU time and peak RSS read from ``os.wait4``. Between submit and collect the bench
waits (polling, untimed) until the server has ended the batches: a collect is timed from there. The server is ``python -m tests.batch_server``
in another process (OpenAI Files + Batches; batches finish at their second poll). The baseline,
measured in the same run on the same cache, is ``harness run --offline`` of the same plan: the
floor every step shares (plan, render, key, parse, write). Collect and replay are timed
``--repeats`` times, alternating (the cache file is put back as submit left it before each
collect, so each downloads and stores all 100,000 again), and their medians compared. ``export`` is timed too (the same
requests written as JSONL for vLLM ``run_batch``), on a second cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's harness (for waiting on the batches)
KEY = "sk-bench"


def write_inputs(work: Path, n: int, base_url: str) -> tuple[Path, Path]:
    data = work / "data.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        for i in range(n):
            record = {"id": f"t{i:07d}", "query": f"What is item {i}?", "response": f"Item {i} is a thing.", "contexts": [f"Item {i} is a thing."]}
            fh.write(json.dumps(record) + "\n")
    config = work / "harness.toml"
    config.write_text(
        f'cache = "{work / "cache.sqlite"}"\nrubrics = ["relevance", "faithfulness"]\n\n[[judges]]\nname = "mini"\nmodel = "gpt-4o-mini"\n'
        f'base_url = "{base_url}"\napi_key_env = "BENCH_KEY"\n',
        encoding="utf-8",
    )
    return data, config


def timed(args: list[str]) -> tuple[float, float, float, str]:
    """(seconds, CPU seconds, peak RSS in MB, stderr tail) of one harness command."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", *args], cwd=ROOT, env={**os.environ, "BENCH_KEY": KEY}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    seconds = time.perf_counter() - started
    if proc.returncode not in (0,):
        raise SystemExit(f"harness {' '.join(args)} exited {proc.returncode}:\n{err[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err.strip().splitlines()[-1] if err.strip() else ""


def median_of(runs: list[tuple[float, float, float, str]]) -> tuple[float, float, float, str]:
    """Median seconds, median CPU, largest peak RSS of repeated runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), max(r[2] for r in runs), runs[-1][3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transcripts", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5, help="collects and replays timed, alternating (medians)")
    args = parser.parse_args()
    from bench.throughput import compile_harness
    from harness.batch import wait as wait_for

    compile_harness()

    server = subprocess.Popen([sys.executable, "-m", "tests.batch_server", "--key", KEY], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            data, config = write_inputs(work, args.transcripts, base_url)
            n = 2 * args.transcripts
            common = [str(data), "--config", str(config)]
            rows: list[tuple[str, float, float, float, str]] = []
            rows.append(("batch submit", *timed(["batch", "submit", *common])))
            # The provider's time is not the collect's: wait (in this process) until the batches end.
            started = time.perf_counter()
            os.environ["BENCH_KEY"] = KEY
            views = asyncio.run(wait_for(work / "cache.sqlite", first_s=0.2, timeout_s=600))
            waited = time.perf_counter() - started
            if not all(v.record.ended for v in views):
                raise SystemExit(f"FAILED: the batches did not end: {[(v.record.status, v.note) for v in views]}")
            cache = work / "cache.sqlite"
            submitted = work / "submitted.sqlite"
            shutil.copyfile(cache, submitted)
            collects: list[tuple[float, float, float, str]] = []
            replays: list[tuple[float, float, float, str]] = []
            for _ in range(args.repeats):
                for suffix in ("-wal", "-shm"):
                    Path(f"{cache}{suffix}").unlink(missing_ok=True)
                shutil.copyfile(submitted, cache)
                collects.append(timed(["batch", "collect", *common, "--out", str(work / "out")]))
                replays.append(timed(["run", *common, "--offline", "--no-progress", "--out", str(work / "replay")]))
            rows.append(("batch collect (download + cache + outputs)", *median_of(collects)))
            rows.append(("run --offline (baseline: replay of the collected cache)", *median_of(replays)))
            with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats") as answer:
                stats = json.load(answer)
            export_cache = work / "export.sqlite"
            rows.append(
                (
                    "batch export (for vLLM run_batch)",
                    *timed(["batch", "export", *common, "--cache", str(export_cache), "--to", str(work / "requests.jsonl")]),
                )
            )
            replayed = sum(1 for _ in (work / "replay" / "judgments.jsonl").open())
            collected = [json.loads(line) for line in (work / "out" / "judgments.jsonl").open()]
            scored = sum(1 for j in collected if j["status"] == "scored")
            baseline, baseline_cpu = rows[2][1], rows[2][2]
            print(
                f"{n:,} judgments ({args.transcripts:,} transcripts × 2 rubrics); server made {stats['created']} batch(es), {stats['requests_received']:,} requests"
            )
            print(f"collected: {scored:,} scored of {len(collected):,}; replayed {replayed:,} rows; {waited:.1f} s waited for the batches to end")
            print(f"collect and replay: medians of {args.repeats}; load average {os.getloadavg()[0]:.2f} (1 min) at the end")
            print(f"{'step':58} {'seconds':>8} {'× replay':>9} {'CPU s':>7} {'× replay':>9} {'judgments/s':>12} {'peak RSS MB':>12}")
            for name, seconds, cpu, rss, _tail in rows:
                print(f"{name:58} {seconds:8.2f} {seconds / baseline:9.2f} {cpu:7.2f} {cpu / baseline_cpu:9.2f} {n / seconds:12,.0f} {rss:12.0f}")
            if stats["requests_received"] != n or scored != n:
                raise SystemExit("FAILED: every judgment should have been sent once and scored")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
