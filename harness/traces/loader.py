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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pydantic import ValidationError

from ..errors import TranscriptError, UserInputError
from ..injection.detect import Finding, scan_transcript
from ..jsonlines import check_readable_file
from ..rubrics.inputs import inputs_of
from ..transcripts.models import Resolved, Transcript
from ..transcripts.raw import MAX_RECORD_BYTES, RawRecord, iter_json_records
from ..validation import first_problem
from .reader import iter_records, resolve_format
from .seen import SeenIds
from .sessions import Sessions


class _Share(Protocol):
    """What ``findings_of`` asks of a shard (``planning.shard.Shard``, a part above this one)."""

    def holds(self, ordinal: int) -> bool: ...


__all__ = [
    "MAX_RECORD_BYTES",
    "OnBad",
    "RawRecord",
    "ScanResult",
    "iter_checked",
    "iter_raw",
    "iter_resolved_for_agent",
    "iter_transcripts",
    "parse_record",
    "required_inputs",
    "scan",
    "scan_required",
    "stdin_as_file",
]

OnBad = Literal["fail", "skip"]

#: Inputs a record must supply whenever the run judges a rubric that reads them. ``response`` is
#: the answer being judged: a record without one (absent, blank, or ``messages`` with no final
#: assistant text) is refused rather than judged unscored. Other inputs stay optional (a record
#: without ``contexts`` is unscored ``missing_input`` for faithfulness, never refused).
REQUIRED_WHEN_READ: tuple[str, ...] = ("response",)


def required_inputs(rubric_inputs: Iterable[Iterable[str]]) -> frozenset[str]:
    """The inputs of :data:`REQUIRED_WHEN_READ` that one of the rubrics (their ``inputs``) reads."""
    read = {name for inputs in rubric_inputs for name in inputs}
    return frozenset(name for name in REQUIRED_WHEN_READ if name in read)


def _lacking_problem(record: Transcript, name: str) -> str:
    """What is wrong with a record that lacks the required input ``name``."""
    if name == "response" and record.response is None and record.messages is not None:
        return "is required, and `messages` has no final assistant message with text to take it from"
    if getattr(record, name) is not None:
        return "is required and must not be empty"
    return "required field is missing"


@dataclass(slots=True)
class ScanResult:
    """What the validation pass found: how many good records, and every bad one."""

    good: int = 0
    bad: list[TranscriptError] = field(default_factory=list)
    #: rubric inputs (``rubrics.inputs``) that at least one good record supplies
    inputs_seen: set[str] = field(default_factory=set)
    #: transcript id -> the judge-directed text found in its inputs (``detect=True``; harness/injection)
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    #: transcript id -> its ordinal among the good records (0-based), for each flagged one: a shard's share
    flagged_ordinal: dict[str, int] = field(default_factory=dict)
    #: each input of ``REQUIRED_WHEN_READ`` some good record lacks: the first such record's line
    #: and problem, and how many lack it (``scan_required`` refuses them when a rubric reads it)
    lacking: dict[str, tuple[int, str, int]] = field(default_factory=dict)

    def findings_of(self, shard: _Share | None) -> dict[str, list[Finding]]:
        """The findings of the transcripts ``shard`` holds (all without a shard)."""
        if shard is None:
            return self.findings
        return {tid: found for tid, found in self.findings.items() if shard.holds(self.flagged_ordinal[tid])}


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


def iter_raw(path: str | Path, format: str = "auto", sessions: Sessions = "on") -> Iterator[RawRecord]:
    """Yield raw records from a ``.jsonl`` file, a file holding one JSON array, or a trace file.

    ``format`` is ``jsonl``, a trace format of :mod:`harness.traces`, or ``auto`` (by content);
    ``sessions`` whether a trace file's sessions are read as conversations (:mod:`.sessions`).
    """
    path = Path(path)
    check_readable_file(path)
    if format != "jsonl":
        format = resolve_format(path, format)
        if format != "jsonl":
            yield from (RawRecord(line, text, error) for line, text, error in iter_records(path, format, sessions))  # type: ignore[arg-type]
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


def _check_required(path: str | Path, line: int, record: Transcript, require: frozenset[str]) -> None:
    if require:
        present = inputs_of(record)
        for name in REQUIRED_WHEN_READ:
            if name in require and name not in present:
                raise TranscriptError(str(path), line, name, _lacking_problem(record, name))


def iter_transcripts(
    path: str | Path, on_bad: OnBad = "fail", format: str = "auto", require: frozenset[str] = frozenset(), *, sessions: Sessions = "on"
) -> Iterator[tuple[int, Transcript]]:
    """Yield ``(line, transcript)``; with ``on_bad="skip"`` bad records (and repeated ids) are passed over.
    A record lacking an input of ``require`` (``required_inputs``) is a bad record.

    Run :func:`scan` first: it is the pass that reports problems and checks ids are unique.
    """
    seen: set[str] = set()
    for raw in iter_raw(path, format, sessions):
        try:
            record = parse_record(path, raw)
            _check_required(path, raw.line, record, require)
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


def iter_checked(
    path: str | Path,
    on_bad: OnBad,
    bad: list[TranscriptError],
    format: str = "auto",
    require: frozenset[str] = frozenset(),
    *,
    sessions: Sessions = "on",
) -> Iterator[tuple[int, Transcript]]:
    """Yield ``(line, transcript)`` of each valid record; a bad record (one lacking an input of
    ``require`` included), or an id seen before (the problem names the line of the first), raises
    with ``on_bad="fail"`` and with ``"skip"`` is appended to ``bad`` and passed over."""

    def checked(raw: RawRecord) -> Transcript:
        record = parse_record(path, raw)
        _check_required(path, raw.line, record, require)
        return record

    return _iter_unique(path, on_bad, bad, format, sessions, checked)


def iter_resolved_for_agent(
    path: str | Path, on_bad: OnBad, bad: list[TranscriptError], format: str = "auto", *, sessions: Sessions = "on"
) -> Iterator[tuple[int, Resolved]]:
    """:func:`iter_checked` resolved, as an agent-only run reads its input: each record validated
    once, into the ``Resolved`` the agent metrics read (``transcripts.fast``); a record of another
    shape, or a bad one, is read by :func:`parse_record` (the same records pass, with the same
    messages). Ids repeated are refused as :func:`iter_checked` refuses them."""
    from ..transcripts.fast import AgentReader

    resolve = AgentReader().resolve

    def resolved(raw: RawRecord) -> Resolved:
        found = resolve(raw.text) if raw.error is None else None
        return parse_record(path, raw).resolved() if found is None else found

    return _iter_unique(path, on_bad, bad, format, sessions, resolved)


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


_Value = TypeVar("_Value", bound=_HasId)


def _iter_unique(
    path: str | Path, on_bad: OnBad, bad: list[TranscriptError], format: str, sessions: Sessions, value: Callable[[RawRecord], _Value]
) -> Iterator[tuple[int, _Value]]:
    """The loop of :func:`iter_checked` and :func:`iter_resolved_for_agent`: ``value`` of each raw
    record (raising ``TranscriptError`` for a bad one), refused when its id was seen before; a
    refusal raises with ``on_bad="fail"``, with ``"skip"`` is appended to ``bad`` and passed over.
    One call of ``value`` per record and nothing more: the agent path is a benchmark's hot path.

    The ids are kept as their hashes (:class:`.seen.SeenIds`, a few bytes an id); the first hash
    seen twice switches to exact ids and first lines, read again from the records before it
    (:func:`_first_lines`), so a refusal, and the line it names, is always of the same id."""
    seen = SeenIds()
    exact: dict[str, int] | None = None  # id -> the line of its first record, once a hash repeats
    read = 0  # raw records read before this one
    for raw in iter_raw(path, format, sessions):
        read += 1
        try:
            record = value(raw)
            rid = record.id
            if exact is None and not seen.add(rid):
                exact = _first_lines(path, format, sessions, value, read - 1)
            if exact is not None and rid in exact:
                raise TranscriptError(str(path), raw.line, "id", f"duplicate id {rid!r} (first on line {exact[rid]})")
        except TranscriptError as exc:
            if on_bad == "fail":
                raise
            bad.append(exc)
            continue
        if exact is not None:
            exact[rid] = raw.line
        yield raw.line, record


def _first_lines(path: str | Path, format: str, sessions: Sessions, value: Callable[[RawRecord], _Value], count: int) -> dict[str, int]:
    """The line of the first good record of each id among the first ``count`` raw records (what
    :func:`_iter_unique` kept as exact ids before it kept hashes): bad records are passed over,
    as the pass passed over them."""
    first: dict[str, int] = {}
    for raw in itertools.islice(iter_raw(path, format, sessions), count):
        try:
            record = value(raw)
        except TranscriptError:
            continue
        first.setdefault(record.id, raw.line)
    return first


def scan(
    path: str | Path,
    on_bad: OnBad = "fail",
    limit: int | None = None,
    format: str = "auto",
    require: frozenset[str] = frozenset(),
    *,
    detect: bool = False,
    sessions: Sessions = "on",
) -> ScanResult:
    """Validate every record (up to ``limit`` good ones) before any judge is called.

    With ``on_bad="fail"`` the first problem raises; with ``"skip"`` every problem is collected.
    Duplicate ids are a problem at the repeat, naming the line of the first; a record lacking an
    input of ``require`` is a problem at its line. ``detect``: each good record's judged inputs
    are scanned for judge-directed text too (``injection.detect``).
    """
    result = ScanResult()
    records = iter_checked(path, on_bad, result.bad, format, require, sessions=sessions)
    if limit is not None:
        records = itertools.islice(records, max(limit, 0))  # reads no record past the limit
    lacking = result.lacking
    for line, record in records:
        result.good += 1
        present = inputs_of(record)
        result.inputs_seen |= present
        for name in REQUIRED_WHEN_READ:
            if name not in present:
                first = lacking.get(name)
                lacking[name] = (line, _lacking_problem(record, name), 1) if first is None else (first[0], first[1], first[2] + 1)
        if detect and (found := scan_transcript(record)):
            result.findings[record.id] = found
            result.flagged_ordinal[record.id] = result.good - 1
    if result.good == 0 and not result.bad:
        raise UserInputError(f"{path}: holds no transcripts")
    return result


def scan_required(
    path: str | Path,
    scanned: ScanResult,
    require: frozenset[str],
    readers: dict[str, str],
    on_bad: OnBad = "fail",
    limit: int | None = None,
    format: str = "auto",
    *,
    detect: bool = False,
    sessions: Sessions = "on",
) -> ScanResult:
    """``scanned`` once the run's rubrics are chosen: a record lacking an input of ``require`` that
    a chosen rubric reads (``readers``: the input's first such rubric) is a bad record. With
    ``on_bad="fail"`` the first raises, naming its line, the field and the rubric; with ``"skip"``
    the file is scanned again with the requirement, so such records are collected and passed over
    (the judging pass reads with the same ``require``)."""
    missing = [name for name in REQUIRED_WHEN_READ if name in require and name in scanned.lacking]
    if not missing:
        return scanned
    if on_bad == "fail":
        name = missing[0]
        line, problem, count = scanned.lacking[name]
        others = f"; {count - 1} more record{'s lack' if count > 2 else ' lacks'} it" if count > 1 else ""
        raise TranscriptError(str(path), line, name, f"{problem} (rubric {readers[name]!r} judges it{others})")
    return scan(path, on_bad, limit, format, require, detect=detect, sessions=sessions)
