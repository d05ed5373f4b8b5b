"""``harness batch``: provider batch APIs (half price, no rate limits). The logic is harness/batch/."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ..errors import UserInputError
from .choices import BatchApi
from .common import BATCH_JUDGE_FLAGS, SCALE, LimitOpt, PromptsOpt, RubricOpt, TranscriptsArg, app, err, judge_options, make_console, turn_options

if TYPE_CHECKING:
    from ..batch import BatchView
    from ..cache.batches import BatchRecord
    from ..planning import JudgeOptions, RunOptions
    from ..planning.turns import TurnFlags

batch_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Judge through the providers' batch APIs at half price, resumable and never submitted twice.",
)
app.add_typer(batch_app, name="batch", rich_help_panel=SCALE)
#: what batch status and release take: where the batches are recorded
LEDGER_FLAGS = ("cache", "config")
LEDGER_HELP = {"cache": "The SQLite cache the batches are recorded in.", "config": "harness.toml (for its cache)."}

WaitOpt = Annotated[bool, typer.Option("--wait", help="Poll (with backoff) until the batches end, then collect.")]
PollOpt = Annotated[float, typer.Option("--poll-interval", help="First wait between polls, seconds (doubles up to 60).")]
MaxWaitOpt = Annotated[float | None, typer.Option("--max-wait", help="With --wait: stop waiting after this many seconds (the batches run on).")]


def _batch_options(
    transcripts: Path,
    out: Path | None,
    judge: JudgeOptions,
    rubric: list[str] | None,
    prompts: list[Path] | None,
    limit: int | None,
    turns: TurnFlags,
) -> RunOptions:
    from ..planning import RunOptions

    return RunOptions.from_judge(
        judge, input=transcripts, out=out, rubrics=rubric or [], prompts=prompts or [], limit=limit, batch=True, progress=False, **turns.as_options()
    )


def _cache_of(cache: str | Path | None, config: Path | None) -> Path:
    """The SQLite file a batch command records in (a PostgreSQL cache is refused)."""
    from ..cache.batches import ledger_path
    from ..cache.location import parse_location
    from ..config import DEFAULT_CACHE, load_config

    return ledger_path(parse_location(cache) if cache is not None else (load_config(config).cache or DEFAULT_CACHE))


def _counts(record: BatchRecord) -> str:
    counts = record.detail_json().get("request_counts") or {}
    return ", ".join(f"{k} {v:,}" for k, v in counts.items() if isinstance(v, int))


def _collect_and_write(options: RunOptions, wait: bool, poll_interval: float, max_wait: float | None = None) -> int:
    """Collect (after waiting, with --wait); write the outputs when nothing of the plan is still out."""
    from ..batch import collect
    from ..batch import wait as wait_for
    from ..terminal.run import batch_table, show_run

    console = make_console(stderr=True)

    def polled(views: list[BatchView]) -> None:
        running = [v.record for v in views if not v.record.ended]
        shown = "; ".join(f"#{r.id} {r.status} ({_counts(r)})" for r in running[:3]) + (" …" if len(running) > 3 else "")
        console.print(f"{len(views) - len(running)}/{len(views)} batch(es) ended" + (f"; running: {shown}" if running else ""), highlight=False)

    if wait:
        asyncio.run(wait_for(_cache_of(options.cache, options.config), first_s=poll_interval, timeout_s=max_wait, on_poll=polled))
    report = asyncio.run(collect(options))
    for note in report.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    for record, counts, problems in report.downloaded:
        err.print(f"batch {record.id} ({record.remote_id}): {counts['succeeded']} succeeded, {counts['failed']} failed", highlight=False)
        for problem in problems[:3]:
            err.print(f"[yellow]batch {record.id}: not read:[/] {escape(problem)} (those requests failed; submit again to resend)", highlight=False)
    if report.outcome is None:
        batch_table([(r, "") for r in report.waiting], console)
        err.print(f"[yellow]{len(report.waiting)} batch(es) still running: collect again later (or use --wait)[/]", highlight=False)
        return 0
    show_run(report.outcome, console)
    style = "green" if report.outcome.exit_code == 0 else "red"
    err.print(f"[{style}]{report.outcome.message}[/]", highlight=False)
    return report.outcome.exit_code


@batch_app.command("submit")
@judge_options(BATCH_JUDGE_FLAGS)
@turn_options()
def batch_submit(
    transcripts: TranscriptsArg,
    judge: JudgeOptions,
    turns: TurnFlags,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    limit: LimitOpt = None,
    api: Annotated[
        BatchApi | None, typer.Option("--api", help="The provider's batch API (default: anthropic for an anthropic.com URL, else openai).")
    ] = None,
    max_requests: Annotated[
        int | None, typer.Option("--max-requests", help="At most N requests per batch (the provider's limit is the most).")
    ] = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="With --wait: where the outputs are written after collecting.")] = None,
) -> None:
    """Submit every judgment that is neither cached nor already in a batch, recording each batch in the cache first."""
    from ..batch import submit

    options = _batch_options(transcripts, out, judge, rubric, prompts, limit, turns)
    if wait and out is None:
        raise UserInputError("--wait collects the results: give --out")
    report = asyncio.run(submit(options, api=None if api is None else api.value, max_requests=max_requests))
    for record in report.batches:
        err.print(f"batch {record.id}: {record.api} {record.remote_id} ({record.requests} requests, {record.status})", highlight=False)
    err.print(
        f"[green]{report.sent} sent[/] in {len(report.batches)} batch(es); {report.skipped} already cached or in a batch; "
        f"{report.missing_input} missing input (unscored, no call)",
        highlight=False,
    )
    if report.too_large:
        err.print(f"[yellow]{len(report.too_large)} request(s) exceed the provider's batch size: judge them with harness run[/]", highlight=False)
    code = _collect_and_write(options, True, poll_interval, max_wait) if wait else 0
    raise typer.Exit(code)


@batch_app.command("status")
@judge_options(LEDGER_FLAGS, help=LEDGER_HELP)
def batch_status(judge: JudgeOptions) -> None:
    """Poll every open batch, re-attach any that a killed process left half-sent, and list them all."""
    from ..batch import batches, refresh
    from ..terminal.run import batch_table

    path = _cache_of(judge.cache, judge.config)
    if not path.exists():
        raise UserInputError(f"{path}: no cache file (nothing was submitted with it)")
    notes = {v.record.id: v.note for v in asyncio.run(refresh(path))}
    rows = [(r, notes.get(r.id, "")) for r in batches(path)]
    batch_table(rows, make_console())


@batch_app.command("collect")
@judge_options(BATCH_JUDGE_FLAGS)
@turn_options()
def batch_collect(
    transcripts: TranscriptsArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    judge: JudgeOptions,
    turns: TurnFlags,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    limit: LimitOpt = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
) -> None:
    """Download every ended batch into the cache and write the usual outputs, which `harness run --offline` then replays.

    Replies are parsed and priced at batch rates; failures keep the provider's reason.
    """
    options = _batch_options(transcripts, out, judge, rubric, prompts, limit, turns)
    raise typer.Exit(_collect_and_write(options, wait, poll_interval, max_wait))


@batch_app.command("export")
@judge_options(("config", "model", "base_url", "cache"))
@turn_options()
def batch_export(
    transcripts: TranscriptsArg,
    to: Annotated[Path, typer.Option("--to", help="The OpenAI batch-format request JSONL to write (vLLM run_batch reads it).")],
    judge: JudgeOptions,
    turns: TurnFlags,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Write the unanswered requests as OpenAI batch JSONL and hold them until `harness batch import`."""
    from ..batch import export

    report = export(_batch_options(transcripts, None, judge, rubric, prompts, limit, turns), to)
    err.print(f"[green]wrote {report.exported} request(s) to {escape(str(to))}[/]; {report.skipped} already cached or in a batch", highlight=False)


@batch_app.command("import")
@judge_options(("config", "model", "base_url", "cache"))
@turn_options()
def batch_import(
    transcripts: TranscriptsArg,
    results: Annotated[list[Path], typer.Argument(help="Batch output JSONL file(s) in OpenAI's format (vLLM run_batch writes it).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    judge: JudgeOptions,
    turns: TurnFlags,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Take the results of exported requests into the cache, then write the usual outputs."""
    from ..batch import import_results

    options = _batch_options(transcripts, out, judge, rubric, prompts, limit, turns)
    totals = import_results(options, results)
    err.print(f"imported {totals['succeeded']} succeeded, {totals['failed']} failed, {totals['unknown']} not exported by this cache", highlight=False)
    raise typer.Exit(_collect_and_write(options, False, 0.0))


@batch_app.command("release")
@judge_options(LEDGER_FLAGS, help=LEDGER_HELP)
def batch_release(
    batch_id: Annotated[int, typer.Argument(help="The batch's number in `harness batch status`.")],
    judge: JudgeOptions,
) -> None:
    """Give up a batch that was never created at the provider, so its requests may be submitted again."""
    from ..batch import release

    record = release(_cache_of(judge.cache, judge.config), batch_id)
    err.print(f"[green]batch {record.id} released[/]", highlight=False)
