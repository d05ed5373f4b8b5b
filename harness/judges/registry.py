"""Judges are made here, from the providers table (``providers.py``), by the config's ``provider``."""

from __future__ import annotations

import importlib

from ..config import JudgeConfig
from ..errors import ConfigError
from .base import Judge
from .providers import PROVIDERS, Provider, provider_of, unsupported

__all__ = ["PROVIDERS", "judge_class", "make_judge"]


def judge_class(provider: Provider) -> type[Judge]:
    """The provider's Judge class, imported now (aiohttp, the openai SDK, llama.cpp load only when used)."""
    module, name = provider.judge.split(":")
    cls: type[Judge] = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return cls


def make_judge(config: JudgeConfig) -> Judge:
    """The judge ``config`` describes; an option its provider cannot honour is a ConfigError here,
    before anything is sent."""
    provider = provider_of(config)
    if (problem := unsupported(config)) is not None:
        raise ConfigError(problem)
    return judge_class(provider)(config)
