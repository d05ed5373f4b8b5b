"""Stream transcript records from JSONL or a JSON array, one at a time, never the whole file.

Every problem is a :class:`~harness.errors.TranscriptError` reading ``FILE:LINE: field: problem``.
``scan`` is the validation pass the runner makes before any judge call, so a typo never costs money;
``iter_transcripts`` is the pass that feeds the judges.
"""

from __future__ import annotations

import codecs
import json
import re
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
from ..validation import first_problem
from .models import Transcript

#: A record (one JSONL line or one array element) larger than this is refused with a clear message.
#: 10 MB responses are fine; the limit exists so a corrupt file cannot exhaust memory.
MAX_RECORD_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20

OnBad = Literal["fail", "skip"]


@dataclass(slots=True)
class RawRecord:
    line: int
    text: bytes | str


@dataclass(slots=True)
class ScanResult:
    """What the validation pass found: how many good records, and every bad one."""

    good: int = 0
    bad: list[TranscriptError] = field(default_factory=list)
    #: rubric inputs (query, response, contexts, reference) that at least one good record supplies
    inputs_seen: set[str] = field(default_factory=set)


_BOM = b"\xef\xbb\xbf"
_JSON_WS = re.compile(r"[ \t\r\n]*")
_AFTER_NUMBER = re.compile(r"[ \t\r\n,\]]")


def _iter_jsonl(path: Path) -> Iterator[RawRecord]:
    with path.open("rb") as fh:
        number = 0
        # readline with a bound: a file with no newline (a corrupt or binary file) is refused after
        # MAX_RECORD_BYTES, never read whole into memory first.
        while line := fh.readline(MAX_RECORD_BYTES + 1):
            number += 1
            if len(line) > MAX_RECORD_BYTES:
                raise TranscriptError(str(path), number, "<record>", f"record is larger than the {MAX_RECORD_BYTES // 2**20} MiB limit")
            if number == 1:
                line = line.removeprefix(_BOM)
            if line.strip():
                yield RawRecord(number, line)


def _iter_json_array(path: Path) -> Iterator[RawRecord]:
    """Yield the elements of a top-level JSON array without reading the file whole.

    ``buf[pos:]`` is the text not yet consumed and ``line`` the line ``pos`` is on. The buffer is
    compacted only when more is read, so an element costs its own length, not a copy of the rest
    of the buffer (small records would otherwise make splitting a large file crawl).
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()  # keeps a character split between reads
    with path.open("rb") as fh:
        buf, pos, line, eof = "", 0, 1, False

        def fill() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            chunk = fh.read(_CHUNK)
            eof = not chunk
            held = len(utf8.getstate()[0])  # bytes of a split character from the last read
            try:
                text = utf8.decode(chunk, final=eof)
            except UnicodeDecodeError as exc:
                bad = line + buf.count("\n", pos) + chunk[: max(exc.start - held, 0)].count(b"\n")
                raise TranscriptError(str(path), bad, "<file>", "is not valid UTF-8") from None
            if text:  # unchanged otherwise, so offsets into it stay valid
                buf, pos = buf[pos:] + text, 0
            return bool(text) or not eof

        def skip_ws() -> None:
            nonlocal pos, line
            while True:
                end = _JSON_WS.match(buf, pos).end()  # type: ignore[union-attr]
                line += buf.count("\n", pos, end)
                pos = end
                if pos < len(buf) or not fill():
                    return

        skip_ws()
        if buf.startswith("\ufeff", pos):
            pos += 1
            skip_ws()
        if not buf.startswith("[", pos):
            raise TranscriptError(str(path), line, "<file>", "expected a JSON array")
        pos += 1
        first = True
        while True:
            skip_ws()
            if buf.startswith("]", pos):
                pos += 1
                skip_ws()
                if pos < len(buf):  # read whole or refused: nothing may follow the array
                    raise TranscriptError(str(path), line, "<file>", "data after the JSON array (one array per file)")
                return
            if not first:
                if not buf.startswith(",", pos):
                    raise TranscriptError(str(path), line, "<file>", "expected ',' or ']' between records")
                pos += 1
                skip_ws()
            first = False
            while True:
                try:
                    _, end = decoder.raw_decode(buf, pos)
                except RecursionError:
                    raise TranscriptError(str(path), line, "<json>", "nested too deeply") from None
                except json.JSONDecodeError as exc:
                    if len(buf) - pos > MAX_RECORD_BYTES:
                        raise TranscriptError(str(path), line, "<record>", "record is too large or malformed") from None
                    if not fill():
                        raise TranscriptError(str(path), line + buf.count("\n", pos, exc.pos), "<json>", exc.msg) from None
                    continue
                # A number ends at the next space, ',' or ']': until one is read it may go on.
                if buf[end - 1] in '}]"' or _AFTER_NUMBER.search(buf, end) or len(buf) - pos > MAX_RECORD_BYTES or not fill():
                    break
            yield RawRecord(line, buf[pos:end])
            line += buf.count("\n", pos, end)
            pos = end


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


def iter_raw(path: str | Path) -> Iterator[RawRecord]:
    """Yield raw records from a ``.jsonl`` file or a file holding one JSON array."""
    path = Path(path)
    check_readable_file(path)
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    yield from (_iter_json_array(path) if head.startswith(b"[") else _iter_jsonl(path))


def parse_record(path: str | Path, raw: RawRecord) -> Transcript:
    """Validate one raw record, translating pydantic's error into ``FILE:LINE: field: problem``."""
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


def iter_transcripts(path: str | Path, on_bad: OnBad = "fail") -> Iterator[tuple[int, Transcript]]:
    """Yield ``(line, transcript)``; with ``on_bad="skip"`` bad records (and repeated ids) are passed over.

    Run :func:`scan` first: it is the pass that reports problems and checks ids are unique.
    """
    seen: set[str] = set()
    for raw in iter_raw(path):
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


def scan(path: str | Path, on_bad: OnBad = "fail", limit: int | None = None) -> ScanResult:
    """Validate every record (up to ``limit`` good ones) before any judge is called.

    With ``on_bad="fail"`` the first problem raises; with ``"skip"`` every problem is collected.
    Duplicate ids are a problem at the repeat, naming the line of the first.
    """
    result = ScanResult()
    first_line: dict[str, int] = {}
    for raw in iter_raw(path):
        if limit is not None and result.good >= limit:
            break
        try:
            record = parse_record(path, raw)
            if record.id in first_line:
                raise TranscriptError(str(path), raw.line, "id", f"duplicate id {record.id!r} (first on line {first_line[record.id]})")
        except TranscriptError as exc:
            if on_bad == "fail":
                raise
            result.bad.append(exc)
            continue
        first_line[record.id] = raw.line
        result.good += 1
        result.inputs_seen |= record.resolved().present_inputs()
    if result.good == 0 and not result.bad:
        raise UserInputError(f"{path}: holds no transcripts")
    return result
