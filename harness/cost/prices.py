"""Judge prices: the shipped table (``harness/data/prices.toml``), a user's table, and the judge's own.

Precedence, highest first: the judge's ``input_price_per_1m``/``output_price_per_1m``; the user's
``price_table``; the shipped table. A model found nowhere has no price, and its cost is reported
as unknown, never as $0.
"""

from __future__ import annotations

import math
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

    @field_validator("*")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
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
    for table in (user_table, shipped_table()):
        if table is not None and model in table.models:
            return table.models[model]
    return None


def with_prices(judge: JudgeConfig, user_table: PriceTable | None = None) -> JudgeConfig:
    """The judge with prices filled in from the tables where its config gives none."""
    if judge.has_prices or judge.provider == "local":
        return judge
    price = lookup(judge.model, user_table)
    if price is None:
        return judge
    return judge.model_copy(
        update={
            "input_price_per_1m": judge.input_price_per_1m if judge.input_price_per_1m is not None else price.input,
            "output_price_per_1m": judge.output_price_per_1m if judge.output_price_per_1m is not None else price.output,
        }
    )


def with_batch_prices(judge: JudgeConfig, user_table: PriceTable | None = None) -> JudgeConfig:
    """The judge priced at its provider's batch rates: ``batch_input``/``batch_output`` of the
    user's table, else of the shipped one. A judge's own ``input_price_per_1m`` and
    ``output_price_per_1m`` are live prices; they are kept only for a model no table gives batch
    prices for, so a batch is never priced below what is known."""
    price = lookup(judge.model, user_table)
    if price is None or price.batch_input is None or price.batch_output is None:
        return with_prices(judge, user_table)
    return judge.model_copy(update={"input_price_per_1m": price.batch_input, "output_price_per_1m": price.batch_output})


def cost_usd(prompt_tokens: float, completion_tokens: float, input_per_1m: float, output_per_1m: float) -> float:
    """USD for one call. Seed 000's "token cost" with per-1K prices is the same computation:
    25,474/1000 × 0.000075 + 2,080/1000 × 0.0003 = $0.00253455 (per-1M: 0.075 and 0.30)."""
    return (prompt_tokens * input_per_1m + completion_tokens * output_per_1m) / 1_000_000


def call_cost(judge: JudgeConfig, prompt_tokens: float | None, completion_tokens: float | None) -> float | None:
    """USD for one call of ``judge`` at its per-1M prices; None when a price or the usage is unknown.

    The one place a call is priced: the run, the budget and the estimate all come here.
    """
    if prompt_tokens is None or completion_tokens is None:
        return None
    if judge.input_price_per_1m is None or judge.output_price_per_1m is None:
        return None
    return cost_usd(prompt_tokens, completion_tokens, judge.input_price_per_1m, judge.output_price_per_1m)
