"""Decoding untrusted JSON, and reading JSON-lines files of objects with one-line errors.

The one home of JSON decoding for input the harness did not write: judges' replies
(``judges/protocol.py``), transcripts and trace exports (``harness.transcripts``, ``harness.traces``)
and the suites' files. Each value is bounded before it is decoded, in size (``MAX_RECORD_BYTES``)
and in nesting (``json_depth_exceeds``), so no RecursionError or runaway allocation can escape
as an internal error: bad input is a ``FILE:LINE: field: problem`` line.

Decoding is orjson's (about 4x the standard library's on a judge's reply, bench/profile_judgment.py);
whatever orjson refuses is decoded again by ``json``, so what is accepted (NaN, lone surrogates)
and every error message stay the standard library's; a lone surrogate (an unpaired ``\\ud800``
escape, which no UTF-8 file or database can hold) is then replaced by U+FFFD. A body with a run
of 19 or more digits goes to ``json`` alone: orjson reads an integer past 64 bits as a float,
``json`` keeps it exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import orjson

from .errors import OutputError, TranscriptError, UserInputError

#: One record (a JSONL line, an array element, a trace export read whole, a transcript a trace
#: reader builds) larger than this is refused: 10 MB responses are fine; the limit exists so a
#: corrupt or hostile file cannot exhaust memory, and is the same for every reader.
MAX_RECORD_BYTES = 64 * 1024 * 1024
#: JSON nesting deeper than this in a judge's reply is refused before it is decoded.
MAX_JSON_DEPTH = 64
#: ... and in an input file (a trace export nests deeper than a reply: OTLP attribute values).
MAX_INPUT_DEPTH = 256

#: Digits to "9", anything else to " ": a run of 19 digits is then a substring search (a regex took 5 µs a reply).
_DIGITS_ONLY = bytes(57 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"9" * 19


def orjson_reads_as_stdlib(data: bytes) -> bool:
    """Whether ``orjson`` reads ``data`` into the values the standard library (and pydantic) would:
    not when it holds 19 digits in a row, a long integer orjson may read as a float."""
    return _LONG_RUN not in data.translate(_DIGITS_ONLY)


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256)]
#: A ``\\u`` escape of a surrogate (D800-DFFF): only a body holding one can decode to a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: In text (not bytes), such an escape or a surrogate itself.
_SURROGATE_IN_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def record_too_large(limit: int) -> str:
    """The one message for a record over ``limit`` bytes, whichever reader met it."""
    return f"record is larger than the {limit // 2**20} MiB limit"


def json_depth_exceeds(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``raw`` (JSON text) nests arrays/objects deeper than ``limit``. Brackets inside
    strings are not counted; a body with fewer brackets than ``limit`` is accepted at once. The
    scan runs in C (regex, translate, accumulate): a 64 MB record costs a fraction of its decoding."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def decode_json(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> Any:
    """Decode untrusted JSON; ValueError (with the reason) when it is not bounded, valid JSON."""
    if len(raw) > limit and json_depth_exceeds(raw, limit):  # (shorter, it has too few brackets to nest so deep)
        raise ValueError(f"nested too deeply (JSON nested deeper than {limit} levels)")
    data = raw if isinstance(raw, bytes) else None
    if data is not None and orjson_reads_as_stdlib(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library's verdict, and its message, on anything orjson refuses
    try:
        value = json.loads(raw)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("JSON nested too deeply") from None
    surrogate = _SURROGATE_ESCAPE.search(raw) if isinstance(raw, bytes) else _SURROGATE_IN_TEXT.search(raw)
    return _valid_text(value) if surrogate else value


def _valid_text(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings and keys replaced by U+FFFD. ``json``
    decodes an unpaired ``\\ud800`` into text that no UTF-8 file or database can hold (a judge's
    reply holding one could be neither written out nor cached), as a UTF-8 decoder replaces an
    invalid byte. A surrogate pair escaped whole is one character, and kept."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_valid_text(v) for v in value]
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    return value


def load_record(path: str | Path, line: int, raw: bytes | str, field: str = "<json>") -> Any:
    """One record of an input file, decoded; a ``FILE:LINE: field: problem`` TranscriptError when
    it is too large, not UTF-8, not JSON or nested deeper than ``MAX_INPUT_DEPTH``."""
    if len(raw) > MAX_RECORD_BYTES:
        raise TranscriptError(str(path), line, "<record>", record_too_large(MAX_RECORD_BYTES))
    try:
        return decode_json(raw, MAX_INPUT_DEPTH)
    except UnicodeDecodeError as exc:
        raise TranscriptError(str(path), line, "<record>", f"is not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        # a value cut short is reported on its last line, not on the blank end after it
        within = min(exc.lineno, exc.doc.rstrip().count("\n") + 1)
        raise TranscriptError(str(path), line + within - 1, field, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:
        raise TranscriptError(str(path), line, field, str(exc)) from None


def line_error(path: Path, line: int | None, field_name: str, problem: str) -> UserInputError:
    """``FILE:LINE: field: problem`` (``FILE: field: problem`` with no line)."""
    where = f"{path}:{line}" if line is not None else f"{path}"
    return UserInputError(f"{where}: {field_name}: {problem}")


def check_readable_file(path: Path) -> None:
    """A one-line error when ``path`` is not a regular file a reader can read whole (a directory,
    a FIFO, a device), before anything is opened: a FIFO would block, a directory would traceback."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise UserInputError(f"{path}: is a directory, not a file")
    if stat.S_ISFIFO(mode):
        raise UserInputError(f"{path}: is a FIFO (named pipe); give a regular file, or '-' to read standard input")
    if not stat.S_ISREG(mode):
        raise UserInputError(f"{path}: is not a regular file")


def iter_json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line, streamed; bad JSON or a non-object is an error."""
    check_readable_file(path)
    try:
        handle = path.open("r", encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot be read ({exc.strerror})") from None
    with handle:
        number = 0
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    value = decode_json(text, MAX_INPUT_DEPTH)
                except json.JSONDecodeError as exc:
                    raise line_error(path, number, "<json>", f"invalid JSON ({exc.msg} at column {exc.colno})") from None
                except ValueError as exc:
                    raise line_error(path, number, "<json>", str(exc)) from None
                if not isinstance(value, dict):
                    raise line_error(path, number, "<record>", f"expected a JSON object, got {type(value).__name__}")
                yield number, value
        except UnicodeDecodeError as exc:
            raise line_error(path, number + 1, "<record>", f"is not valid UTF-8 (byte {exc.start})") from None


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses Infinity and NaN: no file the harness writes holds them."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError as exc:
        raise OutputError(f"refused to write a non-finite number: {exc}") from None


def dumps_line(value: Any) -> bytes:
    """One JSON line (``\\n`` ended) of ``value``, as :func:`dumps` would write it but by orjson,
    about 7x faster on a judgment's row (bench/profile_judgment.py). orjson writes NaN and
    Infinity as null, so a row with a null in it is checked for them and refused as ``dumps``
    refuses it; orjson's refusals (an integer past 64 bits) go to ``dumps``."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (dumps(value) + "\n").encode()
    if b"null" in data and _non_finite(value):
        dumps(value)  # raises OutputError, naming the value
    return data


def _non_finite(value: Any) -> bool:
    """Does ``value`` hold a NaN or an infinity anywhere? (A loop, not recursion: it runs per row.)"""
    if isinstance(value, float):
        return value - value != 0.0
    stack = [value]
    while stack:
        item = stack.pop()
        for v in item.values() if isinstance(item, dict) else item:
            kind = type(v)
            if kind is float:
                if v - v != 0.0:  # NaN for NaN and the infinities, 0.0 for every finite float
                    return True
            elif v is None or kind is str or kind is int or kind is bool:
                continue
            elif isinstance(v, float):
                if v - v != 0.0:
                    return True
            elif isinstance(v, dict | list | tuple):
                stack.append(v)
    return False
