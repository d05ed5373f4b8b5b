"""The context-window guard: a prompt that cannot fit its judge's window is never sent.

A prompt fits when its tokens plus the request's completion budget (``max_tokens``, reasoning
budget included) are within the judge's ``context_window``. Tokens are counted offline exactly as
``harness estimate`` counts them (``cost.tokens``), but only when they could matter: a BPE token
is at least one UTF-8 byte, so a prompt whose bytes (plus chat framing) fit is known to fit
without tokenizing it, which is nearly every prompt.

An overflowing prompt with a compactable input (``trajectory``: ``rubrics.inputs``) first has
that input compacted by its own rule (``agent.render``: middle results shortened, then middle
steps dropped; the first and last steps and every failed one kept) to a budget of characters
worked out from the tokens the rest of the prompt leaves, counted again until it fits; whatever
``truncate`` says, since compaction keeps what a judge of the trajectory needs. Then, with
``truncate = "middle"`` (rubric or judge), the longest text field among the rubric's inputs (a
single context counts as a field) loses its middle, marked in place, and the prompt is counted
again until it fits. For models whose tokenizer is unknown the count is o200k_base's (an
approximation, as in the estimate).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from ..cost.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TokenCounter
from ..rubrics.inputs import BY_NAME
from ..rubrics.rubric import Rubric
from ..transcripts.models import Resolved

#: Rounds of cutting before giving up (each round aims to leave the prompt just inside the window).
MAX_CUTS = 8
#: Characters a cut field keeps at least, head and tail together.
MIN_KEEP = 64
#: The share of the room a cut prompt leaves free, for the tokens a cut shifts at its edges.
MARGIN = 0.02
#: The longest token of o200k_base and cl100k_base is 128 bytes: a prompt of N tokens holds at most
#: 128 N characters, so a field longer than that is cut to it before anything is tokenized.
MAX_TOKEN_CHARS = 128
CUT_MARK = "\n[... {n} characters cut to fit the judge's context window ...]\n"

Messages = tuple[dict[str, str], ...]


class Fit(NamedTuple):
    """(A named tuple: one is made per job, and a frozen dataclass costs 1 us to make.)"""

    #: the messages to send (cut if ``truncated``), or None: the prompt cannot fit
    messages: Messages | None
    #: the prompt's counted tokens, where they had to be counted
    prompt_tokens: int | None = None
    truncated: bool = False
    #: a compactable input (the trajectory) was compacted to fit the window
    compacted: bool = False


def byte_bound(messages: Messages) -> int:
    """An upper bound on the prompt's tokens: its UTF-8 bytes plus the chat framing (one token per role)."""
    size = (TOKENS_PER_MESSAGE + 1) * len(messages) + REPLY_PRIMING
    for message in messages:
        content = message["content"]
        size += len(content) if content.isascii() else len(content.encode("utf-8"))
    return size


def fits_whole(bound: int, window: int, completion_tokens: int) -> bool:
    """A prompt whose ``byte_bound`` is ``bound`` fits as it is, without counting its tokens."""
    return bound <= window - completion_tokens


def fit(
    messages: Messages,
    transcript: Resolved,
    rubric: Rubric,
    *,
    window: int,
    completion_tokens: int,
    counter: TokenCounter,
    truncate: bool,
) -> Fit:
    room = window - completion_tokens
    if fits_whole(byte_bound(messages), window, completion_tokens):
        return Fit(messages)
    current = transcript
    budgets: dict[str, int] | None = None
    compacted = False
    if truncate:  # what cannot fit whole is cut by characters first, so a 50 MB field is never tokenized
        current = _precut(transcript, rubric.inputs, max(room, 0) * MAX_TOKEN_CHARS)
        if current is not transcript:
            messages = rubric.messages(current)
    tokens = counter.count_messages(messages)
    if tokens > room and rubric.compactable:
        messages, tokens, budgets, compacted = _compact(current, rubric, tokens, room, counter)
    if tokens <= room:
        return Fit(messages, tokens, truncated=current is not transcript, compacted=compacted)
    if not truncate:
        return Fit(None, tokens)
    for _ in range(MAX_CUTS):
        shortened = _cut_longest(current, rubric.inputs, tokens, room, counter)
        if shortened is None:
            break
        current = shortened
        messages = rubric.messages(current, None, None, budgets)
        tokens = counter.count_messages(messages)
        if tokens <= room:
            return Fit(messages, tokens, truncated=True, compacted=compacted)
    return Fit(None, tokens)


def _compact(transcript: Resolved, rubric: Rubric, tokens: int, room: int, counter: TokenCounter) -> tuple[Messages, int, dict[str, int], bool]:
    """The prompt with its compactable inputs rendered to budgets of characters that bring its
    ``tokens`` to just inside ``room``: each input's share of the room the rest of the prompt
    leaves, in its own characters per token (less the margin), shrunk in proportion while the
    count is over, until the inputs cannot be compacted further (their kept steps alone)."""
    texts = {name: BY_NAME[name].render(getattr(transcript, BY_NAME[name].attr)) for name in dict.fromkeys(rubric.compactable)}
    own = {name: counter.count_text(text) for name, text in texts.items()}
    free = room - (tokens - sum(own.values())) - int(room * MARGIN)
    share = max(free, 0) / max(1, sum(own.values()))
    budgets = {name: int(len(text) * share) for name, text in texts.items()}
    for _ in range(MAX_CUTS):
        prompt = rubric.prompt(transcript, budgets=budgets)
        tokens = counter.count_messages(prompt.messages)
        if tokens <= room or not prompt.fits:
            break
        budgets = {name: int(budget * room / tokens * (1 - MARGIN)) for name, budget in budgets.items()}
    return prompt.messages, tokens, budgets, bool(prompt.compacted)


def _fields(transcript: Resolved, inputs: tuple[str, ...]) -> list[tuple[int, str, int]]:
    """``(length, field, index within a list or -1)`` of each text field among the inputs (the
    ``text`` and ``texts`` inputs of ``rubrics.inputs``) the transcript has."""
    fields: list[tuple[int, str, int]] = []
    for name in inputs:
        entry = BY_NAME[name]
        value = getattr(transcript, entry.attr)
        if entry.kind == "texts":
            fields += [(len(c), entry.attr, i) for i, c in enumerate(value or ())]
        elif entry.kind == "text" and value is not None:
            fields.append((len(value), entry.attr, -1))
    return fields


def _text(transcript: Resolved, attr: str, index: int) -> str:
    value = getattr(transcript, attr)
    return str(value[index] if index >= 0 else value)


def _middle(text: str, keep: int) -> str:
    """``text`` with its middle replaced by the mark, ``keep`` characters of it kept (head and tail)."""
    head = keep // 2
    return text[:head] + CUT_MARK.format(n=len(text) - keep) + text[len(text) - (keep - head) :]


def _replace(transcript: Resolved, attr: str, index: int, text: str) -> Resolved:
    value: str | tuple[str, ...] = text
    if index >= 0:
        items = list(getattr(transcript, attr))
        items[index] = text
        value = tuple(items)
    changes: dict[str, Any] = {attr: value}
    return dataclasses.replace(transcript, **changes)


def _precut(transcript: Resolved, inputs: tuple[str, ...], limit: int) -> Resolved:
    """``transcript`` with every input field longer than ``limit`` characters cut to it."""
    for length, name, index in _fields(transcript, inputs):
        if length > max(limit, MIN_KEEP):
            transcript = _replace(transcript, name, index, _middle(_text(transcript, name, index), max(limit, MIN_KEEP)))
    return transcript


def _cut_longest(transcript: Resolved, inputs: tuple[str, ...], tokens: int, room: int, counter: TokenCounter) -> Resolved | None:
    """``transcript`` with the middle of its longest input field cut so that the prompt of ``tokens``
    tokens comes to just inside ``room``: the field keeps what the room leaves beside the rest of
    the prompt, less a margin taken on the room (never on the excess, which made a large input
    keep less than a small one)."""
    fields = _fields(transcript, inputs)
    if not fields:
        return None
    length, name, index = max(fields)
    if length <= MIN_KEEP:
        return None
    text = _text(transcript, name, index)
    field_tokens = counter.count_text(text)
    chars_per_token = length / max(1, field_tokens)
    target = room - (tokens - field_tokens) - int(room * MARGIN) - counter.count_text(CUT_MARK.format(n=length))
    keep = int(target * chars_per_token)
    if keep >= length:  # the rest of the prompt was undercounted: shrink in proportion instead
        keep = int(length * room / tokens * (1 - MARGIN))
    return _replace(transcript, name, index, _middle(text, max(MIN_KEEP, keep)))
