"""Per-turn judging (``harness run --turns``): which turns are judged, what each turn's judgment
sees, and how its turns' scores become the conversation's.

- **Selection** (``--turns``): ``all``, ``last``, or turn numbers from 1 (``1,3``). A number a
  conversation does not have is not judged for it, and counted (summary.json
  ``conversations.turns_absent``), never passed over in silence.
- **A turn's view**: the transcript with ``query`` = the turn's user text, ``response`` = its
  answer, ``contexts`` = its tool results, ``trajectory`` = its steps, and ``history`` = the
  conversation before it within the window (``transcripts.conversation.HistoryWindow``).
  ``reference`` stays on the last turn only (it is the expected outcome of the conversation);
  ``tools``, ``task`` and ``reference_trajectory`` stay the transcript's. A rubric that does not name
  ``{{history}}`` gets the history block before its first input's label (``rubric.HISTORY_PREFACE``, ``Rubric.history_at``), so every
  rubric judges a turn knowing what came before it; a turn with nothing before it is rendered
  exactly as a single exchange is.
- **Aggregation** (``--turn-aggregate``): ``mean`` of the judged turns' scores, ``worst`` (the
  lowest on a higher-is-better scale, the highest on a lower-is-better one), ``last`` (the last
  judged turn's), or ``pass-share`` (the share of judged turns whose score, normalised to 0..1 with
  1 best, is at least ``pass_threshold``; on 0..1). The conversation is scored only when every
  judged turn is; otherwise it is unscored with the first such turn's reason.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import ConfigError
from ..transcripts.conversation import HistoryWindow, render_history
from ..transcripts.models import Resolved

Aggregate = Literal["mean", "worst", "last", "pass-share"]
AGGREGATES: tuple[str, ...] = get_args(Aggregate)

#: What each rule computes, in words (summary.json and the terminal state it).
AGGREGATE_RULES: dict[str, str] = {
    "mean": "the mean of the judged turns' scores",
    "worst": "the worst judged turn's score (lowest, or highest for a lower-is-better rubric)",
    "last": "the last judged turn's score",
    "pass-share": "the share of judged turns whose normalised score is at least {threshold:g} (0..1)",
}


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """Per-turn judging as asked: ``selection`` is ``"all"``, ``"last"`` or turn numbers."""

    selection: Literal["all", "last"] | tuple[int, ...]
    aggregate: Aggregate = "mean"
    window: HistoryWindow = HistoryWindow()
    pass_threshold: float = 0.5

    def describe(self) -> str:
        return self.selection if isinstance(self.selection, str) else ",".join(map(str, self.selection))

    def rule(self) -> str:
        return AGGREGATE_RULES[self.aggregate].format(threshold=self.pass_threshold)

    def chosen(self, turns: int) -> tuple[list[int], int]:
        """The turns of a conversation of ``turns`` turns to judge, and how many asked were absent."""
        if self.selection == "all":
            return list(range(1, turns + 1)), 0
        if self.selection == "last":
            return [turns], 0
        present = [t for t in self.selection if t <= turns]
        return present, len(self.selection) - len(present)


@dataclass(frozen=True, slots=True)
class TurnFlags:
    """``--turns`` and its companions as given, unchecked: one value that every command planning a
    run (``harness run``, ``estimate``, ``batch submit``/``collect``) carries into ``RunOptions``,
    whose fields of the same names ``parse_turns`` checks."""

    turns: str | None = None
    turn_aggregate: str = "mean"
    history_turns: int | None = None
    history_tokens: int | None = None
    pass_threshold: float = 0.5

    def as_options(self) -> dict[str, Any]:
        """The ``RunOptions`` fields these flags set."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def parse_turns(
    text: str, aggregate: str = "mean", history_turns: int | None = None, history_tokens: int | None = None, pass_threshold: float = 0.5
) -> TurnOptions:
    """``--turns`` and its companions, checked; a mistake is one line naming the option."""
    value = text.strip().lower()
    selection: Literal["all", "last"] | tuple[int, ...]
    if value in ("all", "last"):
        selection = value  # type: ignore[assignment]
    else:
        try:
            numbers = [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise ConfigError(f"--turns {text!r}: expected all, last, or turn numbers from 1 such as 1,3") from None
        if not numbers or any(n < 1 for n in numbers):
            raise ConfigError(f"--turns {text!r}: turn numbers start at 1")
        selection = tuple(sorted(set(numbers)))
    if aggregate not in AGGREGATES:
        raise ConfigError(f"--turn-aggregate {aggregate!r}: expected one of {', '.join(AGGREGATES)}")
    if not 0.0 <= pass_threshold <= 1.0:
        raise ConfigError(f"--pass-threshold {pass_threshold:g}: expected a value in 0..1 (on the normalised scale)")
    defaults = HistoryWindow()
    try:
        window = HistoryWindow(history_turns or defaults.turns, history_tokens or defaults.tokens)
    except ValueError as exc:
        raise ConfigError(f"--history-turns/--history-tokens: {exc}") from None
    return TurnOptions(selection, aggregate, window, pass_threshold)  # type: ignore[arg-type]


def turn_views(transcript: Resolved, options: TurnOptions) -> tuple[list[Resolved], int]:
    """The views of ``transcript`` to judge (module docstring), and the selected turns it lacks.

    A transcript without ``messages`` (or with one turn and no system prompt) is one turn: its view
    is the transcript itself, numbered 1."""
    conversation = transcript.conversation
    count = transcript.turns
    chosen, absent = options.chosen(count)
    if conversation is None or len(conversation) == 0 or (count == 1 and conversation.system is None and conversation.opening is None):
        return ([dataclasses.replace(transcript, turn=1)] if chosen else []), absent
    views = []
    for index in chosen:
        turn = conversation.turn(index)
        views.append(
            dataclasses.replace(
                transcript,
                query=turn.user,
                response=turn.answer,
                contexts=turn.contexts or None,
                steps=turn.steps,
                reference=transcript.reference if index == count else None,
                turn=index,
                history=render_history(conversation, index, options.window),
            )
        )
    return views, absent


def aggregate(rule: Aggregate, scores: Sequence[float], lo: float, hi: float, direction: str, threshold: float = 0.5) -> float:
    """A conversation's score from its judged turns' ``scores`` (in turn order) by ``rule``."""
    if not scores:
        raise ValueError("no turn scores to aggregate")
    if rule == "mean":
        return statistics.fmean(scores)
    if rule == "last":
        return float(scores[-1])
    if rule == "worst":
        return float(max(scores) if direction == "lower" else min(scores))
    normalised = [(s - lo) / (hi - lo) for s in scores]
    if direction == "lower":
        normalised = [1.0 - v for v in normalised]
    return sum(1 for v in normalised if v >= threshold) / len(normalised)
