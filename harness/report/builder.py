"""``build_report``: RUN_DIR/report.html, one self-contained page about a run.

The page is ``template.html`` with ``report.css``, the vendored Chart.js, ``report.js`` and the
run's data inlined: it opens from disk with no network. The data is one JSON blob in a
``<script type="application/json">`` element (every ``<`` escaped, so no transcript text can end
the element early); ``report.js`` renders the charts from it and draws only the visible rows of the
transcript table, so the page stays fast with 10,000 transcripts. Transcript text reaches the page
only through ``textContent``, never as HTML.

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

from ..errors import UserInputError
from ..jsonlines import iter_json_objects as iter_jsonl
from ..planning.judgment import NO_CALL_REASONS
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
from .inference import read_inference
from .run import RunView, clip, open_run, read_texts

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
)
LATENCY_FIELDS = ("total_ms", "llm_ms", "tool_ms", "api_ms")
_SLOT = re.compile(r"/\*@(\w+)@\*/")


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


def render_page(data: dict[str, Any], title: str) -> str:
    """The HTML page for ``data``: every asset inlined, the data as one escaped JSON blob."""
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    chart_js = _asset("vendor/chart.umd.min.js")
    chart_js = re.sub(r"\n//# sourceMappingURL=\S+\s*$", "\n", chart_js)  # the map is not shipped
    slots = {
        "TITLE": html.escape(title),
        "CSS": _asset("report.css"),
        "CHART_JS": _script(chart_js, "vendor/chart.umd.min.js"),
        "APP_JS": _script(_asset("report.js"), "report.js"),
        "DATA": blob,
    }
    # One pass over the template: text put into one slot is never searched for another.
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("template.html"))


def _metric_entry(
    view: RunView, name: str, kind: str, values: dict[str, list[float]], labels: dict[str, Counter[str]] | None = None
) -> dict[str, Any]:
    section = view.summary.get("rubrics" if kind == "rubric" else "composites", {}).get(name, {})
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
    return cols


def build_data(view: RunView) -> dict[str, Any]:
    """Everything the page shows, as one JSON-ready dict."""
    results = [row for _, row in iter_jsonl(view.results_path)]
    judgments: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _, row in iter_jsonl(view.judgments_path):
        judgments[str(row.get("transcript_id"))].append(row)
    ids = [str(row.get("transcript_id")) for row in results]
    texts, text_note = read_texts(view, set(ids))
    notes = list(view.notes)
    if text_note:
        notes.append(text_note)

    columns = _columns(view)
    col_index = {c["key"]: i for i, c in enumerate(columns)}
    rubric_values: dict[tuple[str, str], list[float]] = defaultdict(list)
    label_counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    composite_values: dict[tuple[str, str], list[float]] = defaultdict(list)
    agent: dict[str, list[float]] = {f: [] for f in LATENCY_FIELDS}
    tool_calls: list[int] = []
    judge_latency: dict[str, list[float]] = {j: [] for j in view.judges}
    health: dict[tuple[str, str], Health] = defaultdict(Health)
    table_rows: list[list[Any]] = []
    details: list[dict[str, Any]] = []
    disagreements = 0

    for row, tid in zip(results, ids, strict=True):
        own = judgments.pop(tid, [])
        cells: list[Any] = [None] * len(columns)
        cells[0] = tid
        unscored = failed = 0
        packed = []
        for j in own:
            rubric, judge, status = str(j.get("rubric")), str(j.get("judge")), j.get("status")
            health[(judge, rubric)].add(j)
            if status == "scored" and j.get("score") is not None:
                rubric_values[(rubric, judge)].append(float(j["score"]))
                if (i := col_index.get(f"r:{rubric}:{judge}")) is not None:
                    cells[i] = j["score"]
            elif status == "scored" and j.get("label") is not None:
                label_counts[(rubric, judge)][str(j["label"])] += 1
                if (i := col_index.get(f"r:{rubric}:{judge}")) is not None:
                    cells[i] = str(j["label"])
            elif status == "failed":
                failed += 1
            else:
                unscored += 1
            called = not (j.get("reason") in NO_CALL_REASONS and not j.get("attempts"))
            if called and not j.get("cached") and status != "failed" and j.get("latency_ms") is not None and judge in judge_latency:
                judge_latency[judge].append(float(j["latency_ms"]))
            packed.append([clip(j.get(f)) if f == "raw_output" else j.get(f) for f in JUDGMENT_FIELDS])
        recorded = row.get("composites") or {}
        for judge in view.judges:
            for name in view.composites:
                value = (recorded.get(judge) or {}).get(name)
                cells[col_index[f"c:{name}:{judge}"]] = value
                if value is not None:
                    composite_values[(name, judge)].append(float(value))
        performance = row.get("performance") or {}
        for f in LATENCY_FIELDS:
            if performance.get(f) is not None:
                agent[f].append(float(performance[f]))
        if performance.get("tool_calls") is not None:
            tool_calls.append(int(performance["tool_calls"]))
        cells[col_index["unscored"]], cells[col_index["failed"]] = unscored, failed
        cells[col_index["total_ms"]], cells[col_index["tool_calls"]] = performance.get("total_ms"), performance.get("tool_calls")
        lines = composite_lines(view, own, recorded)
        disagreements += sum(1 for line in lines if line.agrees is False)
        table_rows.append(cells)
        found = texts.get(tid)
        details.append(
            {
                "perf": {f: performance.get(f) for f in PERFORMANCE_FIELDS},
                "texts": found.as_dict() if found else None,
                "j": packed,
                "c": [line.as_dict() for line in lines],
            }
        )
    if disagreements:
        notes.append(
            f"{disagreements} composite value(s) in results.jsonl differ from the formula with the weights from "
            f"{view.weights_source}: the run used other weights (pass its --config); such formulas are marked"
        )
    summary = view.summary
    judges_summary = summary.get("judges") or {}
    hits = sum(int((judges_summary.get(j) or {}).get("cache_hits") or 0) for j in view.judges)
    calls = sum(int((judges_summary.get(j) or {}).get("calls") or 0) for j in view.judges)
    metrics = [_metric_entry(view, n, "composite", {j: composite_values[(n, j)] for j in view.judges}) for n in view.composites]
    metrics += [
        _metric_entry(view, n, "rubric", {j: rubric_values[(n, j)] for j in view.judges}, {j: label_counts[(n, j)] for j in view.judges})
        for n in view.rubric_versions
    ]
    perf_summary = summary.get("performance") or {}
    return {
        "format": 1,
        "meta": {
            "run_dir": str(view.path),
            "input": summary.get("input"),
            "input_resolved": str(view.input_path) if view.input_path else None,
            "texts_available": len(texts),
            "judges": [{"name": j, **(summary["judge_models"].get(j) or {})} for j in view.judges],
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
            "transcripts": summary.get("transcripts", len(results)),
            "judgments": summary.get("judgments") or {},
            "wall_time_s": summary.get("wall_time_s"),
            "cost_usd": summary.get("cost_usd"),
            "cache": summary.get("cache"),
            "cache_mode": summary.get("cache_mode"),
            "cache_hits": hits,
            "cache_hit_rate": hits / (hits + calls) if hits + calls else None,
            "interrupted": bool(summary.get("interrupted")),
            "budget": summary.get("budget"),
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "harness_version": __version__,
            "chart_js_version": CHART_JS_VERSION,
            "notes": notes,
        },
        "metrics": metrics,
        "performance": {
            "agent": {f: {"stats": perf_summary.get(f), "hist": latency_histogram(agent[f])} for f in LATENCY_FIELDS},
            "tool_calls": {"stats": perf_summary.get("tool_calls"), "hist": count_histogram(tool_calls)},
            "judges": {
                j: {"stats": (judges_summary.get(j) or {}).get("latency_ms"), "hist": latency_histogram(judge_latency[j])} for j in view.judges
            },
        },
        "cost": {"summary": summary.get("cost"), "judges": {j: judges_summary.get(j) for j in view.judges}},
        "health": [{"judge": j, "rubric": r, **health[(j, r)].as_dict()} for j in view.judges for r in view.rubric_versions if (j, r) in health],
        "table": {"columns": columns, "rows": table_rows, "sort": 1 if len(columns) > 5 else 0},
        "judgment_fields": list(JUDGMENT_FIELDS),
        "details": details,
        "trust": {"judge_noise": _noise_rows(summary.get("judge_noise") or {}), "pairwise": [], "probes": []},
    }


def _noise_rows(noise: Mapping[str, Any]) -> list[dict[str, Any]]:
    """summary.json's ``judge_noise`` (repeated samples) as one row per rubric and judge."""
    return [{"rubric": rubric, "judge": judge, **figures} for rubric, judges in noise.items() for judge, figures in judges.items()]


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
) -> ReportResult:
    """Write ``run_dir/report.html`` (or ``out``). See :func:`harness.report.run.open_run` for the
    options; ``trust`` names pairwise.json and probe.json files to show in the "Judge trust" section."""
    started = time.perf_counter()
    view = open_run(run_dir, config=config, prompts=prompts, input=input)
    extra = trust_sections(trust)
    data = build_data(view)
    data["trust"].update(extra)
    data["inference"], inference_notes = read_inference(view.path)
    data["meta"]["notes"].extend(inference_notes)
    page = render_page(data, f"harness report · {view.path.name or view.path}")
    path = Path(out) if out is not None else view.path / REPORT_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return ReportResult(path, len(data["details"]), len(page.encode("utf-8")), time.perf_counter() - started, tuple(data["meta"]["notes"]))
