"""The providers, one entry each: everything a path needs to know about a judge's provider.

An entry names the judge class (imported when a judge is made, so aiohttp, the openai SDK and
llama.cpp load only when used), the default base URL and the environment variable that overrides
it, the version path the API lives under, the API key's variable, the batch API that serves it,
the reader of its replies' usage, and what its requests accept. The live judges and the batch
client build their URLs on ``api_root``; ``JudgeConfig.endpoint`` resolves the base URL here;
``registry.make_judge`` imports the class and refuses, before anything is sent, an option the provider cannot honour.

Adding a provider is one entry here and one Judge class.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import ConfigError
from .usage import Usage, anthropic_usage, llama_usage, openai_usage


class JudgeFields(Protocol):
    """The fields of ``config.JudgeConfig`` read here (the config asks this table for its
    endpoint and key variable, so this module cannot import it)."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def samples_via(self) -> str: ...
    @property
    def logprobs(self) -> bool: ...
    @property
    def structured_output(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Accepts:
    """What a provider's requests can carry, beyond messages and ``max_tokens``."""

    #: several choices in one request (``samples_via = "n"``)
    n: bool
    #: top logprobs per token (``logprobs = true``, G-Eval)
    logprobs: bool
    #: a JSON Schema for the reply (``structured_output = true``)
    structured_output: bool
    #: the highest temperature sent; a judge's higher one is capped to it
    temperature_max: float
    #: OpenAI's model-family rules apply (``families.py``: ``max_completion_tokens``, unsent temperature)
    families: bool


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    #: "module:Class" in harness.judges
    judge: str
    #: None: no network (the embedded judge)
    default_base_url: str | None
    #: the environment variable that overrides the default base URL
    base_url_env: str | None
    #: appended to the base URL for the API root, unless the base URL already ends with it
    version_path: str
    #: the API key's default environment variable (None: no key)
    key_env: str | None
    #: "openai" (Files + Batches) or "anthropic" (Message Batches); None: no batch API
    batch_api: str | None
    usage: Callable[[Any], Usage | None]
    accepts: Accepts
    #: what a reader is told the provider is, in refusals
    title: str = ""


_OPENAI = Provider(
    "openai",
    "openai_aiohttp:AiohttpJudge",
    "https://api.openai.com/v1",
    "OPENAI_BASE_URL",
    "",
    "OPENAI_API_KEY",
    "openai",
    openai_usage,
    Accepts(n=True, logprobs=True, structured_output=True, temperature_max=2.0, families=True),
    "OpenAI chat completions",
)

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        # An OpenAI base URL carries its version (https://api.openai.com/v1, as OPENAI_BASE_URL does).
        _OPENAI,
        # The same API through the official SDK instead of the aiohttp client.
        replace(_OPENAI, name="openai-sdk", judge="openai_sdk:OpenAISDKJudge"),
        # An Anthropic base URL does not (https://api.anthropic.com, as the SDK and ANTHROPIC_BASE_URL have it).
        Provider(
            "anthropic",
            "anthropic:AnthropicJudge",
            "https://api.anthropic.com",
            "ANTHROPIC_BASE_URL",
            "/v1",
            "ANTHROPIC_API_KEY",
            "anthropic",
            anthropic_usage,
            Accepts(n=False, logprobs=False, structured_output=True, temperature_max=1.0, families=False),
            "Anthropic's Messages API",
        ),
        Provider(
            "local",
            "local:LocalLlamaJudge",
            None,
            None,
            "",
            None,
            None,
            llama_usage,
            Accepts(n=False, logprobs=False, structured_output=False, temperature_max=2.0, families=False),
            "the embedded local judge",
        ),
    )
}


def provider_of(config: JudgeFields) -> Provider:
    try:
        return PROVIDERS[config.provider]
    except KeyError:
        raise ConfigError(f"judge {config.name!r}: unknown provider {config.provider!r} (known: {', '.join(PROVIDERS)})") from None


def endpoint(config: JudgeFields) -> str:
    """The base URL a judge calls: its ``base_url``, else the provider's variable, else its default
    ("local" for the embedded judge). This is what the cache key holds."""
    provider = provider_of(config)
    if provider.default_base_url is None:
        return "local"
    env = os.environ.get(provider.base_url_env) if provider.base_url_env else None
    return (config.base_url or env or provider.default_base_url).rstrip("/")


def api_root(config: JudgeFields) -> str:
    """The base URL with the provider's version path: every request path goes after it
    (``/chat/completions``, ``/messages``, ``/files``, ``/batches``, ``/messages/batches``)."""
    return root_of(provider_of(config).name, endpoint(config))


def root_of(provider: str, base_url: str) -> str:
    """``base_url`` with ``provider``'s version path added once (``https://api.anthropic.com`` and
    ``https://api.anthropic.com/v1`` both give ``.../v1``): the one rule, for the live judges and the
    batch clients, which know a provider by name and a base URL."""
    base = base_url.rstrip("/")
    path = PROVIDERS[provider].version_path if provider in PROVIDERS else ""
    return base if not path or base.endswith(path) else base + path


def cannot(provider: str, option: str) -> str | None:
    """Why ``provider`` cannot honour ``option`` ("n", "logprobs", "structured_output"), or None: the
    one wording of a provider's limits, for the refusal below and the capabilities table."""
    entry = PROVIDERS[provider]
    accepts = entry.accepts
    if option == "n" and not accepts.n:
        return f'{entry.title} has no "n" (several choices per request): set samples_via = "requests"'
    if option == "logprobs" and not accepts.logprobs:
        return f"{entry.title} returns no logprobs: set logprobs = false"
    if option == "structured_output" and not accepts.structured_output:
        return f"{entry.title} cannot follow a JSON Schema: set structured_output = false"
    return None


def unsupported(config: JudgeFields) -> str | None:
    """Why ``config`` asks for something its provider cannot do, or None: said before anything is sent."""
    name = provider_of(config).name
    for option, asked in (("n", config.samples_via == "n"), ("logprobs", config.logprobs), ("structured_output", config.structured_output)):
        if asked and (why := cannot(name, option)) is not None:
            return f"judge {config.name!r}: {why}"
    return None
