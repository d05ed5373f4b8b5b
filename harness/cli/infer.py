"""Human labels that correct the judge: ``harness labels sample|collect`` and ``harness infer``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ..errors import HarnessError, OutputError, UserInputError
from .common import ANALYSE, SuccessOpt, ThresholdOpt, app, err, make_console, pass_fail_cuts
from .common import fail as _fail

if TYPE_CHECKING:
    from ..labels.schema import InferResult

labels_app = typer.Typer(no_args_is_help=True, help="Choose the transcripts a human labels (with a recorded design), and collect the labels.")
app.add_typer(labels_app, name="labels", rich_help_panel=ANALYSE)
PromptsOpt = Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the run's custom rubric files (for their scales).")]


@labels_app.command("sample")
def labels_sample(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by harness run --out, or a pairwise.json of harness pairwise.")],
    n: Annotated[int, typer.Option("--n", help="Transcripts to label (the expected number for --strategy active).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the draw (recorded in design.json).")] = 0,
    strategy: Annotated[str, typer.Option(help="uniform (a simple random sample) or active (more where the judge is uncertain).")] = "uniform",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Directory for design.json, to_label.jsonl, to_label.csv. Default: RUN_DIR/labels.")
    ] = None,
    rubric: Annotated[list[str] | None, typer.Option("--rubric", help="Rubric to label (repeatable). Default: every rubric of the run.")] = None,
    judge: Annotated[str | None, typer.Option(help="Whose uncertainty drives --strategy active. Default: the run's first judge.")] = None,
    uncertainty: Annotated[
        str, typer.Option(help="active: spread (repeated samples), logprob (score distribution), error-model (fitted on --labels) or auto.")
    ] = "auto",
    floor: Annotated[float, typer.Option(help="active: every transcript's probability is at least FLOOR x n/N.")] = 0.2,
    labels: Annotated[Path | None, typer.Option("--labels", help="active, error-model: labels already given, to fit the judge's error.")] = None,
    prompts: PromptsOpt = None,
) -> None:
    """Draw the transcripts to label and record the design (who was eligible, each one's probability).

    The labeller gets to_label.jsonl and to_label.csv (UTF-8 with a byte-order mark, the agent's
    steps in its last column), without the judge's scores so they do not anchor the labels; harness
    labels collect turns the filled CSV into labels JSONL, and harness view labels in the browser.
    """
    from ..labels.design import sample_labels
    from ..labels.pairwise import is_pairwise_file, sample_pairs

    try:
        if is_pairwise_file(run_dir):
            design = sample_pairs(run_dir, n, seed, out, strategy, judge, floor)
        else:
            design = sample_labels(run_dir, n, seed, out, strategy, rubric or [], judge, uncertainty, floor, labels, prompts or [])  # type: ignore[arg-type]
    except HarnessError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(OutputError(f"{out or run_dir}: {exc.strerror or exc}")) from None
    folder = out or (run_dir.parent if run_dir.is_file() else run_dir) / "labels"
    for note in design.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    err.print(
        f"[green]drew {design.drawn_count} of {design.eligible_count} transcripts ({escape(design.sampling)}); "
        f"wrote {escape(str(folder))}/design.json, to_label.jsonl, to_label.csv[/]",
        highlight=False,
        soft_wrap=True,
    )


@labels_app.command("collect")
def labels_collect(
    csv_file: Annotated[Path, typer.Argument(help="A filled to_label.csv.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Labels JSONL to write ({transcript_id, rubric, label} rows).")],
) -> None:
    """Turn a filled to_label.csv into the labels JSONL that harness infer and harness agreement read."""
    from ..labels.design import collect_csv

    try:
        counts = collect_csv(csv_file, out)
    except HarnessError as exc:
        raise _fail(exc) from None
    err.print(
        f"[green]wrote {counts.labels} labels to {escape(str(out))}[/] ({counts.blank} rows left blank: not written)",
        highlight=False,
        soft_wrap=True,
    )


@app.command(rich_help_panel=ANALYSE)
def infer(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="A run directory, two (A then B) for the corrected difference B - A, or a pairwise.json of harness pairwise.")
    ],
    labels: Annotated[list[Path], typer.Option("--labels", help="Human labels JSONL (as for harness agreement); one per run when comparing.")],
    design: Annotated[
        Path | None, typer.Option(help="design.json of harness labels sample. Default: beside the labels, else RUN_DIR/labels/.")
    ] = None,
    no_design: Annotated[
        bool, typer.Option("--no-design", help="Ignore any design file (the labels are then flagged as not a random sample).")
    ] = False,
    alpha: Annotated[float, typer.Option(help="1 - confidence of the intervals.")] = 0.05,
    min_labels: Annotated[int, typer.Option("--min-labels", help="Refuse a metric with fewer labels than this.")] = 20,
    success: SuccessOpt = None,
    threshold: ThresholdOpt = None,
    save: Annotated[bool, typer.Option(help="Write RUN_DIR/inference.json (one run), which harness report shows.")] = True,
    prompts: PromptsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """Estimate what humans would score, per rubric and judge, from a few human labels and the judge's scores.

    Labels on a recorded random design give valid intervals; others are flagged. With two runs,
    the corrected paired difference B - A and a verdict per metric (Holm-adjusted). When every
    metric is refused (too few labels, none for the run's transcripts), it exits 2 after printing why.
    A run that did not judge all it was given gets a note with the counts (the estimates are of the
    transcripts it judged), and --json a completeness section; the exit code is not changed by it.
    """
    from ..labels.infer import infer_report
    from ..labels.pairwise import infer_pairwise, is_pairwise_file, pairwise_lines
    from ..labels.render import infer_tables
    from ..outputs.files import atomic_write_text

    if len(run_dirs) == 1 and is_pairwise_file(run_dirs[0]):
        try:
            found = infer_pairwise(run_dirs[0], labels[0], design, alpha, min_labels, no_design)
        except HarnessError as exc:
            raise _fail(exc) from None
        if as_json:
            typer.echo(json.dumps(found, indent=2, allow_nan=False))
        else:
            for line in pairwise_lines(found):
                typer.echo(line)
        _estimated_something(found)
        return
    try:
        result = infer_report(run_dirs, labels, design, alpha, min_labels, pass_fail_cuts(threshold, success), prompts or [], no_design)
        if save and len(run_dirs) == 1:
            atomic_write_text(run_dirs[0] / "inference.json", json.dumps(result.as_json(), indent=2, allow_nan=False) + "\n")
    except HarnessError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(OutputError(f"{run_dirs[0]}/inference.json: {exc.strerror or exc}")) from None
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2, allow_nan=False))
    else:
        infer_tables(result, make_console())
    _estimated_something(result)


def _estimated_something(result: InferResult | dict[str, Any]) -> None:
    """Exit 2 (bad input) when the labels allowed no estimate at all: a script must not read success."""
    from ..labels.infer import nothing_estimated

    why = nothing_estimated(result)
    if why is not None:
        raise _fail(UserInputError(f"nothing estimated: {why}"))
