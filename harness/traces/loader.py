"""Stream transcript records from JSONL or a JSON array, one at a time, never the whole file.

Every problem is a :class:`~harness.errors.TranscriptError` reading ``FILE:LINE: field: problem``.
``scan`` is the validation pass the runner makes before any judge call, so a typo never costs money;
``iter_transcripts`` is the pass that feeds the judges.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ..errors import TranscriptError, UserInputError
from ..jsonlines import check_readable_file
from ..rubrics.inputs import inputs_of
from ..transcripts.models import Transcript
from ..transcripts.raw import MAX_RECORD_BYTES, RawRecord, iter_json_records
from ..validation import first_problem
from .reader import iter_records, resolve_format

__all__ = [
    "MAX_RECORD_BYTES",
    "OnBad",
    "RawRecord",
    "ScanResult",
    "iter_checked",
    "iter_raw",
    "iter_transcripts",
    "parse_record",
    "scan",
    "stdin_as_file",
]

OnBad = Literal["fail", "skip"]


@dataclass(slots=True)
class ScanResult:
    """What the validation pass found: how many good records, and every bad one."""

    good: int = 0
    bad: list[TranscriptError] = field(default_factory=list)
    #: rubric inputs (``rubrics.inputs``) that at least one good record supplies
    inputs_seen: set[str] = field(default_factory=set)


@contextmanager
def stdin_as_file(path: Path) -> Iterator[Path]:
    """``path`` itself, or for ``-`` standard input copied whole to a temporary file first (the run
    reads its input twice: validation, then judging); the copy is removed afterwards."""
    if str(path) != "-":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="harness-stdin-") as directory:
        spooled = Path(directory) / "stdin.jsonl"
        with spooled.open("wb") as fh:
            shutil.copyfileobj(sys.stdin.buffer, fh, 1 << 20)
        yield spooled


def iter_raw(path: str | Path, format: str = "auto") -> Iterator[RawRecord]:
    """Yield raw records from a ``.jsonl`` file, a file holding one JSON array, or a trace file.

    ``format`` is ``jsonl``, a trace format of :mod:`harness.traces`, or ``auto`` (by content).
    """
    path = Path(path)
    check_readable_file(path)
    if format != "jsonl":
        format = resolve_format(path, format)
        if format != "jsonl":
            yield from (RawRecord(line, text, error) for line, text, error in iter_records(path, format))  # type: ignore[arg-type]
            return
    yield from iter_json_records(path)


def parse_record(path: str | Path, raw: RawRecord) -> Transcript:
    """Validate one raw record, translating pydantic's error into ``FILE:LINE: field: problem``."""
    if raw.error is not None:
        raise raw.error
    text = raw.text
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TranscriptError(str(path), raw.line, "<record>", f"is not valid UTF-8 (byte {exc.start})") from None
    try:
        return Transcript.model_validate_json(text)
    except ValidationError as exc:
        first = first_problem(exc, whole="<record>")
        if first.kind == "json_invalid":
            raise TranscriptError(str(path), raw.line, "<json>", f"invalid JSON ({first.problem.removeprefix('Invalid JSON: ')})") from None
        loc, problem = first.field, first.problem
        more = exc.error_count() - 1
        if more:
            problem += f" (and {more} more problem{'s' if more > 1 else ''} in this record)"
        raise TranscriptError(str(path), raw.line, loc, problem) from None


def iter_transcripts(path: str | Path, on_bad: OnBad = "fail", format: str = "auto") -> Iterator[tuple[int, Transcript]]:
    """Yield ``(line, transcript)``; with ``on_bad="skip"`` bad records (and repeated ids) are passed over.

    Run :func:`scan` first: it is the pass that reports problems and checks ids are unique.
    """
    seen: set[str] = set()
    for raw in iter_raw(path, format):
        try:
            record = parse_record(path, raw)
        except TranscriptError:
            if on_bad == "skip":
                continue
            raise
        if record.id in seen:
            if on_bad == "skip":
                continue
            raise TranscriptError(str(path), raw.line, "id", f"duplicate id {record.id!r}")
        seen.add(record.id)
        yield raw.line, record


def iter_checked(path: str | Path, on_bad: OnBad, bad: list[TranscriptError], format: str = "auto") -> Iterator[tuple[int, Transcript]]:
    """Yield ``(line, transcript)`` of each valid record; a bad record, or an id seen before (the
    problem names the line of the first), raises with ``on_bad="fail"`` and with ``"skip"`` is
    appended to ``bad`` and passed over."""
    first_line: dict[str, int] = {}
    for raw in iter_raw(path, format):
        try:
            record = parse_record(path, raw)
            if record.id in first_line:
                raise TranscriptError(str(path), raw.line, "id", f"duplicate id {record.id!r} (first on line {first_line[record.id]})")
        except TranscriptError as exc:
            if on_bad == "fail":
                raise
            bad.append(exc)
            continue
        first_line[record.id] = raw.line
        yield raw.line, record


def scan(path: str | Path, on_bad: OnBad = "fail", limit: int | None = None, format: str = "auto", *, inputs: bool = True) -> ScanResult:
    """Validate every record (up to ``limit`` good ones) before any judge is called.

    With ``on_bad="fail"`` the first problem raises; with ``"skip"`` every problem is collected.
    Duplicate ids are a problem at the repeat, naming the line of the first. ``inputs``: collect
    ``inputs_seen`` (which resolves the records that need it); a run whose rubrics are named needs
    none, and its records are then resolved once, by the run.
    """
    result = ScanResult()
    records = iter_checked(path, on_bad, result.bad, format)
    if limit is not None:
        records = itertools.islice(records, max(limit, 0))  # reads no record past the limit
    if not inputs:
        for _ in records:
            result.good += 1
    for _, record in records:
        result.good += 1
        result.inputs_seen |= inputs_of(record)
    if result.good == 0 and not result.bad:
        raise UserInputError(f"{path}: holds no transcripts")
    return result
