"""``run_evaluation``: one whole ``harness run``, callable from Python as from the CLI.

Order matters and is the contract: check the plan, validate every transcript (a typo never costs
money), open the cache, make the judges, judge, write outputs, then decide the exit code. The
session prints nothing: it returns a :class:`RunOutcome`, and reports progress only through the
optional ``on_start``/``on_judgment`` callbacks; the terminal (``outputs/terminal.py``) renders
both.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache.location import describe, open_store
from ..cost.budget import Budget
from ..cost.estimate import estimate_scanned
from ..errors import BudgetExceeded, ConfigError, FatalJudgeError, TranscriptError, UserInputError
from ..exit_codes import EXIT_BUDGET, EXIT_CACHE_MISSES, EXIT_FAILED_JUDGMENTS, EXIT_INTERRUPTED, EXIT_OK
from ..judges.base import Judge
from ..judges.registry import make_judge
from ..outputs.writer import OutputSink, write_summary
from ..planning import Judgment, RunOptions, RunPlan, build_plan
from ..transcripts.loader import ScanResult, scan
from .engine import Runner


@dataclass(slots=True)
class RunOutcome:
    exit_code: int
    summary: dict[str, Any]
    message: str
    #: records passed over with ``on_bad_record="skip"`` (listed in OUT/skipped.jsonl)
    skipped: list[TranscriptError] = field(default_factory=list)
    skipped_file: Path | None = None
    #: the pre-run estimate checked against ``--max-cost`` (None without a budget)
    estimated_cost_usd: float | None = None
    #: judges stopped for the rest of the run (quota gone, refusing connections), with the reason
    stopped_judges: list[FatalJudgeError] = field(default_factory=list)


def _budget(plan: RunPlan, scanned: ScanResult) -> tuple[Budget, float]:
    """Refuse to start when the offline estimate is above ``--max-cost``; else the in-run guard."""
    assert plan.max_cost is not None
    unpriced = [j.name for j in plan.judges if not j.has_prices]
    if unpriced:
        raise ConfigError(f"--max-cost needs prices: judge {unpriced[0]!r} has none (set input_price_per_1m and output_price_per_1m)")
    estimate = estimate_scanned(plan, scanned)
    expected = estimate.cost_usd_expected or 0.0
    if expected > plan.max_cost:
        raise BudgetExceeded(
            f"estimated cost ${expected:.6f} exceeds --max-cost ${plan.max_cost:g} by ${expected - plan.max_cost:.6f}; "
            "nothing was sent (see `harness estimate`)"
        )
    return Budget(plan.max_cost, plan.judges), expected


def _write_skipped(out: Path, scanned: ScanResult) -> Path | None:
    if not scanned.bad:
        return None
    path = out / "skipped.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for err in scanned.bad:
            fh.write(json.dumps({"file": err.path, "line": err.line, "field": err.field, "problem": err.problem}) + "\n")
    return path


async def run_evaluation(
    options: RunOptions,
    *,
    on_start: Callable[[int], None] | None = None,
    on_judgment: Callable[[Judgment], None] | None = None,
    handle_signals: bool = False,
) -> RunOutcome:
    """Run ``options``. ``on_start(total judgments)`` is called once before judging, ``on_judgment``
    as each judgment completes; ``handle_signals`` makes Ctrl-C/SIGTERM stop dispatching (twice:
    stop waiting for in-flight calls)."""
    started = time.perf_counter()
    if options.out is None:
        raise UserInputError("--out is required")
    out = options.out
    plan = build_plan(options)
    scanned = scan(plan.input, plan.on_bad_record, plan.limit)
    rubrics = plan.select_rubrics(scanned.inputs_seen)
    # Judges are made before anything is written, so a judge that cannot exist (the local judge
    # not installed, a missing key) leaves --out as it was. Making one opens nothing; offline, no
    # judge is even constructed, so nothing can call out.
    judges: dict[str, Judge] = {} if plan.cache_mode == "offline" else {j.name: make_judge(j) for j in plan.judges}
    out.mkdir(parents=True, exist_ok=True)
    skipped_file = _write_skipped(out, scanned)

    budget, estimated = _budget(plan, scanned) if plan.max_cost is not None else (None, None)
    sink = OutputSink(out, rubrics, plan.judges, plan.composites)
    cache = open_store(plan.cache_path, read_only=plan.cache_mode == "offline", lease_s=plan.cache_lease_s) if plan.cache_path else None
    interrupted = False
    try:
        if cache is not None:
            await cache.open()
        if on_start is not None:
            good = plan.shard.size(scanned.good) if plan.shard is not None else scanned.good
            on_start(good * len(rubrics) * len(plan.judges))
        runner = Runner(plan, rubrics, judges, cache, on_entry=sink.write_entry, on_judgment=on_judgment or (lambda j: None), budget=budget)
        with ExitStack() as stack:
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

    totals = sink.totals
    summary = totals.summary(
        wall_time_s=time.perf_counter() - started,
        extra={
            "input": str(plan.input),
            "cache": describe(plan.cache_path) if plan.cache_path else None,
            "cache_mode": plan.cache_mode,
            "judge_models": {j.name: {"model": j.model, "base_url": j.endpoint} for j in plan.judges},
            "rubric_versions": {r.name: r.version for r in rubrics},
            "rubric_scales": {r.name: {"scale": list(r.scale), "direction": r.direction} for r in rubrics},
            "composite_weights": sink.composites,
            "skipped_records": len(scanned.bad),
            "interrupted": interrupted,
            **({"shard": str(plan.shard)} if plan.shard is not None else {}),
            "budget": None
            if budget is None
            else {
                "max_cost_usd": budget.limit,
                "spent_usd": budget.spent,
                "stopped_the_run": budget.exhausted,
            },
        },
    )
    write_summary(out, summary)
    outcome = RunOutcome(
        EXIT_OK,
        summary,
        f"wrote {out}/judgments.jsonl, results.jsonl, summary.json",
        skipped=scanned.bad,
        skipped_file=skipped_file,
        estimated_cost_usd=estimated,
        stopped_judges=[h.error for h in runner.health.values() if h.error is not None],
    )

    failed = summary["judgments"].get("failed", 0)
    misses = totals.reason_counts[("unscored", "cache_miss")]
    if interrupted:
        outcome.exit_code, outcome.message = EXIT_INTERRUPTED, "interrupted: finished judgments are cached; rerun the same command to continue"
    elif budget is not None and budget.exhausted:
        stopped = totals.reason_counts[("unscored", "budget_exhausted")]
        outcome.exit_code = EXIT_BUDGET
        outcome.message = (
            f"--max-cost ${budget.limit:g} reached after ${budget.spent:.6f}: {stopped} judgment(s) not sent; "
            "finished ones are cached, rerun with a higher budget to continue"
        )
    elif failed:
        outcome.exit_code, outcome.message = EXIT_FAILED_JUDGMENTS, f'{failed} judgment(s) failed; see judgments.jsonl (status "failed")'
    elif misses:
        outcome.exit_code = EXIT_CACHE_MISSES
        outcome.message = f"offline: {misses} judgment(s) were not in the cache (unscored, reason cache_miss)"
    return outcome
