"""Judges are made here, from the provider's profile (``harness/providers/``), by the config's ``provider``."""

from __future__ import annotations

import importlib

from ..config import JudgeConfig
from ..errors import ConfigError
from ..providers import ProviderProfile, profile_of, unsupported
from .base import Judge

__all__ = ["judge_class", "make_judge"]


def judge_class(profile: ProviderProfile) -> type[Judge]:
    """The provider's Judge class, imported now (aiohttp, the openai SDK, llama.cpp load only when used)."""
    module, name = profile.judge.split(":")
    cls: type[Judge] = getattr(importlib.import_module(module), name)
    return cls


def make_judge(config: JudgeConfig) -> Judge:
    """The judge ``config`` describes; an option its provider cannot honour is a ConfigError here,
    before anything is sent."""
    profile = profile_of(config)
    if (problem := unsupported(config)) is not None:
        raise ConfigError(problem)
    return judge_class(profile)(config)
