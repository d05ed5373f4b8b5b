"""``harness run`` and ``harness estimate``, and the trace commands ``harness import`` / ``harness export``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import HarnessError, UserInputError
from .common import (
    ApiKeyEnvOpt,
    BaseUrlOpt,
    CacheOpt,
    ConcurrencyOpt,
    FormatOpt,
    JudgeConfigOpt,
    ModelOpt,
    NoCacheOpt,
    OfflineOpt,
    _fail,
    _write_report,
    app,
    err,
)


@app.command()
def run(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format); - reads standard input.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    format: FormatOpt = "auto",
    config: JudgeConfigOpt = None,
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to run (repeatable). Default: every rubric the transcripts can feed.")
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = None,
    cache: CacheOpt = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Ignore cache hits and overwrite them.")] = False,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    limit: Annotated[int | None, typer.Option(help="Judge only the first N transcripts.")] = None,
    on_bad_record: Annotated[
        str, typer.Option(help="fail (default): stop before any judge call; skip: judge the rest and list the bad ones.")
    ] = "fail",
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    max_cost: Annotated[float | None, typer.Option(help="Budget in USD: refuse to start above it, stop dispatching before crossing it.")] = None,
    report: Annotated[bool, typer.Option("--report", help="Also write OUT/report.html (as harness report OUT).")] = False,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: judge only the i-th of n round-robin slices of the transcripts (join with harness merge).")
    ] = None,
) -> None:
    """Judge transcripts and write judgments, per-transcript results and a summary."""
    from ..outputs.terminal import run_in_terminal
    from ..planning import RunOptions
    from ..transcripts.loader import stdin_as_file

    if on_bad_record not in ("fail", "skip"):
        raise _fail(UserInputError("--on-bad-record must be 'fail' or 'skip'"))
    mode: Literal["fail", "skip"] = "skip" if on_bad_record == "skip" else "fail"
    options = RunOptions(
        input=transcripts,
        out=out,
        config=config,
        rubrics=rubric or [],
        prompts=prompts or [],
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        cache=cache,
        refresh=refresh,
        no_cache=no_cache,
        offline=offline,
        limit=limit,
        on_bad_record=mode,
        progress=progress and err.is_terminal,
        max_cost=max_cost,
        format=format,
        shard=shard,
    )
    try:
        with stdin_as_file(transcripts) as options.input:
            outcome = asyncio.run(run_in_terminal(options, err, handle_signals=True))
    except HarnessError as exc:
        raise _fail(exc) from None
    style = "green" if outcome.exit_code == 0 else "red"
    err.print(f"[{style}]{outcome.message}[/]", highlight=False)
    if report:
        _write_report(out, config=config, prompts=prompts or [], input=transcripts)
    raise typer.Exit(outcome.exit_code)


@app.command()
def estimate(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format).")],
    config: Annotated[Path | None, typer.Option(help="harness.toml with judges, composites, cache, prompts.")] = None,
    format: FormatOpt = "auto",
    rubric: Annotated[list[str] | None, typer.Option("--rubric", help="Rubric to estimate (repeatable).")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    model: Annotated[str | None, typer.Option(help="Ad-hoc judge model.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Ad-hoc judge base URL.")] = None,
    cache: Annotated[
        str | None, typer.Option(help="Cache (a SQLite file or a postgresql:// URL) whose hits cost nothing (default cache/judgments.sqlite).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Estimate as if nothing were cached.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N transcripts.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON on stdout.")] = False,
    batch: Annotated[bool, typer.Option("--batch", help="Price at the providers' batch rates (harness batch submit).")] = False,
) -> None:
    """What a run would cost and take: tokens counted offline, cache hits free. No network call."""
    from ..cost.estimate import estimate_run
    from ..outputs.terminal import estimate_table
    from ..planning import RunOptions
    from ..transcripts.loader import stdin_as_file

    options = RunOptions(
        input=transcripts,
        config=config,
        rubrics=rubric or [],
        prompts=prompts or [],
        model=model,
        base_url=base_url,
        cache=cache,
        no_cache=no_cache,
        limit=limit,
        format=format,
        batch=batch,
    )
    try:
        with stdin_as_file(transcripts) as options.input:
            result = estimate_run(options)
    except HarnessError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        estimate_table(result, Console())


# --- Traces (issue 16): harness import / harness export ---------------------------------------


@app.command("import")
def import_(
    traces: Annotated[
        Path, typer.Argument(help="A trace file: OTLP JSON (OTel GenAI, OpenInference), Inspect .eval/.json, LangSmith or Langfuse export.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The transcripts JSONL to write.")],
    format: FormatOpt = "auto",
    on_bad_record: Annotated[
        str, typer.Option(help="fail (default): stop at the first trace with no query or response; skip: import the rest and list them.")
    ] = "fail",
) -> None:
    """Write the transcripts found in TRACES as JSONL, to check or edit before `harness run`."""
    from ..traces.importer import import_traces

    if on_bad_record not in ("fail", "skip"):
        raise _fail(UserInputError("--on-bad-record must be 'fail' or 'skip'"))
    try:
        result = import_traces(traces, out, format, "skip" if on_bad_record == "skip" else "fail")
    except HarnessError as exc:
        raise _fail(exc) from None
    for problem in result.bad:
        err.print(f"[yellow]skipped:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(out))}[/] ({result.written:,} transcripts from {result.format}, "
        f"{len(result.bad)} skipped, {result.seconds:.2f} s)",
        highlight=False,
    )


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    format: Annotated[
        str, typer.Option("--format", help="otel (gen_ai.evaluation.result events, OTLP JSON logs), csv, or parquet (needs pyarrow).")
    ] = "otel",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="File to write (default RUN_DIR/evaluations.otlp.jsonl, judgments.csv or judgments.parquet).")
    ] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts or trace file, if it has moved since the run.")] = None,
    input_format: Annotated[str, typer.Option("--input-format", help="Format of the run's input (default: auto).")] = "auto",
) -> None:
    """Write the run's verdicts beside the traces they judged: OTel evaluation events, CSV or Parquet."""
    from ..traces.export import export_run

    try:
        result = export_run(run_dir, format, out, input, input_format)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.judgments:,} judgments, {result.linked:,} linked to their trace and span)",
        highlight=False,
    )
