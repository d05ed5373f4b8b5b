"""Judges are made here, from the providers table (``providers.py``), by the config's ``provider``."""

from __future__ import annotations

from ..config import JudgeConfig
from ..errors import ConfigError
from .base import Judge
from .providers import PROVIDERS, judge_class, provider_of, unsupported

__all__ = ["PROVIDERS", "make_judge"]


def make_judge(config: JudgeConfig) -> Judge:
    """The judge ``config`` describes; an option its provider cannot honour is a ConfigError here,
    before anything is sent."""
    provider = provider_of(config)
    if (problem := unsupported(config)) is not None:
        raise ConfigError(problem)
    return judge_class(provider)(config)
