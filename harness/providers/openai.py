"""OpenAI chat completions (``provider = "openai"``): OpenAI, and any OpenAI-compatible endpoint
(vLLM, Ollama, Groq, Gemini, a gateway), over aiohttp.

An OpenAI base URL carries its version (``https://api.openai.com/v1``, as ``OPENAI_BASE_URL`` does).

Its models' request shapes, first match wins (the model name is matched after any gateway prefix
such as ``openai/``, lower-cased). OpenAI's reasoning models (the gpt-5 family, the o-series)
answer HTTP 400 to ``max_tokens`` ("Use 'max_completion_tokens' instead") and to any
``temperature`` but the default ("Only the default (1) value is supported"), and they spend hidden
reasoning tokens out of the completion budget: with a rubric's ``max_tokens = 64`` they stop at
``finish_reason = "length"`` before writing a word. So for those families a request carries
``max_completion_tokens`` = the rubric's ``max_tokens`` plus a reasoning budget, and no
``temperature``:

=================  ========================  ===================  ==================
family             name starts with          token field          temperature sent
=================  ========================  ===================  ==================
gpt-5-chat         ``gpt-5-chat``            max_completion_tok.  yes
gpt-5 (reasoning)  ``gpt-5``                 max_completion_tok.  no; +4096 budget
o-series           ``o1``, ``o3``, ``o4``    max_completion_tok.  no; +4096 budget
gemini-2.5         ``gemini-2.5``            max_tokens           yes; +4096 budget
anything else      —                         max_tokens           yes
=================  ========================  ===================  ==================

The reasoning families (gpt-5, the o-series) get the rubric's instructions as a ``developer``
message, the role their API gives instructions (a ``system`` message is read as one).

A new model needs no code change: a judge sets ``token_param``, ``send_temperature``,
``reasoning_budget`` and ``reasoning_effort`` in its config, and those win over the table.
"""

from __future__ import annotations

from ..usage import openai_usage
from .profile import ModelFamily, ProviderProfile

#: Completion tokens a reasoning model gets on top of the rubric's ``max_tokens`` by default. gpt-5-mini
#: at its default (medium) effort spends a few hundred to about two thousand on a judging prompt.
DEFAULT_REASONING_BUDGET = 4096

MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(name="gpt-5-chat", prefixes=("gpt-5-chat",), token_param="max_completion_tokens"),
    ModelFamily(
        name="gpt-5",
        prefixes=("gpt-5",),
        token_param="max_completion_tokens",
        send_temperature=False,
        reasoning_budget=DEFAULT_REASONING_BUDGET,
        reasoning=True,
        system_role="developer",
    ),
    ModelFamily(
        name="o-series",
        prefixes=("o1", "o3", "o4"),
        token_param="max_completion_tokens",
        send_temperature=False,
        reasoning_budget=DEFAULT_REASONING_BUDGET,
        reasoning=True,
        system_role="developer",
    ),
    # Gemini 2.5 thinks by default, and its thinking counts against max_tokens.
    ModelFamily(name="gemini-2.5", prefixes=("gemini-2.5",), reasoning_budget=DEFAULT_REASONING_BUDGET),
)


def bearer(key: str | None) -> dict[str, str]:
    """``Authorization: Bearer``, the key's header on every OpenAI-compatible endpoint."""
    return {"Authorization": f"Bearer {key}"} if key else {}


PROFILE = ProviderProfile(
    name="openai",
    title="OpenAI chat completions",
    judge="harness.judges.openai_aiohttp:AiohttpJudge",
    usage=openai_usage,
    default_base_url="https://api.openai.com/v1",
    base_url_env="OPENAI_BASE_URL",
    key_env="OPENAI_API_KEY",
    auth_headers=bearer,
    batch_api="openai",
    supports_n=True,
    supports_logprobs=True,
    supports_structured_output=True,
    supports_instructions_role=True,
    model_families=MODEL_FAMILIES,
)
