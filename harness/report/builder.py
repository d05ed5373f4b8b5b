"""``build_report``: RUN_DIR/report.html, one self-contained page about a run.

The page is ``template.html`` with ``report.css``, the vendored Chart.js, ``report.js`` and the
run's data inlined: it opens from disk with no network. The data is one JSON blob in a
``<script type="application/json">`` element (every ``<`` escaped, so no transcript text can end
the element early); ``report.js`` renders the charts from it and draws only the visible rows of the
transcript table, so the page stays fast with 10,000 transcripts. Each transcript's texts and
judgments are not in that blob: they are compressed chunks the page inflates when a row is opened
(see ``details``), written while the run is streamed, so neither the page (``MAX_PAGE_BYTES``) nor
the report step's memory grows with the transcripts' length. Transcript text reaches the page only
through ``textContent``, never as HTML.

The chart library is Chart.js (npm ``chart.js``, version below), chosen over hand-drawn SVG for
its bar and histogram charts, tooltips, legends and theming, and over uPlot because most of the
report's charts are categorical bars. It is committed in ``vendor/`` (see vendor/README.md for
how to update it) and read with importlib.resources; nothing is fetched when a report is built.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import HarnessError, UserInputError
from ..metrics.composites import Component
from ..metrics.schema import NoiseSummary
from ..planning.judgment import NO_CALL_REASONS
from ..rows import JudgmentRow, TurnJudgmentRow, iter_result_rows, located_judgments, located_results
from ..transcripts import PERFORMANCE_FIELDS
from ..version import __version__
from .aggregate import (
    Health,
    count_histogram,
    label_histogram,
    latency_histogram,
    score_histogram,
)
from .breakdown import composite_lines
from .details import SPENT_REPLY_CHARS, ChunkWriter, Spool, dumps
from .inference import read_inference
from .run import RunView, TurnScores, clip, iter_texts, open_run, turn_scores

#: npm chart.js version of vendor/chart.umd.min.js (update both together; see vendor/README.md).
CHART_JS_VERSION = "4.6.1"
REPORT_NAME = "report.html"
#: The order of a judgment's fields in the page's data (each judgment is a list, to keep the page small).
JUDGMENT_FIELDS = (
    "rubric",
    "rubric_version",
    "judge",
    "status",
    "score",
    "raw_score",
    "clamped",
    "reason",
    "error",
    "raw_output",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_ms",
    "attempts",
    "billed_retries",
    "cached",
    "cache_key",
    "label",
    "samples",
    "sample_scores",
    "sample_labels",
    "spread",
    "score_mass",
    #: the turn a judgment judged (a run judged per turn, ``harness run --turns``); null otherwise
    "turn",
)
LATENCY_FIELDS = ("total_ms", "llm_ms", "tool_ms", "api_ms")
_SLOT = re.compile(r"/\*@(\w+)@\*/")
DETAILS_SLOT = "<!--@DETAILS@-->"
#: The page's size, about, whatever the run's: past it the best-scored transcripts' texts are left out.
MAX_PAGE_BYTES = 50_000_000
#: The table's filter searches this much of each query (the page holds no more of it up front).
QUERY_SEARCH_CHARS = 200
#: The k of the agent section's pass@k and pass^k per task (those some task has enough runs for).
PASSK_KS = (1, 3, 5)


@dataclass(frozen=True, slots=True)
class ReportResult:
    path: Path
    transcripts: int
    bytes: int
    seconds: float
    notes: tuple[str, ...]


def _asset(name: str) -> str:
    return resources.files("harness.report").joinpath(name).read_text(encoding="utf-8")


def _script(text: str, name: str) -> str:
    # Inline script text must not contain "</script" (it would end the element): never true of
    # ours or of Chart.js's build, and checked so an update cannot break the page silently.
    if re.search(r"</script", text, re.IGNORECASE):
        raise RuntimeError(f"{name} contains '</script' and cannot be inlined")
    return text


def _chart_js() -> str:
    chart_js = _asset("vendor/chart.umd.min.js")
    chart_js = re.sub(r"\n//# sourceMappingURL=\S+\s*$", "\n", chart_js)  # the map is not shipped
    return _script(chart_js, "vendor/chart.umd.min.js")


def _fill(template: str, slots: Mapping[str, str]) -> str:
    # One pass over the template: text put into one slot is never searched for another.
    return _SLOT.sub(lambda m: slots[m.group(1)], template)


def _metric_entry(
    view: RunView, name: str, kind: str, values: dict[str, list[float]], labels: dict[str, Counter[str]] | None = None
) -> dict[str, Any]:
    per_judge_summary = (view.summary.rubrics if kind == "rubric" else view.summary.composites).get(name, {})
    section = {judge: _json(figures) for judge, figures in per_judge_summary.items()}
    rubric = view.rubrics.get(name) if kind == "rubric" else None
    if rubric is not None and rubric.labels is not None:  # categorical: judgments per label, no score
        per_judge = {judge: (labels or {}).get(judge, Counter()) for judge in view.judges}
        names = label_histogram(rubric.labels, sum(per_judge.values(), Counter()))["labels"]
        return {
            "name": name,
            "kind": kind,
            "version": view.rubric_versions.get(name),
            "scale": None,
            "direction": None,
            "definition": None,
            "labels": list(rubric.labels),
            "stats": section,
            "hist": {"labels": names, "counts": {judge: [c.get(n, 0) for n in names] for judge, c in per_judge.items()}},
        }
    if kind == "composite":
        scale: tuple[float, float] | None = (0.0, 1.0)
        direction: str | None = "higher"
        weights = view.composites.get(name)
        definition = " + ".join(f"{w:g}·{r}" for r, w in weights.items()) if weights else None
    else:
        scale = rubric.scale if rubric else None
        direction = rubric.direction if rubric else None
        definition = None
    if scale is None:  # unknown scale: the data's range, shared by every judge's bars
        every = [v for vs in values.values() for v in vs]
        scale = (min(every), max(every)) if every else (0.0, 1.0)
    hists = {judge: score_histogram(values.get(judge, []), scale) for judge in view.judges}
    bins = next(iter(hists.values()))["labels"] if hists else []
    return {
        "name": name,
        "kind": kind,
        "version": view.rubric_versions.get(name),
        "scale": list(scale),
        "direction": direction,
        "definition": definition,
        "stats": section,
        "hist": {"labels": bins, "counts": {judge: h["counts"] for judge, h in hists.items()}},
    }


def _columns(view: RunView) -> list[dict[str, Any]]:
    many = len(view.judges) > 1
    cols: list[dict[str, Any]] = [{"key": "id", "label": "transcript", "type": "text", "worst": "asc"}]
    for name in view.composites:
        for judge in view.judges:
            cols.append(
                {"key": f"c:{name}:{judge}", "label": f"{name} · {judge}" if many else name, "type": "score", "worst": "asc", "scale": [0.0, 1.0]}
            )
    for name in view.rubric_versions:
        rubric = view.rubrics.get(name)
        worst = "desc" if rubric is not None and rubric.direction == "lower" else "asc"
        if rubric is not None and rubric.labels is not None:  # categorical: the label, no score bar
            for judge in view.judges:
                cols.append({"key": f"r:{name}:{judge}", "label": f"{name} · {judge}" if many else name, "type": "label", "worst": "asc"})
            continue
        for judge in view.judges:
            cols.append(
                {
                    "key": f"r:{name}:{judge}",
                    "label": f"{name} · {judge}" if many else name,
                    "type": "score",
                    "worst": worst,
                    "scale": list(rubric.scale) if rubric is not None else None,
                }
            )
    cols += [
        {"key": "unscored", "label": "unscored", "type": "int", "worst": "desc"},
        {"key": "failed", "label": "failed", "type": "int", "worst": "desc"},
        {"key": "total_ms", "label": "latency ms", "type": "ms", "worst": "desc"},
        {"key": "tool_calls", "label": "tool calls", "type": "int", "worst": "desc"},
    ]
    for name, figures in view.summary.agent.items():  # the agent metrics, beside the rubrics (an agent run only)
        worst = "desc" if figures.direction == "lower" else "asc"
        if figures.scale is not None:
            cols.append({"key": f"a:{name}", "label": name, "type": "score", "worst": worst, "scale": [float(v) for v in figures.scale]})
        else:
            cols.append({"key": f"a:{name}", "label": name, "type": "int", "worst": worst})
    return cols


def _worst_first(rows: list[list[Any]], col: int, direction: str) -> list[int]:
    """Row indices in the table's first order (report.js ``compare``): by column ``col`` worst
    first, ties by position, missing values last. The page's details are written in this order."""
    present = [i for i, r in enumerate(rows) if r[col] is not None]
    present.sort(key=lambda i: rows[i][col], reverse=direction == "desc")  # stable either way
    return present + [i for i, r in enumerate(rows) if r[col] is None]


@dataclass
class _Run:
    """What one streaming pass over results.jsonl, judgments.jsonl and the input file keeps: the
    table, the aggregates, and spool offsets for each transcript's judgments and texts."""

    ids: list[str]
    columns: list[dict[str, Any]]
    rows: list[list[Any]]
    queries: list[str]
    perf: list[dict[str, Any]]
    recorded: list[dict[str, Any]]
    #: each transcript's judgments: where the spool holds them, or (lazy) where judgments.jsonl does
    judgment_refs: list[list[tuple[int, int]]]
    text_refs: list[tuple[int, int] | None]
    #: (lazy) each transcript's row of results.jsonl: (line, offset, length)
    result_refs: list[tuple[int, int, int]]
    #: (lazy) the line of judgments.jsonl each judgment ref is on
    judgment_lines: list[list[int]]
    #: a conversation judged per turn: its turns' scores (``run.turn_scores``); None otherwise
    conversations: list[TurnScores | None]
    #: each transcript's judgments as its composites weigh them (``breakdown.judgment_components``)
    components: list[dict[str, dict[str, Component]]]
    rubric_values: dict[tuple[str, str], list[float]]
    label_counts: dict[tuple[str, str], Counter[str]]
    composite_values: dict[tuple[str, str], list[float]]
    agent: dict[str, list[float]]
    tool_calls: list[int]
    judge_latency: dict[str, list[float]]
    health: dict[tuple[str, str], Health]
    notes: list[str]


def _new_run(view: RunView, columns: list[dict[str, Any]]) -> _Run:
    """An empty pass's outcome for ``view``, its table's ``columns`` (the report's pass and the viewer's light one)."""
    return _Run(
        ids=[], columns=columns, rows=[], queries=[], perf=[], recorded=[], judgment_refs=[], text_refs=[], result_refs=[], judgment_lines=[], conversations=[], components=[],
        rubric_values=defaultdict(list), label_counts=defaultdict(Counter), composite_values=defaultdict(list),
        agent={f: [] for f in LATENCY_FIELDS}, tool_calls=[], judge_latency={j: [] for j in view.judges},
        health=defaultdict(Health), notes=list(view.notes),
    )  # fmt: skip


def _read_run(view: RunView, spool: Spool | None) -> _Run:
    """One pass over results.jsonl, judgments.jsonl and the input file. With no ``spool`` (the
    viewer, lazy) the input file is not read and each judgment's ref is where judgments.jsonl holds
    it (offset, length), so the pass costs only the two rows files' parsing."""
    columns = _columns(view)
    col_index = {c["key"]: i for i, c in enumerate(columns)}
    run = _new_run(view, columns)
    position: dict[str, int] = {}
    for number, offset, length, row in located_results(view.results_path):
        tid = row.transcript_id
        position[tid] = len(run.ids)
        run.ids.append(tid)
        cells: list[Any] = [None] * len(columns)
        cells[0] = tid
        recorded = row.composites
        for judge in view.judges:
            for name in view.composites:
                value = (recorded.get(judge) or {}).get(name)
                cells[col_index[f"c:{name}:{judge}"]] = value
                if value is not None:
                    run.composite_values[(name, judge)].append(float(value))
        performance = row.performance.as_dict()
        for f in LATENCY_FIELDS:
            if performance.get(f) is not None:
                run.agent[f].append(float(performance[f]))
        if performance.get("tool_calls") is not None:
            run.tool_calls.append(int(performance["tool_calls"]))
        if row.turns is not None:
            # judged per turn: the table and the histograms hold the conversation's score (the
            # results row's, by the run's rule); each turn's is in the transcript's details
            for judge, values in row.scores.items():
                for name, value in values.items():
                    if value is not None and (i := col_index.get(f"r:{name}:{judge}")) is not None:
                        cells[i] = value
                        run.rubric_values[(name, judge)].append(float(value))
        cells[col_index["unscored"]], cells[col_index["failed"]] = 0, 0
        cells[col_index["total_ms"]], cells[col_index["tool_calls"]] = performance.get("total_ms"), performance.get("tool_calls")
        run.rows.append(cells)
        perf = {f: performance.get(f) for f in PERFORMANCE_FIELDS}
        if row.agent is not None:  # the transcript's agent metrics, for its detail view
            perf["agent"], perf["agent_unscored"] = row.agent, row.agent_unscored or {}
            # what the metrics point at: the steps behind each count, and why the trajectory did not
            # match (the reference calls expected and not made), as results.jsonl records them
            perf["agent_steps"], perf["agent_notes"] = row.agent_steps or {}, row.agent_notes or {}
            for name, value in row.agent.items():
                if (i := col_index.get(f"a:{name}")) is not None:
                    cells[i] = value
        if row.task is not None:
            perf["task"] = row.task
        if (turns := turn_scores(view, row)) is not None:
            perf["turns"] = turns.as_dict()
        run.conversations.append(turns)
        run.perf.append(perf)
        run.recorded.append(recorded)
        run.judgment_refs.append([])
        run.components.append({})
        run.text_refs.append(None)
        run.queries.append("")
        if spool is None:
            run.result_refs.append((number, offset, length))
            run.judgment_lines.append([])
    for number, offset, length, j in located_judgments(view.judgments_path):
        at = position.get(j.transcript_id)
        if at is None:
            continue
        cells = run.rows[at]
        rubric, judge, status = j.rubric, j.judge, j.status
        run.health[(judge, rubric)].add(j)
        if isinstance(j, TurnJudgmentRow):
            pass  # one turn's judgment: the conversation's score is the results row's (above)
        elif status == "scored" and j.score is not None:
            run.rubric_values[(rubric, judge)].append(j.score)
            if (i := col_index.get(f"r:{rubric}:{judge}")) is not None:
                cells[i] = j.score
        elif status == "scored" and j.label is not None:
            run.label_counts[(rubric, judge)][j.label] += 1
            if (i := col_index.get(f"r:{rubric}:{judge}")) is not None:
                cells[i] = j.label
        elif status == "failed":
            cells[col_index["failed"]] += 1
        else:
            cells[col_index["unscored"]] += 1
        if not isinstance(j, TurnJudgmentRow):
            run.components[at].setdefault(judge, {})[rubric] = Component(status, j.score, j.reason)
        called = not (j.reason in NO_CALL_REASONS and not j.attempts)
        if called and not j.cached and status != "failed" and j.latency_ms is not None and judge in run.judge_latency:
            run.judge_latency[judge].append(j.latency_ms)
        if spool is None:
            run.judgment_refs[at].append((offset, length))
            run.judgment_lines[at].append(number)
            continue
        run.judgment_refs[at].append(spool.put(judgment_fields(j)))
    if spool is None:
        return run
    for tid, texts in iter_texts(view, set(position), run.notes):
        at = position[tid]
        run.text_refs[at] = spool.put(texts.as_dict())
        run.queries[at] = (texts.query or "")[:QUERY_SEARCH_CHARS]
    return run


def judgment_fields(j: JudgmentRow) -> list[Any]:
    """A judgments.jsonl row as the page's list of ``JUDGMENT_FIELDS`` (the reply cut at ``MAX_TEXT_CHARS``;
    ``turn`` None but for a per-turn row)."""
    return [clip(j.raw_output) if f == "raw_output" else getattr(j, f, None) for f in JUDGMENT_FIELDS]


def _write_details(view: RunView, run: _Run, spool: Spool, writer: ChunkWriter, order: list[int]) -> tuple[int, int]:
    """Every transcript's details into ``writer``, in ``order``; (composites that disagree with
    results.jsonl, transcripts whose texts were left out for the budget)."""
    disagreements = left_out = 0
    # JSON every row brings whatever the budget: its judgments, and about this much besides.
    small = [sum(ref[1] for ref in refs) + 150 for refs in run.judgment_refs]
    rest = sum(small)
    for at in order:
        rest -= small[at]
        packed = [spool.get(ref) for ref in run.judgment_refs[at]]
        lines = composite_lines(view, run.components[at], run.recorded[at], run.conversations[at])
        disagreements += sum(1 for line in lines if line.agrees is False)
        ref = run.text_refs[at]
        detail: dict[str, Any] = {"perf": run.perf[at], "texts": None, "j": packed, "c": [line.as_dict() for line in lines]}
        if writer.spent(rest):
            if ref is not None:
                detail["left_out"] = True
                left_out += 1
            raw = JUDGMENT_FIELDS.index("raw_output")
            for p in packed:
                p[raw] = clip(p[raw], SPENT_REPLY_CHARS)
        elif ref is not None:
            detail["texts"] = spool.get(ref)
        writer.add(at, detail)
    writer.flush()
    return disagreements, left_out


def _metrics(view: RunView, run: _Run) -> list[dict[str, Any]]:
    metrics = [_metric_entry(view, n, "composite", {j: run.composite_values[(n, j)] for j in view.judges}) for n in view.composites]
    metrics += [
        _metric_entry(view, n, "rubric", {j: run.rubric_values[(n, j)] for j in view.judges}, {j: run.label_counts[(n, j)] for j in view.judges})
        for n in view.rubric_versions
    ]
    return metrics


def build_data(view: RunView, run: _Run, details: dict[str, Any]) -> dict[str, Any]:
    """Everything the page shows but the transcripts' details, as one JSON-ready dict."""
    summary = view.summary
    judges_summary = {j: summary.judges[j] for j in view.judges if j in summary.judges}
    hits = sum(s.cache_hits for s in judges_summary.values())
    calls = sum(s.calls for s in judges_summary.values())
    perf_summary = {name: _json(figures) for name, figures in summary.performance.items()}
    return {
        "format": 2,
        "meta": {
            "run_dir": str(view.path),
            "input": summary.input,
            "input_resolved": str(view.input_path) if view.input_path else None,
            "texts_available": sum(1 for ref in run.text_refs if ref is not None),
            "judges": [{"name": j, **(_json(summary.judge_models.get(j)) or {})} for j in view.judges],
            "rubrics": [
                {
                    "name": n,
                    "version": v,
                    "scale": list(view.rubrics[n].scale) if n in view.rubrics else None,
                    "direction": view.rubrics[n].direction if n in view.rubrics else None,
                    "labels": list(labels) if n in view.rubrics and (labels := view.rubrics[n].labels) is not None else None,
                }
                for n, v in view.rubric_versions.items()
            ],
            "composites": [
                {"name": n, "definition": " + ".join(f"{w:g}·{r}" for r, w in ws.items()) if ws else None} for n, ws in view.composites.items()
            ],
            "weights_source": view.weights_source,
            "transcripts": summary.transcripts if "transcripts" in summary.model_fields_set else len(run.rows),
            "judgments": summary.judgments,
            "wall_time_s": summary.wall_time_s,
            "cost_usd": summary.cost_usd,
            "cache": summary.cache,
            "cache_mode": summary.cache_mode,
            "cache_hits": hits,
            "cache_hit_rate": hits / (hits + calls) if hits + calls else None,
            "interrupted": summary.interrupted,
            "budget": _json(summary.budget),
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "harness_version": __version__,
            "chart_js_version": CHART_JS_VERSION,
            "notes": run.notes,
        },
        "metrics": _metrics(view, run),
        "performance": {
            "agent": {f: {"stats": perf_summary.get(f), "hist": latency_histogram(run.agent[f])} for f in LATENCY_FIELDS},
            "tool_calls": {"stats": perf_summary.get("tool_calls"), "hist": count_histogram(run.tool_calls)},
            "judges": {
                j: {"stats": _json(s.latency_ms) if (s := judges_summary.get(j)) else None, "hist": latency_histogram(run.judge_latency[j])}
                for j in view.judges
            },
        },
        "cost": {"summary": _json(summary.cost), "judges": {j: _json(judges_summary.get(j)) for j in view.judges}},
        "health": [
            {"judge": j, "rubric": r, **run.health[(j, r)].as_dict()} for j in view.judges for r in view.rubric_versions if (j, r) in run.health
        ],
        "table": {"columns": run.columns, "rows": run.rows, "queries": run.queries, "sort": _sort_column(run.columns)},
        "judgment_fields": list(JUDGMENT_FIELDS),
        "details": details,
        "trust": {"judge_noise": _noise_rows(summary.judge_noise), "pairwise": [], "probes": []},
        "agent": agent_section(view) if summary.agent else None,
        "injection": injection_section(view),
    }


#: findings listed on the page; the rest are counted and left to the run's injection.jsonl
INJECTION_ROWS = 200


def injection_section(view: RunView) -> dict[str, Any] | None:
    """What the run's injection scan found (summary.json's ``injection`` and the first
    ``INJECTION_ROWS`` lines of its injection.jsonl); None for a run that did not scan."""
    record = view.summary.injection
    if record is None:
        return None
    rows: list[dict[str, Any]] = []
    more = 0
    path = view.path / record.file
    if path.exists():
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if len(rows) >= INJECTION_ROWS:
                    more += 1
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise UserInputError(f"{path}:{number}: not a JSON line") from None
                rows.append({k: row.get(k) for k in ("transcript", "field", "turn", "step", "offset", "kind", "excerpt")})
    return {**record.model_dump(), "rows": rows, "more": more}


def agent_section(view: RunView) -> dict[str, Any]:
    """The agent metrics of summary.json and, for a run whose transcripts name tasks, pass@k and
    pass^k per task (`harness.analysis.repeated.repeated_runs`, as ``harness passk`` prints them)
    with success ``trajectory_match >= 1`` (or ``task_note`` saying why there are none)."""
    out: dict[str, Any] = {"metrics": {name: figures.model_dump(exclude_unset=True) for name, figures in view.summary.agent.items()}}
    out["tasks"], out["task_note"] = None, None
    if "trajectory_match" not in view.summary.agent:
        out["task_note"] = "the run has no trajectory_match (no reference trajectories) to decide a task's success"
        return out
    from ..analysis.repeated import repeated_runs, success_rule

    runs = Counter(r.task for r in iter_result_rows(view.results_path) if r.task is not None)
    most = max(runs.values(), default=1)
    try:
        rule = success_rule(metric="trajectory_match", at_least=1.0)
        found = repeated_runs(view.path, rule, tuple(k for k in PASSK_KS if k <= most) or (1,))
    except HarnessError as exc:
        out["task_note"] = str(exc)
        return out
    if not found.tasks:
        out["task_note"] = "no transcript of the run names a task"
        return out
    out["tasks"] = found.as_dict()
    return out


def _sort_column(columns: list[dict[str, Any]]) -> int:
    return 1 if len(columns) > 5 else 0


def _noise_rows(noise: Mapping[str, Mapping[str, NoiseSummary]]) -> list[dict[str, Any]]:
    """summary.json's ``judge_noise`` (repeated samples) as one row per rubric and judge."""
    return [
        {"rubric": rubric, "judge": judge, **figures.model_dump(exclude_unset=True)}
        for rubric, judges in noise.items()
        for judge, figures in judges.items()
    ]


def _json(section: BaseModel | None) -> dict[str, Any] | None:
    """A section of summary.json as the file holds it, for the page's data."""
    return None if section is None else section.model_dump(exclude_unset=True)


def trust_sections(paths: Iterable[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """The results of ``harness pairwise`` (pairwise.json) and ``harness probe`` (probe.json) to show
    beside the run; a file that is neither is a one-line error."""
    found: dict[str, list[dict[str, Any]]] = {"pairwise": [], "probes": []}
    for raw in paths:
        path = Path(raw)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserInputError(f"{path}: no such file") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserInputError(f"{path}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
        if isinstance(data, dict) and isinstance(data.get("judges"), dict) and "pairs" in data:
            rows = [
                {"source": str(path), "judge": judge, **{k: v for k, v in figures.items() if k != "verdicts"}}
                for judge, figures in data["judges"].items()
            ]
            found["pairwise"].extend(rows)
        elif isinstance(data, dict) and isinstance(data.get("shifts"), list) and "probe" in data:
            found["probes"].extend({"source": str(path), "probe": data["probe"], **shift} for shift in data["shifts"])
        else:
            raise UserInputError(f"{path}: not a pairwise.json or probe.json written by harness pairwise / harness probe")
    return found


def build_report(
    run_dir: str | Path,
    *,
    config: str | Path | None = None,
    prompts: Iterable[str | Path] = (),
    input: str | Path | None = None,
    out: str | Path | None = None,
    trust: Iterable[str | Path] = (),
    max_bytes: int | None = None,
) -> ReportResult:
    """Write ``run_dir/report.html`` (or ``out``). See :func:`harness.report.run.open_run` for the
    options; ``trust`` names pairwise.json and probe.json files to show in the "Judge trust" section.
    ``max_bytes``: the page's size, about (default MAX_PAGE_BYTES); past it the best-scored
    transcripts' texts are left out."""
    started = time.perf_counter()
    max_bytes = MAX_PAGE_BYTES if max_bytes is None else max_bytes
    view = open_run(run_dir, config=config, prompts=prompts, input=input)
    extra = trust_sections(trust)
    title = f"harness report · {view.path.name or view.path}"
    path = Path(out) if out is not None else view.path / REPORT_NAME
    tmp = path.with_name(path.name + ".tmp")
    try:
        run = _write_page(view, tmp, max_bytes, extra, title)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    size = tmp.stat().st_size
    tmp.replace(path)  # a reader never sees half a page
    return ReportResult(path, len(run.rows), size, time.perf_counter() - started, tuple(run.notes))


def _write_page(view: RunView, tmp: Path, max_bytes: int, extra: dict[str, list[dict[str, Any]]], title: str) -> _Run:
    """Stream the run into ``tmp``: the page's head, the details' chunks, then the data and scripts."""
    inference, inference_notes = read_inference(view.path)
    head, tail = _asset("template.html").split(DETAILS_SLOT)
    assets = {"TITLE": html.escape(title), "CSS": _asset("report.css"), "CHART_JS": _chart_js(), "APP_JS": _script(_asset("report.js"), "report.js")}
    with Spool(tmp.parent) as spool, tmp.open("w", encoding="utf-8") as fh:
        run = _read_run(view, spool)
        first = run.columns[_sort_column(run.columns)]
        order = _worst_first(run.rows, _sort_column(run.columns), first["worst"])
        # What the page holds besides the details: the assets, the table, and a few bytes per row.
        fixed = sum(len(a.encode("utf-8")) for a in (head, tail, *assets.values()))
        fixed += len(dumps(run.rows).encode("utf-8")) + len(dumps(run.queries).encode("utf-8")) + 16 * len(run.rows) + 200_000
        writer = ChunkWriter(fh, len(run.rows), max(0, max_bytes - fixed))
        fh.write(_fill(head, assets))
        disagreements, left_out = _write_details(view, run, spool, writer, order)
        if disagreements:
            run.notes.append(
                f"{disagreements} composite value(s) in results.jsonl differ from the formula with the weights from "
                f"{view.weights_source}: the run used other weights (pass its --config); such formulas are marked"
            )
        if left_out:
            run.notes.append(
                f"the texts of {left_out:,} of {len(run.rows):,} transcripts (the best by {first['label']}) are left out to keep "
                f"report.html under {max_bytes / 1e6:.0f} MB; their judgments are shown, and harness explain {view.path} ID prints any transcript"
            )
        run.notes.extend(inference_notes)
        data = build_data(view, run, {"where": writer.where, "chunks": writer.chunks, "left_out": left_out})
        data["trust"].update(extra)
        data["inference"] = None if inference is None else inference.as_json()
        blob = dumps(data).replace("<", "\\u003c")
        fh.write(_fill(tail, {**assets, "DATA": blob}))
    return run
