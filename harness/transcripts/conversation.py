"""A transcript as a conversation: its system prompt and its turns, in order.

A **turn** begins at a user message that is not only tool results (an Anthropic ``tool_result``
user message belongs to the turn it answers) and holds everything up to the next such message:
the user's text, the agent's tool calls and their results (its **steps**), and its **answer**, the
last assistant message of the turn with text (else the last assistant message's text; None when
the turn has no assistant message). User messages in a row with nothing between them are one turn,
their texts joined by a blank line. The **system prompt** is the text of every ``system`` and
``developer`` message, in order, joined by a blank line; an assistant message before the first user
message is the conversation's **opening**.

:func:`conversation_from_messages` splits a ``messages`` list in one pass, recording where each
turn starts and ends; a turn's text, answer and steps are read from its slice when asked
(:meth:`Conversation.turn`), so a run that judges no turn builds none of them.
:func:`conversation_from_turns` makes one from turns already split (a session of traces, whose
turns ``traces.sessions`` assembles): each turn is then given whole, with its steps.

:func:`render_history` is the ``history`` rubric input of a turn judged on its own (the
conversation before it) and :func:`render_conversation` the ``conversation`` input of a
conversation-level rubric; both are documented in docs/guide/transcripts.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..agent.steps import Step, steps_from_messages

#: A ``transcripts.models.Message`` (not imported: the model imports this module); what is read of
#: one is its ``role``, ``content`` and ``text()``.
Message = Any

#: The history window's defaults: the last turns kept whole, and its budget in tokens.
HISTORY_TURNS = 6
HISTORY_TOKENS = 4000
#: Tokens are counted as ceil(characters / 4) (deterministic and judge-independent: the rendered
#: history is part of the request key, so it must not depend on which tokenizer is installed).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation, numbered from 1."""

    index: int
    user: str
    answer: str | None
    steps: tuple[Step, ...]
    #: the turn's tool results, as the transcript's ``contexts`` are read from them
    contexts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A ``messages`` list split into turns (``bounds``: each turn's slice of ``messages``), or
    turns given whole (``given``; ``messages`` is then empty, ``conversation_from_turns``)."""

    messages: Sequence[Message]
    bounds: tuple[tuple[int, int], ...]
    system: str | None = None
    opening: str | None = None
    given: tuple[Turn, ...] | None = None

    def __len__(self) -> int:
        return len(self.bounds) if self.given is None else len(self.given)

    def turn(self, index: int) -> Turn:
        """Turn ``index`` (from 1)."""
        if self.given is not None:
            if index < 1:
                raise IndexError(index)
            return self.given[index - 1]
        start, end = self.bounds[index - 1]
        part = self.messages[start:end]
        users: list[str] = []
        answers: list[str] = []
        last_assistant: str | None = None
        contexts: list[str] = []
        for message in part:
            if message.role == "user" and not only_tool_results(message):
                users.append(message.text())
            elif message.role == "assistant":
                last_assistant = message.text()
                if last_assistant.strip():
                    answers.append(last_assistant)
            elif message.role in ("tool", "function"):
                contexts.append(message.text())
        steps = steps_from_messages(part)
        if not contexts and steps:  # Anthropic's tool_result blocks
            contexts = [s.result for s in steps if s.result is not None]
        answer = answers[-1] if answers else last_assistant
        return Turn(index, "\n\n".join(users), answer, steps, tuple(contexts))

    def turns(self) -> tuple[Turn, ...]:
        return tuple(self.turn(i) for i in range(1, len(self) + 1))


def only_tool_results(message: Any) -> bool:
    """An Anthropic-style user message that only carries tool results (not the user's words)."""
    content = message.content
    return isinstance(content, list) and bool(content) and all(p.type == "tool_result" for p in content)


def conversation_from_messages(messages: Sequence[Message]) -> Conversation:
    """Split ``messages`` into turns (module docstring), in one pass."""
    bounds: list[tuple[int, int]] = []
    system: list[str] = []
    opening: list[str] = []
    start: int | None = None
    previous_user = False
    for i, message in enumerate(messages):
        role = message.role
        if role in ("system", "developer"):
            system.append(message.text())
            continue
        user = role == "user" and not only_tool_results(message)
        if user and not previous_user:
            if start is not None:
                bounds.append((start, i))
            start = i
        elif start is None and role == "assistant":
            opening.append(message.text())
        previous_user = user
    if start is not None:
        bounds.append((start, len(messages)))
    joined = "\n\n".join(t for t in system if t.strip())
    shown = "\n\n".join(t for t in opening if t.strip())
    return Conversation(messages, tuple(bounds), joined or None, shown or None)


def conversation_from_turns(turns: Sequence[Turn], system: str | None = None) -> Conversation:
    """A conversation of turns already split, renumbered 1.. in the order given."""
    numbered = tuple(t if t.index == i else Turn(i, t.user, t.answer, t.steps, t.contexts) for i, t in enumerate(turns, 1))
    return Conversation((), (), system if system and system.strip() else None, None, numbered)


def user_turns(messages: Sequence[Message]) -> int:
    """How many turns ``messages`` holds (as :func:`conversation_from_messages` counts them)."""
    count = 0
    previous_user = False
    for message in messages:
        if message.role in ("system", "developer"):
            continue
        user = message.role == "user" and not only_tool_results(message)
        if user and not previous_user:
            count += 1
        previous_user = user
    return count


# -- rendering ------------------------------------------------------------------------------------


def tokens(text: str) -> int:
    """The window's token count of ``text``: ceil(characters / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _turn_lines(turn: Turn, budget_chars: int | None = None) -> str:
    """A turn in the history; with ``budget_chars``, its user text and its answer each cut in the
    middle to half of it (the labels stay whole)."""
    calls = f" ({len(turn.steps)} tool call{'s' if len(turn.steps) != 1 else ''})" if turn.steps else ""
    user = turn.user
    answer = turn.answer if turn.answer is not None else "(no answer)"
    if budget_chars is not None:
        user, answer = _cut_middle(user, budget_chars // 2), _cut_middle(answer, budget_chars // 2)
    return f"[turn {turn.index}: user]\n{user}\n[turn {turn.index}: assistant{calls}]\n{answer}"


def _elided(first: int, last: int) -> str:
    count = last - first + 1
    span = f"turn {first}" if count == 1 else f"turns {first}-{last}"
    return f"[... {span} elided ({count} turn{'s' if count != 1 else ''}) ...]"


def _cut_middle(text: str, budget_chars: int) -> str:
    """``text`` within ``budget_chars``: its middle replaced by a marker saying how much went."""
    if len(text) <= budget_chars:
        return text
    keep = max(budget_chars - 60, 0)
    head, tail = keep - keep // 2, keep // 2
    gone = len(text) - head - tail
    return f"{text[:head]}\n[... {gone} characters elided ...]\n{text[len(text) - tail :] if tail else ''}"


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """How much of the conversation before a turn its judgment sees (docs/guide/transcripts.md).

    Kept whole: the system prompt, the opening, the first turn and the last ``turns`` turns before
    the judged one; the turns between are replaced by one marker saying which and how many. When
    what is kept is over ``tokens``, the oldest kept turns after the first go next (each such
    cut widens the marker); if the first turn, the last turn before the judged one and the system
    prompt alone are still over, each of their texts is cut in the middle with a marker saying how
    many characters went. Nothing is ever dropped without a marker.
    """

    turns: int = HISTORY_TURNS
    tokens: int = HISTORY_TOKENS

    def __post_init__(self) -> None:
        if self.turns < 1:
            raise ValueError("the history window keeps at least 1 turn")
        if self.tokens < 100:
            raise ValueError("the history window needs at least 100 tokens")


def render_history(conversation: Conversation, before: int, window: HistoryWindow | None = None) -> str | None:
    """The conversation before turn ``before`` (from 1) within ``window``, as the ``history``
    input's text; None when there is nothing before it (no system prompt, no opening, turn 1)."""
    window = window or HistoryWindow()
    turns = [conversation.turn(i) for i in range(1, before)]
    head: list[str] = []
    if conversation.system is not None:
        head.append(f"[system]\n{conversation.system}")
    if conversation.opening is not None:
        head.append(f"[assistant, before the first user turn]\n{conversation.opening}")
    if not turns and not head:
        return None
    # indices into ``turns`` kept whole: the first and the last ``window.turns``
    kept = sorted({0, *range(max(len(turns) - window.turns, 0), len(turns))}) if turns else []

    def assemble(keep: list[int], texts: dict[int, str], heads: list[str]) -> str:
        parts = list(heads)
        previous = -1
        for k in keep:
            if k > previous + 1:
                parts.append(_elided(previous + 2, k))  # turns are numbered from 1
            parts.append(texts[k])
            previous = k
        return "\n".join(parts)

    texts = {k: _turn_lines(turns[k]) for k in kept}
    text = assemble(kept, texts, head)
    # Over budget: drop the oldest kept turns after the first, keeping at least the last one.
    while tokens(text) > window.tokens and len(kept) > 2:
        kept.pop(1)
        text = assemble(kept, texts, head)
    if tokens(text) > window.tokens:
        # What is left cannot shrink by turns: each text is cut in the middle to its share.
        pieces = len(head) + len(kept)
        share = max(window.tokens * CHARS_PER_TOKEN // max(pieces, 1) - 80, 40)
        head = [h if len(h) <= share else h.split("\n", 1)[0] + "\n" + _cut_middle(h.split("\n", 1)[1], share) for h in head]
        texts = {k: _turn_lines(turns[k], share) for k in kept}
        text = assemble(kept, texts, head)
    return text


def render_conversation(conversation: Conversation) -> str:
    """The whole conversation, as the ``conversation`` input's text: the system prompt, the
    opening, then each turn's user text and answer with its tool calls named in order."""
    parts: list[str] = []
    if conversation.system is not None:
        parts.append(f"[system]\n{conversation.system}")
    if conversation.opening is not None:
        parts.append(f"[assistant, before the first user turn]\n{conversation.opening}")
    for turn in conversation.turns():
        parts.append(f"[turn {turn.index}: user]\n{turn.user}")
        for step in turn.steps:
            status = "failed" if step.failed else "ok"
            parts.append(f"[turn {turn.index}: tool call {step.name} ({status})]")
        answer = turn.answer if turn.answer is not None else "(no answer)"
        parts.append(f"[turn {turn.index}: assistant]\n{answer}")
    return "\n".join(parts)
