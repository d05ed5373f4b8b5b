"""Endpoints: the judges that draw on one server's allowance, and the limits they share.

An endpoint is a base URL and an API key. Judges with the same pair share one set of
``max_concurrency`` slots and one rpm/tpm limiter in a run (the smallest any of them states), and
``harness estimate`` bounds their duration together.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import JudgeConfig


def endpoint_id(judge: JudgeConfig) -> str:
    """Which server allowance a judge draws on: its base URL and its API key (hashed, never kept)."""
    key = os.environ.get(judge.api_key_env, "") if judge.api_key_env else ""
    return f"{judge.endpoint} {hashlib.sha256(key.encode()).hexdigest()[:16]}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The judges of one endpoint and the limits they share."""

    id: str
    judges: tuple[JudgeConfig, ...]
    max_concurrency: int
    rpm: float | None
    tpm: float | None

    @classmethod
    def group(cls, judges: Sequence[JudgeConfig]) -> list[Endpoint]:
        by_id: dict[str, list[JudgeConfig]] = {}
        for judge in judges:
            by_id.setdefault(endpoint_id(judge), []).append(judge)
        return [
            cls(
                id=eid,
                judges=tuple(group),
                max_concurrency=min(j.max_concurrency for j in group),
                rpm=min((j.rpm for j in group if j.rpm), default=None),
                tpm=min((j.tpm for j in group if j.tpm), default=None),
            )
            for eid, group in by_id.items()
        ]
