"""A provider's profile: everything a path asks of a judge's provider, one field each.

Modelled on pydantic-ai's ``ModelProfile`` (``pydantic_ai/profiles/__init__.py``): a keyword-only
frozen record with a docstring per capability, one per provider (``openai.py``, ``anthropic.py``,
...), found through the registry (``__init__.py``). The config's ``provider`` is checked against
the registry, a judge's URL, key variable and class come from its profile, and a refusal quotes its
words (``cannot``).

This package imports nothing of the harness but the usage value and the errors, so the config,
the judges and the batch clients all read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..usage import Usage

#: The body field that carries a request's completion budget.
TokenParam = Literal["max_tokens", "max_completion_tokens"]
#: The rows of the capabilities table (``harness/capabilities.py``): what a judge is to the harness.
CapabilityFamily = Literal["chat", "reasoning", "anthropic", "local"]
#: The batch APIs (``harness/batch/providers.py``): OpenAI's Files + Batches, Anthropic's Message Batches.
BatchAPIName = Literal["openai", "anthropic"]
#: What a request can ask for beyond messages and ``max_tokens``: several choices, logprobs, a schema.
Capability = Literal["n", "logprobs", "structured_output", "instructions_role"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFamily:
    """What a request to one family of models carries (``families.shape_request``); a judge's own
    ``token_param``, ``send_temperature`` and ``reasoning_budget`` win over it."""

    name: str
    """The family's name, as ``harness judges check`` reports it."""
    prefixes: tuple[str, ...]
    """A model is in the family when its name, lower-cased and without a gateway prefix, starts with one of these."""
    token_param: TokenParam = "max_tokens"
    """The body field that carries the completion budget."""
    send_temperature: bool = True
    """False: the model refuses any temperature but its default, so none is sent."""
    reasoning_budget: int = 0
    """Completion tokens added to the rubric's ``max_tokens`` for hidden reasoning."""
    reasoning: bool = False
    """A reasoning model in the capabilities table (its own row: it refuses logprobs)."""
    system_role: Literal["system", "developer"] = "system"
    """The role the rubric's instructions (the system message) are sent with: OpenAI's reasoning
    models take them as ``developer`` (its docs: developer messages replace system messages from
    o1 on). The wire spelling of one message: a family's own role is not part of the cache key,
    a judge's ``instructions_role`` that differs from it is (``cache/keys._extras``)."""


#: A model no family claims: ``max_tokens``, temperature sent, no reasoning budget.
CHAT = ModelFamily(name="chat", prefixes=())


def no_auth(key: str | None) -> dict[str, str]:
    """No headers: a provider that reads no key."""
    return {}


def bare_model(model: str) -> str:
    """The model name without a gateway's provider prefix (``openai/gpt-4o-mini`` → ``gpt-4o-mini``)."""
    return model.rsplit("/", 1)[-1].lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderProfile:
    """Everything the harness knows about one provider of judges: where it is, how it is called,
    what its requests accept, and what it reports back."""

    name: str
    """The config's ``provider``, and the registry's key."""
    title: str
    """What a reader is told the provider is, in refusals ("Anthropic's Messages API")."""
    judge: str
    """The judge class, ``"package.module:Class"``; imported only when a judge is made (aiohttp,
    the openai SDK and llama.cpp load only when used)."""
    usage: Callable[[Any], Usage | None]
    """The reader of its replies' ``usage`` (``harness/usage.py``): its field names made a ``Usage``."""
    default_base_url: str | None
    """The public API's base URL; None: the judge runs in this process and reaches no network."""
    base_url_env: str | None = None
    """The environment variable that overrides ``default_base_url`` (a judge's ``base_url`` wins over both)."""
    version_path: str = ""
    """Appended once to the base URL for the API root (Anthropic's ``/v1``; an OpenAI base URL carries its own)."""
    key_env: str | None = None
    """The API key's default environment variable (a judge's ``api_key_env`` wins); None: no key is read."""
    auth_headers: Callable[[str | None], dict[str, str]] = no_auth
    """The headers a request carries for a key (None: no key is set): the key's header, any API version."""
    models_path: str = "/models"
    """The path under the API root that lists its models (``harness judges check``), with any paging query."""
    batch_api: BatchAPIName | None = None
    """The batch API that serves it (``harness batch``); None: it has none."""
    supports_n: bool = False
    """Several choices in one request (``samples_via = "n"``)."""
    supports_logprobs: bool = False
    """Top logprobs per token (``logprobs = true``, G-Eval)."""
    supports_structured_output: bool = False
    """A JSON Schema the reply must follow (``structured_output = true``)."""
    supports_instructions_role: bool = False
    """The instructions travel as a message whose role a judge may choose (``instructions_role``);
    False where they have a place of their own (Anthropic's ``system`` field, a chat template)."""
    temperature_max: float = 2.0
    """The highest temperature sent; a judge's higher one is capped to it."""
    model_families: tuple[ModelFamily, ...] = ()
    """Its models' request shapes, first match wins; a model none claims is ``CHAT``."""
    capability_family: CapabilityFamily | None = None
    """Its judges' row in the capabilities table; None: a chat or a reasoning model, by ``model_families``."""
    priced: bool = True
    """Its models are looked up in the price tables (prices, context windows, retirement dates);
    False for a judge that costs nothing and never retires."""

    @property
    def in_process(self) -> bool:
        """The judge runs in this process: no URL, no network."""
        return self.default_base_url is None

    def family_of(self, model: str) -> ModelFamily:
        """The family of ``model`` among this provider's (``CHAT`` when none claims it)."""
        name = bare_model(model)
        return next((f for f in self.model_families if name.startswith(f.prefixes)), CHAT)

    def root(self, base_url: str) -> str:
        """``base_url`` with the version path added once (``https://api.anthropic.com`` and
        ``https://api.anthropic.com/v1`` both give ``.../v1``)."""
        base = base_url.rstrip("/")
        path = self.version_path
        return base if not path or base.endswith(path) else base + path

    def cannot(self, option: Capability) -> str | None:
        """Why this provider cannot honour ``option``, or None: the one wording of its limits, for
        the refusal before a run and the capabilities table."""
        if option == "n" and not self.supports_n:
            return f'{self.title} has no "n" (several choices per request): set samples_via = "requests"'
        if option == "logprobs" and not self.supports_logprobs:
            return f"{self.title} returns no logprobs: set logprobs = false"
        if option == "structured_output" and not self.supports_structured_output:
            return f"{self.title} cannot follow a JSON Schema: set structured_output = false"
        if option == "instructions_role" and not self.supports_instructions_role:
            return f"{self.title} takes the instructions in a place of its own, not as a message of a role: remove instructions_role"
        return None
