"""Judge prices: the shipped table (``harness/data/prices.toml``), a user's table, and the judge's own.

Precedence, highest first: the judge's ``input_price_per_1m``/``output_price_per_1m``; the user's
``price_table``; the shipped table. A model found nowhere has no price, and its cost is reported
as unknown, never as $0.
"""

from __future__ import annotations

import math
from datetime import date
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..config import JudgeConfig, load_toml_model

SHIPPED_TABLE = Path(__file__).resolve().parents[1] / "data" / "prices.toml"


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # strict: TOML gives numbers as numbers, so a quoted "0.5" or a `true` is a mistake, not a price.
    input: float = Field(ge=0, strict=True)
    output: float = Field(ge=0, strict=True)
    cached_input: float | None = Field(default=None, ge=0, strict=True)
    batch_input: float | None = Field(default=None, ge=0, strict=True)
    batch_output: float | None = Field(default=None, ge=0, strict=True)
    #: prompt tokens written to the provider's prompt cache (Anthropic's 5-minute cache writes)
    cache_write_input: float | None = Field(default=None, ge=0, strict=True)
    #: prompt + completion tokens the model takes (the judge's default ``context_window``)
    context_window: int | None = Field(default=None, gt=0, strict=True)
    # Dates are TOML dates (``checked = 2026-11-21``, unquoted): strict, so a quoted one is refused.
    #: the day these prices were last checked against the provider's page (``staleness.stale_prices``)
    checked: date | None = Field(default=None, strict=True)
    #: the day the provider shuts the model down (``staleness.retirements``)
    retires: date | None = Field(default=None, strict=True)
    #: the provider's recommended replacement, where one is published
    successor: str | None = Field(default=None, min_length=1, strict=True)

    @field_validator("*")
    @classmethod
    def _finite(cls, value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: dict[str, ModelPrice] = Field(default_factory=dict)


def load_price_table(path: str | Path) -> PriceTable:
    return load_toml_model(Path(path), PriceTable, "price table")


@lru_cache(maxsize=1)
def shipped_table() -> PriceTable:
    return load_price_table(SHIPPED_TABLE)


def lookup(model: str, user_table: PriceTable | None = None) -> ModelPrice | None:
    """The model's entry; a gateway's provider prefix (``openai/gpt-4o-mini``,
    ``openrouter/anthropic/claude-haiku-4-5``) is dropped when the full name is not listed."""
    found = entry(model, user_table)
    return None if found is None else found[1]


def entry(model: str, user_table: PriceTable | None = None) -> tuple[str, ModelPrice] | None:
    """The name the model is listed under and its entry (``lookup``'s rule)."""
    names = [model]
    while "/" in names[-1]:
        names.append(names[-1].split("/", 1)[1])
    for name in names:
        for table in (user_table, shipped_table()):
            if table is not None and name in table.models:
                return name, table.models[name]
    return None


def with_prices(judge: JudgeConfig, user_table: PriceTable | None = None) -> JudgeConfig:
    """The judge with prices (and its context window) filled in from the tables where its config
    gives none."""
    if not judge.profile.priced:
        return judge
    price = lookup(judge.model, user_table)
    if price is None:
        return judge
    own_prices = judge.has_prices  # a judge priced in its config keeps its own price for cached tokens too

    def pick(field: str, value: float | int | None) -> float | int | None:
        current = getattr(judge, field)
        return current if current is not None or (own_prices and field.endswith("price_per_1m")) else value

    return judge.model_copy(
        update={
            "input_price_per_1m": pick("input_price_per_1m", price.input),
            "output_price_per_1m": pick("output_price_per_1m", price.output),
            "cached_input_price_per_1m": pick("cached_input_price_per_1m", price.cached_input),
            "cache_write_price_per_1m": pick("cache_write_price_per_1m", price.cache_write_input),
            "context_window": pick("context_window", price.context_window),
        }
    )


def with_batch_prices(judge: JudgeConfig, user_table: PriceTable | None = None) -> JudgeConfig:
    """The judge priced at its provider's batch rates: ``batch_input``/``batch_output`` of the
    user's table, else of the shipped one. A judge's own ``input_price_per_1m`` and
    ``output_price_per_1m`` are live prices; they are kept only for a model no table gives batch
    prices for, so a batch is never priced below what is known. Prompt-cache reads and writes get
    the batch's input discount too (the providers' multipliers stack with it)."""
    price = lookup(judge.model, user_table)
    if price is None or price.batch_input is None or price.batch_output is None:
        return with_prices(judge, user_table)
    discount = price.batch_input / price.input if price.input else 1.0
    cache: dict[str, float | None] = {}
    for field, listed in (("cached_input_price_per_1m", price.cached_input), ("cache_write_price_per_1m", price.cache_write_input)):
        live = getattr(judge, field) if getattr(judge, field) is not None else listed
        cache[field] = None if live is None else live * discount
    return judge.model_copy(update={"input_price_per_1m": price.batch_input, "output_price_per_1m": price.batch_output, **cache})


def cost_usd(prompt_tokens: float, completion_tokens: float, input_per_1m: float, output_per_1m: float) -> float:
    """USD for one call. Seed 000's "token cost" with per-1K prices is the same computation:
    25,474/1000 × 0.000075 + 2,080/1000 × 0.0003 = $0.00253455 (per-1M: 0.075 and 0.30)."""
    return (prompt_tokens * input_per_1m + completion_tokens * output_per_1m) / 1_000_000


def call_cost(
    judge: JudgeConfig,
    prompt_tokens: float | None,
    completion_tokens: float | None,
    cached_tokens: float | None = None,
    cache_write_tokens: float | None = None,
) -> float | None:
    """USD for one call of ``judge`` at its per-1M prices; None when a price or the usage is unknown.

    ``prompt_tokens`` is the whole prompt; ``cached_tokens`` of it (read from the provider's prompt
    cache) are priced at the cached-input price and ``cache_write_tokens`` (Anthropic's cache
    writes) at the cache-write price, each at the plain input price when the judge has none.
    Reasoning tokens are part of ``completion_tokens`` and priced as output.
    The one place a call is priced: the run, the budget and the estimate all come here.
    """
    if prompt_tokens is None or completion_tokens is None:
        return None
    if judge.input_price_per_1m is None or judge.output_price_per_1m is None:
        return None
    cost = cost_usd(prompt_tokens, completion_tokens, judge.input_price_per_1m, judge.output_price_per_1m)
    for tokens, price in ((cached_tokens, judge.cached_input_price_per_1m), (cache_write_tokens, judge.cache_write_price_per_1m)):
        if tokens and price is not None:
            cost += tokens * (price - judge.input_price_per_1m) / 1_000_000
    return cost


def prompt_cache_saving(judge: JudgeConfig, cached_tokens: float) -> float:
    """USD the provider's prompt cache saved on ``cached_tokens``: the input price minus the
    cached-input price (0 when either is unknown)."""
    if judge.input_price_per_1m is None or judge.cached_input_price_per_1m is None:
        return 0.0
    return cached_tokens * (judge.input_price_per_1m - judge.cached_input_price_per_1m) / 1_000_000
