"""``harness pull``, ``harness push`` and ``harness sync``: traces straight from a trace server
(Phoenix, MLflow, Langfuse, LangSmith) and the verdicts back onto them (``harness.servers``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .choices import SessionsChoice
from .common import JUDGE, app, err, judge_options

if TYPE_CHECKING:
    from ..servers.operations import PushResult
    from ..suites.common import JudgeOptions

SourceArg = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE",
        help="KIND://HOST[:PORT]/PROJECT, KIND one of phoenix, mlflow, langfuse, langsmith (keys from the environment; see docs/guide/servers.md).",
    ),
]


def _pushed(result: PushResult) -> str:
    left = ", ".join(f"{n} {why}" for why, n in sorted(result.left_out.items()))
    return (
        f"{result.written:,} {result.verdict_name} written, {result.updated:,} updated, {result.unchanged:,} already there"
        f"{f' ({left} left out)' if left else ''} on {result.server}"
    )


@app.command(rich_help_panel=JUDGE)
def pull(
    source: SourceArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The trace file to write (the server's export format; harness run reads it).")],
    since: Annotated[str | None, typer.Option(help="Traces that started since: a duration back (90s, 30m, 1h, 2d) or an ISO 8601 time.")] = None,
    until: Annotated[str | None, typer.Option(help="... and before: a duration back or an ISO 8601 time (default now).")] = None,
    session: Annotated[
        list[str] | None, typer.Option("--session", help="Only the traces of this session (conversation) id, in the window (repeatable).")
    ] = None,
) -> None:
    """Pull the traces of a project on a trace server, by time window, into a file to judge."""
    from ..servers.base import Window, parse_when
    from ..servers.operations import pull as pull_traces

    now = time.time()
    window = Window(parse_when(since, now, "--since"), parse_when(until, now, "--until"))
    result = asyncio.run(pull_traces(source, window, out, session or ()))
    err.print(
        f"[green]wrote {escape(str(out))}[/] ({len(result.traces) - result.passed_over:,} traces, --format {result.format}, "
        f"{result.requests:,} requests, {result.seconds:.1f} s)",
        highlight=False,
        soft_wrap=True,
    )


@app.command(rich_help_panel=JUDGE)
def push(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out over pulled or exported traces.")],
    to: Annotated[str, typer.Option("--to", metavar="SOURCE", help="The trace server and project the traces came from (as for harness pull).")],
    input: Annotated[Path | None, typer.Option("--input", help="The run's trace file, if it has moved since the run.")] = None,
    sessions: Annotated[
        SessionsChoice,
        typer.Option("--sessions", help="As the run read its input: on (sessions are conversations) or off (one transcript per trace)."),
    ] = SessionsChoice.on,
) -> None:
    """Write a run's verdicts back onto the traces and spans they judged; a second write adds nothing."""
    from ..servers.operations import push as push_run

    result = asyncio.run(push_run(run_dir, to, input, sessions=sessions.value))
    err.print(f"[green]{escape(_pushed(result))}[/] ({result.requests:,} requests, {result.seconds:.1f} s)", highlight=False, soft_wrap=True)


@app.command(rich_help_panel=JUDGE)
@judge_options(("config", "model", "base_url", "api_key_env", "concurrency", "cache"))
def sync(
    source: SourceArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory of the passes: each writes OUT/<UTC time>/ (traces.jsonl, run/).")],
    judge: JudgeOptions,
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to run (repeatable). Default: every rubric the traces can feed.")
    ] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    sample: Annotated[
        str | None, typer.Option(help="Judge a seeded sample of the new traces: 5% or 0.05 (the same traces on every machine).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = 0,
    max_cost: Annotated[
        float | None, typer.Option(help="Budget of one pass in USD: the oldest new traces that fit are judged, the rest wait.")
    ] = None,
    since: Annotated[str | None, typer.Option(help="First pass only (no cursor yet): start this far back (1h, 2d) or at an ISO 8601 time.")] = None,
    settle: Annotated[str, typer.Option(help="Leave traces that started less than this long ago for the next pass (still being written).")] = "60s",
    name: Annotated[str, typer.Option(help="The cursor's name: separate jobs on one source keep separate cursors.")] = "default",
) -> None:
    """Judge what is new on a trace server since the last pass and write the verdicts back (for cron)."""
    from ..planning import RunOptions
    from ..servers.base import parse_duration, parse_when
    from ..servers.sync import SyncOptions, parse_sample, sync_once

    now = time.time()
    start = parse_when(since, now, "--since")
    options = SyncOptions(
        source=source,
        run=RunOptions.from_judge(judge, input=out, rubrics=rubric or [], prompts=prompts or [], max_cost=max_cost, progress=False),
        out=out,
        sample=parse_sample(sample),
        seed=seed,
        since_s=None if start is None else now - start,
        settle_s=parse_duration(settle, "--settle"),
        name=name,
    )
    result = asyncio.run(sync_once(options, now=now))
    if result.locked_out:
        err.print(f"[yellow]{escape(result.message)}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(0)
    pulled = result.pulled
    if pulled is not None:
        sampled = f", {pulled.passed_over:,} outside the sample" if pulled.passed_over else ""
        err.print(
            f"pulled {len(pulled.traces):,} new traces from {escape(result.source)}{sampled} into {escape(str(pulled.path))}",
            highlight=False,
            soft_wrap=True,
        )
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if result.run_message:
        err.print(escape(result.run_message), highlight=False, soft_wrap=True)
    if result.pushed is not None:
        err.print(escape(_pushed(result.pushed)), highlight=False, soft_wrap=True)
    after = result.cursor_after.shown() if result.cursor_after is not None else "not set"
    style = "green" if result.exit_code == 0 else "red"
    err.print(f"[{style}]judged {result.judged_traces:,} traces; cursor at {after}[/]", highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)
