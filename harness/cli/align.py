"""``harness align``: fit a rubric to human labels, choose on held-out labels, report once on a sealed test set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .choices import AlignCandidate
from .common import ANALYSE, AsJsonOpt, app, judge_options, make_console, run_async

if TYPE_CHECKING:
    from ..planning import JudgeOptions


@app.command(rich_help_panel=ANALYSE)
@judge_options()
def align(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out: the judgments to align.")],
    labels: Annotated[
        Path, typer.Option("--labels", help="Human labels JSONL (as for harness agreement): split into fit, select and a sealed test set.")
    ],
    rubric: Annotated[str, typer.Option("--rubric", help="The rubric of the run to align.")],
    judge: JudgeOptions,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Directory for split.json, the candidates, align.json and prompts/. Default: RUN_DIR/align-RUBRIC."),
    ] = None,
    judge_name: Annotated[str | None, typer.Option("--judge", help="The run's judge to align. Default: its first.")] = None,
    writer: Annotated[str | None, typer.Option("--writer", help="The judge that rewrites the criteria. Default: the judge aligned.")] = None,
    input: Annotated[Path | None, typer.Option("--input", help="The run's transcripts file, if it has moved since the run.")] = None,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Extra directory of rubric files (repeatable), as for the run.")] = None,
    candidate: Annotated[
        list[AlignCandidate] | None, typer.Option("--candidate", help="A candidate to try (repeatable). Default: all three.")
    ] = None,
    split: Annotated[str, typer.Option("--split", help="Shares of the labels for fit, select and test, summing to 1.")] = "0.4,0.2,0.4",
    shots: Annotated[int, typer.Option("--shots", help="Labelled examples in the few-shot candidate.")] = 4,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Pass/fail threshold for pass/fail labels. Default: the scale's midpoint.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the split and of the bootstrap.")] = 0,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples of test groups for the intervals.")] = 2000,
    as_json: AsJsonOpt = False,
) -> None:
    """Align a judge's rubric with human labels, and say on a sealed test set whether it now agrees with people better.

    The labels are split (seeded, grouped by task or conversation, stratified by label) into fit,
    select and test. Candidates built from the fit set (few-shot examples, criteria rewritten by a
    judge from the disagreements, a monotone recalibration of the score) are judged on the select
    set and the best is chosen; only it is judged on the test set, once. "Improved" is said, and
    the aligned rubric written to OUT/prompts with its provenance, only when the paired bootstrap
    interval of kappa's gain lies above 0.
    """
    from ..align.render import align_tables
    from ..align.workflow import CANDIDATES, AlignOptions
    from ..align.workflow import align as run_align
    from ..errors import UserInputError

    try:
        shares = tuple(float(part) for part in split.split(","))
    except ValueError:
        raise UserInputError(f"--split {split}: give three numbers (fit, select, test) separated by commas") from None
    if len(shares) != 3:
        raise UserInputError(f"--split {split}: give three shares (fit, select, test), each above 0, that sum to 1")
    options = AlignOptions.from_judge(
        judge,
        run=run_dir,
        labels=labels,
        rubric=rubric,
        out=out,
        judge=judge_name,
        writer=writer,
        input=input,
        prompts=prompts or [],
        seed=seed,
        shares=(shares[0], shares[1], shares[2]),
        shots=shots,
        candidates=tuple(c.value for c in candidate) if candidate else CANDIDATES,
        threshold=threshold,
        resamples=resamples,
    )
    result = run_async(run_align(options))
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        align_tables(result, make_console())
    raise typer.Exit(result.exit_code)
