"""``harness run`` and ``harness estimate``, and the trace commands ``harness import`` / ``harness export``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .choices import ExportFormat, InputFormat, OnBadRecord, SessionsChoice
from .common import JUDGE, AsJsonOpt, app, err, judge_options, make_console, turn_options, write_report

if TYPE_CHECKING:
    from ..planning import JudgeOptions
    from ..planning.turns import TurnFlags

_FORMATS = ", ".join(f.value for f in InputFormat)
FormatOpt = Annotated[InputFormat, typer.Option("--format", metavar="FORMAT", help=f"Input format: {_FORMATS} (auto decides by content).")]
SessionsOpt = Annotated[
    SessionsChoice,
    typer.Option(
        "--sessions", help="on: a trace file's sessions (and agent runs sharing a trace) are one conversation each; off: one transcript per trace."
    ),
]


@app.command(rich_help_panel=JUDGE)
@judge_options()
@turn_options()
def run(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format); - reads standard input.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgments.jsonl, results.jsonl, summary.json.")],
    judge: JudgeOptions,
    turns: TurnFlags,
    format: FormatOpt = InputFormat.auto,
    sessions: SessionsOpt = SessionsChoice.on,
    rubric: Annotated[
        list[str] | None,
        typer.Option(
            "--rubric", help="Rubric to run (repeatable). Default: every rubric the transcripts can feed (trajectory rubrics only when named)."
        ),
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Ignore cache hits and overwrite them.")] = False,
    limit: Annotated[int | None, typer.Option(help="Judge only the first N transcripts.")] = None,
    on_bad_record: Annotated[
        OnBadRecord, typer.Option(help="fail: stop before any judge call; skip: judge the rest and list the bad ones.")
    ] = OnBadRecord.fail,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    max_cost: Annotated[float | None, typer.Option(help="Budget in USD: refuse to start above it, stop dispatching before crossing it.")] = None,
    report: Annotated[bool, typer.Option("--report", help="Also write OUT/report.html (as harness report OUT).")] = False,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: judge only the i-th of n round-robin slices of the transcripts (join with harness merge).")
    ] = None,
    jury_labels: Annotated[
        Path | None,
        typer.Option(
            "--jury-labels",
            help="Human labels (JSONL, as for harness agreement) for the config's \\[\\[juries]]: weights, anchors, members' agreement.",
        ),
    ] = None,
    agent_only: Annotated[
        bool,
        typer.Option(
            "--agent-only",
            help="Only the deterministic agent metrics (trajectory match, the checks, the counts): no judge, key, model or cache; nothing is sent.",
        ),
    ] = False,
) -> None:
    """Judge transcripts and write the judgments, each transcript's results and a summary."""
    from ..errors import ConfigError
    from ..planning import RunOptions
    from ..runner import run_evaluation
    from ..terminal.run import RunProgress, show_run
    from ..traces.loader import stdin_as_file

    options = RunOptions.from_judge(
        judge,
        input=transcripts,
        out=out,
        rubrics=rubric or [],
        prompts=prompts or [],
        refresh=refresh,
        limit=limit,
        on_bad_record="skip" if on_bad_record is OnBadRecord.skip else "fail",
        progress=progress and err.is_terminal,
        max_cost=max_cost,
        format=format.value,
        sessions=sessions.value,
        shard=shard,
        jury_labels=jury_labels,
        agent_only=agent_only,
        **turns.as_options(),
    )
    if agent_only:
        named = (("--model", judge.model), ("--base-url", judge.base_url), ("--api-key-env", judge.api_key_env), ("--jury-labels", jury_labels))
        given = [flag for flag, value in named if value]
        if given:
            raise ConfigError(f"--agent-only judges nothing; it cannot take {given[0]}")
    with stdin_as_file(transcripts) as options.input, RunProgress(err, options.progress) as bar:
        outcome = asyncio.run(run_evaluation(options, on_start=bar.on_start, on_judgment=bar.on_judgment, handle_signals=True))
    show_run(outcome, make_console(), notes=err)  # the summary is the result: stdout (docs/reference/commands.md)
    style = "green" if outcome.exit_code == 0 else "red"
    err.print(f"[{style}]{escape(outcome.message)}[/]", highlight=False)
    if report:
        write_report(out, config=judge.config, prompts=prompts or [], input=transcripts)
    raise typer.Exit(outcome.exit_code)


@app.command(rich_help_panel=JUDGE)
@judge_options(
    ("config", "model", "base_url", "cache", "no_cache"),
    help={"cache": "Cache whose hits cost nothing (default cache/judgments.sqlite).", "no_cache": "Estimate as if nothing were cached."},
)
@turn_options()
def estimate(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file (see --format).")],
    judge: JudgeOptions,
    turns: TurnFlags,
    format: FormatOpt = InputFormat.auto,
    sessions: SessionsOpt = SessionsChoice.on,
    rubric: Annotated[list[str] | None, typer.Option("--rubric", help="Rubric to estimate (repeatable).")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N transcripts.")] = None,
    as_json: AsJsonOpt = False,
    batch: Annotated[bool, typer.Option("--batch", help="Price at the providers' batch rates (harness batch submit).")] = False,
) -> None:
    """Tell what a run would cost and how long it would take, counting tokens offline with cache hits free."""
    from ..planning import RunOptions
    from ..runner.estimate import estimate_run
    from ..terminal.run import estimate_table
    from ..traces.loader import stdin_as_file

    options = RunOptions.from_judge(
        judge,
        input=transcripts,
        rubrics=rubric or [],
        prompts=prompts or [],
        limit=limit,
        format=format.value,
        sessions=sessions.value,
        batch=batch,
        **turns.as_options(),
    )
    with stdin_as_file(transcripts) as options.input:
        result = estimate_run(options)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        estimate_table(result, make_console())


# --- Traces: harness import / harness export ---------------------------------------------------


@app.command("import", rich_help_panel=JUDGE)
def import_(
    traces: Annotated[
        Path, typer.Argument(help="A trace file: OTLP JSON (OTel GenAI, OpenInference), Inspect .eval/.json, LangSmith or Langfuse export.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The transcripts JSONL to write.")],
    format: FormatOpt = InputFormat.auto,
    on_bad_record: Annotated[
        OnBadRecord, typer.Option(help="fail: stop at the first trace with no query or response; skip: import the rest and list them.")
    ] = OnBadRecord.fail,
    sessions: SessionsOpt = SessionsChoice.on,
) -> None:
    """Turn a trace file into transcripts JSONL that you can check or edit before judging it."""
    from ..traces.importer import import_traces

    result = import_traces(traces, out, format.value, "skip" if on_bad_record is OnBadRecord.skip else "fail", sessions.value)
    for problem in result.bad:
        err.print(f"[yellow]skipped:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(out))}[/] ({result.written:,} transcripts from {result.format}, "
        f"{len(result.bad)} skipped, {result.seconds:.2f} s)",
        highlight=False,
    )


@app.command(rich_help_panel=JUDGE)
def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out.")],
    format: Annotated[
        ExportFormat, typer.Option("--format", help="otel (gen_ai.evaluation.result events, OTLP JSON logs), csv, or parquet (needs pyarrow).")
    ] = ExportFormat.otel,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="File to write (default RUN_DIR/evaluations.otlp.jsonl, judgments.csv or judgments.parquet).")
    ] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts or trace file, if it has moved since the run.")] = None,
    input_format: Annotated[
        InputFormat, typer.Option("--input-format", metavar="FORMAT", help=f"Format of the run's input: {_FORMATS}.")
    ] = InputFormat.auto,
    sessions: Annotated[
        SessionsChoice,
        typer.Option("--sessions", help="As the run read its input: on (sessions are conversations) or off (one transcript per trace)."),
    ] = SessionsChoice.on,
) -> None:
    """Write a run's verdicts beside the traces they judged, as OTel evaluation events, CSV or Parquet."""
    from ..traces.export import export_run

    result = export_run(run_dir, format.value, out, input, input_format.value, sessions.value)
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.judgments:,} judgments, {result.linked:,} linked to their trace and span"
        + (f"; {result.agent_metrics:,} agent metrics" if result.agent_metrics else "")
        + (f"; {result.step_findings:,} step findings, {result.step_findings_linked:,} on their step's span" if result.step_findings else "")
        + ")",
        highlight=False,
    )
    if result.spans_path is not None:
        err.print(
            f"[green]wrote {escape(str(result.spans_path))}[/] ({result.created_spans:,} execute_tool spans for steps whose trace recorded no run)",
            highlight=False,
        )
