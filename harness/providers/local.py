"""The embedded judge (``provider = "local"``): SmolLM2-135M run by llama.cpp in a worker process
(``judges/local.py``). No URL, no key, no batch API, free; it follows no JSON Schema, returns no
logprobs and makes one choice per request."""

from __future__ import annotations

from ..usage import llama_usage
from .profile import ProviderProfile

PROFILE = ProviderProfile(
    name="local",
    title="the embedded local judge",
    judge="harness.judges.local:LocalLlamaJudge",
    usage=llama_usage,
    default_base_url=None,
    capability_family="local",
    priced=False,
)
