#!/usr/bin/env python
"""The whole ``harness run --agent-only`` command on N agent transcripts of 20 tool calls (issue 44).

    python bench/agent_run.py                       # 10,000 and 100,000 transcripts, plain and any_order, median of 3
    python bench/agent_run.py --sizes 10000 --repeats 1
    python bench/agent_run.py --million             # 1,000,000 too (one repeat at that size)

Writes, per size and kind, a JSONL file of N transcripts in OpenAI ``messages`` form: a user
message, assistant messages with ``tool_calls`` (15% of calls share the previous call's message: a
parallel group), a ``tool`` message answering each call, and a final answer, with the
``reference_trajectory`` the agent should have followed, for 50 tasks. The trajectories are the
reference with edits (a third unchanged; the others with calls swapped, dropped, repeated,
replaced or made with other arguments), as ``bench/agent_match.py`` makes them. Two kinds of
reference:

- ``plain``: the reference is a list of 20 calls;
- ``any_order``: the calls of each of the reference's parallel groups are one ``any_order`` block
  (the agents' calls are grouped the same way, into one message per block, where not edited).

Then, per repeat, two whole processes, each timed from exec to exit by ``os.wait4`` (the child's
user + sys CPU, its wall, and its peak RSS):

- the floor: a plain script (``FLOOR`` below) reading the file line by line with ``json.loads`` and
  comparing, per transcript, the multiset of the call names made with the reference's;
- ``python -m harness run FILE --agent-only --out OUT --no-progress`` (the ``[trajectory]`` mode
  is the default, ``strict``; ``--mode`` sets another through a config file).

The run is checked: exit 0, N rows in results.jsonl, every one with its ``trajectory_match``. It
prints each figure, the medians, the ratios to the floor (CPU and wall; the issue's target is 5×
at 100,000 for both kinds), CPU per 100,000 transcripts (linear cost shows as an equal figure at
every size), and both processes' peak RSS (flat: the same at every size), with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._agentdata import ROOT, STEPS, TASKS, build, commit

FLOOR = r"""
import json, sys
from collections import Counter

def names(items):
    for item in items:
        if "any_order" in item:
            yield from names(item["any_order"])
        else:
            yield item["name"]

same = 0
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        record = json.loads(line)
        made = Counter(c["function"]["name"] for m in record["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ())
        same += made == Counter(names(record["reference_trajectory"]))
print(same)
"""


def timed(argv: list[str]) -> tuple[float, float, float, int, str]:
    """Wall seconds, the child's CPU seconds (user + sys), its peak RSS in MB, exit status, stdout."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if child.returncode != 0:
            sys.exit(f"{' '.join(argv)} exited {child.returncode}: {err.read()[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, child.returncode, text


def check(out: Path, n: int) -> int:
    rows = 0
    matched = 0
    with (out / "results.jsonl").open("rb") as fh:
        for line in fh:
            row = json.loads(line)
            value = row["agent"]["trajectory_match"]
            if value is None:
                sys.exit(f"{out}: {row['transcript_id']} has no trajectory_match")
            matched += value == 1
            rows += 1
    if rows != n:
        sys.exit(f"{out}: {rows} rows, expected {n}")
    return matched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated numbers of transcripts")
    parser.add_argument("--million", action="store_true", help="also 1,000,000 transcripts (one repeat)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kinds", default="plain,any_order")
    parser.add_argument("--mode", default=None, help="[trajectory] mode (default: the harness's default, strict)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] + ([1_000_000] if args.million else [])
    kinds = [k for k in args.kinds.split(",") if k]
    print(
        f"harness {commit()} · {STEPS} steps a transcript, {TASKS} tasks · cpus={os.cpu_count()} · load {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"{'n':>9s} {'kind':9s} {'floor cpu':>9s} {'floor wall':>10s} {'run cpu':>8s} {'run wall':>8s} "
        f"{'cpu ×':>6s} {'wall ×':>6s} {'cpu/100k':>8s} {'floor MB':>8s} {'run MB':>7s} {'matched':>8s}"
    )
    with tempfile.TemporaryDirectory(prefix="agent-run-") as tmp:
        config = None
        if args.mode is not None:
            config = Path(tmp) / "harness.toml"
            config.write_text(f'[trajectory]\nmode = "{args.mode}"\n')
        for n in sizes:
            for kind in kinds:
                data = Path(tmp) / f"{kind}-{n}.jsonl"
                build(data, n, kind == "any_order")
                floor_script = Path(tmp) / "floor.py"
                floor_script.write_text(FLOOR)
                repeats = 1 if n >= 1_000_000 else args.repeats
                floors, runs = [], []
                matched = 0
                for r in range(repeats):
                    floors.append(timed([sys.executable, str(floor_script), str(data)]))
                    out = Path(tmp) / f"out-{kind}-{n}-{r}"
                    argv = [sys.executable, "-m", "harness", "run", str(data), "--agent-only", "--out", str(out), "--no-progress"]
                    if config is not None:
                        argv += ["--config", str(config)]
                    runs.append(timed(argv))
                    matched = check(out, n)
                fw, fc = statistics.median(f[0] for f in floors), statistics.median(f[1] for f in floors)
                rw, rc = statistics.median(x[0] for x in runs), statistics.median(x[1] for x in runs)
                print(
                    f"{n:9,d} {kind:9s} {fc:9.2f} {fw:10.2f} {rc:8.2f} {rw:8.2f} {rc / fc:6.2f} {rw / fw:6.2f} "
                    f"{rc * 100_000 / n:8.2f} {max(f[2] for f in floors):8.0f} {max(x[2] for x in runs):7.0f} {matched / n:8.1%}",
                    flush=True,
                )
                data.unlink()
    print(f"load after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; medians of {args.repeats} (1 at 1,000,000); CPU = user + sys of the child")
    return 0


if __name__ == "__main__":
    sys.exit(main())
