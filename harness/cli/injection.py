"""``harness injection scan|probe``: judge-directed text in transcripts, and how far it moves a judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .common import JUDGE, AsJsonOpt, app, err, judge_options, make_console

if TYPE_CHECKING:
    from rich.console import Console

    from ..planning import JudgeOptions
    from ..workflows.injection_probe import ProbePlan, ProbeResult

injection_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode="rich", help="Find judge-directed text in transcripts, and measure how often it moves your judges."
)
app.add_typer(injection_app, name="injection", rich_help_panel=JUDGE)


@injection_app.command("scan")
def scan_command(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts: JSONL, a JSON array, or a trace file.")],
    as_json: AsJsonOpt = False,
) -> None:
    """List the judge-directed text in every judged input (exit 1 when any transcript is flagged)."""
    from ..injection.detect import scan_transcript
    from ..traces.loader import iter_transcripts, scan

    scan(transcripts)
    total = 0
    flagged = 0
    console = make_console()
    for _, transcript in iter_transcripts(transcripts):
        total += 1
        found = scan_transcript(transcript)
        flagged += bool(found)
        for finding in found:
            if as_json:
                typer.echo(json.dumps(finding.as_dict(), ensure_ascii=False))
            else:
                console.print(
                    f"{escape(finding.where())}  [yellow]{finding.kind}[/]  {escape(repr(finding.excerpt))}", highlight=False, soft_wrap=True
                )
    err.print(f"{flagged} of {total} transcript(s) flagged", highlight=False)
    raise typer.Exit(1 if flagged else 0)


@injection_app.command("probe")
@judge_options()
def probe_command(
    transcripts: Annotated[Path, typer.Argument(help="Clean transcripts to put the attacks into.")],
    judge: JudgeOptions,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for injection_probe.json, judge_inputs.jsonl and the runs.")] = Path(
        "injection-probe"
    ),
    rubric: Annotated[
        list[str] | None, typer.Option("--rubric", help="Rubric to probe (repeatable). Default: every default rubric reading the response.")
    ] = None,
    family: Annotated[list[str] | None, typer.Option("--family", help="Attack family (repeatable). Default: every family of the corpus.")] = None,
    per_family: Annotated[int, typer.Option(help="Attacks drawn from each family (seeded).")] = 5,
    sample: Annotated[int, typer.Option(help="Transcripts the attacks go into (a seeded sample).")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of both samples.")] = 0,
    layout: Annotated[list[str] | None, typer.Option("--layout", help="inline, data (repeatable). Default: both.")] = None,
    threshold: Annotated[float, typer.Option(help="A verdict passes at this normalised score (0..1, 1 best).")] = 0.5,
    corpus: Annotated[Path | None, typer.Option("--corpus", help="Attack corpus (JSONL). Default: the built-in one.")] = None,
    max_asr: Annotated[float | None, typer.Option(help="Gate: exit 6 when any family's attack success rate is above this.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Budget in USD for each layout's run.")] = None,
    estimate_only: Annotated[bool, typer.Option("--estimate", help="Write the records and print the estimate; send nothing.")] = False,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    as_json: AsJsonOpt = False,
) -> None:
    """Put attacks from the corpus into your transcripts and measure each judge's attack success rate per family.

    A clean and an attacked copy of each transcript are judged (cached, --offline works); the rate is
    the share of clean fails that the attack turns into passes, with a Wilson 95% CI.
    """
    from ..exit_codes import EXIT_GATE
    from ..workflows.injection_probe import plan_probe, run_probe

    judge.prompts = prompts or []
    layouts = tuple(layout or ("inline", "data"))
    plan = plan_probe(
        transcripts,
        out,
        judge,
        rubric or [],
        families=family or [],
        per_family=per_family,
        sample=sample,
        seed=seed,
        layouts=layouts,  # type: ignore[arg-type]
        threshold=threshold,
        corpus=corpus,
    )
    err.print(estimate_line(plan), highlight=False)
    if estimate_only:
        raise typer.Exit(0)
    result = run_probe(plan, judge, max_asr=max_asr, max_cost=max_cost)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        probe_table(result, make_console())
    err.print(f"[green]wrote {out}/injection_probe.json[/]", highlight=False)
    failed = result.gate()
    if failed:
        err.print(f"[red]gate failed:[/] {len(failed)} (layout, rubric, judge, family) above --max-asr {max_asr:g}", highlight=False)
        raise typer.Exit(EXIT_GATE)
    raise typer.Exit(result.exit_code)


# -- rendering (as cli/race.py renders a race: the probe is a workflow, which only the commands ask) --


def estimate_line(plan: ProbePlan) -> str:
    cost = "unknown (a judge has no price)" if plan.estimated_cost_usd is None else f"${plan.estimated_cost_usd:.6f}"
    return (
        f"injection probe: {plan.transcripts} transcript(s) × {len(plan.attacks)} attack(s) = {len(plan.attacked)} attacked record(s), "
        f"{len(plan.layouts)} layout(s): {plan.estimated_requests} request(s) not in the cache, estimated cost {cost}"
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def probe_table(result: ProbeResult, console: Console) -> None:
    from ..outputs.layout import FitTable

    table = FitTable("Attack success rate (clean fail → attacked pass), Wilson 95% CI")
    for column in ("layout", "rubric", "judge", "family", "ASR", "95% CI", "flips", "shift", "with scan"):
        table.add_column(column, justify="left" if column in ("layout", "rubric", "judge", "family") else "right")
    for r in result.rates:
        ci = "—" if r.asr_ci is None else f"{_pct(r.asr_ci[0])}–{_pct(r.asr_ci[1])}"
        shift = "—" if r.shift is None else f"{r.shift:+.2f}"
        table.add_row(r.layout, r.rubric, r.judge, r.family, _pct(r.asr), ci, f"{r.flips}/{r.flippable}", shift, _pct(r.asr_with_scan))
    console.print(table)
    for key, defence in result.defences.items():
        console.print(f"[yellow]moved:[/] {escape(key)}: {escape(defence)}", highlight=False, soft_wrap=True)
