"""Anthropic's Messages API, natively (``provider = "anthropic"``).

An Anthropic base URL does not carry its version (``https://api.anthropic.com``, as the SDK and
``ANTHROPIC_BASE_URL`` have it): ``/v1`` is added once. The key goes in ``x-api-key`` with the
API version beside it; temperatures are 0..1; ``/models`` is paged (20 by default, at most 1000).
"""

from __future__ import annotations

from ..usage import anthropic_usage
from .profile import ProviderProfile

#: The long-stable API version, whose Messages API takes ``temperature``. The ``anthropic`` SDK 2.10
#: sends "2026-10-21", whose request type has no temperature at all; a judge wants temperature 0.
ANTHROPIC_VERSION = "2023-06-01"


def api_key_headers(key: str | None) -> dict[str, str]:
    """The API version, and the key in ``x-api-key`` (not ``Authorization: Bearer``)."""
    return {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}


PROFILE = ProviderProfile(
    name="anthropic",
    title="Anthropic's Messages API",
    judge="harness.judges.anthropic:AnthropicJudge",
    usage=anthropic_usage,
    default_base_url="https://api.anthropic.com",
    base_url_env="ANTHROPIC_BASE_URL",
    version_path="/v1",
    key_env="ANTHROPIC_API_KEY",
    auth_headers=api_key_headers,
    models_path="/models?limit=1000",
    batch_api="anthropic",
    supports_structured_output=True,
    temperature_max=1.0,
    capability_family="anthropic",
)
