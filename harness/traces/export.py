"""Write a run's verdicts back: OpenTelemetry ``gen_ai.evaluation.result`` events, CSV or Parquet.

``otel`` writes OTLP JSON logs (one ``ExportLogsServiceRequest`` per line, as the OpenTelemetry
SDK's JSON file exporter does), one log record per judgment, shaped as the GenAI semantic
conventions' ``gen_ai.evaluation.result`` event: ``eventName``, the judged trace's ``traceId`` and
the judged span's ``spanId`` (remembered in the transcript's metadata when it was read from a
trace), and the attributes ``gen_ai.evaluation.name`` (the rubric), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` and ``gen_ai.evaluation.explanation``; a failed judgment carries
``error.type``. Collector ``otlpjsonfile`` receivers and most backends ingest the file as is.

``csv`` (stdlib) and ``parquet`` (needs pyarrow) write one row per judgment with the trace ids.

The deterministic agent metrics of results.jsonl (``agent``: trajectory match, failed steps, ...)
are exported after the judgments, one event or row each, with no judge: ``harness.kind`` is
``agent_metric`` and ``harness.steps`` lists the indices of the steps behind the value; they go on
the transcript's span. With ``otel``, each step a finding names (a failed call, an undeclared
tool, a schema violation, a repeated call, a call the reference did not expect: :data:`FINDINGS`)
gets an event of its own, ``harness.kind`` ``agent_step_finding``, on that step's span: the span
of the tool's run when the trace recorded one (``Step.span_id``), else a span the export creates
for the step under the transcript's span, named ``execute_tool {tool}`` with ``gen_ai.tool.name``
and ``gen_ai.tool.call.id`` (the GenAI conventions' tool span). The created spans are written as
OTLP JSON traces beside the events (``*.spans.otlp.jsonl``); their ids are derived from the
transcript's span and the step, so a second export makes the same spans, and a trace holding them
reads back to the same steps (each is the run of its call: same id, name, arguments and failure).

A conversation read from traces (a session, ``traces.sessions``) keeps each turn's trace and span:
a run judged per turn (``--turns``) puts each turn's judgment on its turn's span, with
``harness.turn``; a judgment of the whole conversation goes on the first turn's span (the root of
the session's first trace). Both carry ``gen_ai.conversation.id`` when the conversation is a
session. CSV and Parquet rows take the turn's trace and span ids.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..agent.steps import Step
from ..errors import UserInputError
from ..rows import iter_judgment_rows, iter_result_rows, judgments_path, results_path
from ..transcripts.models import Transcript
from .loader import iter_transcripts
from .sessions import Sessions

EXPORT_FORMATS = ("otel", "csv", "parquet")
EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = {"name": "harness", "version": "0.1.0"}
_BATCH = 512
COLUMNS = (
    "transcript_id",
    "trace_id",
    "span_id",
    "judge",
    "rubric",
    "rubric_version",
    "status",
    "score",
    "label",
    "reason",
    "error",
    "latency_ms",
    "cost_usd",
    "cached",
)
#: The agent metrics whose named steps are findings about those steps, each with the label its
#: events carry and what it says about the step (``trajectory_precision`` names the calls the
#: reference did not expect; match and F1 name the same ones and are not repeated).
FINDINGS = {
    "failed_steps": ("failed", "the call failed"),
    "undeclared_tools": ("undeclared", "the tool it calls is not declared"),
    "schema_violations": ("schema_violation", "its arguments break the tool's JSON Schema"),
    "repeated_calls": ("repeated", "it repeats an earlier call with the same arguments"),
    "trajectory_precision": ("unexpected", "the reference trajectory does not expect it"),
}
#: the kinds of rows an export writes, in their order
JUDGMENT, AGENT_METRIC, STEP_FINDING = "judgment", "agent_metric", "agent_step_finding"


@dataclass(slots=True)
class ExportResult:
    path: Path
    judgments: int
    linked: int  # judgments whose transcript names its trace and span
    #: the agent metrics exported beside the judgments (events or rows with no judge)
    agent_metrics: int = 0
    #: step findings exported as events on their step's span (``otel``), and of those linked to a trace
    step_findings: int = 0
    step_findings_linked: int = 0
    #: the step spans the export created (steps whose trace recorded no run), and their file
    created_spans: int = 0
    spans_path: Path | None = None


@dataclass(frozen=True, slots=True)
class TraceLink:
    """A transcript of the run's input: its trace and span when it was read from a trace (else
    None), and its steps (each with the span of its tool's run, when the trace recorded one)."""

    trace_id: str | None
    span_id: str | None
    steps: tuple[Step, ...] = ()
    #: the end of the transcript's last span: when a created step span of unknown time is put
    last_end_s: float | None = None
    #: a conversation's turns: each turn's (trace id, span id), when known (``Transcript.turns``)
    turns: tuple[tuple[str, str] | None, ...] = ()
    #: the session the conversation is (its ``metadata.session_id``)
    session: str | None = None

    @property
    def ids(self) -> tuple[str, str] | None:
        return (self.trace_id, self.span_id) if self.trace_id is not None and self.span_id is not None else None


@dataclass(slots=True)
class Tally:
    """What a writer wrote: rows by kind, and of those the rows linked to a trace."""

    rows: Counter[str] = field(default_factory=Counter)
    linked: Counter[str] = field(default_factory=Counter)
    #: the step spans created (``otel``)
    created_spans: int = 0

    def add(self, kind: str, linked: bool) -> None:
        self.rows[kind] += 1
        self.linked[kind] += linked


def _run_input(run_dir: Path, given: Path | None) -> Path | None:
    if given is not None:
        return given
    summary = run_dir / "summary.json"
    try:
        recorded = json.loads(summary.read_text(encoding="utf-8")).get("input")
    except (OSError, json.JSONDecodeError):
        return None
    return Path(recorded) if recorded else None


def trace_links(input_path: Path | None, input_format: str, sessions: Sessions = "on") -> dict[str, TraceLink]:
    """``transcript id -> TraceLink`` for every transcript of the run's input (its trace ids when
    it was read from a trace)."""
    if input_path is None or not input_path.is_file():
        return {}
    links = {}
    for _, record in iter_transcripts(input_path, on_bad="skip", format=input_format, sessions=sessions):
        meta = record.metadata or {}
        trace_id, span_id = meta.get("trace_id"), meta.get("span_id")
        linked = isinstance(trace_id, str) and isinstance(span_id, str)
        steps = record.resolved().steps or ()
        last = max((span.end_s for span in record.spans or ()), default=None)
        link = TraceLink(trace_id if linked else None, span_id if linked else None, steps, last)
        links[record.id] = _conversation_link(link, record) if record.turns is not None else link
    return links


def _conversation_link(link: TraceLink, record: Transcript) -> TraceLink:
    """``link`` of a conversation given as turns: each turn's trace and span, and, when the
    transcript names no span of its own, the first turn's (where its whole judgments go)."""
    turns = tuple((t.trace_id, t.span_id) if t.trace_id is not None and t.span_id is not None else None for t in record.turns or ())
    session = (record.metadata or {}).get("session_id")
    trace_id, span_id = link.trace_id, link.span_id
    traced = [t for t in turns if t is not None]
    if link.ids is None and traced:
        trace_id, span_id = traced[0]
    return replace(link, trace_id=trace_id, span_id=span_id, turns=turns, session=session if isinstance(session, str) else None)


def _judged_span(row: dict[str, Any], link: TraceLink) -> tuple[str, str] | None:
    """Where a judgment or metric goes: its turn's span when it judged one turn of a conversation
    whose turns name their spans, else the transcript's."""
    turn = row.get("turn")
    if isinstance(turn, int) and 1 <= turn <= len(link.turns):
        return link.turns[turn - 1]  # None: a turn no trace recorded (traces.history) is exported unlinked
    return link.ids


def _conversation_attributes(row: dict[str, Any], link: TraceLink | None) -> list[dict[str, Any]]:
    """The attributes saying which turn of which session an event is about (none for others)."""
    out = []
    if isinstance(row.get("turn"), int) and row.get("kind", JUDGMENT) == JUDGMENT:
        out.append(_attr("harness.turn", row["turn"]))
    if link is not None and link.session is not None:
        out.append(_attr("gen_ai.conversation.id", link.session))
    return out


def _judgments(run_dir: Path) -> Iterator[dict[str, Any]]:
    path = judgments_path(run_dir)
    if not path.is_file():
        raise UserInputError(f"{run_dir}: not a run directory (no {path.name})")
    for row in iter_judgment_rows(path):
        yield {**row.as_dict(), "kind": JUDGMENT}


def _agent_rows(run_dir: Path, findings: bool) -> Iterator[dict[str, Any]]:
    """results.jsonl's agent metrics, as rows shaped like a judgment's with no judge; with
    ``findings``, each transcript's step findings after its metrics."""
    path = results_path(run_dir)
    if not path.is_file():
        return
    for row in iter_result_rows(path):
        agent = row.agent
        if agent is None:
            continue
        reasons = row.agent_unscored or {}
        behind = row.agent_steps or {}
        for name, value in agent.items():
            yield {
                "kind": AGENT_METRIC,
                "transcript_id": row.transcript_id,
                "judge": None,
                "rubric": name,
                "status": "scored" if value is not None else "unscored",
                "score": value,
                "reason": reasons.get(name),
                "steps": behind.get(name) or [],
            }
        if findings:
            for name in FINDINGS:
                for index in behind.get(name) or []:
                    yield {"kind": STEP_FINDING, "transcript_id": row.transcript_id, "judge": None, "rubric": name, "step": index}


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _explanation(row: dict[str, Any]) -> str | None:
    if row.get("status") == "scored":
        return row.get("raw_output")
    return f"{row.get('status')}: {row.get('reason') or row.get('error') or ''}".rstrip(": ")


def _finding_attributes(row: dict[str, Any], step: Step | None) -> tuple[list[dict[str, Any]], str]:
    """A step finding's attributes and body: which step, its tool and call id, what was found."""
    label, says = FINDINGS[row["rubric"]]
    index = row["step"]
    name = step.name if step is not None else None
    explanation = f"step {index}" + (f" ({name})" if name else "") + f": {says}"
    if step is not None and row["rubric"] == "failed_steps" and step.error:
        explanation += f": {step.error}"
    attributes = [
        _attr("gen_ai.evaluation.name", row["rubric"]),
        _attr("gen_ai.evaluation.score.label", label),
        _attr("gen_ai.evaluation.explanation", explanation),
        _attr("harness.transcript_id", row["transcript_id"]),
        _attr("harness.kind", STEP_FINDING),
        _attr("harness.step", index),
    ]
    if name:
        attributes.append(_attr("gen_ai.tool.name", name))
    if step is not None and step.call_id:
        attributes.append(_attr("gen_ai.tool.call.id", step.call_id))
    return attributes, f"{row['rubric']}: step {index} {label}"


def evaluation_record(row: dict[str, Any], link: tuple[str, str] | None, now_ns: int, step: Step | None = None) -> dict[str, Any]:
    """One judgment, agent metric or step finding as an OTLP/JSON LogRecord of the
    ``gen_ai.evaluation.result`` event, on ``link`` (trace id, span id) when known."""
    kind = row.get("kind", JUDGMENT)
    if kind == STEP_FINDING:
        attributes, body = _finding_attributes(row, step)
    else:
        attributes = [_attr("gen_ai.evaluation.name", row["rubric"])]
        if row.get("score") is not None:
            attributes.append(_attr("gen_ai.evaluation.score.value", float(row["score"])))
        if row.get("label") is not None:
            attributes.append(_attr("gen_ai.evaluation.score.label", row["label"]))
        if (explanation := _explanation(row)) is not None:
            attributes.append(_attr("gen_ai.evaluation.explanation", explanation))
        if row.get("status") == "failed":
            attributes.append(_attr("error.type", (row.get("error") or "judge_error").split(":")[0]))
        attributes += [
            _attr("harness.status", row.get("status") or ""),
            _attr("harness.transcript_id", row["transcript_id"]),
        ]
        if kind == JUDGMENT:
            attributes += [_attr("harness.judge", row["judge"]), _attr("harness.rubric_version", row.get("rubric_version") or "")]
        else:
            attributes.append(_attr("harness.kind", AGENT_METRIC))
            if row.get("steps"):
                attributes.append({"key": "harness.steps", "value": {"arrayValue": {"values": [{"intValue": str(i)} for i in row["steps"]]}}})
        score = row.get("score")
        body = f"{row['rubric']}: {score if score is not None else row.get('label') or row.get('status')}"
    record: dict[str, Any] = {
        "timeUnixNano": str(now_ns),
        "observedTimeUnixNano": str(now_ns),
        "severityNumber": 9,
        "severityText": "INFO",
        "body": {"stringValue": body},
        "attributes": attributes,
        "eventName": EVENT_NAME,
    }
    if link is not None:
        record["traceId"], record["spanId"] = link
        record["flags"] = 1
    return record


def step_span_id(link: TraceLink, index: int) -> str:
    """The id of the span the export creates for step ``index``: derived from the transcript's
    trace, span and the step, so every export of the run makes the same span."""
    return hashlib.sha256(f"{link.trace_id}/{link.span_id}/step/{index}".encode()).hexdigest()[:16]


def step_span(link: TraceLink, step: Step, now_ns: int) -> dict[str, Any]:
    """An OTLP/JSON span for a step whose trace recorded no run of it: an ``execute_tool`` span
    under the transcript's span (OTel GenAI semantic conventions). Its times are the step's, else
    an instant at the end of the transcript's last span (after the model call that asked for it),
    else now. It carries what makes it read back as the run of its call: the call id, the
    arguments as written, and the failure (status ERROR with the step's error)."""
    if step.start_s is not None and step.end_s is not None:
        start_ns, end_ns = round(step.start_s * 1e9), round(step.end_s * 1e9)
    else:
        start_ns = end_ns = round(link.last_end_s * 1e9) if link.last_end_s is not None else now_ns
    attributes = [_attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", step.name)]
    if step.call_id:
        attributes.append(_attr("gen_ai.tool.call.id", step.call_id))
    arguments = step.arguments_raw if step.arguments_raw is not None else json.dumps(step.arguments) if step.arguments is not None else None
    if arguments is not None:
        attributes.append(_attr("gen_ai.tool.call.arguments", arguments))
    span: dict[str, Any] = {
        "traceId": link.trace_id,
        "spanId": step_span_id(link, step.index),
        "parentSpanId": link.span_id,
        # OTLP span flags: whether the parent is remote is known (0x100), and it is (0x200): the
        # transcript's span was made by the agent's process, not by this export
        "flags": 0x300,
        "name": f"execute_tool {step.name}",
        "kind": 1,  # SPAN_KIND_INTERNAL, as the conventions give execute_tool
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": attributes,
        "status": {"code": 2, "message": step.error or "failed"} if step.failed else {},
    }
    return span


def _request(records: list[dict[str, Any]]) -> str:
    resource = {"attributes": [_attr("service.name", "harness")]}
    doc = {"resourceLogs": [{"resource": resource, "scopeLogs": [{"scope": SCOPE, "logRecords": records}]}]}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _spans_request(spans: list[dict[str, Any]]) -> str:
    resource = {"attributes": [_attr("service.name", "harness")]}
    doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": SCOPE, "spans": spans}]}]}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def spans_path(out: Path) -> Path:
    """Where the created step spans go beside ``out``: evaluations.otlp.jsonl -> evaluations.spans.otlp.jsonl."""
    return out.with_name(out.name.split(".", 1)[0] + ".spans.otlp.jsonl")


class _Placer:
    """The span each row's event goes on; the step spans created for findings, once each."""

    def __init__(self, links: Mapping[str, TraceLink]) -> None:
        self.links = links
        self.created: dict[str, dict[str, Any]] = {}

    def place(self, row: dict[str, Any], now_ns: int) -> tuple[tuple[str, str] | None, Step | None]:
        link = self.links.get(row["transcript_id"])
        if link is None:
            return None, None
        if row.get("kind") != STEP_FINDING:
            return _judged_span(row, link), None
        index = row["step"]
        step = link.steps[index] if 0 <= index < len(link.steps) else None
        if link.trace_id is None or step is None:  # no trace, or the input no longer holds the step
            return link.ids, step
        if step.span_id is not None:
            return (link.trace_id, step.span_id), step
        span_id = step_span_id(link, index)
        if span_id not in self.created:
            self.created[span_id] = step_span(link, step, now_ns)
        return (link.trace_id, span_id), step


def write_otel(rows: Iterator[dict[str, Any]], links: Mapping[str, TraceLink], out: Path) -> Tally:
    tally = Tally()
    now_ns = time.time_ns()
    placer = _Placer(links)
    batch: list[dict[str, Any]] = []
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            link, step = placer.place(row, now_ns)
            record = evaluation_record(row, link, now_ns, step)
            record["attributes"] += _conversation_attributes(row, links.get(row["transcript_id"]))
            batch.append(record)
            tally.add(row.get("kind", JUDGMENT), link is not None)
            if len(batch) >= _BATCH:
                fh.write(_request(batch) + "\n")
                batch = []
        if batch:
            fh.write(_request(batch) + "\n")
    spans = list(placer.created.values())
    target = spans_path(out)
    if spans:
        with target.open("w", encoding="utf-8") as fh:
            for start in range(0, len(spans), _BATCH):
                fh.write(_spans_request(spans[start : start + _BATCH]) + "\n")
    else:
        target.unlink(missing_ok=True)  # an earlier export's spans are not this one's
    tally.created_spans = len(spans)
    return tally


def _table_rows(rows: Iterator[dict[str, Any]], links: Mapping[str, TraceLink]) -> Iterator[dict[str, Any]]:
    for row in rows:
        link = links.get(row["transcript_id"])
        trace_id, span_id = (_judged_span(row, link) if link is not None else None) or (None, None)
        yield {**{c: row.get(c) for c in COLUMNS}, "trace_id": trace_id, "span_id": span_id, "kind": row.get("kind", JUDGMENT)}


def write_csv(rows: Iterator[dict[str, Any]], links: Mapping[str, TraceLink], out: Path) -> Tally:
    tally = Tally()
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in _table_rows(rows, links):
            writer.writerow(row)
            tally.add(row["kind"], row["trace_id"] is not None)
    return tally


def write_parquet(rows: Iterator[dict[str, Any]], links: Mapping[str, TraceLink], out: Path) -> Tally:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserInputError("--format parquet needs pyarrow (pip install pyarrow); --format csv needs nothing") from None
    tally = Tally()
    table_rows = []
    for row in _table_rows(rows, links):
        tally.add(row.pop("kind"), row["trace_id"] is not None)
        table_rows.append(row)
    pq.write_table(pa.Table.from_pylist(table_rows) if table_rows else pa.table({c: [] for c in COLUMNS}), out)
    return tally


_WRITERS = {"otel": (write_otel, "evaluations.otlp.jsonl"), "csv": (write_csv, "judgments.csv"), "parquet": (write_parquet, "judgments.parquet")}


def export_run(
    run_dir: Path, fmt: str, out: Path | None = None, input: Path | None = None, input_format: str = "auto", sessions: Sessions = "on"
) -> ExportResult:
    """Export ``run_dir``'s judgments as ``fmt``; trace ids come from the run's input file."""
    if fmt not in _WRITERS:
        raise UserInputError(f"unknown --format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
    if not run_dir.is_dir():
        raise UserInputError(f"{run_dir}: no such run directory")
    writer, default_name = _WRITERS[fmt]
    path = out or run_dir / default_name
    rows = _judgments(run_dir)
    first = next(rows, None)  # checks the run directory before anything is written
    links = trace_links(_run_input(run_dir, input), input_format, sessions)
    tally = writer(itertools.chain(_chain(first, rows), _agent_rows(run_dir, findings=fmt == "otel")), links, path)
    created = tally.created_spans
    return ExportResult(
        path=path,
        judgments=tally.rows[JUDGMENT],
        linked=tally.linked[JUDGMENT],
        agent_metrics=tally.rows[AGENT_METRIC],
        step_findings=tally.rows[STEP_FINDING],
        step_findings_linked=tally.linked[STEP_FINDING],
        created_spans=created,
        spans_path=spans_path(path) if created else None,
    )


def _chain(first: dict[str, Any] | None, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if first is not None:
        yield first
        yield from rows
