"""What every ``harness`` command shares: the typer app, the error console, the options more
than one command takes, and turning a HarnessError into one line and its exit code."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import BatchError, BudgetExceeded, CacheError, HarnessError, JudgeError, OutputError, ResourceExhausted, UserInputError
from ..exit_codes import EXIT_BUDGET, EXIT_FAILED_JUDGMENTS, EXIT_INTERNAL, EXIT_IO, EXIT_USER_ERROR

# Each command imports what it needs when it runs, so `harness --help` loads typer and rich only.

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Async LLM-judge evaluation harness.")
err = Console(stderr=True)
T = TypeVar("T")

# Judge options shared by every command that calls judges (run and the suites).
JudgeConfigOpt = Annotated[Path | None, typer.Option("--config", help="harness.toml with judges, composites, cache, prompts.")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Ad-hoc judge model (an OpenAI-compatible endpoint).")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="Ad-hoc judge base URL (default: $OPENAI_BASE_URL or OpenAI).")]
ApiKeyEnvOpt = Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the ad-hoc judge's key (default OPENAI_API_KEY).")]
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", help="Override every judge's max_concurrency.")]
CacheOpt = Annotated[str | None, typer.Option("--cache", help="Cache: a SQLite file (default cache/judgments.sqlite) or a postgresql:// URL.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
OfflineOpt = Annotated[bool, typer.Option("--offline", help="Replay judgments from the cache only; no network at all.")]
FormatOpt = Annotated[
    str, typer.Option("--format", help="Input format: auto (by content), jsonl, otel, openinference, inspect, langfuse, langsmith.")
]


@app.callback()
def main() -> None:
    """Judge agent transcripts with LLM rubrics, measure performance, and replay from a cache."""


def _fail(exc: HarnessError) -> typer.Exit:
    # One line whatever the terminal width; the message is text, never rich markup.
    err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    if isinstance(exc, BudgetExceeded):
        return typer.Exit(EXIT_BUDGET)
    if isinstance(exc, CacheError | OutputError | ResourceExhausted):
        return typer.Exit(EXIT_IO)
    if isinstance(exc, BatchError | JudgeError):  # the provider refused: as a run whose judgments failed
        return typer.Exit(EXIT_FAILED_JUDGMENTS)
    return typer.Exit(EXIT_USER_ERROR if isinstance(exc, UserInputError) else EXIT_INTERNAL)


def _location(value: str) -> Path | str:
    from ..cache.location import parse_location

    try:
        return parse_location(value)
    except HarnessError as exc:
        raise _fail(exc) from None


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except HarnessError as exc:
        raise _fail(exc) from None


def _shown(location: str) -> str:
    from ..cache.location import describe

    return describe(location)


def _write_report(run_dir: Path, *, config: Path | None, prompts: list[Path], input: Path | None, trust: list[Path] | None = None) -> None:
    from ..report import build_report

    try:
        result = build_report(run_dir, config=config, prompts=prompts, input=input, trust=trust or [])
    except HarnessError as exc:
        raise _fail(exc) from None
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]wrote {escape(str(result.path))}[/] ({result.transcripts:,} transcripts, {result.bytes / 1e6:.1f} MB, {result.seconds:.1f} s)",
        highlight=False,
    )


# Options of the batch commands that other commands may share.
TranscriptsArg = Annotated[Path, typer.Argument(help="Transcripts: JSONL, or a JSON array (as for harness run).")]
RubricOpt = Annotated[list[str] | None, typer.Option("--rubric", help="Rubric (repeatable). Default: every rubric the transcripts can feed.")]
PromptsOpt = Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")]
LimitOpt = Annotated[int | None, typer.Option(help="Only the first N transcripts.")]
