"""Token usage: one value every provider's reply fills, and the one check it passes.

A reply's ``usage`` is untrusted input. Each provider's dialect is read here by a small reader
(``openai_usage``, ``anthropic_usage``, ``llama_usage``; each provider's profile names its own),
which only turns the provider's field names into a :class:`Usage`. Whether the numbers can be true
is decided once, by ``checked_usage``, for every provider and for the batch path alike:
``Judge.complete`` applies it to every reply against the budget of the whole request (``n``
choices, the completion budget with any reasoning budget in it, the prompt's size).

Usage that cannot be true (negative, not whole numbers, more completion tokens than ``n`` choices
of ``max_tokens`` could make, more prompt tokens than the prompt's bytes, parts larger than their
whole) is unknown: ``None``, priced as unknown and counted in the run summary, never 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

#: Chat framing and provider-side additions (hidden system prompts, tool schemas) a prompt's token
#: count may exceed its bytes by.
PROMPT_TOKEN_SLACK = 65536
#: Completion tokens a server may report beyond max_tokens per choice (special tokens).
COMPLETION_TOKEN_SLACK = 16
#: Beyond this no count is exact in a float, and none is plausible.
MAX_TOKENS_REPORTED = 2**53


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one request used, summed over its choices. ``prompt`` is the whole prompt (cache
    reads and writes included); ``completion`` includes hidden reasoning."""

    prompt: int
    completion: int
    #: hidden reasoning tokens, part of ``completion`` (priced with it)
    reasoning: int | None = None
    #: prompt tokens served from the provider's prompt cache, part of ``prompt``
    cached_read: int | None = None
    #: prompt tokens written to the provider's prompt cache (Anthropic), part of ``prompt``
    cache_write: int | None = None


class _Request(Protocol):
    """What a budget is read from (``judges.base.JudgeRequest``; this module imports nothing of the
    harness, so the config and the provider profiles can use it)."""

    @property
    def messages(self) -> tuple[dict[str, str], ...]: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def schema(self) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Budget:
    """What one request could have used: the bound ``checked_usage`` holds a reply's usage to."""

    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def of(cls, request: _Request) -> Budget:
        """Prompt: at most one token per byte of what was sent (messages, schema) plus framing;
        completion: ``n`` choices of ``max_tokens`` (which holds the reasoning budget), each with
        a little slack for special tokens."""
        sent = 0
        for message in request.messages:
            content = message["content"]
            sent += len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
        if request.schema is not None:
            sent += len(json.dumps(request.schema))
        return cls(sent + PROMPT_TOKEN_SLACK, _completion_budget(request))


def _completion_budget(request: _Request) -> int:
    """``n`` choices of ``max_tokens`` (which holds the reasoning budget), each with a little slack."""
    return max(request.n, 1) * (max(request.max_tokens, 0) + COMPLETION_TOKEN_SLACK)


def usage_within(usage: Usage | None, request: _Request) -> Usage | None:
    """``checked_usage(usage, Budget.of(request))``, the prompt's bytes counted only when they can
    decide it: every budget allows ``PROMPT_TOKEN_SLACK`` prompt tokens whatever was sent, so a
    reply reporting fewer needs no count (1 µs of every reply's 2)."""
    if usage is not None and _is_int(usage.prompt) and 0 <= usage.prompt <= PROMPT_TOKEN_SLACK:
        return _checked(usage, PROMPT_TOKEN_SLACK, _completion_budget(request))  # (no Budget made: it is frozen, 0.4 µs)
    return checked_usage(usage, Budget.of(request))


def checked_usage(usage: Usage | None, budget: Budget) -> Usage | None:
    """``usage`` when it could be true of a request with ``budget``, else None (unknown)."""
    if usage is None:
        return None
    return _checked(usage, budget.prompt_tokens, budget.completion_tokens)


def _checked(usage: Usage, prompt_tokens: int, completion_tokens: int) -> Usage | None:
    """``checked_usage`` against a budget of ``prompt_tokens`` and ``completion_tokens``."""
    # (A loop, not generators: it runs once per reply.)
    for value in (usage.prompt, usage.completion):
        if not _is_int(value) or value < 0 or value >= MAX_TOKENS_REPORTED:
            return None
    for part in (usage.reasoning, usage.cached_read, usage.cache_write):
        if part is not None and (not _is_int(part) or part < 0 or part >= MAX_TOKENS_REPORTED):
            return None
    if usage.prompt > prompt_tokens or usage.completion > completion_tokens:
        return None
    if usage.reasoning is not None and usage.reasoning > usage.completion:
        return None
    if (usage.cached_read or 0) + (usage.cache_write or 0) > usage.prompt:
        return None
    return usage


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def int_or_none(value: Any) -> int | None:
    return value if _is_int(value) else None


def _detail(usage: Mapping[str, Any], group: str, name: str) -> int | None:
    details = usage.get(group)
    return int_or_none(details.get(name)) if isinstance(details, dict) else None


# -- each provider's dialect ---------------------------------------------------------------------


def openai_usage(raw: Any) -> Usage | None:
    """Chat completions' ``usage``: ``prompt_tokens`` and ``completion_tokens`` (over all ``n``
    choices), ``completion_tokens_details.reasoning_tokens``, ``prompt_tokens_details.cached_tokens``."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not _is_int(prompt) or not _is_int(completion):
        return None
    return Usage(
        prompt, completion, _detail(raw, "completion_tokens_details", "reasoning_tokens"), _detail(raw, "prompt_tokens_details", "cached_tokens")
    )


def anthropic_usage(raw: Any) -> Usage | None:
    """The Messages API's ``usage``: ``input_tokens`` excludes cache reads and writes, so the
    prompt is the sum of the three; ``output_tokens`` is the completion."""
    if not isinstance(raw, dict):
        return None
    fresh, output = int_or_none(raw.get("input_tokens")), int_or_none(raw.get("output_tokens"))
    read, written = raw.get("cache_read_input_tokens"), raw.get("cache_creation_input_tokens")
    if fresh is None or output is None or any(v is not None and not _is_int(v) for v in (read, written)):
        return None
    return Usage(fresh + (read or 0) + (written or 0), output, cached_read=read or 0, cache_write=written or 0)


def llama_usage(raw: Any) -> Usage | None:
    """The embedded llama.cpp worker's reply (``llama_worker.py``): ``prompt_tokens``,
    ``completion_tokens`` and ``cached_tokens`` (the prompt's prefix its slot already held)."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = int_or_none(raw.get("prompt_tokens")), int_or_none(raw.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return Usage(prompt, completion, cached_read=int_or_none(raw.get("cached_tokens")))
