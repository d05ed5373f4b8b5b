"""A run's verdicts as a trace server receives them: each judgment tied to the trace and span it judged.

A run's ``judgments.jsonl`` says what was judged (transcript, rubric, judge, score or label, the
judge's reply, cost); the run's input (``summary.json``'s ``input``, a file ``harness pull`` wrote or
any trace export) says which trace and span each transcript came from, in the metadata its reader
kept (``trace_id``/``span_id``; LangSmith's ``langsmith_trace_id``/``run_id``). Only verdicts are
written: a scored judgment (a score or a categorical label). An unscored or failed one is counted
and left out, so a server never shows an absence of verdict as one.

Each verdict has a :attr:`Verdict.key`, the same whatever run wrote it (trace, span, rubric, judge),
which servers that take ids are given; and a :attr:`Verdict.fingerprint` of what it says, so a
write that finds a verdict with that key and fingerprint adds nothing (idempotent) and one whose
fingerprint differs (a new rubric version, a new judge model) replaces it.

A conversation read from traces (a session, ``traces.sessions``) keeps each turn's trace and span.
A run judged per turn (``--turns``) writes each turn's verdict on its own turn's trace and span
(``turn`` in the metadata), and the conversation's score (results.jsonl, by the run's aggregate
rule) once for the conversation: a judgment of the whole conversation is one too. Such a
**conversation verdict** (``Verdict.conversation``) goes where the server keeps a session's
scores (Langfuse: a score with ``sessionId``), else on the first turn's trace and span (the root of
the session's first trace), its metadata saying so (``scope: conversation``, ``session_id``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..rows import JudgmentRow, iter_judgment_rows, iter_result_rows, judgments_path, results_path
from ..traces.reader import iter_records, resolve_format
from ..traces.sessions import Sessions

#: the namespace of verdict keys (uuid5): fixed forever, or every written verdict would be written again
NAMESPACE = uuid.UUID("5f0c1d2e-8a47-4c4e-9f67-3e1f1b6a9c21")
#: what identifies the harness's verdicts on a server (annotator, source, feedback source)
SOURCE = "harness"


@dataclass(frozen=True, slots=True)
class Link:
    """Where a transcript came from on its server; a conversation's also each turn's, and its session."""

    trace_id: str
    span_id: str | None
    #: each turn's link; None for a turn no trace recorded (``traces.history``)
    turns: tuple[Link | None, ...] = ()
    session: str | None = None

    def turn(self, index: int) -> Link | None:
        return self.turns[index - 1] if 1 <= index <= len(self.turns) else None


@dataclass(frozen=True, slots=True)
class Verdict:
    transcript_id: str
    trace_id: str
    span_id: str | None
    rubric: str
    rubric_version: str
    judge: str
    judge_model: str | None
    score: float | None
    label: str | None
    #: the judge's reply: its reasoning and its verdict
    reason: str | None
    cost_usd: float | None
    run: str
    #: the turn of a conversation this verdict judged (a run judged per turn)
    turn: int | None = None
    #: the verdict is the conversation's (module docstring); ``session`` its session id, if any
    conversation: bool = False
    session: str | None = None

    @property
    def key(self) -> str:
        """A UUID from (trace, span, rubric, judge): one verdict per judge and rubric on a span; a
        conversation's verdict adds its conversation (it shares the first turn's span)."""
        parts: list[Any] = [self.trace_id, self.span_id, self.rubric, self.judge]
        if self.conversation:
            parts += ["conversation", self.session or self.transcript_id]
        return str(uuid.uuid5(NAMESPACE, json.dumps(parts)))

    @property
    def fingerprint(self) -> str:
        content = [self.score, self.label, self.reason, self.rubric_version, self.judge_model, self.cost_usd]
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def metadata(self) -> dict[str, Any]:
        """What every server keeps beside the score (flat, JSON-safe)."""
        meta: dict[str, Any] = {
            "source": SOURCE,
            "harness_key": self.key,
            "harness_fingerprint": self.fingerprint,
            "rubric": self.rubric,
            "rubric_version": self.rubric_version,
            "judge": self.judge,
            "transcript_id": self.transcript_id,
            "run": self.run,
        }
        if self.judge_model is not None:
            meta["judge_model"] = self.judge_model
        if self.cost_usd is not None:
            meta["cost_usd"] = self.cost_usd
        if self.turn is not None:
            meta["turn"] = self.turn
        if self.conversation:
            meta["scope"] = "conversation"
        if self.session is not None:
            meta["session_id"] = self.session
        return meta


@dataclass(slots=True)
class RunVerdicts:
    verdicts: list[Verdict] = field(default_factory=list)
    #: judgments left out, by why: "unscored", "failed", "no trace" (the transcript names none)
    left_out: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1


def links(path: Path, fmt: str = "auto", sessions: Sessions = "on") -> dict[str, Link]:
    """``transcript id -> Link`` of the transcripts a trace file holds (read by its reader, its
    sessions as conversations or not, as the run read them)."""
    out: dict[str, Link] = {}
    for _, text, error in iter_records(path, resolve_format(path, fmt), sessions) if fmt != "jsonl" else ():
        if error is not None:
            continue
        record = json.loads(text)
        meta = record.get("metadata") or {}
        trace = meta.get("trace_id") or meta.get("langsmith_trace_id")
        span = meta.get("span_id") or meta.get("run_id")
        if isinstance(trace, str):
            out[str(record["id"])] = Link(trace, span if isinstance(span, str) else None)
        elif isinstance(record.get("turns"), list) and (link := _conversation_link(record["turns"], meta)) is not None:
            out[str(record["id"])] = link
    return out


def _conversation_link(turns: list[dict[str, Any]], meta: dict[str, Any]) -> Link | None:
    """A conversation's link: its first turn's trace and span, each turn's, and its session."""
    each = tuple(Link(t["trace_id"], t.get("span_id")) if isinstance(t.get("trace_id"), str) else None for t in turns)
    traced = [link for link in each if link is not None]
    if not traced:
        return None
    session = meta.get("session_id")
    return Link(traced[0].trace_id, traced[0].span_id, each, session if isinstance(session, str) else None)


def run_summary(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{run_dir}: not a finished run directory (summary.json: {exc})") from None
    return data if isinstance(data, dict) else {}


def read_verdicts(run_dir: Path, input: Path | None = None, input_format: str = "auto", sessions: Sessions = "on") -> RunVerdicts:
    """The verdicts of the run in ``run_dir``; ``input`` is its trace file when it has moved."""
    summary = run_summary(run_dir)
    source = input or (Path(summary["input"]) if summary.get("input") else None)
    if source is None or not source.is_file():
        raise UserInputError(f"{run_dir}: the run's input {source} is not there; give it with --input")
    transcript_links = links(source, input_format, sessions)
    if not transcript_links:
        raise UserInputError(f"{source}: no transcript names its trace (write back needs a run over pulled or exported traces)")
    models = summary.get("judge_models") or {}
    result = RunVerdicts()
    per_turn = False
    for row in _rows(run_dir):
        link = transcript_links.get(row.transcript_id)
        if row.status != "scored" or (row.score is None and row.label is None):
            result.skip(row.status or "unscored")
            continue
        if link is None:
            result.skip("no trace")
            continue
        turn: int | None = getattr(row, "turn", None)
        per_turn = per_turn or turn is not None
        target = link.turn(turn) if turn is not None and link.turns else link
        if target is None:  # a turn no trace recorded (traces.history): nowhere to write it
            result.skip("no trace")
            continue
        result.verdicts.append(
            Verdict(
                transcript_id=row.transcript_id,
                trace_id=target.trace_id,
                span_id=target.span_id,
                rubric=row.rubric,
                rubric_version=row.rubric_version,
                judge=row.judge,
                judge_model=_model(models, row.judge),
                score=row.score,
                label=row.label,
                reason=row.raw_output,
                cost_usd=row.cost_usd,
                run=run_dir.name,
                turn=turn if link.turns else None,
                # a judgment of a whole conversation given as turns is the conversation's verdict
                conversation=bool(link.turns) and turn is None,
                session=link.session,
            )
        )
    if per_turn:
        result.verdicts += _conversation_verdicts(run_dir, transcript_links, result.verdicts)
    return result


def _conversation_verdicts(run_dir: Path, transcript_links: dict[str, Link], turn_verdicts: list[Verdict]) -> list[Verdict]:
    """The conversation scores of a run judged per turn (results.jsonl ``scores``, made of the
    turns' by the run's rule) of the conversations given as turns, one verdict each."""
    path = results_path(run_dir)
    if not path.is_file():
        return []
    versions = {(v.transcript_id, v.rubric, v.judge): (v.rubric_version, v.judge_model) for v in turn_verdicts}
    out = []
    for row in iter_result_rows(path):
        tid = row.transcript_id
        link = transcript_links.get(tid)
        turns = row.turns
        if link is None or not link.turns or turns is None:
            continue
        rule = turns.aggregate
        for judge, scores in row.scores.items():
            for rubric, score in scores.items():
                if (tid, rubric, judge) not in versions or score is None:
                    continue
                version, model = versions[(tid, rubric, judge)]
                judged = turns.judged
                reason = f"the conversation's score: {rule} of turns {', '.join(map(str, judged))}" if rule else None
                out.append(
                    Verdict(
                        tid,
                        link.trace_id,
                        link.span_id,
                        rubric,
                        version,
                        judge,
                        model,
                        float(score),
                        None,
                        reason,
                        None,
                        run_dir.name,
                        None,
                        True,
                        link.session,
                    )
                )
    return out


def _model(models: Any, judge: str) -> str | None:
    entry = models.get(judge) if isinstance(models, dict) else None
    model = entry.get("model") if isinstance(entry, dict) else entry
    return model if isinstance(model, str) else None


def _rows(run_dir: Path) -> Iterator[JudgmentRow]:
    path = judgments_path(run_dir)
    if not path.is_file():
        raise UserInputError(f"{run_dir}: not a run directory (no {path.name})")
    yield from iter_judgment_rows(path)
