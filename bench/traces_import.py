"""`harness import` speed and memory on a large OTLP JSON trace file (issue 16).

    python bench/traces_import.py                 # 20,000 traces (~130 MB), 3 repeats, medians
    python bench/traces_import.py --traces 2000 --repeats 1

The file is the committed OTel GenAI fixture (tests/fixtures/traces/otel_genai.jsonl, written by
the real instrumented openai client) repeated with fresh trace and span ids, so every trace is a
real one. Baseline, measured in the same run on the same machine: reading the same file with
plain ``json.loads`` per line and doing nothing else (the floor of any OTLP JSON reader in
Python). Also reported: the harness's own JSONL reader on the imported file (what ``harness run``
costs once the traces are converted), and peak RSS growth of the import.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.traces.importer import import_traces
from harness.traces.loader import scan

FIXTURE = ROOT / "tests" / "fixtures" / "traces" / "otel_genai.jsonl"


def build(path: Path, traces: int) -> int:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    ids = list(dict.fromkeys(s["traceId"] for line in lines for s in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]))
    copies = max(1, traces // len(ids))
    with path.open("w", encoding="utf-8") as fh:
        for copy in range(copies):
            for line in lines:
                text = line
                for index, trace_id in enumerate(ids):
                    text = text.replace(trace_id, f"{copy:08x}{index:08x}{trace_id[16:]}")
                fh.write(text + "\n")
    return copies * len(ids)


def floor(path: Path) -> None:
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "traces.jsonl", Path(tmp) / "transcripts.jsonl"
        count = build(source, args.traces)
        size = source.stat().st_size
        base = timed(lambda: floor(source), args.repeats)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        harness = timed(lambda: import_traces(source, out, "auto"), args.repeats)
        rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        rerun = timed(lambda: scan(out, format="jsonl"), args.repeats)
        written = sum(1 for _ in out.open("rb"))
        print(f"{count:,} traces, {size / 1e6:.0f} MB of OTLP JSON, {written:,} transcripts written, cpus={os.cpu_count()}")
        print(f"json.loads floor      {base:7.2f} s  {size / 1e6 / base:6.1f} MB/s")
        print(f"harness import        {harness:7.2f} s  {count / harness:8,.0f} traces/s  {harness / base:.1f}x the floor")
        print(f"scan of the import    {rerun:7.2f} s  {count / rerun:8,.0f} transcripts/s")
        print(f"peak RSS growth       {rss_growth / 1024:7.0f} MB (traces are grouped in memory before conversion)")


if __name__ == "__main__":
    main()
