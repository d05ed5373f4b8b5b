"""The viewer's first pass over a run: the table and the page's figures from a few fields of each row.

`runs.open_viewed_run` reads a run with this pass when no index of it is kept. Each line of
results.jsonl and judgments.jsonl is read by orjson, and only the fields the table, its sorts and
filters and the page's figures need are taken, each checked for the type the row's schema gives it
(``rows.ResultRow``, ``rows.JudgmentRow``), with where the line is. A line this pass cannot take
(not JSON, a needed field missing or of another type, a per-turn row, a number orjson may read
otherwise) is handed to the row's typed reader (``rows.parse_result`` / ``parse_judgment``), which
refuses it with its ``FILE:LINE: field: problem`` as every reader of a run does, or gives its values.

The full typed validation of a row is left to when it is shown (``runs.OpenedRun.check``: the rows
of a page, an opened transcript) and to the check behind the index (``runs``), so a line that passes
here and fails its schema is refused with its place when its page is drawn: never shown half-read,
never left out.

The cells and aggregates are made as the report's own pass makes them (``report.builder._read_run``
without a spool, followed here field by field): tests/test_view_light.py checks both passes give
the same page data, and the same refusals, on runs of every kind.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..jsonlines import orjson_reads_as_stdlib
from ..planning.judgment import NO_CALL_REASONS
from ..report.aggregate import Health
from ..report.builder import LATENCY_FIELDS, _columns, _new_run, _Run
from ..report.run import RunView, turn_scores
from ..rows import TurnJudgmentRow, located_lines, parse_judgment, parse_result
from ..transcripts import PERFORMANCE_FIELDS


class _Typed(Exception):
    """A line the first pass leaves to the row's typed reader."""


def _loads(text: bytes, ints_as_written: bool = False) -> Any:
    """``text`` read by orjson. ``ints_as_written``: the line is left to its typed reader when orjson
    might read a long integer as a float (``orjson_reads_as_stdlib``), for a row with a field that
    holds an integer or a float as written (results' ``agent``); a judgments row needs no such care
    (a long integer in a float field is the same float either way, and one read as a float in an
    integer field is refused by `_int`, leaving the line to its reader), and its ``cost_usd``
    often runs to 19 digits."""
    if ints_as_written and not orjson_reads_as_stdlib(text):
        raise _Typed
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise _Typed from None


def _float(value: Any) -> float | None:
    """A ``float | None`` field as the strict schema reads it (an integer is a float; a bool, a string is refused)."""
    kind = type(value)
    if value is None or kind is float:
        return value
    if kind is int:
        return float(value)
    raise _Typed


def _int(value: Any) -> int:
    if type(value) is not int:
        raise _Typed
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Typed
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Typed
    return value


def _opt_str(value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise _Typed
    return value


def _result(d: Any, judges: list[str], composites: list[str]) -> tuple[str, list[float | None], list[Any], Any, Any]:
    """(id, each (judge, composite)'s value, performance as ``PERFORMANCE_FIELDS``, agent, task)
    of a results row taken as JSON."""
    if type(d) is not dict or d.get("turns") is not None:
        raise _Typed  # a per-turn row's turns are read by its schema (``turn_scores``)
    tid = d["transcript_id"]
    recorded = d["composites"]
    given = d["performance"]
    if type(tid) is not str or type(recorded) is not dict or type(given) is not dict:
        raise _Typed
    read: list[float | None] = []
    if composites:
        for judge in judges:
            values = recorded.get(judge) or {}
            if type(values) is not dict:
                raise _Typed
            read += [_float(values.get(name)) for name in composites]
    got = given.get
    performance: list[Any] = [got("total_ms"), got("llm_ms"), got("tool_ms"), got("api_ms"), got("tool_calls")]  # PERFORMANCE_FIELDS
    for k in range(4):  # the latencies (``LATENCY_FIELDS``): floats
        v = performance[k]
        if v is not None and type(v) is not float:
            performance[k] = _float(v)
    if performance[4] is not None:
        _int(performance[4])  # tool_calls
    agent = d.get("agent")
    if agent is not None:
        if type(agent) is not dict:
            raise _Typed
        for value in agent.values():
            if value is not None and type(value) is not float and type(value) is not int:
                raise _Typed
    task = d.get("task")
    if task is not None and type(task) is not str:
        raise _Typed
    return tid, read, performance, agent, task


def _judgment(d: Any) -> tuple[str, str, str, str, float | None, str | None, str | None, int, bool, int, int, bool, float | None, bool]:
    """(transcript, rubric, judge, status, score, label, reason, attempts, cached, retries,
    billed retries, clamped, latency, per turn) of a judgments row taken as JSON. The types are
    checked inline (this runs for every judgment of a run's first open)."""
    if type(d) is not dict:
        raise _Typed
    get = d.get
    tid, rubric, judge, status = d["transcript_id"], d["rubric"], d["judge"], d["status"]
    if type(tid) is not str or type(rubric) is not str or type(judge) is not str or type(status) is not str or type(d["rubric_version"]) is not str:
        raise _Typed
    score, latency, label, reason = get("score"), get("latency_ms"), get("label"), get("reason")
    if score is not None and type(score) is not float:
        score = _float(score)
    if latency is not None and type(latency) is not float:
        latency = _float(latency)
    if (label is not None and type(label) is not str) or (reason is not None and type(reason) is not str):
        raise _Typed
    attempts, retries, billed = get("attempts", 0), get("retries", 0), get("billed_retries", 0)
    cached, clamped = get("cached", False), get("clamped", False)
    if type(attempts) is not int or type(retries) is not int or type(billed) is not int or type(cached) is not bool or type(clamped) is not bool:
        raise _Typed
    per_turn = "turn" in d
    if per_turn and type(d["turn"]) is not int:
        raise _Typed  # a per-turn run's row (``TurnJudgmentRow``) names its turn
    return tid, rubric, judge, status, score, label, reason, attempts, cached, retries, billed, clamped, latency, per_turn


def first_pass(view: RunView) -> _Run:
    """The report's lazy pass (``_read_run(view, None)``) made of the fields the viewer needs: the
    table, the figures, and where each transcript's rows are. ``perf`` holds each transcript's
    agent metrics, task and turn scores (its timings are the table's; the steps and notes its
    details show are read from its row when it is opened)."""
    columns = _columns(view)
    col_index = {c["key"]: i for i, c in enumerate(columns)}
    judges, composites = list(view.judges), list(view.composites)
    run = _new_run(view, columns)
    # (judge, composite) in `_result`'s order, with its column and its values
    composite_cols = [(col_index[f"c:{name}:{judge}"], run.composite_values[(name, judge)]) for judge in judges for name in composites]
    timings = [(k, run.agent[f]) for k, f in enumerate(LATENCY_FIELDS)]
    unscored_col, failed_col, total_col, calls_col = (col_index[k] for k in ("unscored", "failed", "total_ms", "tool_calls"))
    width = len(columns)
    ids, rows, perfs, conversations, result_refs, tool_calls = run.ids, run.rows, run.perf, run.conversations, run.result_refs, run.tool_calls
    path = view.results_path
    for number, offset, length, text in located_lines(path):
        typed = None
        try:
            tid, read, performance, agent, task = _result(_loads(text, ints_as_written=True), judges, composites)
        except (_Typed, KeyError):
            typed = parse_result(text, path, number)  # refuses the line with its place, or reads it
            tid, agent, task = typed.transcript_id, typed.agent, typed.task
            read = [(typed.composites.get(judge) or {}).get(name) for judge in judges for name in composites]
            performance = [getattr(typed.performance, f) for f in PERFORMANCE_FIELDS]
        ids.append(tid)
        cells: list[Any] = [None] * width
        cells[0] = tid
        for (column, values), value in zip(composite_cols, read, strict=True):
            cells[column] = value
            if value is not None:
                values.append(float(value))
        for k, values in timings:
            if performance[k] is not None:
                values.append(float(performance[k]))
        if performance[4] is not None:
            tool_calls.append(int(performance[4]))
        turns = None
        if typed is not None and typed.turns is not None:
            for judge, scores in typed.scores.items():
                for name, score in scores.items():
                    if score is not None and (i := col_index.get(f"r:{name}:{judge}")) is not None:
                        cells[i] = score
                        run.rubric_values[(name, judge)].append(float(score))
            turns = turn_scores(view, typed)
        cells[unscored_col] = cells[failed_col] = 0
        cells[total_col], cells[calls_col] = performance[0], performance[4]
        rows.append(cells)
        perf: dict[str, Any] = {}
        if agent is not None:
            perf["agent"] = agent
            for name, value in agent.items():
                if (i := col_index.get(f"a:{name}")) is not None:
                    cells[i] = value
        if task is not None:
            perf["task"] = task
        if turns is not None:
            perf["turns"] = turns.as_dict()
        conversations.append(turns)
        perfs.append(perf)
        result_refs.append((number, offset, length))
    count = len(ids)
    position = {tid: at for at, tid in enumerate(ids)}  # (a repeated id: its last row, as the report's pass)
    run.text_refs, run.queries = [None] * count, [""] * count
    run.judgment_refs, run.judgment_lines = [[] for _ in range(count)], [[] for _ in range(count)]
    judgment_refs, judgment_lines, judge_latency = run.judgment_refs, run.judgment_lines, run.judge_latency
    #: (rubric, judge) -> (its table column or None, its health, its judge's latencies or None), made on first meeting
    pairs: dict[tuple[str, str], tuple[int | None, Health, list[float] | None]] = {}
    path = view.judgments_path
    for number, offset, length, text in located_lines(path):
        try:
            tid, rubric, judge, status, score, label, reason, attempts, cached, retries, billed, clamped, latency, per_turn = _judgment(_loads(text))
        except (_Typed, KeyError):
            j = parse_judgment(text, path, number)
            tid, rubric, judge, status, score, label, reason = j.transcript_id, j.rubric, j.judge, j.status, j.score, j.label, j.reason
            attempts, cached, retries, billed, clamped, latency = j.attempts, j.cached, j.retries, j.billed_retries, j.clamped, j.latency_ms
            per_turn = isinstance(j, TurnJudgmentRow)
        at = position.get(tid)
        if at is None:
            continue
        cells = rows[at]
        pair = pairs.get((rubric, judge))
        if pair is None:
            pair = pairs[(rubric, judge)] = (col_index.get(f"r:{rubric}:{judge}"), run.health[(judge, rubric)], judge_latency.get(judge))
        col, health, latencies = pair
        health.count(status, reason, attempts, cached, retries, billed, clamped)
        if per_turn:
            pass  # one turn's judgment: the conversation's score is the results row's (above)
        elif status == "scored" and score is not None:
            run.rubric_values[(rubric, judge)].append(score)
            if col is not None:
                cells[col] = score
        elif status == "scored" and label is not None:
            run.label_counts[(rubric, judge)][label] += 1
            if col is not None:
                cells[col] = label
        elif status == "failed":
            cells[failed_col] += 1
        else:
            cells[unscored_col] += 1
        if latencies is not None and not cached and status != "failed" and latency is not None and (attempts or reason not in NO_CALL_REASONS):
            latencies.append(latency)
        judgment_refs[at].append((offset, length))
        judgment_lines[at].append(number)
    return run
