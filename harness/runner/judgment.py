"""One judgment: the outcome of a (transcript, rubric, judge) triple, as written to judgments.jsonl.

Three outcomes only: ``scored``; ``unscored`` with a reason (missing_input, no_score_found,
refusal, cache_miss, interrupted, ...); ``failed`` with the error. Never a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..config import JudgeConfig
from ..cost.prices import cost_usd


@dataclass(slots=True)
class Judgment:
    transcript_id: str
    rubric: str
    rubric_version: str
    judge: str
    status: str
    score: float | None = None
    raw_score: float | None = None
    clamped: bool = False
    reason: str | None = None
    error: str | None = None
    raw_output: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    attempts: int = 0
    #: attempts answered 2xx with an unusable body: billed by the provider, then retried
    billed_retries: int = 0
    cached: bool = False
    cache_key: str | None = None
    #: a categorical rubric's label (its judgments have no score)
    label: str | None = None

    def as_dict(self) -> dict[str, Any]:
        # A plain field-by-field dict: dataclasses.asdict deep-copies every value and was a
        # quarter of an offline replay's CPU (bench/throughput.py, case 4).
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(f.name for f in fields(Judgment))


def call_cost(judge: JudgeConfig, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """USD for one call from the judge's per-1M prices; None when a price or the usage is unknown."""
    if not judge.has_prices or prompt_tokens is None or completion_tokens is None:
        return None
    assert judge.input_price_per_1m is not None and judge.output_price_per_1m is not None
    return cost_usd(prompt_tokens, completion_tokens, judge.input_price_per_1m, judge.output_price_per_1m)
