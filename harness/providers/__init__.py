"""The providers of judges: one profile each (``profile.ProviderProfile``), found through one registry.

A provider is one module here, holding its ``PROFILE``, and one entry in ``PROFILES``; a provider
that speaks a protocol the harness does not know also brings its Judge class. Everything else asks
the registry:

- the config accepts exactly its names as ``provider`` (``config.ProviderName``), and takes a judge's
  key variable from its profile;
- ``endpoint`` and ``api_root`` make a judge's URLs, for the live judges and the batch clients alike;
- ``judges.registry.make_judge`` imports the profile's judge class, after ``unsupported`` has
  refused, before anything is sent, an option the provider cannot honour;
- ``capabilities.py`` derives the provider rows of its table from the profiles; the plan, the price
  tables and ``harness judges check`` read ``in_process``, ``priced``, ``auth_headers`` and ``models_path``.

The package sits below both the config and the judges (it imports only ``errors.py`` and
``usage.py``): the config reads profiles, the judges read the config, and neither loops back.
"""

from __future__ import annotations

import os
from typing import Protocol

from ..errors import ConfigError
from . import anthropic, local, openai, openai_sdk
from .lineage import LINEAGES, Lineage, lineage_of, same_lineage
from .profile import CHAT, Capability, CapabilityFamily, ModelFamily, ProviderProfile

__all__ = [
    "CHAT",
    "LINEAGES",
    "PROFILES",
    "Capability",
    "CapabilityFamily",
    "Lineage",
    "ModelFamily",
    "ProviderProfile",
    "api_root",
    "choices",
    "endpoint",
    "lineage_of",
    "profile_of",
    "root_of",
    "same_lineage",
    "unsupported",
]

#: Every provider, by the config's name for it.
PROFILES: dict[str, ProviderProfile] = {
    profile.name: profile
    for profile in (
        openai.PROFILE,
        openai_sdk.PROFILE,
        anthropic.PROFILE,
        local.PROFILE,
    )
}


class JudgeFields(Protocol):
    """The fields of ``config.JudgeConfig`` read here (the config asks the registry for its
    endpoint and key variable, so this package cannot import it)."""

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


def choices() -> str:
    """The providers, as a refusal lists them: ``'openai', 'anthropic' or 'local'``."""
    quoted = [repr(name) for name in PROFILES]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def profile_of(config: JudgeFields) -> ProviderProfile:
    try:
        return PROFILES[config.provider]
    except KeyError:
        raise ConfigError(f"judge {config.name!r}: unknown provider {config.provider!r} (known: {', '.join(PROFILES)})") from None


def endpoint(config: JudgeFields) -> str:
    """The base URL a judge calls: its ``base_url``, else the provider's variable, else its default
    ("local" for a judge run in this process). This is what the cache key holds."""
    profile = profile_of(config)
    if profile.default_base_url is None:
        return "local"
    env = os.environ.get(profile.base_url_env) if profile.base_url_env else None
    return (config.base_url or env or profile.default_base_url).rstrip("/")


def api_root(config: JudgeFields) -> str:
    """The base URL with the provider's version path: every request path goes after it
    (``/chat/completions``, ``/messages``, ``/files``, ``/batches``, ``/messages/batches``)."""
    return profile_of(config).root(endpoint(config))


def root_of(provider: str, base_url: str) -> str:
    """``base_url`` with ``provider``'s version path added once: the one rule, for the live judges
    and the batch clients, which know a provider by name and a base URL."""
    profile = PROFILES.get(provider)
    return profile.root(base_url) if profile is not None else base_url.rstrip("/")


def unsupported(config: JudgeFields) -> str | None:
    """Why ``config`` asks for something its provider cannot do, or None: said before anything is sent."""
    profile = profile_of(config)
    asked: tuple[tuple[Capability, bool], ...] = (
        ("n", config.samples_via == "n"),
        ("logprobs", config.logprobs),
        ("structured_output", config.structured_output),
    )
    for option, wanted in asked:
        if wanted and (why := profile.cannot(option)) is not None:
            return f"judge {config.name!r}: {why}"
    return None
