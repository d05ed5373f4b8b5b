"""``harness view``: the local web viewer over a folder of runs (harness/view/)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UserInputError
from .common import ANALYSE, app


@app.command(rich_help_panel=ANALYSE)
def view(
    runs_dir: Annotated[Path, typer.Argument(help="A folder of run directories (or one run directory).")] = Path("runs"),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1; 0 picks a free one.")] = 8765,
    annotator: Annotated[
        list[str] | None, typer.Option("--annotator", help="An annotator of the runs' annotation queues (give it once per annotator).")
    ] = None,
    overlap: Annotated[int, typer.Option(help="How many annotators label each item of a queue.")] = 1,
    prompts: Annotated[list[Path] | None, typer.Option("--prompts", help="Directory of the runs' custom rubric files (for their scales).")] = None,
) -> None:
    """Browse runs, compare two, read the agent's steps and label transcripts in a local web page.

    The runs list, one run's figures and transcripts, two runs side by side, the agent's steps, and
    an annotation queue over a labels design (harness labels sample). Serves on 127.0.0.1 only and reads the runs without changing them; labels given in a queue go
    to RUN/labels/annotators/NAME.jsonl, the format harness infer and agreement read.
    """
    if importlib.util.find_spec("flask") is None:
        raise UserInputError("harness view needs Flask: pip install 'harness[view]'")
    if not runs_dir.is_dir():
        raise UserInputError(f"{runs_dir}: no such folder of runs")
    from ..view import serve

    serve(str(runs_dir), port=port, annotators=tuple(annotator or ()), overlap=overlap, prompts=tuple(str(p) for p in prompts or ()))
