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
    """sha256 over the length-prefixed fields (:class:`KeyHasher`)."""
    hasher = KeyHasher(
        model=model,
        base_url=base_url,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        rubric=rubric,
        rubric_version=rubric_version,
        extras=extras,
        sample=sample,
        logprobs=logprobs,
    )
    return hasher.key(messages)


class KeyHasher:
    """The key of every request that differs only in its messages: the other fields are encoded
    once (a run keys each (rubric, judge, sample) this way for every transcript).

    The hash is sha256 over the fields' UTF-8 lengths, ``|``, then the fields themselves. Hashing
    the fields directly instead of a JSON document of them is 3-4x faster (bench/estimate_bench.py
    computes 400,000 keys); the lengths up front make the byte stream unambiguous: no two field
    lists give the same one."""

    __slots__ = ("_head", "_head_lengths", "_tail", "_tail_lengths")

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        rubric: str,
        rubric_version: str,
        extras: Sequence[str] = (),
        sample: int = 0,
        logprobs: int | None = None,
    ) -> None:
        head = [str(KEY_FORMAT), model, base_url, repr(float(temperature)), str(max_tokens), repr(seed), rubric, rubric_version]
        # Repeated samples and logprob requests enter the key only when used, so every key written
        # without them is unchanged (sample 0 is the plain judgment: samples = k reuses it).
        if sample:
            head.append(f"sample={sample}")
        if logprobs is not None:
            head.append(f"top_logprobs={logprobs}")
        # request-shape options (judges/families.py); absent, the key is what it always was
        tail = ["extras", *extras] if extras else []
        self._head, self._head_lengths = _encoded(head)
        self._tail, self._tail_lengths = _encoded(tail)

    def key(self, messages: Sequence[dict[str, str]]) -> str:
        lengths = self._head_lengths.copy()
        data = [self._head]
        for message in messages:
            role, content = message["role"].encode(), message["content"].encode()
            data += role, content
            lengths += str(len(role)), str(len(content))
        lengths += self._tail_lengths
        data.append(self._tail)
        return hashlib.sha256(",".join(lengths).encode() + b"|" + b"".join(data)).hexdigest()


def _encoded(fields: list[str]) -> tuple[bytes, list[str]]:
    data = [field.encode("utf-8") for field in fields]
    return b"".join(data), [str(len(d)) for d in data]


def request_key(sampling: Sampling, request: JudgeRequest, *, rubric: str, rubric_version: str, sample: int = 0) -> str:
    """The cache key of ``request``, sample ``sample`` of a rubric, asked of the judge whose
    sampling is ``sampling``. Model and endpoint come from the sampling; the budget, seed, schema
    and logprobs from the request as it is sent (a rubric's ``max_tokens``, a reasoning budget and
    ``seed + sample`` are resolved there); nothing else of a judge can reach it."""
    return request_hasher(sampling, request, rubric=rubric, rubric_version=rubric_version, sample=sample).key(request.messages)


def request_hasher(sampling: Sampling, request: JudgeRequest, *, rubric: str, rubric_version: str, sample: int = 0) -> KeyHasher:
    """:func:`request_key` for every request shaped as ``request`` but for its messages."""
    return KeyHasher(
        model=sampling.model,
        base_url=sampling.endpoint,
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
    if request.chosen_role is not None:
        extras.append(f"instructions_role:{request.chosen_role}")
    return extras
