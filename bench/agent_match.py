"""Trajectory match + F1 over 100,000 trajectories of 20 steps (issue 35).

    python bench/agent_match.py                    # 100,000 trajectories, every mode, median of 3
    python bench/agent_match.py -n 20000 --repeats 1 --modes unordered,in_order

Writes a JSONL file of N trajectories (one per line: 20 tool calls with their arguments as JSON
text, as OpenAI sends them, a parallel group per assistant message, and the task they attempted)
for 50 tasks, each with a reference of 20 calls compared with exact arguments. The trajectories
are the reference with edits: a third unchanged, the others with calls swapped, dropped, repeated,
replaced, made with other arguments, or put in one parallel message. The file is then streamed
line by line (memory flat) and, per line, in the same process:

- floor: ``json.loads`` of the line, nothing else (the baseline every ratio is against);
- steps: the floor plus building the 20 :class:`~harness.agent.steps.Step` values (arguments
  parsed from their JSON text);
- match: ``match_trajectory`` on those steps (the mode's answer, pairs, missing, extra, and
  precision, recall and F1), timed around the call alone, with the task's reference compiled once
  (``compile_reference``) and, separately, compiled on every call (a transcript carrying its own
  reference).

Prints the medians: the matching's wall and CPU seconds, its CPU seconds per 100,000 trajectories
against the issue's target of 5 s, the steps' building, the whole streamed pass and its ratio to
the floor, the share matched; then the peak RSS after the first pass and after the last (equal:
memory is flat, whatever N).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench._agentdata import STEPS, TASKS, commit  # the agent benches' shared calls and sizes
from bench._agentdata import call as _call
from harness.agent.match import MODES, compile_reference, match_trajectory
from harness.agent.records import RefCall
from harness.agent.steps import Step, parse_arguments


def _trajectory(rnd: random.Random, reference: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = [dict(c) for c in reference]
    if rnd.random() >= 1 / 3:
        for _ in range(rnd.randint(1, 3)):
            i, j = rnd.randrange(STEPS), rnd.randrange(STEPS)
            edit = rnd.randrange(5)
            if edit == 0:
                calls[i], calls[j] = calls[j], calls[i]
            elif edit == 1:
                calls[i] = _call(rnd)
            elif edit == 2:
                calls[i] = {"name": calls[i]["name"], "arguments": {**calls[i]["arguments"], "limit": 9}}
            elif edit == 3:
                calls[i] = calls[j]
            else:
                del calls[i]
                calls.insert(j, _call(rnd))
    out, group = [], 0
    for k, c in enumerate(calls):
        if k and rnd.random() > 0.15:  # 15% of calls share the previous call's message
            group += 1
        out.append({"name": c["name"], "arguments": json.dumps(c["arguments"]), "group": group})
    return out


def build(path: Path, n: int, seed: int = 35) -> dict[str, list[dict[str, Any]]]:
    rnd = random.Random(seed)
    references = {f"task-{t}": [_call(rnd) for _ in range(STEPS)] for t in range(TASKS)}
    names = list(references)
    with path.open("w", encoding="utf-8") as fh:
        for _ in range(n):
            task = rnd.choice(names)
            fh.write(json.dumps({"task": task, "steps": _trajectory(rnd, references[task])}) + "\n")
    return references


def steps_of(record: dict[str, Any]) -> list[Step]:
    out = []
    for i, s in enumerate(record["steps"]):
        parsed, raw, error = parse_arguments(s["arguments"])
        out.append(Step(i, s["name"], parsed, raw, error, turn=s["group"], group=s["group"]))
    return out


def floor(path: Path) -> float:
    started = time.perf_counter()
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - started


def stream(path: Path, references: dict[str, Any], mode: str, compiled: bool, chunk: int = 1000) -> dict[str, float]:
    """One streamed pass, ``chunk`` lines at a time (memory flat): wall seconds of the whole pass,
    of building the steps, and of the matching alone (wall and CPU), and the share matched."""
    refs = {task: compile_reference(items) for task, items in references.items()} if compiled else references
    out = dict.fromkeys(("pass", "steps", "match", "match_cpu", "matched"), 0.0)
    started = time.perf_counter()
    with path.open("rb") as fh:
        while True:
            lines = list(islice(fh, chunk))
            if not lines:
                break
            records = [json.loads(line) for line in lines]
            t1 = time.perf_counter()
            work = [(steps_of(r), refs[r["task"]]) for r in records]
            t2, c2 = time.perf_counter(), time.process_time()
            for steps, ref in work:
                out["matched"] += match_trajectory(steps, ref, mode).matched  # type: ignore[arg-type]
            out["match"] += time.perf_counter() - t2
            out["match_cpu"] += time.process_time() - c2
            out["steps"] += t2 - t1
    out["pass"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--per-call-compile", action="store_true", help="also time compiling the reference on every call")
    parser.add_argument("--chunk", type=int, default=1000, help="lines read, parsed and matched at a time")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trajectories.jsonl"
        raw = build(path, args.n)
        references = {task: [RefCall(name=c["name"], arguments=c["arguments"]) for c in calls] for task, calls in raw.items()}
        print(
            f"harness {commit()} · {args.n:,} trajectories of {STEPS} steps, {TASKS} tasks, {path.stat().st_size / 1e6:.0f} MB · cpus={os.cpu_count()} · load {os.getloadavg()[0]:.1f}"
        )
        base = statistics.median(floor(path) for _ in range(args.repeats))
        print(f"floor (json.loads per line)   {base:6.2f} s")
        scale = 100_000 / args.n
        peaks = []
        variants = [(m, True) for m in modes] + ([(m, False) for m in modes] if args.per_call_compile else [])
        print(
            f"{'mode':10s} {'reference':9s} {'match s':>8s} {'cpu s':>7s} {'cpu/100k':>8s} {'target':>6s} "
            f"{'steps s':>8s} {'pass s':>7s} {'pass/floor':>10s} {'matched':>8s}"
        )
        for mode, compiled in variants:
            runs = [stream(path, references, mode, compiled, args.chunk) for _ in range(args.repeats)]
            m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            verdict = "ok" if m["match_cpu"] * scale <= 5.0 else "over"
            print(
                f"{mode:10s} {'once' if compiled else 'per call':9s} {m['match']:8.2f} {m['match_cpu']:7.2f} {m['match_cpu'] * scale:8.2f} {verdict:>6s} "
                f"{m['steps']:8.2f} {m['pass']:7.2f} {m['pass'] / base:10.1f} {m['matched'] / args.n:8.1%}"
            )
            peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print(f"peak RSS after the first pass {peaks[0]:.0f} MB, after the last {peaks[-1]:.0f} MB (streamed {args.chunk:,} lines at a time)")


if __name__ == "__main__":
    main()
