"""How the harness writes files without ever losing the ones already there.

- :class:`StagedFile`: written under a temporary name beside its target and renamed into place
  (``os.replace``, atomic on one file system) only by ``commit()``; a run that fails to start
  discards it, so the previous run's file stays exactly as it was.
- :func:`atomic_write_text`: the same for a file written in one go.
- :class:`OutDirLock`: one run at a time per ``--out`` (an ``flock`` on ``OUT/.harness.lock``);
  a second run is refused with a clear message instead of interleaving rows.
- :func:`remove_stale`: run files an earlier run left that this one did not write are removed
  (and named), so a directory never mixes two runs.
- ``dumps`` (from ``jsonlines``): JSON that can never hold Infinity or NaN (``allow_nan=False``); :func:`dumps_line`,
  the same for one output row, by orjson (a row per judgment is on the hot path).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import IO

from ..errors import OutputError
from ..jsonlines import dumps as dumps  # they live below the rows (``harness/rows.py`` writes with them)
from ..jsonlines import dumps_line as dumps_line
from ..rows import JUDGMENTS, RESULTS

#: Every file ``harness run`` may write to ``--out``; the ones a run does not write are stale.
RUN_FILES = (JUDGMENTS, RESULTS, "summary.json", "skipped.jsonl", "report.html")
#: Files other commands write into a run's directory from its judgments (``harness export``,
#: ``infer``, ``labels design``): they describe the run that was there, so a new run in that
#: directory removes them. Files the harness does not write (a user's labels) are never removed.
DERIVED_FILES = (
    "judgments.csv",
    "judgments.parquet",
    "evaluations.otlp.jsonl",
    "evaluations.spans.otlp.jsonl",
    "inference.json",
    "labels/design.json",
    "labels/to_label.jsonl",
    "labels/to_label.csv",
)
_TMP_MARK = ".tmp-"


def io_problem(exc: OSError) -> str:
    """A one-line name for an OS error, with the fix where there is an obvious one."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device (free some, or write elsewhere)"
    if exc.errno == errno.EFBIG:
        return "file too large for this file system or the process's file-size limit"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return "out of file descriptors (too many open files): lower --concurrency or raise the limit (ulimit -n)"
    if exc.errno == errno.ENOMEM:
        return "out of memory: lower --concurrency, or split the input"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TMP_MARK}{os.getpid()}")


#: Rows are written to the file in blocks of this many bytes (one write call each).
BLOCK_BYTES = 1 << 20


class StagedFile:
    """A UTF-8 file written under a temporary name and renamed over ``path`` by ``commit()``;
    rows go out in blocks of ``BLOCK_BYTES``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temp = _temp_name(path)
        try:
            self._fh: IO[bytes] | None = self.temp.open("wb", buffering=BLOCK_BYTES)
        except OSError as exc:
            raise OutputError(f"{path.parent}: cannot write: {io_problem(exc)}") from None

    def write(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def write_bytes(self, data: bytes) -> None:
        assert self._fh is not None, "written after commit or discard"
        try:
            self._fh.write(data)
        except OSError as exc:
            raise OutputError(f"{self.path}: write failed: {io_problem(exc)}") from None

    def commit(self) -> None:
        if self._fh is None:
            return
        try:
            self._fh.close()
            self._fh = None
            os.replace(self.temp, self.path)
        except OSError as exc:
            self.discard()
            raise OutputError(f"{self.path}: write failed: {io_problem(exc)}") from None

    def swap(self) -> Path:
        """Set the rows written so far aside (``<temp>.prev``, returned, for the caller to read
        and remove) and start the file again empty: a rewrite of what was written."""
        assert self._fh is not None, "swapped after commit or discard"
        previous = self.temp.with_name(self.temp.name + ".prev")
        try:
            self._fh.close()
            os.replace(self.temp, previous)
            self._fh = self.temp.open("wb", buffering=BLOCK_BYTES)
        except OSError as exc:
            raise OutputError(f"{self.path}: write failed: {io_problem(exc)}") from None
        return previous

    def discard(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass  # the file is being thrown away; its flush failing changes nothing
            self._fh = None
        self.temp.unlink(missing_ok=True)
        self.temp.with_name(self.temp.name + ".prev").unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a temporary file renamed into place."""
    staged = StagedFile(path)
    try:
        staged.write(text)
    except BaseException:
        staged.discard()
        raise
    staged.commit()


def prepare_out_dir(out: Path) -> None:
    """``--out`` as a writable directory (created), or one OutputError line saying why not."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"--out {out}: cannot create the directory: {io_problem(exc)}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out}: not writable")


class OutDirLock:
    """Held for a whole run: a second run on the same ``--out`` is refused, never interleaved.
    Also clears temporary files a killed run left behind (only its holder may)."""

    def __init__(self, out: Path) -> None:
        self.path = out / ".harness.lock"
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"--out {out}: cannot write: {io_problem(exc)}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise OutputError(f"--out {out}: another harness run is writing this directory; wait for it or choose another --out") from None
        for leftover in out.glob(f".*{_TMP_MARK}*"):
            leftover.unlink(missing_ok=True)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def remove_stale(out: Path, written: set[str]) -> list[str]:
    """Remove the run files in ``out`` this run did not write, and every derived file an earlier
    run's commands left (``DERIVED_FILES``; ``labels/`` too once nothing else is in it); return
    their names."""
    removed = []
    for name in (*RUN_FILES, *DERIVED_FILES):
        path = out / name
        if name not in written and (path.is_file() or path.is_symlink()):
            path.unlink()
            removed.append(name)
    labels = out / "labels"
    if any(name.startswith("labels/") for name in removed) and labels.is_dir() and not any(labels.iterdir()):
        labels.rmdir()
    return removed
