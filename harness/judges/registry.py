"""Providers are found here, by the judge config's ``provider`` field."""

from __future__ import annotations

from collections.abc import Callable

from ..config import JudgeConfig
from ..errors import ConfigError
from .base import Judge


def _openai(config: JudgeConfig) -> Judge:
    from .openai_aiohttp import AiohttpJudge

    return AiohttpJudge(config)


def _openai_sdk(config: JudgeConfig) -> Judge:
    from .openai_sdk import OpenAISDKJudge

    return OpenAISDKJudge(config)


def _anthropic(config: JudgeConfig) -> Judge:
    from .anthropic import AnthropicJudge

    return AnthropicJudge(config)


def _local(config: JudgeConfig) -> Judge:
    from .local import LocalLlamaJudge

    return LocalLlamaJudge(config)


PROVIDERS: dict[str, Callable[[JudgeConfig], Judge]] = {"openai": _openai, "openai-sdk": _openai_sdk, "anthropic": _anthropic, "local": _local}


def make_judge(config: JudgeConfig) -> Judge:
    try:
        factory = PROVIDERS[config.provider]
    except KeyError:
        raise ConfigError(f"judge {config.name!r}: unknown provider {config.provider!r}") from None
    return factory(config)
