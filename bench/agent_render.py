#!/usr/bin/env python
"""Judge tokens per judgment of a trajectory rubric, by the trajectory's length (issue 35).

    python bench/agent_render.py                      # 10, 100, 1,000 and 10,000 steps
    python bench/agent_render.py --steps 10 100 1000 --windows 0 8192 32768

For each length it makes a synthetic trajectory (``synthetic_steps``: results of 40 to 800
characters, one call in 20 failed, about one turn in 5 with two parallel calls, seeded), plans the
``task_completion`` rubric for one judge (gpt-4.1-mini, counted exactly with o200k_base) through
the real planner (``planning.jobs.Planner``: render, compaction, context-window guard) and prints
the prompt's tokens, the compaction stage, the steps omitted and the time to plan one judgment.
Window 0 is a judge with no known context window: only the default budget
(``agent.render.TRAJECTORY_CHARS``) applies. The claim checked in ``tests/test_agent_render.py``:
tokens grow at most linearly with the steps and never exceed the window (less the reply's budget).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.agent import Step
from harness.config import JudgeConfig
from harness.cost.tokens import TokenCounter
from harness.planning.jobs import Planner
from harness.rubrics.rubric import load_rubrics
from harness.transcripts.models import Resolved
from harness.transcripts.performance import Performance

TOOLS = ("search", "fetch_page", "get_weather", "lookup_fund", "calculator", "read_file")
WORDS = ["the", "fund", "net", "asset", "value", "paris", "weather", "rain", "report", "page", "result", "total", "ratio", "growth", "direct", "plan"]


def synthetic_steps(n: int, seed: int = 35) -> tuple[Step, ...]:
    """``n`` steps: results of 40 to 800 characters, one call in 20 failed (steps 7, 27, 47, …),
    about one turn in 5 two parallel calls; the same for the same ``n`` and ``seed``."""
    rng = random.Random(f"{seed}:{n}")
    steps: list[Step] = []
    turn = group = 0
    while len(steps) < n:
        width = 2 if rng.random() < 0.2 and n - len(steps) >= 2 else 1
        for _ in range(width):
            index = len(steps)
            name = rng.choice(TOOLS)
            arguments = {"q": " ".join(rng.choices(WORDS, k=rng.randint(1, 6))), "page": rng.randint(1, 9)}
            if index % 20 == 7:
                error = "HTTP 503: " + " ".join(rng.choices(WORDS, k=rng.randint(4, 20)))
                steps.append(Step(index, name, arguments, result=error, failed=True, error=error, turn=turn, group=group))
            else:
                result = " ".join(rng.choices(WORDS, k=rng.randint(8, 150)))
                steps.append(Step(index, name, arguments, result=result, turn=turn, group=group))
        turn += 1
        group += 1
    return tuple(steps)


def transcript(n: int) -> Resolved:
    return Resolved(
        f"t{n}",
        "Find the NAV of HDFC Top 100 Direct and the weather in Paris, then summarise both.",
        "The NAV is 1,184.37 as of 8 Dec 2025; Paris has light rain at 14 C.",
        None,
        None,
        Performance(),
        steps=synthetic_steps(n),
    )


def judge(window: int) -> JudgeConfig:
    fields = {"name": "j", "model": "gpt-4.1-mini", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "BENCH_KEY"}
    return JudgeConfig.model_validate(fields | ({"context_window": window} if window else {}))


def measure(n: int, window: int) -> dict[str, object]:
    """One judgment of ``task_completion`` on an ``n``-step trajectory for a judge with ``window``."""
    rubric = load_rubrics()["task_completion"]
    planner = Planner([rubric], [judge(window)], keyed=False)
    resolved = transcript(n)
    start = time.perf_counter()
    [job] = planner.entry(resolved).jobs
    seconds = time.perf_counter() - start
    row: dict[str, object] = {"steps": n, "window": window or None, "plan_ms": round(seconds * 1000, 1)}
    if job.request is None:
        assert job.result is not None
        return row | {"status": job.result.status, "reason": job.result.reason}
    text = job.request.messages[-1]["content"]
    lines = text.split("<trajectory>\n", 1)[1].split("\n</trajectory>", 1)[0].split("\n")
    omitted = sum(int(line.split()[1]) for line in lines if line.startswith("… ") and line.endswith(" omitted …"))
    return row | {
        "status": "sent",
        "prompt_tokens": TokenCounter.for_model("gpt-4.1-mini").count_messages(job.request.messages),
        "chars": sum(len(m["content"]) for m in job.request.messages),
        "compacted": job.compacted_input,
        "steps_shown": sum(1 for line in lines if line.startswith("[")),
        "omitted": omitted,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--windows", type=int, nargs="+", default=[0, 8192, 32768, 128000], help="0: no known context window")
    args = parser.parse_args(argv)
    print(f"{'steps':>6} {'window':>7} {'tokens':>7} {'chars':>8} {'shown':>6} {'omitted':>7} {'compacted':>9} {'plan ms':>8}")
    for window in args.windows:
        for n in args.steps:
            row = measure(n, window)
            if row["status"] != "sent":
                print(f"{n:>6} {window or '-':>7} {row['status']} ({row['reason']})")
                continue
            print(
                f"{n:>6} {window or '-':>7} {row['prompt_tokens']:>7,} {row['chars']:>8,} {row['steps_shown']:>6} "
                f"{row['omitted']:>7} {row['compacted']!s:>9} {row['plan_ms']:>8}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
