"""The Judge interface: one async call per attempt, plus hooks with defaults.

A judge turns a :class:`JudgeRequest` (rendered chat messages and sampling parameters) into a
:class:`JudgeReply`, or raises one of :mod:`harness.errors`' ``JudgeError`` kinds. A provider
implements ``send``; ``complete`` (what the runner calls) holds every reply's usage to the
request's budget (``usage.checked_usage``), so no provider can skip the check. Retrying, rate
limiting and concurrency live outside the judge (``retry.py``, ``ratelimit.py``, the runner), so
every provider gets the same behaviour.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..config import JudgeConfig
from ..usage import Usage, usage_within


@dataclass(slots=True)
class JudgeRequest:
    """One request as planned: treated as immutable, but not ``frozen`` (a run makes one per job
    and a frozen dataclass's ``__init__`` costs 1 us more)."""

    messages: tuple[dict[str, str], ...]
    max_tokens: int
    temperature: float
    seed: int | None = None
    #: the body field that carries ``max_tokens``: reasoning models want ``max_completion_tokens``
    token_param: str = "max_tokens"
    #: False for models that reject any temperature but their default (``families.py``)
    send_temperature: bool = True
    reasoning_effort: str | None = None
    #: JSON Schema the reply must follow (structured output), or None for free text
    schema: Mapping[str, Any] | None = None
    #: replies asked for in one request (the ``n`` parameter); 1 sends no ``n``
    n: int = 1
    #: top logprobs asked for per token (``logprobs: true, top_logprobs: N``); None asks for none
    top_logprobs: int | None = None
    #: characters at the start of the last user message that are the rubric's fixed text (the same
    #: in every request of that rubric): Anthropic's ``cache_control`` breakpoint goes after them
    fixed_prefix: int = 0
    #: the request's cache key (``cache/keys.request_key``), set when the job is planned
    key: str | None = None
    #: the role the system message is sent with (``ModelFamily.system_role``: ``developer`` for
    #: OpenAI's reasoning models, or the judge's ``instructions_role``)
    system_role: str = "system"
    #: the judge's ``instructions_role`` where it differs from its family's role (so it changes
    #: the request and is in the cache key); None: the family's role, the wire spelling of one
    #: message, not in the key (keys made before the option are unchanged)
    chosen_role: str | None = None

    def with_messages(self, messages: tuple[dict[str, str], ...], key: str | None) -> JudgeRequest:
        """This request with other messages and key: a run makes one per job, and
        ``dataclasses.replace`` walks the fields each time (tests/test_planning checks they agree)."""
        return JudgeRequest(
            messages,
            self.max_tokens,
            self.temperature,
            self.seed,
            self.token_param,
            self.send_temperature,
            self.reasoning_effort,
            self.schema,
            self.n,
            self.top_logprobs,
            self.fixed_prefix,
            key,
            self.system_role,
            self.chosen_role,
        )

    @property
    def fixed_text(self) -> str:
        """The text every request of this rubric starts with: the system prompt(s) and the fixed
        start of the user message, which a provider's prompt cache can serve."""
        parts = [m["content"] for m in self.messages if m["role"] == "system"]
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "user" and self.fixed_prefix:
            parts.append(last["content"][: self.fixed_prefix])
        return "\n".join(parts)


#: One generated token's alternatives: ((token, logprob), ...), most likely first.
TokenAlternatives = tuple[tuple[str, float], ...]


#: The finish reasons of a reply cut off (``JudgeReply.truncated``).
TRUNCATED_FINISHES = frozenset({"length", "max_tokens", "model_context_window_exceeded"})


@dataclass(frozen=True, slots=True)
class JudgeReply:
    text: str
    #: what the request used, over all its choices; None when the reply did not say or could not be true
    usage: Usage | None
    finish_reason: str | None = None
    #: "batch" for a reply a provider's batch API gave (priced at batch rates, kept on replay)
    tier: str | None = None
    #: the texts of choices 1..n-1 when the request asked for n > 1
    more_texts: tuple[str, ...] = ()
    #: per generated token of choice 0: (token, its top alternatives); None: the reply had none
    logprobs: tuple[tuple[str, TokenAlternatives], ...] | None = None
    #: the same for choices 1..n-1
    more_logprobs: tuple[tuple[tuple[str, TokenAlternatives], ...] | None, ...] = ()

    @property
    def truncated(self) -> bool:
        """The reply was cut off: at the completion budget (``finish_reason`` "length", Anthropic's
        "max_tokens") or at the end of the context window (Anthropic's "model_context_window_exceeded")."""
        return self.finish_reason in TRUNCATED_FINISHES

    # The usage's parts, by the names judgments and the cache use (None when usage is unknown).
    @property
    def prompt_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.prompt

    @property
    def completion_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.completion

    @property
    def reasoning_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.reasoning

    @property
    def cached_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.cached_read

    @property
    def cache_write_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.cache_write


class Judge(ABC):
    """Base class of every judge provider."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def max_connections(self) -> int:
        """How many calls this judge may have in flight; the runner enforces it."""
        return self.config.max_concurrency

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """One attempt (``send``), its usage held to what ``request`` could have used: usage
        that cannot be true becomes unknown here, for every provider."""
        reply = await self.send(request)
        usage = usage_within(reply.usage, request)
        return reply if usage is reply.usage else replace(reply, usage=usage)

    @abstractmethod
    async def send(self, request: JudgeRequest) -> JudgeReply:
        """Make exactly one attempt. Raise RateLimited / TransientJudgeError / FatalJudgeError."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or models."""
