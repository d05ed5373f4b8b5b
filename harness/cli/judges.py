"""``harness judges check``: each configured judge, checked with one tiny request before a long run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from .common import JUDGE, AsJsonOpt, app, judge_options, make_console, run_async

if TYPE_CHECKING:
    from ..checks.judges import JudgeCheck
    from ..planning import JudgeOptions

judges_app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich", help="Check that the configured judges answer before a long run.")
app.add_typer(judges_app, name="judges", rich_help_panel=JUDGE)


@judges_app.command("check")
@judge_options(("config", "model", "base_url", "api_key_env"))
def check(
    judge: JudgeOptions,
    only: Annotated[list[str] | None, typer.Option("--judge", help="Check only the judge of this name (repeatable).")] = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Send each judge one tiny request and read its endpoint's model list, then say what works (exit 1 when a judge is unusable)."""
    from ..checks.judges import check_judges, report_json
    from ..planning import RunOptions, build_plan

    options = RunOptions.from_judge(judge, input=Path("-"), judges_only=only or [])
    plan = build_plan(options, require_keys=False)  # a missing key is reported per judge, not as an error
    checks = run_async(check_judges(plan.judges, plan.price_table))
    if as_json:
        typer.echo(report_json(checks))
    else:
        console = make_console()
        for result in checks:
            show(result, console)
    raise typer.Exit(0 if all(c.usable for c in checks) else 1)


def _yes(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "[red]no[/]"


def show(result: JudgeCheck, console: Console) -> None:
    """One judge's verdict, stacked in two columns so it reads on an 80-column terminal."""
    from rich.table import Table

    verdict = "[green]usable[/]" if result.usable else "[red]unusable[/]"
    console.print(f"[bold]{escape(result.judge)}[/]: {verdict} ({escape(result.provider)}, {escape(result.model)} at {escape(result.endpoint)})")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row("  reachable", _yes(result.reachable))
    grid.add_row("  key accepted", _yes(result.key_accepted))
    grid.add_row("  model known", _yes(result.model_known))
    for capability in result.capabilities:
        note = f": {escape(capability.note)}" if capability.note else ""
        grid.add_row(f"  {escape(capability.name)}", f"{_yes(capability.accepted)}, {capability.how}{note}")
    window = f"{result.context_window:,} tokens ({result.context_source})" if result.context_window else "unknown"
    grid.add_row("  context window", window)
    retirement = result.retirement
    if retirement is not None:
        when = f"{-retirement.days_left} days ago" if retirement.retired else f"in {retirement.days_left} days"
        grid.add_row("  retires", f"[yellow]{retirement.retires.isoformat()}[/] ({when}; {escape(retirement.source)})")
    else:
        grid.add_row("  retires", result.retires.isoformat() if result.retires else "no date known")
    for problem in result.problems:
        grid.add_row("  [red]problem[/]", escape(problem))
    for note in result.notes:
        grid.add_row("  note", escape(note))
    console.print(grid, highlight=False)
