"""The cache key: a hash of exactly what changes a judge's answer.

In: judge model, endpoint (base URL), rendered messages, sampling parameters (temperature,
max_tokens, seed), rubric name and version. Out: timeouts, attempts, concurrency, rate limits,
prices and API keys — changing those must still hit the cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

KEY_FORMAT = 1


def cache_key(
    *,
    model: str,
    base_url: str,
    messages: Sequence[dict[str, str]],
    temperature: float,
    max_tokens: int,
    seed: int | None,
    rubric: str,
    rubric_version: str,
) -> str:
    payload = {
        "format": KEY_FORMAT,
        "model": model,
        "base_url": base_url,
        "messages": list(messages),
        "temperature": float(temperature),
        "max_tokens": max_tokens,
        "seed": seed,
        "rubric": rubric,
        "rubric_version": rubric_version,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
