"""Reading JSON-lines files of objects, with one-line errors naming the file, line and field.

Shared by the commands that read the harness's own outputs (analysis, report) and the suites'
inputs. Transcripts have their own streaming reader with size limits (``harness.transcripts``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserInputError


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
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise line_error(path, number, "<json>", f"invalid JSON ({exc.msg} at column {exc.colno})") from None
                except RecursionError:
                    raise line_error(path, number, "<json>", "nested too deeply") from None
                if not isinstance(value, dict):
                    raise line_error(path, number, "<record>", f"expected a JSON object, got {type(value).__name__}")
                yield number, value
        except UnicodeDecodeError as exc:
            raise line_error(path, number + 1, "<record>", f"is not valid UTF-8 (byte {exc.start})") from None
