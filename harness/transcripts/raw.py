"""Records from a JSON file, one at a time: JSONL lines or the elements of one top-level array.

The bottom of transcript reading: :mod:`harness.traces.loader` validates what this yields, and
the trace readers (:mod:`harness.traces`) use it for exports that are JSONL or a JSON array.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TranscriptError
from ..jsonlines import MAX_RECORD_BYTES, load_record, record_too_large

__all__ = ["MAX_RECORD_BYTES", "RawRecord", "iter_json_records", "iter_json_values"]

_CHUNK = 1 << 20


@dataclass(slots=True)
class RawRecord:
    line: int
    text: bytes | str
    #: set by a trace reader when the trace holds no query or response: raised like any bad record
    error: TranscriptError | None = None


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
                raise TranscriptError(str(path), number, "<record>", record_too_large(MAX_RECORD_BYTES))
            if number == 1:
                line = line.removeprefix(_BOM)
            if not line.isspace():  # (not ``strip()``: no copy of every line)
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


def iter_json_records(path: Path) -> Iterator[RawRecord]:
    """JSONL or one JSON array, told apart by the first character that is not a space."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    yield from (_iter_json_array(path) if head.startswith(b"[") else _iter_jsonl(path))


def iter_json_values(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for each JSON value of an export file, decoded by the one bounded decoder:
    the elements of a top-level array; else the whole file when it is one JSON document (indented
    or not, at most ``MAX_RECORD_BYTES``: one record limit for every reader); else one value per
    JSONL line. A document is tried first: a file whose first line is not a whole value is not JSONL."""
    with path.open("rb") as fh:
        first = fh.readline(MAX_RECORD_BYTES + 1).removeprefix(_BOM)
    if first.lstrip().startswith(b"["):
        for raw in _iter_json_array(path):
            yield raw.line, load_record(path, raw.line, raw.text)
        return
    if first.strip() and _is_value(first):
        for raw in _iter_jsonl(path):
            yield raw.line, load_record(path, raw.line, raw.text)
        return
    if path.stat().st_size > MAX_RECORD_BYTES:
        limit = f"{MAX_RECORD_BYTES // 2**20} MiB"
        problem = f"not JSON lines (line 1 is not a whole JSON value), and as one JSON document larger than the {limit} record limit"
        raise TranscriptError(str(path), 1, "<record>", problem)
    text = path.read_bytes().removeprefix(_BOM)
    if text.strip():
        yield 1, load_record(path, 1, text)


def _is_value(line: bytes) -> bool:
    try:
        load_record("", 1, line)
    except TranscriptError as exc:
        return "invalid JSON" not in exc.problem  # too deep or not UTF-8: JSONL reading reports it
    return True
