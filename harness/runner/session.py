"""``run_evaluation``: one whole ``harness run``, callable from Python as from the CLI.

Order matters and is the contract: check the plan, validate every transcript (a typo never costs
money), open the cache, make the judges, judge, write outputs, then decide the exit code. The
session prints nothing: it returns a :class:`RunOutcome`, and reports progress only through the
optional ``on_start``/``on_judgment`` callbacks; the terminal (``terminal/run.py``) renders
both.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import threading
import time
from collections.abc import Callable, Container, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..cache.base import CacheStore
from ..cache.location import describe, open_store
from ..capabilities import check_supported
from ..cost.budget import Budget
from ..cost.staleness import retirements
from ..errors import BudgetExceeded, CacheError, ConfigError, FatalJudgeError, OutputError, ResourceExhausted, TranscriptError, UserInputError
from ..exit_codes import EXIT_BUDGET, EXIT_CACHE_MISSES, EXIT_FAILED_JUDGMENTS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_IO, EXIT_OK
from ..injection.detect import Finding, by_kind
from ..injection.policy import screen
from ..judges.base import Judge
from ..judges.registry import make_judge
from ..metrics.run import RunTotals
from ..metrics.schema import (
    BudgetRecord,
    InjectionRecord,
    JudgeModel,
    JuryPanelRecord,
    JurySummary,
    RetirementRecord,
    RubricScale,
    RunRecord,
    RunSummary,
)
from ..outputs.files import OutDirLock, StagedFile, dumps, prepare_out_dir, remove_stale
from ..outputs.writer import OutputSink, write_summary
from ..planning import Job, Judgment, RunOptions, RunPlan, build_plan
from ..rows import ROW_FILES
from ..rubrics.rubric import Rubric, inline_custom, opt_in_notice
from ..traces.loader import ScanResult
from .engine import Runner
from .estimate import estimate_scanned

if TYPE_CHECKING:
    from ..jury.outputs import JuryRun


@dataclass(slots=True)
class RunOutcome:
    exit_code: int
    #: what summary.json holds
    summary: RunSummary
    message: str
    #: records passed over with ``on_bad_record="skip"`` (listed in OUT/skipped.jsonl)
    skipped: list[TranscriptError] = field(default_factory=list)
    skipped_file: Path | None = None
    #: the pre-run estimate checked against ``--max-cost`` (None without a budget)
    estimated_cost_usd: float | None = None
    #: judges stopped for the rest of the run (quota gone, refusing connections), with the reason
    stopped_judges: list[FatalJudgeError] = field(default_factory=list)
    #: files an earlier run left in --out that this run did not write, removed
    removed_stale: list[str] = field(default_factory=list)
    #: one-line notes for the user (a custom rubric of the old layout in a run that asked for the data layout)
    notices: list[str] = field(default_factory=list)


class Answers(Protocol):
    """Answers a run's cache misses instead of judges (``harness batch collect``: the downloaded results)."""

    @property
    def uncached(self) -> Container[str]:
        """Keys known to have no cache row: the run answers them without looking them up."""

    def answer(self, job: Job) -> Judgment: ...

    def settle(self) -> None:
        """Store what was answered; called once judging ends, before the outputs are committed."""


def crash_exit(exc: BaseException) -> tuple[int, str]:
    """The exit code and one line for an error that ended a run after it started."""
    if isinstance(exc, CacheError | OutputError | ResourceExhausted):
        return EXIT_IO, str(exc)
    if isinstance(exc, MemoryError):
        return EXIT_IO, "out of memory: lower --concurrency, or split the input"
    if isinstance(exc, OSError):
        from ..outputs.files import io_problem

        return EXIT_IO, f"{exc.filename or 'I/O'}: {io_problem(exc)}"
    return EXIT_INTERNAL, f"internal error: {type(exc).__name__}: {str(exc)[:300]} (a bug in the harness; what was done is written)"


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


def _stage_skipped(out: Path, scanned: ScanResult) -> StagedFile | None:
    if not scanned.bad:
        return None
    staged = StagedFile(out / "skipped.jsonl")
    for err in scanned.bad:
        staged.write(dumps({"file": err.path, "line": err.line, "field": err.field, "problem": err.problem}) + "\n")
    return staged


def _stage_findings(out: Path, plan: RunPlan, scanned: ScanResult) -> StagedFile | None:
    """OUT/injection.jsonl: one line per finding of a run that scans (empty when none were found)."""
    if plan.injection == "off":
        return None
    staged = StagedFile(out / "injection.jsonl")
    for found in scanned.findings_of(plan.shard).values():
        for finding in found:
            staged.write(dumps(finding.as_dict()) + "\n")
    return staged


@dataclass(slots=True)
class _Run:
    """One run once checked: what judging it needs, and how it reports back."""

    plan: RunPlan
    scanned: ScanResult
    rubrics: list[Rubric]
    judges: dict[str, Judge]
    out: Path
    budget: Budget | None
    estimated: float | None
    started: float
    on_start: Callable[[int], None] | None = None
    on_judgment: Callable[[Judgment], None] | None = None
    handle_signals: bool = False
    answers: Answers | None = None
    juries: JuryRun | None = None
    #: transcript id -> why its judgments are unscored without a call (config injection = "unscored")
    suspected: dict[str, str] | None = None


def _juries(plan: RunPlan, rubrics: list[Rubric]) -> JuryRun | None:
    """The run's juries, their labels read and checked, before anything is sent (harness/jury)."""
    if not plan.juries:
        return None
    from ..jury.classes import Classes
    from ..jury.outputs import JuryRun
    from ..jury.panel import prepare

    panels = prepare(plan.juries, plan.judges, rubrics, plan.source, others=set(plan.available_rubrics) - {r.name for r in rubrics})
    return JuryRun(panels, [Classes.of(r) for r in rubrics], {r.name: r.version for r in rubrics})


async def run_evaluation(
    options: RunOptions,
    *,
    on_start: Callable[[int], None] | None = None,
    on_judgment: Callable[[Judgment], None] | None = None,
    handle_signals: bool = False,
    answers: Answers | None = None,
) -> RunOutcome:
    """Run ``options``. ``on_start(total judgments)`` is called once before judging, ``on_judgment``
    as each judgment completes; ``handle_signals`` makes Ctrl-C/SIGTERM stop dispatching (twice:
    stop waiting for in-flight calls). ``answers`` answers every cache miss and no judge is made
    (``harness batch collect`` answers from a provider batch's downloaded results)."""
    started = time.perf_counter()
    if options.out is None:
        raise UserInputError("--out is required")
    out = options.out
    plan = build_plan(options)
    if not options.batch:  # a batch's own paths check at submit and export
        check_supported(plan.judges, "offline" if options.offline else "shard" if options.shard else "live", plan.juries)
    else:  # a collect: its juries as the submit checked them
        check_supported((), "batch", plan.juries)
    # An agent-only run costs nothing and sends nothing, so nothing needs checking before it
    # starts: it reads its input once, validating as it goes (the runner fills ``scanned``), and a
    # bad record stops it with the previous outputs as they were, as the scan would have.
    if plan.agent_only:
        scanned, suspected = ScanResult(), None
        rubrics = plan.select_rubrics(scanned.inputs_seen)
    else:
        scanned, rubrics, _ = plan.scan(detect=plan.injection != "off")
        suspected = screen(plan.injection, plan.input, scanned.findings_of(plan.shard))  # "fail" raises before any judge is made
    juries = _juries(plan, rubrics)
    # Judges are made before anything is written, so a judge that cannot exist (the local judge
    # not installed, a missing key) leaves --out as it was. Making one opens nothing; offline, no
    # judge is even constructed, so nothing can call out.
    judges: dict[str, Judge] = {} if plan.cache_mode == "offline" or answers is not None else {j.name: make_judge(j) for j in plan.judges}
    budget, estimated = _budget(plan, scanned) if plan.max_cost is not None else (None, None)
    created = not out.exists()
    prepare_out_dir(out)
    lock = OutDirLock(out)  # held to the end: a second run on this --out is refused
    try:
        with collector_tuned():
            return await _judge_and_write(
                _Run(
                    plan, scanned, rubrics, judges, out, budget, estimated, started, on_start, on_judgment, handle_signals, answers, juries, suspected
                )
            )
    except UserInputError:
        if created and plan.agent_only:  # stopped by a bad record while reading: --out as it was, absent
            lock.release()
            lock.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    finally:
        lock.release()


#: Runs inside ``collector_tuned`` now, and the thresholds found when the first of them began.
_tuned_users = 0
_tuned_saved: tuple[int, int, int] = (700, 10, 10)
_tuned_lock = threading.Lock()


@contextmanager
def collector_tuned() -> Iterator[None]:
    """The garbage collector set for a run (or a collect's download), and put back after it: what
    exists when it starts is frozen (never scanned again), and collections run every 20,000
    allocations, not 700. A run keeps up to ``engine.WINDOW`` transcripts' jobs alive and frees them
    by reference counting, so the default thresholds only rescanned them (an offline replay of
    100,000, bench case 4: 4.6 s of CPU -> 4.43 s).

    The collector is the process's: runs that overlap (two threads, or two ``aevaluate`` on one
    loop) share one setting, made by the first to begin and put back by the last to end. Each
    saving and restoring its own, the first to end unfroze the other's objects and the last put
    back the tuned thresholds for good."""
    global _tuned_users, _tuned_saved
    with _tuned_lock:
        if _tuned_users == 0:
            _tuned_saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(20_000, 20, 20)
        _tuned_users += 1
    try:
        yield
    finally:
        with _tuned_lock:
            _tuned_users -= 1
            if _tuned_users == 0:
                gc.set_threshold(*_tuned_saved)
                gc.unfreeze()


async def _judge_and_write(run: _Run) -> RunOutcome:
    """Judge into staged files; commit them only once judging has begun (so a run that fails to
    start, or stops at a judge's first request, leaves the previous outputs as they were); an
    error during judging ends the run with what is done written and a documented exit code
    (``crash_exit``), never a hang."""
    plan = run.plan
    skipped = None if plan.agent_only else _stage_skipped(run.out, run.scanned)
    flagged = _stage_findings(run.out, plan, run.scanned)
    try:
        sink = OutputSink(run.out, run.rubrics, plan.judges, plan.composites, plan.trajectory, run.juries, plan.turns)
    except BaseException:
        for staged in (skipped, flagged):
            if staged is not None:
                staged.discard()
        raise
    cache = open_store(plan.cache_path, read_only=plan.cache_mode == "offline", lease_s=plan.cache_lease_s) if plan.cache_path else None
    runner: Runner | None = None
    try:
        try:
            if cache is not None:
                await cache.open()
            if run.on_start is not None:
                run.on_start(_planned_judgments(run))
            answer = run.answers.answer if run.answers is not None else None
            # a collect's downloaded keys without a cache row: answered without a lookup
            uncached = run.answers.uncached if run.answers is not None else frozenset[str]()
            on_judgment = run.on_judgment or (lambda j: None)
            runner = Runner(
                plan,
                run.rubrics,
                run.judges,
                cache,
                on_entry=sink.write_entry,
                on_judgment=on_judgment,
                budget=run.budget,
                answer=answer,
                uncached=uncached,
                suspected=run.suspected,
                reading=run.scanned if plan.agent_only else None,
            )
            interrupted, crash = await _judge(runner, run.handle_signals)
            if plan.agent_only:  # read as it ran: what the scan would have found is known now
                if crash is None and run.scanned.good == 0 and not run.scanned.bad:
                    raise UserInputError(f"{plan.input}: holds no transcripts")
                skipped = _stage_skipped(run.out, run.scanned)
            if run.answers is not None:
                crash = crash or _settle(run.answers)
            if cache is not None and runner.failed:
                crash = crash or await _record_failures(cache, runner)
        finally:
            crash_on_close = await _close(run.judges, cache)
    except BaseException as exc:
        # Never started judging, or a judge's first request showed the run cannot succeed (the
        # one line says why): the previous run's outputs stay as they were.
        if runner is None or isinstance(exc, UserInputError):
            sink.discard()
            for staged in (skipped, flagged):
                if staged is not None:
                    staged.discard()
        raise
    assert runner is not None
    crash = crash or crash_on_close
    written = _commit(sink, skipped)
    if flagged is not None:
        flagged.commit()
        written.add(flagged.path.name)
    code, crash_message = crash_exit(crash) if crash is not None else (EXIT_OK, None)
    record = _run_record(plan, run.rubrics, sink, len(run.scanned.bad), interrupted, run.budget, crash_message, run.scanned.findings_of(plan.shard))
    if interrupted or crash_message is not None or sink.totals.transcripts < _planned(run):
        # a run that stopped short records what it was given: the readers count the rest as never judged
        record = record.model_copy(update={"planned_transcripts": _planned(run)})
    summary = sink.totals.summary(wall_time_s=time.perf_counter() - run.started, record=record)
    write_summary(run.out, summary)
    removed = remove_stale(run.out, written)
    if crash_message is not None:
        message = f"{crash_message}; the transcripts finished before it are written to {run.out}"
    else:
        code, message = _verdict(sink.totals, run.out, interrupted, run.budget)
        if plan.agent_only and code == EXIT_OK:
            message = f"agent metrics only (no judge, nothing sent): {message}"
    return RunOutcome(
        code,
        summary,
        message,
        skipped=run.scanned.bad,
        skipped_file=skipped.path if skipped is not None else None,
        estimated_cost_usd=run.estimated,
        stopped_judges=[h.error for h in runner.health.values() if h.error is not None],
        removed_stale=removed,
        notices=_notices(plan, run.rubrics),
    )


def _notices(plan: RunPlan, rubrics: list[Rubric]) -> list[str]:
    """Told once a run: the custom rubrics still in the inline layout when the config asks for the data layout."""
    old = inline_custom(rubrics) if plan.rubric_layout == "data" else []
    return [opt_in_notice(old)] if old else []


def _planned_judgments(run: _Run) -> int:
    """The judgments the run is to make, for the progress bar: one per (transcript, rubric, judge),
    and judged per turn one per (selected turn, rubric, judge): each planned transcript's turns are
    counted by the rule the planner selects them by (``TurnOptions.chosen``), the input read once
    more for it."""
    per = len(run.rubrics) * len(run.plan.judges)
    plan = run.plan
    if plan.turns is None:
        return _planned(run) * per
    from ..traces.loader import iter_transcripts, required_inputs

    turns = 0
    require = required_inputs(r.inputs for r in run.rubrics)
    for count, (_, record) in enumerate(iter_transcripts(plan.input, plan.on_bad_record, plan.format, require)):
        if plan.limit is not None and count >= plan.limit:
            break
        if plan.shard is None or plan.shard.holds(count):
            turns += len(plan.turns.chosen(record.resolved().turns)[0])
    return turns * per


def _planned(run: _Run) -> int:
    """The transcripts the run is to judge: its input's valid records (after --limit), this shard's."""
    good = run.scanned.good
    return run.plan.shard.size(good) if run.plan.shard is not None else good


async def _judge(runner: Runner, handle_signals: bool) -> tuple[bool, Exception | None]:
    """Run ``runner``; return whether Ctrl-C stopped it and the error that ended it, if any. A
    user's mistake (``UserInputError``, e.g. a judge's first request answered 404) is raised."""
    interrupted = False
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

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, on_sigint)
                stack.callback(loop.remove_signal_handler, sig)
        try:
            await task
        except asyncio.CancelledError:
            if not interrupted:
                raise
        except UserInputError:
            raise
        except Exception as exc:  # noqa: BLE001 - any error ends the run with what is done written
            return interrupted, exc
    return interrupted, None


def _settle(answers: Answers) -> Exception | None:
    """Store what ``answers`` answered; a failure is this run's error (nothing is lost: see batch/collected.py)."""
    try:
        answers.settle()
    except Exception as exc:  # noqa: BLE001 - reported like a failed last cache write
        return exc
    return None


async def _record_failures(cache: CacheStore, runner: Runner) -> Exception | None:
    """Record the run's failed calls (an offline replay reports them as this run did); a failure to
    write them is this run's error, like a failed last cache write."""
    assert runner.failed is not None
    try:
        await cache.record_failures(list(runner.failed.values()))
    except Exception as exc:  # noqa: BLE001 - reported like a failed last cache write
        return exc
    return None


async def _close(judges: dict[str, Judge], cache: CacheStore | None) -> Exception | None:
    """Close the judges' connections and the cache; a failed last cache write is returned."""
    for judge in judges.values():
        try:
            await judge.aclose()
        except Exception:  # noqa: BLE001 - closing a connection pool cannot change the outcome
            pass
    if cache is not None:
        try:
            await cache.close()
        except Exception as exc:  # noqa: BLE001 - a failed last write is this run's error
            return exc
    return None


def _commit(sink: OutputSink, skipped: StagedFile | None) -> set[str]:
    """Rename the staged outputs into place; return the names written."""
    try:
        sink.commit()
        written = {*ROW_FILES, "summary.json"}
        if skipped is not None:
            skipped.commit()
            written.add("skipped.jsonl")
    except BaseException:
        sink.discard()
        if skipped is not None:
            skipped.discard()
        raise
    return written


def _run_record(
    plan: RunPlan,
    rubrics: list[Rubric],
    sink: OutputSink,
    skipped: int,
    interrupted: bool,
    budget: Budget | None,
    aborted: str | None,
    findings: Mapping[str, list[Finding]] | None = None,
) -> RunRecord:
    """What summary.json records about the run itself, beside its aggregates."""
    juries = sink.juries
    judge_models = {j.name: JudgeModel(model=j.model, base_url=j.endpoint) for j in plan.judges}
    if juries is not None:
        judge_models |= {
            p.name: JudgeModel(model=f"jury: {p.describe()}", base_url=None, jury=JuryPanelRecord.model_validate(p.record())) for p in juries.panels
        }
    record = RunRecord(
        input=str(plan.input),
        cache=describe(plan.cache_path) if plan.cache_path else None,
        cache_mode=plan.cache_mode,
        judge_models=judge_models,
        # Each judge as it ran (read back as a JudgeConfig by `harness merge`; the key's variable, never the key).
        judge_configs={j.name: j.model_dump(mode="json") for j in plan.judges},
        rubric_versions={r.name: r.version for r in rubrics},
        rubric_scales={r.name: _scale_record(r) for r in rubrics},
        composite_weights=sink.composites,
        skipped_records=skipped,
        interrupted=interrupted,
        budget=None if budget is None else BudgetRecord(max_cost_usd=budget.limit, spent_usd=budget.spent, stopped_the_run=budget.exhausted),
        judge_retirements=[RetirementRecord(**r.as_dict()) for r in retirements(plan.judges, plan.price_table)],
        aborted=aborted,
    )
    # set only when they apply: an unsharded run writes no shard, a run without juries no juries section
    update: dict[str, Any] = {}
    if plan.shard is not None:
        update["shard"] = str(plan.shard)
    if juries is not None:
        update["juries"] = {name: JurySummary.model_validate(report) for name, report in juries.report().items()}
    if plan.injection != "off":
        findings = findings or {}
        update["injection"] = InjectionRecord(
            on_flag=plan.injection,
            flagged_transcripts=len(findings),
            findings=sum(map(len, findings.values())),
            by_kind=by_kind(findings),
            file="injection.jsonl",
        )
    return record.model_copy(update=update) if update else record


def _scale_record(rubric: Rubric) -> RubricScale:
    """A rubric's scale and direction as summary.json records them (a label rubric's labels too)."""
    if rubric.labels is not None:
        return RubricScale(scale=list(rubric.scale), direction=rubric.direction, labels=list(rubric.labels))
    return RubricScale(scale=list(rubric.scale), direction=rubric.direction)


def _verdict(totals: RunTotals, out: Path, interrupted: bool, budget: Budget | None) -> tuple[int, str]:
    """The exit code and closing message, first match wins: interrupted, budget, failures, cache misses."""
    failed = totals.status_counts["failed"]
    misses = totals.reason_counts[("unscored", "cache_miss")]
    if interrupted:
        return EXIT_INTERRUPTED, "interrupted: finished judgments are cached; rerun the same command to continue"
    if budget is not None and budget.exhausted:
        stopped = totals.reason_counts[("unscored", "budget_exhausted")]
        return EXIT_BUDGET, (
            f"--max-cost ${budget.limit:g} reached after ${budget.spent:.6f}: {stopped} judgment(s) not sent; "
            "finished ones are cached, rerun with a higher budget to continue"
        )
    if failed:
        return EXIT_FAILED_JUDGMENTS, f'{failed} judgment(s) failed; see judgments.jsonl (status "failed")'
    if misses:
        return EXIT_CACHE_MISSES, f"offline: {misses} judgment(s) were not in the cache (unscored, reason cache_miss)"
    return EXIT_OK, f"wrote {out}/judgments.jsonl, results.jsonl, summary.json"
