"""The context-window guard: a prompt that cannot fit its judge's window is never sent.

A prompt fits when its tokens plus the request's completion budget (``max_tokens``, reasoning
budget included) are within the judge's ``context_window``. Tokens are counted offline exactly as
``harness estimate`` counts them (``cost.tokens``), but only when they could matter: a BPE token
is at least one UTF-8 byte, so a prompt whose bytes (plus chat framing) fit is known to fit
without tokenizing it, which is nearly every prompt.

With ``truncate = "middle"`` (rubric or judge) an overflowing prompt is cut instead: the longest
transcript field among the rubric's inputs (a single context counts as a field) loses its middle,
marked in place, and the prompt is counted again until it fits. For models whose tokenizer is
unknown the count is o200k_base's (an approximation, as in the estimate).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..cost.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TokenCounter
from ..rubrics.rubric import Rubric
from ..transcripts.models import Resolved

#: Rounds of cutting before giving up (each round aims to remove the whole excess).
MAX_CUTS = 8
#: Characters a cut field keeps at least, head and tail together.
MIN_KEEP = 64
CUT_MARK = "\n[... {n} characters cut to fit the judge's context window ...]\n"

Messages = tuple[dict[str, str], ...]


@dataclass(frozen=True, slots=True)
class Fit:
    #: the messages to send (cut if ``truncated``), or None: the prompt cannot fit
    messages: Messages | None
    #: the prompt's counted tokens, where they had to be counted
    prompt_tokens: int | None = None
    truncated: bool = False


def byte_bound(messages: Messages) -> int:
    """An upper bound on the prompt's tokens: its UTF-8 bytes plus the chat framing (one token per role)."""
    size = sum(len(c) if c.isascii() else len(c.encode("utf-8")) for c in (m["content"] for m in messages))
    return size + (TOKENS_PER_MESSAGE + 1) * len(messages) + REPLY_PRIMING


def fit(
    messages: Messages, transcript: Resolved, rubric: Rubric, *, window: int, completion_tokens: int, counter: TokenCounter, truncate: bool
) -> Fit:
    room = window - completion_tokens
    if byte_bound(messages) <= room:
        return Fit(messages)
    tokens = counter.count_messages(messages)
    if tokens <= room:
        return Fit(messages, tokens)
    if not truncate:
        return Fit(None, tokens)
    current = transcript
    for _ in range(MAX_CUTS):
        shortened = _cut_longest(current, rubric.inputs, tokens - room, counter)
        if shortened is None:
            break
        current = shortened
        messages = tuple(rubric.render(current))
        tokens = counter.count_messages(messages)
        if tokens <= room:
            return Fit(messages, tokens, truncated=True)
    return Fit(None, tokens)


def _cut_longest(transcript: Resolved, inputs: tuple[str, ...], excess: int, counter: TokenCounter) -> Resolved | None:
    """``transcript`` with the middle of its longest input field cut by about ``excess`` tokens."""
    fields: list[tuple[int, str, int]] = []  # (length, field, index within contexts or -1)
    for name in inputs:
        if name == "contexts":
            fields += [(len(c), name, i) for i, c in enumerate(transcript.contexts or ())]
        elif (text := getattr(transcript, name)) is not None:
            fields.append((len(text), name, -1))
    if not fields:
        return None
    length, name, index = max(fields)
    text = transcript.contexts[index] if index >= 0 and transcript.contexts else getattr(transcript, name)
    if length <= MIN_KEEP:
        return None
    chars_per_token = length / max(1, counter.count_text(text))
    cut = min(length - MIN_KEEP, int(excess * chars_per_token * 1.05) + len(CUT_MARK) + 16)
    head = (length - cut) // 2
    shortened = text[:head] + CUT_MARK.format(n=cut) + text[head + cut :]
    if index >= 0:
        contexts = list(transcript.contexts or ())
        contexts[index] = shortened
        return dataclasses.replace(transcript, contexts=tuple(contexts))
    if name == "query":
        return dataclasses.replace(transcript, query=shortened)
    if name == "reference":
        return dataclasses.replace(transcript, reference=shortened)
    return dataclasses.replace(transcript, response=shortened)
