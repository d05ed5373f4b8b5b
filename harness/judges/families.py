"""What a request to a model looks like: a small table of model families, plus per-judge overrides.

OpenAI's reasoning models (the gpt-5 family, the o-series) answer HTTP 400 to ``max_tokens``
("Use 'max_completion_tokens' instead") and to any ``temperature`` but the default ("Only the
default (1) value is supported"), and they spend hidden reasoning tokens out of the completion
budget: with a rubric's ``max_tokens = 64`` they stop at ``finish_reason = "length"`` before
writing a word. So for those families a request carries ``max_completion_tokens`` = the rubric's
``max_tokens`` plus a reasoning budget, and no ``temperature``.

The table, first match wins (the model name is matched after any gateway prefix such as
``openai/``, lower-cased):

=================  ========================  ===================  ==================
family             name starts with          token field          temperature sent
=================  ========================  ===================  ==================
gpt-5-chat         ``gpt-5-chat``            max_completion_tok.  yes
gpt-5 (reasoning)  ``gpt-5``                 max_completion_tok.  no; +4096 budget
o-series           ``o1``, ``o3``, ``o4``    max_completion_tok.  no; +4096 budget
gemini-2.5         ``gemini-2.5``            max_tokens           yes; +4096 budget
anything else      —                         max_tokens           yes
=================  ========================  ===================  ==================

A second, smaller table, ``LINEAGES``, says which maker's line a model belongs to (GPT, Claude,
Gemini, Llama, ...): a judge of the same lineage as the agent it judges may favour that agent's
answers (self-preference), so a jury flags such a member (``lineage_of``).

A new model needs no code change: a judge sets ``token_param``, ``send_temperature``,
``reasoning_budget`` and ``reasoning_effort`` in its config, and those win over the table.
``shape_request`` is the one place a request is built from a judge and a rendered prompt; every
provider (and the batch APIs) sends what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..config import JudgeConfig
from .base import JudgeRequest

TokenParam = Literal["max_tokens", "max_completion_tokens"]
#: Completion tokens a reasoning model gets on top of the rubric's ``max_tokens`` by default. gpt-5-mini
#: at its default (medium) effort spends a few hundred to about two thousand on a judging prompt.
DEFAULT_REASONING_BUDGET = 4096


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    prefixes: tuple[str, ...]
    token_param: TokenParam
    send_temperature: bool
    reasoning_budget: int


FAMILIES: tuple[Family, ...] = (
    Family("gpt-5-chat", ("gpt-5-chat",), "max_completion_tokens", True, 0),
    Family("gpt-5", ("gpt-5",), "max_completion_tokens", False, DEFAULT_REASONING_BUDGET),
    Family("o-series", ("o1", "o3", "o4"), "max_completion_tokens", False, DEFAULT_REASONING_BUDGET),
    # Gemini 2.5 thinks by default, and its thinking counts against max_tokens.
    Family("gemini-2.5", ("gemini-2.5",), "max_tokens", True, DEFAULT_REASONING_BUDGET),
)
CHAT = Family("chat", (), "max_tokens", True, 0)


def bare_model(model: str) -> str:
    """The model name without a gateway's provider prefix (``openai/gpt-4o-mini`` → ``gpt-4o-mini``)."""
    return model.rsplit("/", 1)[-1].lower()


@lru_cache(maxsize=256)
def family_of(model: str) -> Family:
    name = bare_model(model)
    return next((f for f in FAMILIES if name.startswith(f.prefixes)), CHAT)


@dataclass(frozen=True, slots=True)
class Lineage:
    """Models of one maker's line, trained alike. LLM judges rate their own lineage's answers higher
    than others rate them (self-preference: Zheng et al. 2023, "Judging LLM-as-a-Judge", section
    3.3; Panickssery et al. 2024, "LLM Evaluators Recognize and Favor Their Own Generations")."""

    name: str
    prefixes: tuple[str, ...]


#: First match wins, on the model name after any gateway prefix, lower-cased (``bare_model``).
LINEAGES: tuple[Lineage, ...] = (
    Lineage("OpenAI GPT", ("gpt-", "gpt4", "chatgpt", "o1", "o3", "o4", "davinci")),
    Lineage("Anthropic Claude", ("claude",)),
    Lineage("Google Gemini", ("gemini", "gemma")),
    Lineage("Meta Llama", ("llama", "meta-llama")),
    Lineage("Mistral", ("mistral", "mixtral", "ministral", "codestral", "magistral", "pixtral")),
    Lineage("Qwen", ("qwen", "qwq")),
    Lineage("DeepSeek", ("deepseek",)),
    Lineage("Microsoft Phi", ("phi-", "phi3", "phi4")),
    Lineage("xAI Grok", ("grok",)),
    Lineage("Cohere Command", ("command", "c4ai")),
    Lineage("Hugging Face SmolLM", ("smollm",)),
)


@lru_cache(maxsize=256)
def lineage_of(model: str) -> Lineage | None:
    """The lineage of ``model`` (``openai/gpt-4o-mini`` → OpenAI GPT), or None when unknown."""
    name = bare_model(model)
    return next((line for line in LINEAGES if name.startswith(line.prefixes)), None)


def same_lineage(judge_model: str, agent_model: str) -> Lineage | None:
    """The lineage a judge shares with the agent it judges, or None: the same model, or two
    models of one known lineage."""
    line = lineage_of(judge_model)
    if line is not None and line == lineage_of(agent_model):
        return line
    if bare_model(judge_model) == bare_model(agent_model):
        return Lineage(bare_model(judge_model), (bare_model(judge_model),))
    return None


def shape_request(
    judge: JudgeConfig,
    messages: tuple[dict[str, str], ...],
    answer_tokens: int,
    schema: Mapping[str, Any] | None = None,
    fixed_prefix: int = 0,
) -> JudgeRequest:
    """The request ``judge`` sends for ``messages``: ``answer_tokens`` is the rubric's (or judge's)
    ``max_tokens``, the room the verdict itself needs; a reasoning model gets its budget on top."""
    family = family_of(judge.model)
    budget = judge.reasoning_budget if judge.reasoning_budget is not None else family.reasoning_budget
    send_temperature = judge.send_temperature if judge.send_temperature is not None else family.send_temperature
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
    )
