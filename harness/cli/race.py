"""``harness race``: an anytime-valid sequential comparison of two agents (harness/workflows/race.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .common import ANALYSE, JUDGE, PromptsOpt, app, err, judge_options, run_async, turn_options

if TYPE_CHECKING:
    from ..planning import JudgeOptions
    from ..planning.turns import TurnFlags
    from ..workflows.calibration import Calibration
    from ..workflows.cascade import CascadeResult

RACE_FLAGS = ("config", "model", "base_url", "api_key_env", "concurrency", "cache", "offline")


@app.command(rich_help_panel=ANALYSE)
@judge_options(RACE_FLAGS)
@turn_options()
def race(
    a: Annotated[Path, typer.Argument(help="Agent A's transcripts (JSONL).")],
    b: Annotated[Path, typer.Argument(help="Agent B's transcripts (JSONL), paired with A's by id.")],
    metric: Annotated[str, typer.Option("--metric", help="The rubric, composite or bounded agent metric (trajectory_f1, ...: no judge) to compare.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for a/, b/, sequence.jsonl and race.json.")],
    judge: JudgeOptions,
    turns: TurnFlags,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable).")] = None,
    alpha: Annotated[float, typer.Option(help="Error rate of the decision, valid however often the sequence is looked at.")] = 0.05,
    margin: Annotated[float | None, typer.Option(help="Stop once the interval is narrower than this: a smaller difference does not matter.")] = None,
    round_size: Annotated[int, typer.Option("--round", help="Pairs judged between two looks.")] = 20,
    max_pairs: Annotated[int | None, typer.Option(help="Judge at most this many pairs.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random order in which pairs are judged.")] = 0,
) -> None:
    """Compare agent B with agent A on one rubric, composite or agent metric, in rounds of pairs until the answer is sure.

    Pairs with a side not scored (failed, unscored) are left out of the sequence and counted, and a
    note says when the sequence is on fewer pairs than were judged; race.json's completeness holds
    the counts. It exits as one run of all its rounds would: 1 when judgments failed, 130 when
    interrupted.
    """
    from ..workflows.race import Look, RaceOptions
    from ..workflows.race import race as run_race

    options = RaceOptions.from_judge(
        judge,
        a=a,
        b=b,
        out=out,
        metric=metric,
        prompts=prompts or [],
        alpha=alpha,
        margin=margin,
        round_size=round_size,
        max_pairs=max_pairs,
        seed=seed,
        turns=turns,
    )

    def show(look: Look) -> None:
        err.print(f"round {look.round}: {look.pairs_judged} pairs, B - A in [{look.lo:+.3f}, {look.hi:+.3f}]", highlight=False)

    result = run_async(run_race(options, on_look=show))
    lo, hi = result.interval
    cost = "cost unknown (no price)" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    saved = "" if result.saved_usd is None else f", about ${result.saved_usd:.4f} saved against judging all {result.pairs_total} pairs"
    lower = ", lower is better" if result.direction == "lower" else ""
    err.print(
        f"{escape(result.verdict)} ({escape(result.metric)}{lower}, {1 - result.alpha:.0%} confidence sequence for B - A [{lo:+.3f}, {hi:+.3f}]) "
        f"after {result.pairs_judged} of {result.pairs_total} pairs: {result.judgments} judgments, {cost}{saved}",
        highlight=False,
        soft_wrap=True,
    )
    if result.unpaired["a"] or result.unpaired["b"]:
        err.print(
            f"[yellow]note:[/] ids with no partner in the other file, not judged: {result.unpaired['a']} of {escape(str(a))}, "
            f"{result.unpaired['b']} of {escape(str(b))}",
            highlight=False,
            soft_wrap=True,
        )
    if result.pairs_not_scored:
        left = ", ".join(f"{n} {reason}" for reason, n in sorted(result.pairs_not_scored.items()))
        err.print(f"[yellow]note:[/] pairs left out of the sequence (a side not scored): {escape(left)}", highlight=False, soft_wrap=True)
    if (subset := result.subset_line()) is not None:
        err.print(f"[yellow]note:[/] {escape(subset)}", highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


cascade_app = typer.Typer(help="Judge with a cheap judge first and a strong one only where needed, at a guaranteed agreement.", no_args_is_help=True)
app.add_typer(cascade_app, name="cascade", rich_help_panel=JUDGE)


#: a cascade's judge options: --config is required (it holds [cascade]) and worded for it
CASCADE_FLAGS = ("config", "cache", "offline")
# "\\[": help is rich markup, where a bare [cascade] is a style tag and disappears.
CASCADE_HELP = {"config": "harness.toml with the judges and its \\[cascade] section."}
CascadeRubricOpt = Annotated[str, typer.Option(help="The rubric the cascade judges (built-in, or from the config's prompts or --prompts).")]


def _spent(result: Calibration | CascadeResult) -> str:
    """What a cascade command paid (cache hits cost nothing), and what its judgments cost uncached."""
    paid = "paid: unknown (no price)" if result.cost_usd is None else f"paid ${result.cost_usd:.4f}"
    hits = f" ({result.cache_hits} of {result.judgments} judgments from the cache)" if result.cache_hits else ""
    worth = "unknown (no price)" if result.uncached_cost_usd is None else f"${result.uncached_cost_usd:.4f}"
    return f"{paid}{hits}; {worth} without the cache"


@cascade_app.command("calibrate")
@judge_options(CASCADE_FLAGS, help=CASCADE_HELP, required=("config",))
def cascade_calibrate(
    transcripts: Annotated[Path, typer.Argument(help="Calibration transcripts (JSONL), judged by every stage.")],
    judge: JudgeOptions,
    rubric: CascadeRubricOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the stages' calibration runs and cascade.json.")],
    labels: Annotated[Path | None, typer.Option(help="Human labels (JSONL: transcript_id, rubric, label) as the reference.")] = None,
    prompts: PromptsOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the split into calibration and held-out transcripts.")] = 0,
    holdout: Annotated[float, typer.Option(help="Share of the transcripts held out to measure the thresholds (between 0 and 1).")] = 0.3,
) -> None:
    """Set each stage's confidence threshold so the cascade's agreement is guaranteed."""
    from ..workflows.cascade import CascadeOptions, calibrate

    options = CascadeOptions.from_judge(judge, input=transcripts, out=out, rubric=rubric, prompts=prompts or [])
    result = run_async(calibrate(options, labels, seed, holdout))
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    for stage in result.stages:
        threshold = "never trusted" if stage.threshold is None else f"trusted at confidence >= {stage.threshold:.3f}"
        guaranteed = "" if stage.guaranteed_agreement is None else f", agreement >= {stage.guaranteed_agreement:.1%} guaranteed"
        held = "" if stage.heldout_agreement is None else f", {stage.heldout_agreement:.1%} on held-out transcripts"
        err.print(f"{escape(stage.judge)}: {threshold}{guaranteed}{held}", highlight=False, soft_wrap=True)
    err.print(f"{result.calibration['transcripts']} calibration transcripts; {escape(_spent(result))}", highlight=False, soft_wrap=True)
    err.print(f"wrote {escape(str(out / 'cascade.json'))}", highlight=False)


@cascade_app.command("run")
@judge_options((*CASCADE_FLAGS, "concurrency"), help=CASCADE_HELP, required=("config",))
def cascade_run(
    transcripts: Annotated[Path, typer.Argument(help="Transcripts to judge (JSONL).")],
    judge: JudgeOptions,
    rubric: CascadeRubricOpt,
    calibration: Annotated[Path, typer.Option(help="cascade.json written by harness cascade calibrate.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the stages' runs, judgments.jsonl and cascade.json.")],
    prompts: PromptsOpt = None,
) -> None:
    """Judge transcripts through a calibrated cascade, escalating only the judgments a stage is unsure of."""
    from ..workflows.cascade import CascadeOptions, run_cascade

    options = CascadeOptions.from_judge(judge, input=transcripts, out=out, rubric=rubric, prompts=prompts or [])
    result = run_async(run_cascade(options, calibration))
    for stage in result.stages:
        err.print(f"{escape(stage.judge)}: answered {stage.answered} of the {stage.judged} it judged", highlight=False)
    alone = "" if result.strongest_alone_usd is None else f", against about ${result.strongest_alone_usd:.4f} for the strongest judge alone"
    failed = f", {result.failed} failed" if result.failed else ""
    err.print(
        f"{result.transcripts} transcripts, {result.abstained} abstained{failed}; {escape(_spent(result))}{alone}; {escape(result.guarantee)}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(result.exit_code)
