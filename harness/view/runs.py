"""The runs under a folder, and one run opened for the viewer.

A run is a directory holding summary.json (``harness run --out``). :func:`find_runs` lists them
under the viewer's root (two levels deep); :class:`OpenedRun` is one run read once with the static
report's own pass (``report.builder._read_run`` and ``build_data``), so every figure the viewer
shows of a run is the figure report.html shows. The transcripts' texts and judgments stay in the
report's spool (a temporary file) and are read back one transcript at a time; the table rows, with
the agent metrics, task and tags added, are kept in memory for server-side filtering and sorting.

Nothing here writes into a run directory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..agent.specs import SPECS as AGENT_SPECS
from ..errors import UserInputError
from ..report.builder import JUDGMENT_FIELDS, _read_run, build_data
from ..report.details import Spool
from ..report.run import RunView, open_run
from ..rows import ResultRow, iter_result_rows
from ..rundir import read_summary

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


def find_runs(root: Path) -> list[RunEntry]:
    """Every run under ``root``, newest first; a run whose summary.json cannot be read is listed
    with the one-line problem instead of its figures."""
    out: list[RunEntry] = []
    for path in _iter_run_dirs(root):
        name = str(path.relative_to(root)) if path != root else path.name
        when = datetime.fromtimestamp((path / "summary.json").stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
        try:
            s = read_summary(path)
        except UserInputError as exc:
            out.append(RunEntry(name, path, when, None, 0, (), None, (), False, str(exc)))
            continue
        headline = tuple(
            (metric, judge, figures.mean, figures.n)
            for section in (s.composites, s.rubrics)
            for metric, judges in section.items()
            for judge, figures in judges.items()
        )
        out.append(RunEntry(name, path, when, s.input, s.transcripts, tuple(s.judge_models), s.cost_usd, headline, s.interrupted))
    out.sort(key=lambda r: (r.when, r.name), reverse=True)
    return out


@dataclass
class OpenedRun:
    """A run read once: the report's data (figures), the table rows and where each transcript's details are."""

    view: RunView
    data: dict[str, Any]
    columns: list[dict[str, Any]]
    rows: list[list[Any]]
    ids: list[str]
    position: dict[str, int]
    tasks: list[str | None]
    tags: list[tuple[str, ...]]
    queries: list[str]
    results: list[ResultRow]
    spool: Spool
    judgment_refs: list[list[tuple[int, int]]]
    text_refs: list[tuple[int, int] | None]
    agent_metrics: list[str]
    #: the custom rubric directories the run was opened with
    prompts: tuple[Path, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: figures worked out once per opened run (pass@k per task)
    extras: dict[str, Any] = field(default_factory=dict)

    def judgments(self, at: int) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(zip(JUDGMENT_FIELDS, self.spool.get(ref), strict=True)) for ref in self.judgment_refs[at]]

    def texts(self, at: int) -> dict[str, Any] | None:
        ref = self.text_refs[at]
        if ref is None:
            return None
        with self.lock:
            value: dict[str, Any] = self.spool.get(ref)
            return value

    def close(self) -> None:
        self.spool.close()


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
    Only the lines that hold ``"tags"`` are parsed: a quarter of a 20,000-transcript run's first
    open went to parsing every line for them (bench/view_open.py)."""
    path = view.input_path
    if path is None or not path.is_file():
        return {}
    out: dict[str, tuple[str, ...]] = {}
    try:
        with path.open("rb") as fh:
            for line in fh:
                if b'"tags"' not in line:
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a bad line: the run's reader said so when the run read it
                if not isinstance(row, dict):
                    continue
                tid = str(row.get("id"))
                if tid in wanted and (tags := _tags(row.get("metadata"))):
                    out[tid] = tags
    except OSError:
        return out
    return out


def _results(path: Path) -> list[ResultRow]:
    """results.jsonl's typed rows (``harness/rows.py``)."""
    return list(iter_result_rows(path))


def open_viewed_run(path: Path, scratch: Path, prompts: Sequence[Path] = ()) -> OpenedRun:
    """Read the run at ``path`` with the report's pass; the spool lives in ``scratch`` (never the run)."""
    view = open_run(path, prompts=prompts)
    spool = Spool(scratch)
    try:
        run = _read_run(view, spool)
        data = build_data(view, run, {"where": [], "chunks": 0, "left_out": 0})
    except BaseException:
        spool.close()
        raise
    results = _results(view.results_path)
    names = list(AGENT_SPECS)
    present = [n for n in names if any(r.agent is not None and n in r.agent for r in results)]
    tags = _input_tags(view, set(run.ids)) if view.input_path is not None and view.input_path.suffix == ".jsonl" else {}
    columns = list(run.columns)
    columns.insert(1, {"key": "task", "label": "task", "type": "text", "worst": "asc"})
    columns.insert(2, {"key": "tags", "label": "tags", "type": "text", "worst": "asc"})
    for n in present:
        spec = AGENT_SPECS[n]
        columns.append({"key": f"a:{n}", "label": n, "type": "score", "worst": "desc" if spec.direction == "lower" else "asc", "scale": None})
    rows: list[list[Any]] = []
    for i, cells in enumerate(run.rows):
        r = results[i] if i < len(results) else None
        agent: dict[str, Any] = (r.agent or {}) if r is not None else {}
        tid = run.ids[i]
        rows.append([cells[0], r.task if r is not None else None, " ".join(tags.get(tid, ())), *cells[1:], *[agent.get(n) for n in present]])
    return OpenedRun(
        view=view,
        data=data,
        columns=columns,
        rows=rows,
        ids=run.ids,
        position={t: i for i, t in enumerate(run.ids)},
        tasks=[r.task for r in results],
        tags=[tags.get(t, ()) for t in run.ids],
        queries=run.queries,
        results=results,
        spool=spool,
        judgment_refs=run.judgment_refs,
        text_refs=run.text_refs,
        agent_metrics=present,
        prompts=tuple(prompts),
    )
