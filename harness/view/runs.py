"""The runs under a folder, and one run opened for the viewer, lazily.

A run is a directory holding summary.json (``harness run --out``). :func:`find_runs` lists them
under the viewer's root (two levels deep), each summary read once while its file is unchanged
(:func:`stamp`: mtime and size). :class:`OpenedRun` is one run read with the viewer's first pass
(`harness.view.light`: a few fields of each row, made into the cells and aggregates as the static
report's own pass makes them) and the report's ``build_data``, so every figure the viewer shows of
a run is the figure report.html shows; that pass keeps the table's cells and where each
transcript's results and judgment rows are in their files, not the rows. A row is validated by
its type when it is shown (`OpenedRun.check`), and every row, in a thread after the first page,
before the run's index is kept. A transcript's rows are read back by offset when it is opened, and its input record
through :class:`InputIndex` (the input's lines indexed once, on first need). The table rows, with
the agent metrics, task and tags added, stay in memory for server-side filtering and sorting.

Nothing here writes into a run directory.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..agent.specs import SPECS as AGENT_SPECS
from ..errors import HarnessError, UserInputError
from ..report.chat import Chat, build_chat
from ..report.run import RunView, TurnScores, open_run, texts_of, turn_texts
from ..rows import JudgmentRow, ResultRow, judgment_at, result_at
from ..rundir import read_summary
from ..traces.loader import iter_transcripts, parse_record
from ..transcripts.models import Resolved
from ..transcripts.raw import RawRecord
from .index import FIELDS as INDEX_FIELDS
from .index import index_dir, index_key, no_gc
from .index import load as load_index
from .index import save as save_index

#: How deep under the root a run directory is looked for.
MAX_DEPTH = 2


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One run of the list: where, when, what it read, its judges, cost and headline scores."""

    name: str
    path: Path
    when: str
    input: str | None
    transcripts: int
    judges: tuple[str, ...]
    cost_usd: float | None
    #: (metric, judge, mean, n) of each rubric and composite
    headline: tuple[tuple[str, str, float | None, int], ...]
    interrupted: bool
    problem: str | None = None


def _iter_run_dirs(root: Path, depth: int = 0) -> Iterator[Path]:
    if (root / "summary.json").is_file():
        yield root
        return
    if depth >= MAX_DEPTH:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        yield from _iter_run_dirs(child, depth + 1)


def stamp(path: Path, names: Sequence[str]) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime in ns, size) of each of ``names`` in ``path`` that exists: what a cached
    reading of them is keyed by (a file rewritten in place within the mtime's resolution changes
    its size, or the reading is stale only until the next write)."""
    out = []
    for name in names:
        try:
            st = (path / name).stat()
        except OSError:
            continue
        out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


#: summary.json read once per (path, mtime, size): the runs list over many runs reads only the
#: summaries that changed since it was last drawn
_ENTRIES: dict[Path, tuple[tuple[tuple[str, int, int], ...], RunEntry]] = {}
_ENTRIES_LOCK = threading.Lock()


def _entry(root: Path, path: Path) -> RunEntry:
    key = stamp(path, ("summary.json",))
    with _ENTRIES_LOCK:
        cached = _ENTRIES.get(path)
    name = str(path.relative_to(root)) if path != root else path.name
    if cached is not None and cached[0] == key and cached[1].name == name:
        return cached[1]
    when = datetime.fromtimestamp(key[0][1] / 1e9, UTC).strftime("%Y-%m-%d %H:%M UTC") if key else "—"
    try:
        s = read_summary(path)
    except UserInputError as exc:
        entry = RunEntry(name, path, when, None, 0, (), None, (), False, str(exc))
    else:
        headline = tuple(
            (metric, judge, figures.mean, figures.n)
            for section in (s.composites, s.rubrics)
            for metric, judges in section.items()
            for judge, figures in judges.items()
        )
        entry = RunEntry(name, path, when, s.input, s.transcripts, tuple(s.judge_models), s.cost_usd, headline, s.interrupted)
    with _ENTRIES_LOCK:
        _ENTRIES[path] = (key, entry)
    return entry


def find_runs(root: Path) -> list[RunEntry]:
    """Every run under ``root``, newest first; a run whose summary.json cannot be read is listed
    with the one-line problem instead of its figures. Each summary is read once while it is
    unchanged (`stamp`)."""
    out = [_entry(root, path) for path in _iter_run_dirs(root)]
    out.sort(key=lambda r: (r.when, r.name), reverse=True)
    return out


class InputIndex:
    """Where each transcript's record is in the run's input file, found by one pass over its
    lines (a JSONL input: ``orjson`` reads each line's ``id`` and ``query``; no record is
    validated) when first needed; one record is then read and validated (``parse_record``, the
    reader the run used) when its transcript is opened. An input that is not JSONL (a trace
    file) has no index: a transcript's record is found by the run's own reader, scanning."""

    def __init__(self, path: Path | None, wanted: set[str]) -> None:
        self.path = path
        self._wanted = wanted
        self._where: dict[str, tuple[int, int, int]] | None = None
        self._queries: dict[str, str] = {}
        self._recent: dict[str, Resolved | None] = {}
        self._lock = threading.Lock()

    def _jsonl(self) -> bool:
        if self.path is None or self.path.suffix != ".jsonl" or not self.path.is_file():
            return False
        with self.path.open("rb") as fh:
            head = fh.read(64).lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
        return not head.startswith(b"[")

    def _build(self) -> dict[str, tuple[int, int, int]]:
        with self._lock:
            if self._where is not None:
                return self._where
            from ..report.builder import QUERY_SEARCH_CHARS

            where: dict[str, tuple[int, int, int]] = {}
            if self.path is not None and self._jsonl():
                try:
                    with self.path.open("rb") as fh:
                        offset = 0
                        for number, line in enumerate(fh, start=1):
                            start, offset = offset, offset + len(line)
                            try:
                                row = orjson.loads(line)
                            except orjson.JSONDecodeError:
                                continue  # a bad line (or a BOM): the validating reader decides, when asked
                            tid = row.get("id") if isinstance(row, dict) else None
                            if isinstance(tid, bool) or not isinstance(tid, str | int):
                                continue
                            key = str(tid)
                            if key in self._wanted and key not in where:
                                where[key] = (number, start, len(line))
                                if isinstance(row.get("query"), str):
                                    self._queries[key] = row["query"][:QUERY_SEARCH_CHARS]
                except OSError:
                    where = {}
            self._where = where
            return where

    def query(self, tid: str) -> str | None:
        """The first characters of the transcript's ``query`` field (for the table's search), if it has one."""
        self._build()
        return self._queries.get(tid)

    def resolved(self, tid: str) -> Resolved | None:
        """The transcript ``tid`` as the run read it; None when the input lacks it or cannot be read."""
        path = self.path
        if path is None or not path.is_file():
            return None
        with self._lock:
            if tid in self._recent:
                return self._recent[tid]
        t = self._resolve(path, tid)
        with self._lock:
            self._recent[tid] = t
            while len(self._recent) > 8:  # the few transcripts open now (a page asks for one several times)
                self._recent.pop(next(iter(self._recent)))
        return t

    def _resolve(self, path: Path, tid: str) -> Resolved | None:
        found = self._build().get(tid)
        if found is not None:
            number, offset, length = found
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read(length)
                if number == 1:
                    data = data.removeprefix(b"\xef\xbb\xbf")
                record = parse_record(path, RawRecord(number, data))
                if record.id == tid:
                    return record.resolved()
            except (HarnessError, OSError):
                pass  # a bad first record with this id: the reader passes it over, as the scan below does
        try:
            for _, record in iter_transcripts(path, on_bad="skip"):
                if record.id == tid:
                    return record.resolved()
        except (HarnessError, OSError):
            return None
        return None


@dataclass
class OpenedRun:
    """A run read once, lazily: the report's data (figures) and the table rows from one pass over
    results.jsonl and judgments.jsonl, and where each transcript's rows and input record are, read
    when the transcript is opened."""

    view: RunView
    data: dict[str, Any]
    columns: list[dict[str, Any]]
    rows: list[list[Any]]
    ids: list[str]
    position: dict[str, int]
    tasks: list[str | None]
    tags: list[tuple[str, ...]]
    #: (line, offset, length) of each transcript's results.jsonl row
    result_refs: list[tuple[int, int, int]]
    #: (offset, length) of each of a transcript's judgments.jsonl rows, and their lines
    judgment_refs: list[list[tuple[int, int]]]
    judgment_lines: list[list[int]]
    inputs: InputIndex
    agent_metrics: list[str]
    #: a run judged per turn: each conversation's turn scores (None for a transcript judged whole)
    conversations: list[TurnScores | None] = field(default_factory=list)
    #: the custom rubric directories the run was opened with
    prompts: tuple[Path, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: figures worked out once per opened run (pass@k per task)
    extras: dict[str, Any] = field(default_factory=dict)
    #: the transcripts whose rows were validated by their types (`check`)
    checked: set[int] = field(default_factory=set)
    #: set once the run's first page is drawn: the index's check (`index_when_served`) waits for it
    served: threading.Event = field(default_factory=threading.Event)
    #: the thread validating every row before the index is written (None: no index to write)
    indexing: threading.Thread | None = None
    #: the first line that check refused (``FILE:LINE: field: problem``), shown as a note of the run
    problem: str | None = None

    def check(self, at: int) -> None:
        """Validate transcript ``at``'s rows by their types (``rows.result_at`` / ``judgment_at``)
        before they are shown: the first pass read only some of their fields, so a row that is
        wrong elsewhere is refused here with its ``FILE:LINE: field: problem`` (a 400 page)."""
        if at in self.checked:
            return
        self.result(at)
        self.judgment_rows(at)
        self.checked.add(at)

    def result(self, at: int) -> ResultRow:
        """Transcript ``at``'s results.jsonl row."""
        number, offset, length = self.result_refs[at]
        return result_at(self.view.results_path, number, offset, length)

    def judgment_rows(self, at: int) -> list[JudgmentRow]:
        """Transcript ``at``'s judgments.jsonl rows."""
        path = self.view.judgments_path
        return [judgment_at(path, n, o, ln) for n, (o, ln) in zip(self.judgment_lines[at], self.judgment_refs[at], strict=True)]

    def judgments(self, at: int) -> list[dict[str, Any]]:
        """Transcript ``at``'s judgments as the report's details hold them (``JUDGMENT_FIELDS``, the reply cut)."""
        from ..report.builder import JUDGMENT_FIELDS, judgment_fields

        return [dict(zip(JUDGMENT_FIELDS, judgment_fields(j), strict=True)) for j in self.judgment_rows(at)]

    def resolved(self, at: int) -> Resolved | None:
        return self.inputs.resolved(self.ids[at])

    def texts(self, at: int) -> dict[str, Any] | None:
        t = self.resolved(at)
        return texts_of(t).as_dict() if t is not None else None

    def chat(self, at: int) -> Chat | None:
        """Transcript ``at`` as a chat, each turn with its judgments (None: not a conversation of turns)."""
        t = self.resolved(at)
        if t is None:
            return None
        return build_chat(turn_texts(t), self.conversations[at] if at < len(self.conversations) else None, self.judgment_rows(at))

    def query(self, at: int) -> str:
        """The query's first characters, for the table's search (read from the input's index when first searched)."""
        return self.inputs.query(self.ids[at]) or ""

    def close(self) -> None:
        pass  # nothing held open: every read opens its file


def _tags(metadata: Any) -> tuple[str, ...]:
    if not isinstance(metadata, dict):
        return ()
    tags = metadata.get("tags")
    if isinstance(tags, str):
        return (tags,)
    if isinstance(tags, list):
        return tuple(str(t) for t in tags if isinstance(t, str | int | float))
    return ()


def _input_tags(view: RunView, wanted: set[str]) -> dict[str, tuple[str, ...]]:
    """Each transcript's ``metadata.tags`` from the run's input file (none when it cannot be read).
    Only the lines that hold ``"tags"`` are parsed, found by searching the mapped file: parsing
    every line for them took a quarter of a 20,000-transcript run's first open, and reading it
    line by line a tenth (bench/view_open.py)."""
    path = view.input_path
    if path is None or not path.is_file():
        return {}
    out: dict[str, tuple[str, ...]] = {}
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return out
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at = data.find(b'"tags"')
                while at != -1:
                    start = data.rfind(b"\n", 0, at) + 1
                    end = data.find(b"\n", at)
                    end = len(data) if end == -1 else end
                    try:
                        row = orjson.loads(data[start:end])
                    except orjson.JSONDecodeError:
                        row = None  # a bad line: the run's reader said so when the run read it
                    if isinstance(row, dict):
                        tid = str(row.get("id"))
                        if tid in wanted and tid not in out and (tags := _tags(row.get("metadata"))):
                            out[tid] = tags
                    at = data.find(b'"tags"', end)
    except (OSError, ValueError):
        return out
    return out


def open_viewed_run(path: Path, scratch: Path, prompts: Sequence[Path] = ()) -> OpenedRun:
    """Read the run at ``path`` with the report's pass, lazily (``_read_run`` without a spool:
    the input file is not read until a transcript is opened), or from the index an earlier viewer
    kept of the same files (`harness.view.index`: outside the run, named by the files' stamps);
    ``scratch`` is unused by the lazy pass and kept for the viewer's other state (nothing is
    written into the run)."""
    view = open_run(path, prompts=prompts)
    key = index_key(path, view.input_path, prompts) if index_dir() is not None else None
    kept = load_index(key) if key is not None else None
    if kept is not None:
        return OpenedRun(
            view=view,
            **{f: kept[f] for f in INDEX_FIELDS},
            position={t: i for i, t in enumerate(kept["ids"])},
            inputs=InputIndex(view.input_path, set(kept["ids"])),
            conversations=kept["conversations"],
            prompts=tuple(prompts),
        )
    with no_gc():
        opened = _first_pass(view, prompts)
    if key is not None:
        opened.indexing = threading.Thread(target=_index_when_served, args=(opened, path, key, prompts), name="harness-view-index", daemon=True)
        opened.indexing.start()
    return opened


#: how long the index's check waits for the run's first page before it starts anyway
SERVED_WAIT_S = 5.0


def _index_when_served(opened: OpenedRun, path: Path, key: str, prompts: Sequence[Path]) -> None:
    """Once the first page is drawn, validate every row of the run by its type (``rows``' typed
    readers) and, when each passes and no file changed meanwhile, keep the index for the next viewer
    (an index is made only of rows that were validated). A refused line is kept as the run's
    ``problem`` and shown as a note of its page; that row's own page refuses it the same."""
    from ..rows import iter_judgment_rows, iter_result_rows

    opened.served.wait(SERVED_WAIT_S)
    view = opened.view
    try:
        for _ in iter_result_rows(view.results_path):
            pass
        for _ in iter_judgment_rows(view.judgments_path):
            pass
    except HarnessError as exc:
        opened.problem = str(exc)
        opened.data["meta"]["notes"].append(f"{exc} (that transcript's rows are refused when shown)")
        return
    if index_key(path, view.input_path, prompts) == key:  # the files the first pass read are still those
        save_index(key, {f: getattr(opened, f) for f in (*INDEX_FIELDS, "conversations")})


def _first_pass(view: RunView, prompts: Sequence[Path]) -> OpenedRun:
    """The run read with the viewer's first pass (`harness.view.light`: a few fields of each row,
    the rows validated when shown), the figures made by the report's ``build_data``."""
    # the report's builder (and numpy, and the planning it names) is imported here, on a first
    # open, not at start-up: a viewer reading a kept index never needs it for the run's page
    from ..report.builder import build_data
    from .light import first_pass

    run = first_pass(view)
    data = build_data(view, run, {"where": [], "chunks": 0, "left_out": 0})
    # results.jsonl's agent metrics and tasks, as the report's pass kept them (``perf``)
    agents: list[dict[str, Any]] = [p.get("agent") or {} for p in run.perf]
    named = set().union(*agents)
    present = [n for n in AGENT_SPECS if n in named]
    tasks: list[str | None] = [p.get("task") for p in run.perf]
    tags = _input_tags(view, set(run.ids)) if view.input_path is not None and view.input_path.suffix == ".jsonl" else {}
    columns = list(run.columns)
    columns.insert(1, {"key": "task", "label": "task", "type": "text", "worst": "asc"})
    columns.insert(2, {"key": "tags", "label": "tags", "type": "text", "worst": "asc"})
    known = {c["key"] for c in columns}
    for n in present:
        if f"a:{n}" in known:
            continue  # the report's own column (summary.json has the metric)
        spec = AGENT_SPECS[n]
        columns.append({"key": f"a:{n}", "label": n, "type": "score", "worst": "desc" if spec.direction == "lower" else "asc", "scale": None})
    extra = [n for n in present if f"a:{n}" not in known]
    if extra:
        rows = [
            [cells[0], tasks[i], " ".join(tags.get(tid, ())), *cells[1:], *[agents[i].get(n) for n in extra]]
            for i, (tid, cells) in enumerate(zip(run.ids, run.rows, strict=True))
        ]
    else:
        rows = [[cells[0], task, " ".join(tags.get(tid, ())), *cells[1:]] for tid, task, cells in zip(run.ids, tasks, run.rows, strict=True)]
    return OpenedRun(
        view=view,
        data=data,
        columns=columns,
        rows=rows,
        ids=run.ids,
        position={t: i for i, t in enumerate(run.ids)},
        tasks=tasks,
        tags=[tags.get(t, ()) for t in run.ids],
        result_refs=run.result_refs,
        judgment_refs=run.judgment_refs,
        judgment_lines=run.judgment_lines,
        inputs=InputIndex(view.input_path, set(run.ids)),
        agent_metrics=present,
        conversations=run.conversations,
        prompts=tuple(prompts),
    )
