#!/usr/bin/env python
"""The whole ``harness run --offline`` command: this checkout against another commit, same run.

    python bench/offline_ab.py                      # against HEAD~1, N = 4,000 judgments, 5 rounds
    python bench/offline_ab.py --base dd96588 -n 4000 --repeats 5

The other commit is checked out into a temporary git worktree; one cache of N judgments (keyed by
this checkout's planner, which must key jobs as the base does) is replayed by both, alternating
base and this checkout each round, and each command's CPU (user + sys of the child, from
RUSAGE_CHILDREN) and wall are recorded. Every run is checked: exit 0, N scored, N cache hits.
It prints the medians, their difference and ratio, the load average, and which of numpy and
SciPy each side imported (``-X importtime`` of one extra run each).
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

from bench.offline_replay import offline_run_argv
from bench.throughput import OFFLINE_URL, populate_cache, write_config, write_transcripts


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(checkout: Path, argv: list[str], out: Path, n: int) -> tuple[float, float]:
    """Wall and CPU seconds of one offline run from ``checkout``; raises if it did not replay all N."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before, started = _cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall, cpu = time.perf_counter() - started, _cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    if summary["judgments"].get("scored") != n or summary["judges"]["bench"]["cache_hits"] != n:
        raise SystemExit(f"{checkout}: replayed {summary['judgments']}, expected {n} scored cache hits")
    return wall, cpu


def numeric_imports(checkout: Path, argv: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=checkout, env=env, capture_output=True, text=True, timeout=600, check=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return sorted(m for m in names if m in ("numpy", "scipy", "scipy.special", "scipy.stats"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare against")
    parser.add_argument("-n", type=int, default=4000, help="cached judgments (transcripts x 4 rubrics)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-ab-") as tmp:
        work = Path(tmp)
        base = work / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base], check=True, capture_output=True)
        try:
            data = write_transcripts(work / "data.jsonl", args.n // 4)
            config = write_config(work / "harness.toml", OFFLINE_URL, 64)
            cache = work / "cache.sqlite"
            assert populate_cache(cache, data, config) == args.n
            sides = {"base": base, "this": ROOT}
            results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
            for r in range(args.repeats):
                for side, checkout in sides.items():
                    out = work / f"out-{side}-{r}"
                    results[side].append(run(checkout, offline_run_argv(data, config, cache, out), out, args.n))
                    wall, cpu = results[side][-1]
                    print(f"  round {r + 1} {side:>4}: {wall:.3f} s wall, {cpu:.3f} s CPU", flush=True)
            imports = {
                side: numeric_imports(checkout, offline_run_argv(data, config, cache, work / f"out-{side}-imp")) for side, checkout in sides.items()
            }
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False, capture_output=True)
    med = {side: (statistics.median(w for w, _ in rs), statistics.median(c for _, c in rs)) for side, rs in results.items()}
    print(f"\nharness run --offline, N = {args.n:,} cached judgments, medians of {args.repeats} (load average {os.getloadavg()[0]:.2f})")
    for side in sides:
        print(
            f"  {side:>4} ({args.base if side == 'base' else 'this checkout'}): {med[side][1]:.3f} s CPU, {med[side][0]:.3f} s wall; imports {imports[side] or 'neither numpy nor SciPy'}"
        )
    d_cpu, d_wall = med["base"][1] - med["this"][1], med["base"][0] - med["this"][0]
    print(f"  saved: {d_cpu:.3f} s CPU ({med['this'][1] / med['base'][1]:.2f}x), {d_wall:.3f} s wall ({med['this'][0] / med['base'][0]:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
