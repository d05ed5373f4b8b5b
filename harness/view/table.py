"""The transcripts table of one run, filtered, sorted and cut into pages on the server.

The page never holds more than one page of rows, whatever the run's size: a 20,000-transcript run
opens as fast as a 30-transcript one (bench/view_open.py measures it). The filters are the
table's query string: ``q`` (text in the id, task, tags or the query's first characters),
``task``, ``tag``, ``judge`` (only that judge's columns), ``turn`` (a run judged per turn: the
conversations in which that turn was judged, each rubric column holding that turn's score instead
of the conversation's), ``col`` with ``min`` / ``max`` (rows whose value in that column lies in the
range), ``sort`` (a column key) with ``dir``, and ``page``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .runs import OpenedRun

PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class TablePage:
    columns: list[dict[str, Any]]
    #: (row index in the run, the visible cells)
    rows: list[tuple[int, list[Any]]]
    matched: int
    total: int
    page: int
    pages: int
    sort: str
    direction: str
    params: dict[str, str]
    tasks: list[str]
    tags: list[str]
    judges: list[str]
    #: a run judged per turn: the turn numbers judged in some conversation
    turns: list[int]


def _number(text: str | None) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _key(value: Any) -> tuple[int, Any]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def table_page(run: OpenedRun, args: Mapping[str, str]) -> TablePage:
    """One page of ``run``'s transcripts under the filters and sort of ``args`` (see the module docstring)."""
    columns = run.columns
    index = {c["key"]: i for i, c in enumerate(columns)}
    judge = args.get("judge") or ""
    visible = [i for i, c in enumerate(columns) if not judge or not c["key"].startswith(("r:", "c:")) or c["key"].endswith(f":{judge}")]
    q = (args.get("q") or "").strip().lower()
    task = args.get("task") or ""
    tag = args.get("tag") or ""
    col = args.get("col") or ""
    lo, hi = _number(args.get("min")), _number(args.get("max"))
    turns = sorted({t for c in run.conversations if c is not None for t in c.judged})
    turn = int(args["turn"]) if (args.get("turn") or "").isdigit() and int(args["turn"]) in turns else None
    rows = run.rows if turn is None else _turn_rows(run, columns, turn)
    default = columns[_default_sort(columns)]
    sort = str(args.get("sort")) if args.get("sort") in index else str(default["key"])
    direction = str(args.get("dir")) if args.get("dir") in ("asc", "desc") else str(columns[index[sort]]["worst"])
    s = index[sort]
    unfiltered = turn is None and not (q or task or tag or (col in index and (lo is not None or hi is not None)))
    orders: dict[tuple[str, str], list[int]] = run.extras.setdefault("orders", {})
    ordered = orders.get((sort, direction)) if unfiltered else None
    if ordered is None:
        ordered = _ordered(run, rows, turn, task, tag, q, col if col in index else None, lo, hi, index, s, direction)
        if unfiltered:
            orders[(sort, direction)] = ordered  # the run's rows do not change while it is open
    pages = max(1, -(-len(ordered) // PER_PAGE))
    try:
        page = min(max(1, int(args.get("page") or 1)), pages)
    except ValueError:
        page = 1
    chunk = ordered[(page - 1) * PER_PAGE : page * PER_PAGE]
    params = {k: str(v) for k, v in args.items() if k in ("q", "task", "tag", "judge", "turn", "col", "min", "max", "sort", "dir") and v}
    return TablePage(
        columns=[columns[i] for i in visible],
        rows=[(at, [rows[at][i] for i in visible]) for at in chunk],
        matched=len(ordered),
        total=len(run.rows),
        page=page,
        pages=pages,
        sort=sort,
        direction=direction,
        params=params,
        tasks=sorted({t for t in run.tasks if t}),
        tags=sorted({t for ts in run.tags for t in ts}),
        judges=list(run.view.judges),
        turns=turns,
    )


def _ordered(
    run: OpenedRun, rows: list[list[Any]], turn: int | None, task: str, tag: str, q: str,
    col: str | None, lo: float | None, hi: float | None, index: dict[str, int], s: int, direction: str,
) -> list[int]:  # fmt: skip
    """The rows under the filters, sorted by column ``s`` (missing values last, either way)."""
    if turn is None and not (task or tag or q or (col is not None and (lo is not None or hi is not None))):
        return _sorted(rows, range(len(rows)), s, direction)  # no filter: every row (a run's first page)
    selected: list[int] = []
    for at, cells in enumerate(rows):
        if turn is not None and turn not in (c.judged if (c := run.conversations[at]) is not None else ()):
            continue
        if task and run.tasks[at] != task:
            continue
        if tag and tag not in run.tags[at]:
            continue
        if q and not any(q in str(v).lower() for v in (run.ids[at], run.tasks[at] or "", " ".join(run.tags[at]), run.query(at))):
            continue
        if col is not None and (lo is not None or hi is not None):
            value = cells[index[col]]
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                continue
        selected.append(at)
    return _sorted(rows, selected, s, direction)


def _sorted(rows: list[list[Any]], selected: Sequence[int], s: int, direction: str) -> list[int]:
    """``selected`` sorted by column ``s``, numbers before text (`_key`), ties in run order,
    missing values last either way; a column of numbers only (most) is sorted by its values."""
    present = [at for at in selected if rows[at][s] is not None]
    values = [rows[at][s] for at in present]
    if all(type(v) is float or type(v) is int for v in values):
        keys: list[Any] = values
    else:
        keys = [_key(v) for v in values]
    order = sorted(range(len(present)), key=keys.__getitem__, reverse=direction == "desc")
    return [present[i] for i in order] + [at for at in selected if rows[at][s] is None]


def _turn_rows(run: OpenedRun, columns: list[dict[str, Any]], turn: int) -> list[list[Any]]:
    """The table's rows with each rubric column holding turn ``turn``'s score (None where that turn
    was not judged): the rows of the ``turn`` filter."""
    rubric_cols = [(i, c["key"].split(":", 2)) for i, c in enumerate(columns) if c["key"].startswith("r:")]
    out: list[list[Any]] = []
    for at, cells in enumerate(run.rows):
        conversation = run.conversations[at] if at < len(run.conversations) else None
        if conversation is None:
            out.append(cells)
            continue
        row = list(cells)
        for i, (_, rubric, judge) in rubric_cols:
            row[i] = conversation.score(rubric, judge, turn)
        out.append(row)
    return out


def _default_sort(columns: list[dict[str, Any]]) -> int:
    """The report's first order: its first score column (builder._sort_column), shifted past task and tags."""
    for i, c in enumerate(columns):
        if c["key"].startswith(("c:", "r:")):
            return i
    return 0
