"""A conversation as a chat: each turn's user text, the agent's steps and its answer, with that
turn's judgments (a run judged per turn, ``harness run --turns``) and the conversation's score per
rubric and judge with the rule that made it of its turns' (``planning.turns``).

One model for the three views that show it: ``harness explain`` (:func:`chat_lines`), the viewer
(its transcript template) and report.html (report.js draws the same fields from a transcript's
details: ``texts.turns``, ``perf.turns`` and each judgment's ``turn``). A transcript of one turn, or
without ``messages``, has no chat: it is shown as one exchange, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent.render import timeline
from ..rows import JudgmentRow, TurnJudgmentRow
from .run import TurnScores, TurnText


@dataclass(frozen=True, slots=True)
class TurnJudgment:
    """One judgment of one turn, as judgments.jsonl holds it."""

    rubric: str
    judge: str
    status: str
    score: float | None
    label: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class ChatTurn:
    index: int
    user: str
    answer: str | None
    #: the turn's steps, each as ``harness explain`` prints it (``agent.render.timeline``)
    steps: tuple[str, ...]
    #: the step failed (same order as ``steps``)
    failed: tuple[bool, ...]
    judged: bool
    judgments: tuple[TurnJudgment, ...]


@dataclass(frozen=True, slots=True)
class ConversationScore:
    """One rubric and judge over the conversation: each judged turn's score and the aggregate."""

    rubric: str
    judge: str
    turns: tuple[float | None, ...]
    value: float | None
    why: str | None


@dataclass(frozen=True, slots=True)
class Chat:
    turns: tuple[ChatTurn, ...]
    #: judged per turn: the rule's name and words, the turns judged, the conversation's scores
    aggregate: str | None
    rule: str | None
    judged: tuple[int, ...]
    scores: tuple[ConversationScore, ...]
    absent: int = 0


def build_chat(turns: Sequence[TurnText] | None, scores: TurnScores | None, judgments: Iterable[JudgmentRow]) -> Chat | None:
    """The chat of a conversation (``turns``: its texts' turns), with the per-turn ``scores`` of its
    results row and its ``judgments`` (each per-turn one carries its ``turn``); None when the
    transcript is not a conversation of more than one turn."""
    if not turns:
        return None
    by_turn: dict[int, list[TurnJudgment]] = {}
    for j in judgments:
        if isinstance(j, TurnJudgmentRow):
            by_turn.setdefault(j.turn, []).append(
                TurnJudgment(rubric=j.rubric, judge=j.judge, status=j.status, score=j.score, label=j.label, reason=j.reason)
            )
    judged = set(scores.judged) if scores is not None else set()
    chat_turns = tuple(
        ChatTurn(
            index=t.index,
            user=t.user,
            answer=t.answer,
            steps=tuple(timeline(t.steps)),
            failed=tuple(s.failed for s in t.steps),
            judged=t.index in judged,
            judgments=tuple(by_turn.get(t.index, ())),
        )
        for t in turns
    )
    conversation = (
        tuple(
            ConversationScore(rubric, judge, values, *scores.conversation.get((rubric, judge), (None, None)))
            for (rubric, judge), values in scores.by_turn.items()
        )
        if scores is not None
        else ()
    )
    return Chat(
        turns=chat_turns,
        aggregate=scores.aggregate if scores is not None else None,
        rule=scores.rule if scores is not None else None,
        judged=scores.judged if scores is not None else (),
        scores=conversation,
        absent=scores.absent if scores is not None else 0,
    )


def _number(value: Any) -> str:
    return "—" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def judgment_text(j: TurnJudgment) -> str:
    """``relevance · judge a: scored 0.8`` (a label for a categorical rubric, the reason when unscored)."""
    head = f"{j.rubric} · judge {j.judge}: {j.status}"
    if j.status == "scored":
        return head + f" {j.label if j.score is None and j.label is not None else _number(j.score)}"
    return head + (f" ({j.reason})" if j.reason else "")


def chat_lines(chat: Chat, short: Any) -> list[str]:
    """The chat as ``harness explain`` prints it; ``short`` cuts a text for the terminal."""
    out: list[str] = []
    if chat.aggregate is not None:
        turns = ", ".join(map(str, chat.judged)) or "none"
        out.append(f"  judged per turn: turns {turns}; each conversation score is {chat.rule or chat.aggregate} ({chat.aggregate})")
        if chat.absent:
            out.append(f"  {chat.absent} selected turn(s) not in this conversation (not judged)")
        for s in chat.scores:
            per = ", ".join(f"turn {t} {_number(v)}" for t, v in zip(chat.judged, s.turns, strict=False))
            value = _number(s.value) if s.value is not None else f"unscored ({s.why or 'unknown'})"
            out.append(f"  {s.rubric} · judge {s.judge}: {value}  = {chat.aggregate} of {per or 'no turn'}")
    for t in chat.turns:
        out.append(f"  turn {t.index}{'' if chat.aggregate is None or t.judged else ' (not judged)'}")
        out.append("    user:")
        out.extend("      " + line for line in short(t.user).splitlines() or [""])
        if t.steps:
            out.append(f"    steps: {len(t.steps)}")
            out.extend("      " + line for line in t.steps)
        out.append("    answer:")
        out.extend("      " + line for line in short(t.answer).splitlines() or [""])
        out.extend("    " + judgment_text(j) for j in t.judgments)
    return out
