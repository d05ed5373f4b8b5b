"""``run_evaluation``: one whole ``harness run``, callable from Python as from the CLI.

Order matters and is the contract: check the plan, validate every transcript (a typo never costs
money), open the cache, make the judges, judge, write outputs, then decide the exit code.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from ..cache import JudgmentCache
from ..cost.budget import Budget
# A module, not its function: harness.cost.estimate imports runner.jobs, so importing it first
# (``from harness.cost.estimate import estimate_run``) reaches here while it is half initialised.
from ..cost import estimate as cost_estimate
from ..errors import BudgetExceeded, ConfigError, UserInputError
from ..judges import Judge, make_judge
from ..outputs.terminal import RunProgress, summary_table
from ..outputs.writer import OutputSink, write_summary
from ..transcripts import ScanResult, scan
from .engine import Runner
from .plan import RunOptions, RunPlan, build_plan

EXIT_OK = 0
EXIT_FAILED_JUDGMENTS = 1
EXIT_USER_ERROR = 2
EXIT_CACHE_MISSES = 3
EXIT_BUDGET = 4
EXIT_INTERRUPTED = 130


@dataclass(slots=True)
class RunOutcome:
    exit_code: int
    summary: dict[str, Any]
    message: str


def _budget(plan: RunPlan, scanned: ScanResult, console: Console) -> Budget:
    """Refuse to start when the offline estimate is above ``--max-cost``; else the in-run guard."""
    assert plan.max_cost is not None
    unpriced = [j.name for j in plan.judges if not j.has_prices]
    if unpriced:
        raise ConfigError(f"--max-cost needs prices: judge {unpriced[0]!r} has none (set input_price_per_1m and output_price_per_1m)")
    estimate = cost_estimate.estimate_scanned(plan, scanned)
    expected = estimate.cost_usd_expected or 0.0
    if expected > plan.max_cost:
        raise BudgetExceeded(
            f"estimated cost ${expected:.6f} exceeds --max-cost ${plan.max_cost:g} by ${expected - plan.max_cost:.6f}; "
            "nothing was sent (see `harness estimate`)"
        )
    console.print(f"estimated cost ${expected:.6f} of --max-cost ${plan.max_cost:g}", highlight=False)
    return Budget(plan.max_cost, plan.judges)


async def run_evaluation(options: RunOptions, console: Console | None = None, handle_signals: bool = False) -> RunOutcome:
    console = console or Console(stderr=True)
    started = time.perf_counter()
    if options.out is None:
        raise UserInputError("--out is required")
    out = options.out
    plan = build_plan(options)
    scanned = scan(plan.input, plan.on_bad_record, plan.limit, plan.format)
    rubrics = plan.select_rubrics(scanned.inputs_seen)
    out.mkdir(parents=True, exist_ok=True)
    if scanned.bad:
        with (out / "skipped.jsonl").open("w", encoding="utf-8") as fh:
            for err in scanned.bad:
                fh.write(json.dumps({"file": err.path, "line": err.line, "field": err.field, "problem": err.problem}) + "\n")
        console.print(f"[yellow]skipped {len(scanned.bad)} bad record(s); listed in {out / 'skipped.jsonl'}[/]")
        for err in scanned.bad[:5]:
            console.print(f"  {err}", markup=False)

    budget = _budget(plan, scanned, console) if plan.max_cost is not None else None
    total = scanned.good * len(rubrics) * len(plan.judges)
    sink = OutputSink(out, rubrics, plan.judges, plan.composites)
    cache = JudgmentCache(plan.cache_path, read_only=plan.cache_mode == "offline") if plan.cache_path else None
    judges: dict[str, Judge] = {}
    interrupted = False
    try:
        if cache is not None:
            await cache.open()
        if plan.cache_mode != "offline":  # offline: no judge is even constructed, so nothing can call out
            judges = {j.name: make_judge(j) for j in plan.judges}
        with ExitStack() as stack:
            progress = stack.enter_context(RunProgress(total, console, plan.progress))
            runner = Runner(plan, rubrics, judges, cache, on_entry=sink.write_entry, on_judgment=progress.advance, budget=budget)
            task = asyncio.ensure_future(runner.run())
            if handle_signals:
                loop = asyncio.get_running_loop()

                def on_sigint() -> None:
                    nonlocal interrupted
                    if interrupted:  # second Ctrl-C: stop waiting for in-flight calls
                        task.cancel()
                    interrupted = True
                    runner.stop()

                loop.add_signal_handler(signal.SIGINT, on_sigint)
                loop.add_signal_handler(signal.SIGTERM, on_sigint)
                stack.callback(loop.remove_signal_handler, signal.SIGINT)
                stack.callback(loop.remove_signal_handler, signal.SIGTERM)
            try:
                await task
            except asyncio.CancelledError:
                if not interrupted:
                    raise
    finally:
        sink.close()
        for judge in judges.values():
            await judge.aclose()
        if cache is not None:
            await cache.close()

    wall = time.perf_counter() - started
    summary = sink.summary(
        wall_time_s=wall,
        extra={
            "input": str(plan.input),
            "cache": str(plan.cache_path) if plan.cache_path else None,
            "cache_mode": plan.cache_mode,
            "judge_models": {j.name: {"model": j.model, "base_url": j.endpoint} for j in plan.judges},
            "rubric_versions": {r.name: r.version for r in rubrics},
            "rubric_scales": {r.name: {"scale": list(r.scale), "direction": r.direction} for r in rubrics},
            "composite_weights": sink.composites,
            "skipped_records": len(scanned.bad),
            "interrupted": interrupted,
            "budget": None if budget is None else {
                "max_cost_usd": budget.limit, "spent_usd": budget.spent, "stopped_the_run": budget.exhausted,
            },
        },
    )
    write_summary(out, summary)
    summary_table(summary, console)
    for health in runner.health.values():
        if health.error is not None:  # said once here, not once per judgment it failed
            console.print(f"[red]judge stopped:[/] {health.error}", highlight=False)

    failed = summary["judgments"].get("failed", 0)
    misses = sink.reason_counts.get("unscored:cache_miss", 0)
    if interrupted:
        return RunOutcome(EXIT_INTERRUPTED, summary, "interrupted: finished judgments are cached; rerun the same command to continue")
    if budget is not None and budget.exhausted:
        stopped = sink.reason_counts.get("unscored:budget_exhausted", 0)
        return RunOutcome(EXIT_BUDGET, summary, f"--max-cost ${budget.limit:g} reached after ${budget.spent:.6f}: "
                          f"{stopped} judgment(s) not sent; finished ones are cached, rerun with a higher budget to continue")
    if failed:
        return RunOutcome(EXIT_FAILED_JUDGMENTS, summary, f"{failed} judgment(s) failed; see judgments.jsonl (status \"failed\")")
    if misses:
        return RunOutcome(EXIT_CACHE_MISSES, summary, f"offline: {misses} judgment(s) were not in the cache (unscored, reason cache_miss)")
    return RunOutcome(EXIT_OK, summary, f"wrote {out}/judgments.jsonl, results.jsonl, summary.json")
