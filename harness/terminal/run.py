"""The terminal layer: everything a command shows on screen. The library returns values; this
module renders them with rich (a run's progress bar, notes and summary tables; the estimate). It
runs nothing: the CLI calls the library (``run_evaluation`` with :class:`RunProgress`'s callbacks),
then hands the outcome here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ..outputs.layout import FitTable, count, duration_ms, usd
from ..planning import Judgment

if TYPE_CHECKING:  # the types only: the terminal renders values, it makes none
    from ..cache.base import CacheStats
    from ..cache.batches import BatchRecord
    from ..metrics.schema import JurySummary, RunSummary
    from ..runner.estimate import Estimate
    from ..runner.session import RunOutcome


#: Seconds between updates of the progress bar's counts (its refresh rate).
SHOW_EVERY_S = 0.1


class RunProgress:
    """done / cached / failed / cost so far / ETA, updated as each judgment completes.

    The run tells it what happens through :func:`run_evaluation`'s callbacks (:attr:`on_start`,
    :attr:`on_judgment`); the bar is made when the run says how many judgments it will make, and
    closed when the ``with`` block ends. Disabled (``--no-progress``, or not a terminal), it gives
    no callbacks: no bar is made, nor ``rich.progress`` imported, and no judgment is counted for it.
    """

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.cached = self.failed = self.unknown = 0
        self.cost = 0.0
        self._unshown = 0
        self._next_show = 0.0
        self._progress: Any = None
        self._task: Any = None

    @property
    def on_start(self) -> Callable[[int], None] | None:
        return self.start if self.enabled else None

    @property
    def on_judgment(self) -> Callable[[Judgment], None] | None:
        return self.advance if self.enabled else None

    def start(self, total: int) -> None:
        """Make and show the bar for ``total`` judgments."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]judging"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("cached {task.fields[cached]}  failed {task.fields[failed]}  ${task.fields[cost]:.4f}{task.fields[unknown]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.enabled,
            transient=False,
        )
        self._task = self._progress.add_task("judging", total=total, cached=0, failed=0, cost=0.0, unknown="")
        self._progress.start()

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._show()
            self._progress.stop()

    def advance(self, judgment: Judgment) -> None:
        if judgment.cached:
            self.cached += 1
        elif judgment.cost_usd is not None:
            self.cost += judgment.cost_usd
        elif judgment.status != "failed" and judgment.called:
            self.unknown += 1
        if judgment.status == "failed":
            self.failed += 1
        self._unshown += 1
        # The bar is redrawn 10 times a second: updating it for every judgment cost an offline
        # replay 7% of its CPU on a terminal; the counts it shows are brought up to date as often.
        if self.enabled and (now := time.monotonic()) >= self._next_show:
            self._next_show = now + SHOW_EVERY_S
            self._show()

    def _show(self) -> None:
        if self.enabled and self._unshown and self._progress is not None:
            unknown = f" + {self.unknown} unknown" if self.unknown else ""
            self._progress.update(self._task, advance=self._unshown, cached=self.cached, failed=self.failed, cost=self.cost, unknown=unknown)
            self._unshown = 0


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


#: An unscored reason in the user's words (the others are shown with spaces for underscores).
REASON_WORDS = {
    "missing_input": "missing input",
    "cache_miss": "not in the cache",
    "budget_exhausted": "over budget",
    "context_overflow": "prompt too long",
    "no_score": "no score in the reply",
    "empty_reply": "empty reply",
    "truncated": "reply cut off",
    "jury_settled": "not needed by a sequential jury",
    "injection_suspected": "judge-directed text found (not sent)",
}

#: Unscored reasons that point at a judge's settings, and what to do about them.
REPLY_PROBLEMS = {
    "truncated": "replies cut off at the completion budget (unscored): raise max_tokens or reasoning_budget",
    "empty_reply": "empty replies (unscored)",
    "schema_violation": "replies that broke the JSON Schema (unscored)",
    "context_overflow": 'prompts too long for its context window (unscored, not sent): truncate = "middle" cuts them to fit',
}


def summary_table(summary: RunSummary, console: Console) -> None:
    if summary.judges or summary.rubrics or summary.composites:  # an agent-only run has neither table
        _judged_tables(summary, console)
    jury_table(summary.juries, console)
    _rest_tables(summary, console)


def _judged_tables(summary: RunSummary, console: Console) -> None:
    scores = FitTable("Scores (mean with 95% CI)")
    for column in ("metric", "judge", "n", "mean", "95% CI", "unscored", "failed", "clamped"):
        scores.add_column(column, justify="left" if column in ("metric", "judge") else "right", collapsible=column == "judge")
    for kind, section in (("rubrics", summary.rubrics), ("composites", summary.composites)):
        for metric, per_judge in section.items():
            for judge, s in per_judge.items():
                ci = "—" if not s.ci95 else f"[{s.ci95[0]:.3f}, {s.ci95[1]:.3f}]"
                label = metric if kind == "rubrics" else f"{metric} (composite)"
                scores.add_row(label, judge, str(s.n), _fmt(s.mean), ci, str(s.unscored), str(s.failed), str(s.clamped))
    console.print(scores)

    judges = FitTable("Judges")
    for column in ("judge", "requests", "cache hits", "failed", "prompt tok", "compl. tok", "cost", "saved $", "latency p50 / p95 / p99"):
        judges.add_column(column, justify="left" if column == "judge" else "right", collapsible=column == "judge")
    for name, j in summary.judges.items():
        lat = j.latency_ms
        judges.add_row(
            name,
            count(j.requests),
            count(j.cache_hits),
            count(j.failed),
            count(j.prompt_tokens),
            count(j.completion_tokens),
            usd(j.cost_usd),
            usd(j.cost_saved_usd),
            " / ".join(duration_ms(p) for p in (lat.p50, lat.p95, lat.p99)),
        )
    console.print(judges)
    for name, j in summary.judges.items():
        problems = {reason: n for reason, n in j.unscored_reasons.items() if reason in REPLY_PROBLEMS}
        for reason, n in problems.items():
            console.print(f"judge {name}: {n} {REPLY_PROBLEMS[reason]}")


def _rest_tables(summary: RunSummary, console: Console) -> None:
    if summary.judge_noise:
        trust = FitTable("Judge noise (repeated samples; share of single-score variance that is the judge disagreeing with itself)")
        for column in ("rubric", "judge", "transcripts", "samples", "noise share", "in the mean", "mean spread"):
            trust.add_column(column, justify="left" if column in ("rubric", "judge") else "right", collapsible=column == "judge")
        for rubric, per_rubric in summary.judge_noise.items():
            for judge, noise in per_rubric.items():
                share, of_mean = noise.noise_share, noise.noise_share_of_mean
                trust.add_row(
                    rubric,
                    judge,
                    count(noise.transcripts),
                    count(noise.samples),
                    "—" if share is None else f"{share:.1%}",
                    "—" if of_mean is None else f"{of_mean:.1%}",
                    _fmt(noise.mean_spread, 4),
                )
        console.print(trust)

    perf = FitTable("Agent performance (from the transcripts)")
    for column in ("metric", "n", "mean", "p50", "p95", "p99"):
        perf.add_column(column, justify="left" if column == "metric" else "right")
    for name, p in summary.performance.items():
        perf.add_row(name, count(p.n), _fmt(p.mean, 1), _fmt(p.p50, 1), _fmt(p.p95, 1), _fmt(p.p99, 1))
    console.print(perf)
    if summary.agent:
        steps = FitTable("What the agent did (from its steps; no judge)")
        for column in ("metric", "n", "mean", "95% CI", "unscored"):
            steps.add_column(column, justify="left" if column == "metric" else "right")
        for name, a in summary.agent.items():
            ci = "—" if not a.ci95 else f"[{a.ci95[0]:.3f}, {a.ci95[1]:.3f}]"
            steps.add_row(name, count(a.n), _fmt(a.mean), ci, count(a.unscored))
        console.print(steps)
    total = summary.cost_usd
    cost = f"cost unknown ({_cost_unknown_why(summary)})" if total is None else usd(total)
    console.print(closing_line(summary, cost), highlight=False, soft_wrap=True)


def jury_table(juries: Mapping[str, JurySummary], console: Console) -> None:
    """A run's juries: per rubric their verdicts, their members' agreement, and the members a
    sequential jury did not ask; then any member of the agents' own lineage."""
    if not juries:
        return
    table = FitTable("Juries (agreement between members: Krippendorff's alpha)")
    for column in ("jury", "method", "rubric", "verdicts", "alpha", "members not asked"):
        table.add_column(column, justify="left" if column in ("jury", "method", "rubric") else "right", collapsible=column == "method")
    for name, jury in juries.items():
        asked = jury.member_judgments
        verdicts = ", ".join(f"{n} {status}" for status, n in jury.verdicts.items())
        for rubric, section in jury.rubrics.items():
            level = "ordinal" if "ordinal" in section else "nominal"
            alpha = section.get(level, {}).get("value")
            method = jury.method + (", sequential" if jury.sequential else "")
            table.add_row(
                name, method, rubric, verdicts, "—" if alpha is None else f"{alpha:.3f} ({level})", f"{asked.not_asked:,} of {asked.total:,}"
            )
    console.print(table)
    for name, jury in juries.items():
        for flag in jury.self_preference:
            console.print(
                f"jury {name}: member {flag.member} ({flag.model}) is of the {flag.lineage} lineage, as the agent of "
                f"{flag.transcripts:,} transcript(s) it judged: it may favour them (self-preference)",
                highlight=False,
                soft_wrap=True,
            )


def _cost_unknown_why(summary: RunSummary) -> str:
    """Which of the two reasons (or both) left the cost unknown: a model without a price, or replies
    whose usage is unknown (none reported, or none that could be true)."""
    why = []
    if summary.cost.unpriced_models:
        why.append(f"no price for model {', '.join(summary.cost.unpriced_models)}")
    if unknown := summary.cost.total.usage_unknown_calls:
        why.append(f"usage unknown: {unknown}")
    return "; ".join(why) or "unknown"


#: An input's name in the closing line, where it differs from the name (``no context``).
INPUT_WORDS = {"contexts": "context", "reference_trajectory": "reference trajectory"}


def _reason_words(reason: str) -> str:
    if reason.startswith("no "):  # a missing input, or several: "no query and context"
        return "no " + " and ".join(INPUT_WORDS.get(name, name) for name in reason.removeprefix("no ").split(", "))
    return REASON_WORDS.get(reason, reason.replace("_", " "))


def closing_line(summary: RunSummary, cost: str) -> str:
    """The run in one sentence: "84 judgments: 81 scored, 3 unscored (no context) · $0.0107 · 0.8 s"."""
    counts = summary.judgments
    if not summary.judges and not sum(counts.values()):  # an agent-only run
        return (
            f"{summary.transcripts:,} transcript{'s' if summary.transcripts != 1 else ''}, agent metrics only · {cost} · {summary.wall_time_s:.1f} s"
        )
    reasons: Counter[str] = Counter()
    for judge in summary.judges.values():
        for reason, n in judge.unscored_reasons.items():
            if reason == "missing_input":
                # named as it is ("no context", "no reference"); the rest, if any (a summary read
                # back from summary.json, which does not keep them), stays "missing input"
                for lacked, k in judge.missing_inputs.items():
                    reasons[f"no {lacked}"] += k
                    n -= k
            if n > 0:
                reasons[reason] += n
    parts = []
    for status in ("scored", "unscored", "failed"):
        n = counts.get(status, 0)
        if n or status == "scored":
            why = ", ".join(f"{_reason_words(r)}" + (f" {k}" if len(reasons) > 1 else "") for r, k in reasons.most_common())
            parts.append(f"{n:,} {status}" + (f" ({why})" if status == "unscored" and why else ""))
    total = sum(counts.values())
    return f"{total:,} judgment{'s' if total != 1 else ''}: {', '.join(parts)} · {cost} · {summary.wall_time_s:.1f} s"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.6f}"


def estimate_table(estimate: Estimate, console: Console) -> None:
    """The ``harness estimate`` report: per judge and rubric, then per judge with duration."""
    table = FitTable(f"Estimate for {estimate.transcripts:,} transcripts (no network used)")
    for column in ("judge", "rubric", "requests", "cache hits", "prompt tok", "compl. tok max", "compl. tok expected", "cost expected", "cost max"):
        table.add_column(column, justify="left" if column in ("judge", "rubric") else "right", collapsible=column == "judge")
    for line in estimate.lines:
        expected = count(round(line.completion_tokens_expected)) + ("" if line.cached_completion_mean is not None else " (max)")
        table.add_row(
            line.judge,
            line.rubric,
            count(line.requests),
            count(line.cache_hits),
            count(line.prompt_tokens),
            count(line.completion_tokens_max),
            expected,
            usd(line.cost_usd_expected),
            usd(line.cost_usd_max),
        )
    console.print(table)
    judges = FitTable("Per judge")
    for column in ("judge", "tokenizer", "requests", "cost expected", "cost max", "latency s", "duration", "bound by"):
        judges.add_column(column, justify="left" if column in ("judge", "tokenizer", "bound by") else "right")
    for j in estimate.judges:
        tokenizer = j.tokenizer + (" (approximate)" if j.approximate else "")
        latency = f"{j.latency_s:.2f}" + ("" if j.latency_measured else " (assumed)")
        judges.add_row(
            j.judge, tokenizer, count(j.requests), usd(j.cost_usd_expected), usd(j.cost_usd_max), latency, f"{j.duration_s:.1f} s", j.duration_bound
        )
    console.print(judges)
    approx = [j.judge for j in estimate.judges if j.approximate]
    if approx:
        console.print(f"approximate token counts (no known tokenizer; counted with o200k_base): {', '.join(approx)}")
    for j in estimate.judges:
        if j.context_overflow:
            console.print(
                f"{j.judge}: {j.context_overflow} prompts would overflow its context window and be unscored "
                '(context_overflow, no call); truncate = "middle" shortens them to fit'
            )
    for j in estimate.judges:
        if j.prompt_cache_saving_usd is not None:
            console.print(
                f"{j.judge}: the provider's prompt cache would save about {usd(j.prompt_cache_saving_usd)} on the prompts' shared prefix (system prompt and rubric text)"
            )
    cut = sum(line.truncated_input for line in estimate.lines)
    if cut:
        console.print(f'{cut} prompts would be cut in the middle to fit a context window (truncate = "middle")')
    compacted = sum(line.compacted_input for line in estimate.lines)
    if compacted:
        console.print(f"{compacted} prompts would have their trajectory compacted to fit (first, last and failed steps kept)")
    for warning in [r.message() for r in estimate.retirements] + [p.message() for p in estimate.stale_prices]:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    unpriced = [j.judge for j in estimate.judges if not j.priced]
    if unpriced:
        console.print(f"no price for: {', '.join(unpriced)} (cost unknown; set input_price_per_1m/output_price_per_1m)")
    console.print(f"total: expected {usd(estimate.cost_usd_expected)}, at most {usd(estimate.cost_usd_max)}, about {estimate.duration_s:.1f} s")


def cache_stats_table(stats: CacheStats, console: Console) -> None:
    """``harness cache stats``: rows and reply bytes per judge model, base URL and rubric."""
    table = FitTable(f"{stats.backend} cache {stats.location}: {stats.rows:,} judgments, {stats.claims} claim(s) in flight")
    for column in ("judge model", "base url", "rubric", "rows", "reply MB", "oldest", "newest"):
        table.add_column(column, justify="right" if column in ("rows", "reply MB") else "left", collapsible=column in ("judge model", "base url"))
    for g in stats.groups:
        table.add_row(
            g["judge_model"], g["base_url"], g["rubric"], count(g["rows"]), f"{g['reply_bytes'] / 1e6:.2f}", str(g["oldest"]), str(g["newest"])
        )
    console.print(table)


def show_run(outcome: RunOutcome, console: Console, notes: Console | None = None) -> None:
    """What a finished run tells the user, except its closing message (the CLI colours that): the
    summary on ``console``, and what it noticed on the way (skipped records, stale files removed,
    warnings) on ``notes`` (by default ``console`` too)."""
    results, console = console, notes or console
    if outcome.skipped:
        console.print(f"[yellow]skipped {len(outcome.skipped)} bad record(s); listed in {outcome.skipped_file}[/]")
        for err in outcome.skipped[:5]:
            console.print(f"  {err}", markup=False)
    if outcome.removed_stale:
        console.print(f"removed {', '.join(outcome.removed_stale)}: left by an earlier run, not written by this one", highlight=False)
    budget = outcome.summary.budget
    if outcome.estimated_cost_usd is not None and budget is not None:
        console.print(f"estimated cost ${outcome.estimated_cost_usd:.6f} of --max-cost ${budget.max_cost_usd:g}", highlight=False)
    summary_table(outcome.summary, results)
    conversation_lines(outcome.summary, console)
    for retirement in outcome.summary.judge_retirements:  # summary.json carries them too
        console.print(f"[yellow]warning:[/] {escape(retirement.message)}", highlight=False, soft_wrap=True)
    for error in outcome.stopped_judges:  # said once here, not once per judgment it failed
        console.print(f"[red]judge stopped:[/] {error}", highlight=False)
    if (scan := outcome.summary.injection) is not None:
        kinds = ", ".join(f"{n} {kind}" for kind, n in scan.by_kind.items())
        done = {"flag": "judged as usual", "unscored": "unscored injection_suspected, not sent"}.get(scan.on_flag, scan.on_flag)
        style = "yellow" if scan.flagged_transcripts else "green"
        line = f"[{style}]injection scan:[/] {scan.flagged_transcripts} transcript(s) flagged"
        if scan.flagged_transcripts:
            line += f" ({escape(kinds)}; {done}); each finding is in {escape(scan.file)} beside summary.json"
        console.print(line, highlight=False, soft_wrap=True)
    for notice in outcome.notices:
        console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False, soft_wrap=True)


def conversation_lines(summary: RunSummary, console: Console) -> None:
    """How transcripts of several turns were judged, in one line (and, judged per turn, the turn
    scores with their interval clustered by conversation)."""
    conversations = summary.conversations
    if conversations is None:
        return
    if conversations.judged_as != "per turn":
        console.print(
            f"[yellow]warning:[/] {conversations.multi_turn} transcript(s) hold several user turns and were judged as "
            "first question, last answer; --turns all judges each turn with the conversation before it",
            highlight=False,
            soft_wrap=True,
        )
        return
    absent = f", {conversations.turns_absent} selected turn(s) absent" if conversations.turns_absent else ""
    console.print(
        f"judged per turn (--turns {conversations.turns}): {conversations.judged_turns} turn(s) of {summary.transcripts} conversation(s){absent}; "
        f"the Scores table holds each conversation's score: {conversations.aggregate_rule} ({conversations.aggregate})",
        highlight=False,
        soft_wrap=True,
    )
    for rubric, per_judge in (conversations.turn_scores or {}).items():
        for judge, t in per_judge.items():
            ci = "—" if not t.ci95_clustered else f"[{t.ci95_clustered[0]:.3f}, {t.ci95_clustered[1]:.3f}]"
            console.print(
                f"  {rubric} / {judge}: mean turn score {_fmt(t.mean)} over {t.turns} turn(s), 95% CI {ci} (cluster bootstrap by conversation)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def batch_table(rows: list[tuple[BatchRecord, str]], console: Console) -> None:
    """``harness batch status``: each recorded batch, what its provider last said, and any note."""
    table = FitTable(f"{len(rows)} batch(es)")
    for column in ("#", "api", "judge", "batch id", "status", "requests", "provider counts", "created", "note"):
        table.add_column(column, justify="right" if column == "requests" else "left", collapsible=column in ("api", "judge"))
    for record, note in rows:
        counts = record.detail_json().get("request_counts") or {}
        table.add_row(
            str(record.id),
            record.api,
            record.judge,
            record.remote_id or "-",
            record.status,
            str(record.requests),
            ", ".join(f"{k} {v}" for k, v in counts.items()),
            record.created_at,
            note,
        )
    console.print(table)
