"""``harness batch``: provider batch APIs (half price, no rate limits). The logic is harness/batch/."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import HarnessError, UserInputError

if TYPE_CHECKING:
    from ..batch import BatchView
    from ..cache.batches import BatchRecord
    from ..planning import RunOptions


from .common import ApiKeyEnvOpt, BaseUrlOpt, CacheOpt, JudgeConfigOpt, LimitOpt, ModelOpt, PromptsOpt, RubricOpt, TranscriptsArg, _fail, app, err

# ---------------------------------------------------------------------------------------------
# harness batch: provider batch APIs (half price, no rate limits). The logic is harness/batch/.
# ---------------------------------------------------------------------------------------------

batch_app = typer.Typer(
    no_args_is_help=True,
    help="Judge through providers' batch APIs (OpenAI Batch, Anthropic Message Batches): half price, resumable, never submitted twice.",
)
app.add_typer(batch_app, name="batch")

WaitOpt = Annotated[bool, typer.Option("--wait", help="Poll (with backoff) until the batches end, then collect.")]
PollOpt = Annotated[float, typer.Option("--poll-interval", help="First wait between polls, seconds (doubles up to 60).")]
MaxWaitOpt = Annotated[float | None, typer.Option("--max-wait", help="With --wait: stop waiting after this many seconds (the batches run on).")]


def _batch_options(
    transcripts: Path, out: Path | None, config: Path | None, rubric: list[str] | None, prompts: list[Path] | None, **kw: object
) -> RunOptions:
    from ..planning import RunOptions

    return RunOptions(input=transcripts, out=out, config=config, rubrics=rubric or [], prompts=prompts or [], batch=True, progress=False, **kw)  # type: ignore[arg-type]


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
    from ..outputs.terminal import batch_table, show_run

    console = Console(stderr=True)

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
def batch_submit(
    transcripts: TranscriptsArg,
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
    api: Annotated[str | None, typer.Option("--api", help="openai or anthropic (default: anthropic for an anthropic.com URL, else openai).")] = None,
    max_requests: Annotated[
        int | None, typer.Option("--max-requests", help="At most N requests per batch (the provider's limit is the most).")
    ] = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="With --wait: where the outputs are written after collecting.")] = None,
) -> None:
    """Submit every judgment that is neither cached nor already in a batch. Each batch and its keys
    are recorded in the cache before this returns."""
    from ..batch import submit

    options = _batch_options(
        transcripts, out, config, rubric, prompts, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache, limit=limit
    )
    try:
        if wait and out is None:
            raise UserInputError("--wait collects the results: give --out")
        report = asyncio.run(submit(options, api=api, max_requests=max_requests))
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
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("status")
def batch_status(
    cache: CacheOpt = None,
    config: JudgeConfigOpt = None,
) -> None:
    """Poll every open batch recorded in the cache, re-attach any a killed process left half-sent,
    and list them all."""
    from ..batch import batches, refresh
    from ..outputs.terminal import batch_table

    try:
        path = _cache_of(cache, config)
        if not path.exists():
            raise UserInputError(f"{path}: no cache file (nothing was submitted with it)")
        notes = {v.record.id: v.note for v in asyncio.run(refresh(path))}
        rows = [(r, notes.get(r.id, "")) for r in batches(path)]
    except HarnessError as exc:
        raise _fail(exc) from None
    batch_table(rows, Console(width=200))


@batch_app.command("collect")
def batch_collect(
    transcripts: TranscriptsArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
    wait: WaitOpt = False,
    poll_interval: PollOpt = 5.0,
    max_wait: MaxWaitOpt = None,
) -> None:
    """Download every ended batch into the cache (parsed, priced at batch rates, failures with the
    provider's reason), then write the usual outputs. `harness run --offline` replays them."""
    options = _batch_options(
        transcripts, out, config, rubric, prompts, model=model, base_url=base_url, api_key_env=api_key_env, cache=cache, limit=limit
    )
    try:
        code = _collect_and_write(options, wait, poll_interval, max_wait)
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("export")
def batch_export(
    transcripts: TranscriptsArg,
    to: Annotated[Path, typer.Option("--to", help="The OpenAI batch-format request JSONL to write (vLLM run_batch reads it).")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Write the unanswered requests as OpenAI batch JSONL and hold them until `batch import`."""
    from ..batch import export

    options = _batch_options(transcripts, None, config, rubric, prompts, model=model, base_url=base_url, cache=cache, limit=limit)
    try:
        report = export(options, to)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(f"[green]wrote {report.exported} request(s) to {escape(str(to))}[/]; {report.skipped} already cached or in a batch", highlight=False)


@batch_app.command("import")
def batch_import(
    transcripts: TranscriptsArg,
    results: Annotated[list[Path], typer.Argument(help="Batch output JSONL file(s) in OpenAI's format (vLLM run_batch writes it).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    config: JudgeConfigOpt = None,
    rubric: RubricOpt = None,
    prompts: PromptsOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    cache: CacheOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Take exported requests' results into the cache, then write the usual outputs."""
    from ..batch import import_results

    options = _batch_options(transcripts, out, config, rubric, prompts, model=model, base_url=base_url, cache=cache, limit=limit)
    try:
        totals = import_results(options, results)
        err.print(
            f"imported {totals['succeeded']} succeeded, {totals['failed']} failed, {totals['unknown']} not exported by this cache", highlight=False
        )
        code = _collect_and_write(options, False, 0.0)
    except HarnessError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@batch_app.command("release")
def batch_release(
    batch_id: Annotated[int, typer.Argument(help="The batch's number in `harness batch status`.")],
    cache: CacheOpt = None,
    config: JudgeConfigOpt = None,
) -> None:
    """Give up a batch that was never created at the provider, so its requests may be submitted again."""
    from ..batch import release

    try:
        record = release(_cache_of(cache, config), batch_id)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(f"[green]batch {record.id} released[/]", highlight=False)
