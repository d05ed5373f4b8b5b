"""The viewer's index of a run: what its first pass found, kept outside the run for the next viewer.

Opening a run reads every row of results.jsonl and judgments.jsonl (`harness.view.light`: the
fields the table and the figures need) to make the page's figures and the table; on a
20,000-transcript run that pass is most of the first page's time (bench/view_open.py). The pass's
outcome (the report's data, the table's columns and cells, each transcript's id, task, tags, turn
scores and where its rows are) is written here as one JSON file, so a viewer started later opens
the same run by reading that file instead of the rows.

The file is named by a hash of what the pass read: the run's path, each of summary.json and the
row files' (name, mtime, size), the input file's, the custom rubric directories' files', the
harness version and this format's number. A row file rewritten, an input edited or a new harness
makes a new name, so a stale index is never read (it is simply not found, and the rows are read
again). An index is written only once every row was validated by its type (`runs`: in a thread,
after the first page is served): a line the first pass cannot take is refused at open with its
``FILE:LINE: field: problem``, one that fails only its full type when its page is drawn, and
neither leaves an index. A file that cannot be read back
as this format is ignored the same way. The directory is ``$HARNESS_VIEW_INDEX`` when set
(``off``: no index, every viewer reads the rows), else ``$XDG_CACHE_HOME/harness/view-index``
(``~/.cache/...``); never inside a run. A directory that cannot be written leaves the viewer
reading the rows, as before.
"""

from __future__ import annotations

import gc
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from ..report.run import TurnScores
from ..rows import ROW_FILES
from ..version import __version__

#: the layout of an index file; a change makes every older file unused
FORMAT = 1
ENV = "HARNESS_VIEW_INDEX"


@contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic collector paused while a pass makes many small values that hold no cycles (it
    ran over them again and again as they were made: a fifth of a 20,000-transcript run's open)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def index_dir() -> Path | None:
    """Where indexes are kept, or None when ``$HARNESS_VIEW_INDEX`` is ``off``."""
    given = os.environ.get(ENV)
    if given is not None and given.strip().lower() in ("off", "0", "no", "false"):
        return None
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "view-index"


def _stamp(path: Path | None) -> list[Any]:
    if path is None:
        return []
    try:
        st = path.stat()
    except OSError:
        return [str(path)]
    return [str(path), st.st_mtime_ns, st.st_size]


def index_key(run: Path, input_path: Path | None, prompts: Sequence[Path]) -> str:
    """The name of the run's index: a hash of every file the first pass read (see the module docstring)."""
    parts: list[Any] = [FORMAT, __version__, str(run.resolve())]
    parts += [_stamp(run / name) for name in ("summary.json", *ROW_FILES)]
    parts.append(_stamp(input_path))
    for folder in prompts:
        try:
            files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
        except OSError:
            files = []
        parts.append([str(folder), *(_stamp(p) for p in files)])
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


def _turns_out(t: TurnScores | None) -> Any:
    if t is None:
        return None
    return {
        "judged": list(t.judged),
        "aggregate": t.aggregate,
        "rule": t.rule,
        "absent": t.absent,
        "by_turn": [[r, j, list(v)] for (r, j), v in t.by_turn.items()],
        "conversation": [[r, j, list(v)] for (r, j), v in t.conversation.items()],
    }


def _turns_in(d: Any) -> TurnScores | None:
    if d is None:
        return None
    return TurnScores(
        judged=tuple(d["judged"]),
        aggregate=d["aggregate"],
        rule=d["rule"],
        by_turn={(r, j): tuple(v) for r, j, v in d["by_turn"]},
        conversation={(r, j): (v[0], v[1]) for r, j, v in d["conversation"]},
        absent=d["absent"],
    )


#: the first pass's outcome, as ``runs.OpenedRun`` holds it (the fields an index carries)
FIELDS = ("data", "columns", "rows", "ids", "tasks", "tags", "result_refs", "judgment_refs", "judgment_lines", "agent_metrics")


def load(key: str) -> dict[str, Any] | None:
    """The index named ``key`` (the fields of ``FIELDS`` and ``conversations``), or None: none
    kept, indexes off, or a file that is not this format (then the rows are read)."""
    folder = index_dir()
    if folder is None:
        return None
    try:
        text = (folder / f"{key}.json").read_bytes()
    except OSError:
        return None
    try:
        with no_gc():
            got = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(got, dict) or got.get("format") != FORMAT or any(f not in got for f in (*FIELDS, "conversations")):
        return None
    try:
        # the refs and tags stay lists (read as the tuples are: unpacked, zipped, searched)
        got["conversations"] = [_turns_in(c) for c in got["conversations"]]
    except (KeyError, TypeError, ValueError):
        return None
    if not len(got["ids"]) == len(got["rows"]) == len(got["result_refs"]) == len(got["judgment_refs"]) == len(got["conversations"]):
        return None
    return got


def save(key: str, values: dict[str, Any]) -> None:
    """Write the index named ``key`` (atomically: a reader sees the whole file or none); a
    directory that cannot be written is left alone (the next viewer reads the rows)."""
    folder = index_dir()
    if folder is None:
        return
    body = {"format": FORMAT, **{f: values[f] for f in FIELDS}, "conversations": [_turns_out(c) for c in values["conversations"]]}
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = orjson.dumps(body)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(text)
            os.replace(tmp, folder / f"{key}.json")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, TypeError, orjson.JSONEncodeError):
        return
