"""Reading back what a run wrote: the one way into a run directory for analysis, the report and merge.

It sits low, beside the summary.json schema it reads (``metrics/schema.py``): the writers
(``outputs/``) and the readers (``analysis/``, ``report/``, ``labels/``) both stand on it.

``open_run_dir`` checks the directory and its summary.json; ``read_run`` adds the readers of its
typed rows (``RunRows``: judgments and results, streamed, ``harness/rows.py``); ``resolve_input`` finds the
transcripts file the run read; ``version_note`` and
``interrupted_note`` are the notes both readers attach when a rubric file has changed since the
run or the run was cut short. Every problem is one line naming the file. A directory with a run's
rows or unfinished files and no summary.json (a run killed before it finished) is
`RunIncomplete`, never read as a finished run (``unfinished_files`` names what such a run left).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import RunIncomplete, UserInputError
from .metrics.schema import RunSummary
from .rows import ROW_FILES, JudgmentRow, ResultRow, iter_judgment_rows, iter_result_rows, judgments_path, results_path
from .rubrics.rubric import Rubric, rubric_versions

#: The temporary files a run writes its rows to before it renames them into place
#: (``outputs/files.StagedFile``: ``.NAME.tmp-PID``); one left in a run directory is a run's that
#: was killed (or is still running) before it finished.
_UNFINISHED = ".*.tmp-*"
#: The rows a run writes; found without a summary.json, they are a killed run's.
_ROWS = ROW_FILES


def unfinished_files(run: Path) -> list[str]:
    """The names of the files a run that did not finish left in ``run`` (sorted; empty when none)."""
    try:
        return sorted(p.name for p in run.glob(_UNFINISHED))
    except OSError:
        return []


def open_run_dir(path: str | Path) -> tuple[Path, RunSummary]:
    """The run directory and its summary.json, checked. A directory a killed run left (rows or
    unfinished files, no summary.json) is `RunIncomplete`, never read as a finished run."""
    run = Path(path)
    if not run.is_dir():
        raise UserInputError(f"{run}: no such run directory")
    if not (run / "summary.json").exists():
        left = [name for name in _ROWS if (run / name).exists()] + unfinished_files(run)
        if left:
            shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            raise RunIncomplete(
                f"{run}: incomplete run: no summary.json, only {shown}: the run was killed (or is still running) before it finished; "
                "rerun it to completion"
            )
    return run, read_summary(run)


@dataclass(frozen=True, slots=True)
class RunRows:
    """A finished run read back: its summary and its typed rows (``harness/rows.py``), each file
    streamed and validated once a pass (a pass is one call of ``judgments()`` or ``results()``)."""

    path: Path
    summary: RunSummary

    @property
    def judgments_file(self) -> Path:
        return judgments_path(self.path)

    @property
    def results_file(self) -> Path:
        return results_path(self.path)

    def judgments(self) -> Iterator[JudgmentRow]:
        """judgments.jsonl's rows in order; a missing file is one line naming the run."""
        if not self.judgments_file.is_file():
            raise UserInputError(f"{self.path}: not a run directory (no {self.judgments_file.name})")
        return iter_judgment_rows(self.judgments_file)

    def results(self) -> Iterator[ResultRow]:
        """results.jsonl's rows in order (none when the run wrote no results file)."""
        if not self.results_file.is_file():
            return iter(())
        return iter_result_rows(self.results_file)


def read_run(path: str | Path) -> RunRows:
    """A run directory, checked as ``open_run_dir`` checks it, with the readers of its rows."""
    run, summary = open_run_dir(path)
    return RunRows(run, summary)


def run_rows(run: Path, summary: RunSummary) -> RunRows:
    """The row readers of a run directory already opened (its summary read)."""
    return RunRows(run, summary)


def refuse_per_turn(run: Path, summary: RunSummary, command: str) -> None:
    """A command that shows a run's judgments one per transcript cannot show a run judged per
    turn (``harness run --turns``) yet: refused in one line, never shown as if each turn were a
    transcript of its own."""
    conversations = summary.conversations
    if conversations is not None and conversations.judged_as == "per turn":
        raise UserInputError(
            f"{run}: judged per turn (--turns {conversations.turns}); {command} does not show a run judged per turn yet "
            "(compare, gate, passk and infer read its conversations' scores; results.jsonl holds each turn's)"
        )


def read_summary(run: Path) -> RunSummary:
    """A run directory's summary.json, read through the schema it was written with
    (``metrics/schema.py``); every problem is one line naming the file."""
    path = run / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserInputError(f"{run}: not a run directory (no summary.json; write one with harness run --out)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: <json>: invalid JSON ({exc})") from None
    except RecursionError:
        raise UserInputError(f"{path}: <json>: invalid JSON (nested too deeply)") from None
    return RunSummary.read(path, summary)


def resolve_input(run: Path, recorded: str | None, given: Path | None) -> Path | None:
    """The run's transcripts file: ``given`` (``--input``), else the path summary.json records; a
    relative path is relative to where the run was started: usually here, else near the run."""
    if given is not None:
        return given
    if not recorded:
        return None
    path = Path(recorded)
    if path.is_absolute():
        return path
    for candidate in (path, run / path, run.parent / path, run.parent.parent / path):
        if candidate.is_file():
            return candidate
    return path


def version_note(name: str, version: object, rubric: Rubric) -> str | None:
    """A note when the rubric file is not the version the run used; None when it is (a built-in
    rubric's file is both its version ``V``, inline, and ``V-data``, the data layout)."""
    if str(version) in rubric_versions(rubric):
        return None
    return (
        f"rubric {name}: the run used version {version}, the rubric file ({rubric.source}) is version "
        f"{rubric.version}; its scale and direction are taken from the file"
    )


def interrupted_note(summary: RunSummary) -> str | None:
    if not summary.interrupted:
        return None
    planned = summary.planned_transcripts
    if planned is not None and planned > summary.transcripts:
        return (
            f"the run was interrupted after {summary.transcripts:,} of its {planned:,} transcripts: the {planned - summary.transcripts:,} "
            "it did not reach were never judged; calls it had queued are unscored (reason interrupted)"
        )
    return "the run was interrupted: calls it had queued are unscored (reason interrupted)"
