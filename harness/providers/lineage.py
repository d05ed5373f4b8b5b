"""Which maker's line a model belongs to (GPT, Claude, Gemini, Llama, ...), whatever provider serves it.

A judge of the same lineage as the agent it judges may favour that agent's answers
(self-preference), so a jury flags such a member (``jury.report``). Unlike a provider's model
families (its profile's), a lineage is a fact of the model: a Llama is a Llama served by OpenAI's
API, a gateway or this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .profile import bare_model


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
