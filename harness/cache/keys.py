"""The cache key: a hash of exactly what changes a judge's answer.

``request_key`` is the one function that computes a request's key, from the judge's
``config.Sampling`` and the request built from it; every path (run, ``--offline``, estimate,
batch submit/collect/export/import, shards, claims, merge) reads the key it wrote onto the job and
its request, and a batch result is matched by the ``custom_id`` it carries, which is that key.

In: judge model, endpoint (base URL), rendered messages, sampling parameters (temperature,
max_tokens, seed), rubric name and version; and, only when used, the sample index of a repeated
sample (1..k-1) and the number of top logprobs asked for. Out: timeouts, attempts, concurrency, rate limits,
prices and API keys — changing those must still hit the cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Sampling
    from ..judges.base import JudgeRequest

KEY_FORMAT = 2


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
    extras: Sequence[str] = (),
    sample: int = 0,
    logprobs: int | None = None,
) -> str:
    """sha256 over the length-prefixed fields. Hashing the fields directly instead of a JSON
    document of them is 3-4× faster (bench/estimate_bench.py computes 400,000 keys)."""
    fields = [str(KEY_FORMAT), model, base_url, repr(float(temperature)), str(max_tokens), repr(seed), rubric, rubric_version]
    # Repeated samples and logprob requests enter the key only when used, so every key written
    # without them is unchanged (sample 0 is the plain judgment: samples = k reuses it).
    if sample:
        fields.append(f"sample={sample}")
    if logprobs is not None:
        fields.append(f"top_logprobs={logprobs}")
    for message in messages:
        fields += (message["role"], message["content"])
    if extras:  # request-shape options (judges/families.py); absent, the key is what it always was
        fields += ("extras", *extras)
    data = [field.encode("utf-8") for field in fields]
    # The lengths up front make the byte stream unambiguous: no two field lists give the same one.
    lengths = ",".join(str(len(d)) for d in data).encode()
    return hashlib.sha256(lengths + b"|" + b"".join(data)).hexdigest()


def request_key(sampling: Sampling, request: JudgeRequest, *, rubric: str, rubric_version: str, sample: int = 0) -> str:
    """The cache key of ``request``, sample ``sample`` of a rubric, asked of the judge whose
    sampling is ``sampling``. Model and endpoint come from the sampling; the budget, seed, schema
    and logprobs from the request as it is sent (a rubric's ``max_tokens``, a reasoning budget and
    ``seed + sample`` are resolved there); nothing else of a judge can reach it."""
    return cache_key(
        model=sampling.model,
        base_url=sampling.endpoint,
        messages=request.messages,
        temperature=sampling.temperature,
        max_tokens=request.max_tokens,
        seed=request.seed,
        rubric=rubric,
        rubric_version=rubric_version,
        extras=_extras(request),
        sample=sample,
        logprobs=request.top_logprobs,
    )


def _extras(request: JudgeRequest) -> list[str]:
    """The request-shape options a key hashes beyond the classic fields: only what differs from a
    plain request, so the keys of judges that use none of it are unchanged."""
    extras: list[str] = []
    if not request.send_temperature:
        extras.append("temperature:unsent")
    if request.reasoning_effort is not None:
        extras.append(f"reasoning_effort:{request.reasoning_effort}")
    if request.schema is not None:
        extras.append("schema:" + json.dumps(request.schema, sort_keys=True))
    return extras
