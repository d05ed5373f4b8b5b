"""The embedded judge on the README's example: the worker process against the old in-process path.

    python bench/local_judge.py                 # 3 repeats, medians (about 3-5 minutes)
    python bench/local_judge.py --repeats 1 --limit 5

Both sides judge the very requests ``harness run examples/transcripts.jsonl`` renders (every
built-in rubric the example can feed, planned by the harness's own ``make_entry``):

- **worker**: the whole README command, ``harness run examples/transcripts.jsonl --out ... --no-cache
  --no-progress``, as a subprocess: start-up, model load, judging and outputs included.
- **in-process** (the baseline, as the judge worked before): ``llama_cpp.Llama(n_ctx=4096)`` in this
  process, ``create_chat_completion`` with the ``{"score": number}`` JSON-schema grammar, one call at
  a time; model load included.

Prints per-side medians, per-judgment times and the ratio. The machine is shared: quote medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config import local_judge_config
from harness.judges.local import model_path
from harness.planning import RunOptions, build_plan, make_entry
from harness.traces.loader import iter_transcripts, scan

EXAMPLE = ROOT / "examples" / "transcripts.jsonl"
SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


def requests(limit: int | None) -> list:
    plan = build_plan(RunOptions(input=EXAMPLE, limit=limit))
    rubrics = plan.select_rubrics(scan(EXAMPLE, limit=limit).inputs_seen)
    judge = local_judge_config()
    out = []
    for i, (_, transcript) in enumerate(iter_transcripts(EXAMPLE)):
        if limit is not None and i >= limit:
            break
        out += [job.request for job in make_entry(transcript.resolved(), rubrics, [judge]).jobs if job.request is not None]
    return out


def in_process(reqs: list) -> float:
    import llama_cpp

    started = time.perf_counter()
    llama = llama_cpp.Llama(model_path=model_path(), n_ctx=4096, n_threads=os.cpu_count() or 1, seed=0, verbose=False)
    for r in reqs:
        llama.create_chat_completion(
            messages=list(r.messages),
            temperature=r.temperature,
            max_tokens=r.max_tokens,
            seed=r.seed or 0,
            response_format={"type": "json_object", "schema": SCHEMA},
        )
    elapsed = time.perf_counter() - started
    llama.close()
    return elapsed


def worker(limit: int | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "harness", "run", str(EXAMPLE), "--out", tmp, "--no-cache", "--no-progress"]
        if limit is not None:
            argv += ["--limit", str(limit)]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"harness run failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="transcripts (default: the whole example)")
    args = parser.parse_args()
    reqs = requests(args.limit)
    print(f"{len(reqs)} judgments of the README example; {os.cpu_count()} cores; {args.repeats} repeat(s)")
    times: dict[str, list[float]] = {"worker": [], "in-process": []}
    for _ in range(args.repeats):
        times["worker"].append(worker(args.limit))
        times["in-process"].append(in_process(reqs))
        print(f"  worker {times['worker'][-1]:7.1f} s   in-process {times['in-process'][-1]:7.1f} s", flush=True)
    medians = {side: statistics.median(values) for side, values in times.items()}
    for side, value in medians.items():
        print(f"{side:>10}: median {value:7.1f} s   {value / len(reqs) * 1000:7.0f} ms/judgment")
    print(f"speed-up (in-process / worker): {medians['in-process'] / medians['worker']:.1f}x")


if __name__ == "__main__":
    main()
