"""What a request to a model looks like: its provider's model families, plus per-judge overrides.

A provider's profile lists the families of its models (``providers/openai.py`` holds OpenAI's:
the reasoning models want ``max_completion_tokens``, no ``temperature`` and a reasoning budget);
a model no family claims is a plain chat model. A judge's ``token_param``, ``send_temperature``,
``reasoning_budget``, ``reasoning_effort`` and ``instructions_role`` win over its family's. ``shape_request`` is the one
place a request is built from a judge and a rendered prompt; every provider (and the batch APIs)
sends what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import JudgeConfig
from ..providers import ModelFamily, profile_of
from .base import JudgeRequest


def family_of(judge: JudgeConfig) -> ModelFamily:
    """The family of ``judge``'s model among its provider's."""
    return profile_of(judge).family_of(judge.model)


def shape_request(
    judge: JudgeConfig,
    messages: tuple[dict[str, str], ...],
    answer_tokens: int,
    schema: Mapping[str, Any] | None = None,
    fixed_prefix: int = 0,
) -> JudgeRequest:
    """The request ``judge`` sends for ``messages``: ``answer_tokens`` is the rubric's (or judge's)
    ``max_tokens``, the room the verdict itself needs; a reasoning model gets its budget on top."""
    family = family_of(judge)
    budget = judge.reasoning_budget if judge.reasoning_budget is not None else family.reasoning_budget
    send_temperature = judge.send_temperature if judge.send_temperature is not None else family.send_temperature
    # a role the family would not send changes the request, so it enters the cache key; the family's own does not
    chosen_role = judge.instructions_role if judge.instructions_role not in (None, family.system_role) else None
    return JudgeRequest(
        messages,
        answer_tokens + budget,
        judge.temperature,
        judge.seed,
        token_param=judge.token_param or family.token_param,
        send_temperature=send_temperature,
        reasoning_effort=judge.reasoning_effort,
        schema=schema,
        fixed_prefix=fixed_prefix,
        system_role=chosen_role or family.system_role,
        chosen_role=chosen_role,
    )
