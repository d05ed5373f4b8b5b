"""``harness explain RUN_DIR TRANSCRIPT_ID``: one transcript's numbers, each traced to its source.

Plain text, one fact a line: the transcript's texts (cut short), its performance, each composite
as its formula with the numbers put in, and each judgment with its rubric version, cache key and
the judge reply its score was parsed from. The same lines the report's transcript view shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..agent.render import timeline
from ..errors import UserInputError
from ..rows import TurnJudgmentRow, iter_judgment_rows, iter_result_rows
from .aggregate import fmt_ms
from .breakdown import composite_lines, judgment_components
from .chat import build_chat, chat_lines
from .run import open_run, read_texts, turn_scores

#: Transcript text longer than this is cut in the terminal (the report shows up to MAX_TEXT_CHARS).
EXPLAIN_TEXT_CHARS = 600


def _short(text: str | None, limit: int = EXPLAIN_TEXT_CHARS) -> str:
    if text is None:
        return "(none)"
    if len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit:,} more characters)"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _number(value: Any) -> str:
    return "—" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    return "$" + (f"{value:.10f}".rstrip("0").rstrip(".") if value else "0")


def _jury_line(jury: dict[str, Any]) -> str:
    """``jury majority of votes a 0.8, b 0.7, c not asked (confidence 0.67)``: a jury's verdict traced to its members."""
    settled = set(jury.get("settled") or ())
    votes = ", ".join(f"{m} {'not asked' if m in settled else _number(v)}" for m, v in (jury.get("votes") or {}).items())
    confidence = jury.get("confidence")
    return f"jury {jury.get('method')} of votes {votes}" + ("" if confidence is None else f" (confidence {confidence:.3g})")


def explain(
    run_dir: str | Path,
    transcript_id: str,
    *,
    config: str | Path | None = None,
    prompts: Iterable[str | Path] = (),
    input: str | Path | None = None,
) -> str:
    """The breakdown of one transcript as text. An id the run does not hold is a UserInputError."""
    view = open_run(run_dir, config=config, prompts=prompts, input=input)
    row = next((r for r in iter_result_rows(view.results_path) if r.transcript_id == transcript_id), None)
    if row is None:
        raise UserInputError(f"{view.results_path}: no transcript {transcript_id!r} in this run")
    judgments = [j for j in iter_judgment_rows(view.judgments_path) if j.transcript_id == transcript_id]
    texts, note = read_texts(view, {transcript_id})
    conversation = turn_scores(view, row)
    out = [f"transcript {transcript_id}  (run {view.path})"]
    found = texts.get(transcript_id)
    if found is None:
        out.append(f"  texts: {note or 'not available'}")
    else:
        out.append("  query:")
        out.append(_indent(_short(found.query), "    "))
        out.append("  response:")
        out.append(_indent(_short(found.response), "    "))
        if found.reference is not None:
            out.append("  reference:")
            out.append(_indent(_short(found.reference), "    "))
        contexts = found.contexts or ()
        out.append(f"  contexts: {len(contexts) + found.contexts_left_out}")
        for i, context in enumerate(contexts[:5], start=1):
            out.append(_indent(f"[{i}] " + _short(context, 200), "    "))
    perf = row.performance.as_dict()
    parts = [
        f"{label} {fmt_ms(perf[key]) if perf.get(key) is not None else '—'}"
        for key, label in (("total_ms", "total"), ("llm_ms", "LLM"), ("tool_ms", "tool"), ("api_ms", "API"))
    ]
    out.append(f"  performance: {' · '.join(parts)} · tool calls {_number(perf.get('tool_calls'))}")
    if row.task is not None:
        out.append(f"  task: {row.task}")
    if found is not None and found.steps is not None:
        out.append(f"  steps: {len(found.steps)}")
        out.extend(_indent(line, "    ") for line in timeline(found.steps))
    agent = row.agent
    if agent is not None:
        out.append("")
        out.append("agent metrics")
        why = row.agent_unscored or {}
        behind = row.agent_steps or {}
        notes = row.agent_notes or {}
        for name, value in agent.items():
            shown = f"  {name}: {_number(value)}" if value is not None else f"  {name}: — ({why.get(name, 'unknown')})"
            if behind.get(name):
                shown += "  · steps " + ", ".join(f"[{i}]" for i in behind[name])
            out.append(shown)
            if notes.get(name):
                out.append(f"    {notes[name]}")

    if found is not None and (chat := build_chat(found.turns, conversation, judgments)) is not None:
        out.append("")
        out.append(f"conversation ({len(chat.turns)} turns)")
        out.extend(chat_lines(chat, _short))
    lines = composite_lines(view, judgment_components(judgments), row.composites, conversation)
    if lines:
        out.append("")
        out.append("composites")
        for line in lines:
            out.append(f"  judge {line.judge}: {line.text()}")
            out.extend(f"    where {step}" for step in line.steps)
            if line.agrees is False:
                out.append(f"    ! results.jsonl holds {_number(line.recorded)}: the run used other weights (pass its --config)")
    out.append("")
    out.append("judgments")
    for j in judgments:
        status = j.status
        turn = f" · turn {j.turn}" if isinstance(j, TurnJudgmentRow) else ""
        head = f"  {j.rubric} v{j.rubric_version} · judge {j.judge}{turn}: {status}"
        if status == "scored" and j.score is None and j.label is not None:
            head += f" label {j.label}"
        elif status == "scored":
            head += f" {_number(j.score)}"
            if j.clamped:
                head += f" (clamped from {_number(j.raw_score)})"
        elif j.reason:
            head += f" ({j.reason})"
        out.append(head)
        out.append(f"    cache key {j.cache_key or '—'}{' (cache hit)' if j.cached else ''}")
        out.append(
            f"    attempts {j.attempts or 0} · latency {fmt_ms(j.latency_ms) if j.latency_ms is not None else '—'}"
            f" · tokens {_number(j.prompt_tokens)} + {_number(j.completion_tokens)}"
            f" · cost {_usd(j.cost_usd)}"
        )
        if j.error:
            out.append(f"    error: {j.error}")
        if j.jury:
            out.append(f"    {_jury_line(j.jury)}")
            continue
        raw = j.raw_output
        if raw is None:
            out.append("    no judge reply")
        else:
            out.append("    judge replied:")
            out.append(_indent(_short(raw, 2000), "      "))
    if view.notes:
        out.append("")
        out.extend(f"note: {n}" for n in view.notes)
    return "\n".join(out)
