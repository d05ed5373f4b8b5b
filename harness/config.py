"""Run configuration: judges, composites, cache and prompt locations, read from TOML.

``harness.toml``::

    cache = "cache/judgments.sqlite"
    prompts = ["my_prompts"]

    [[judges]]
    name = "mini"
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    input_price_per_1m = 0.15
    output_price_per_1m = 0.60

    [composites.answer_correctness]
    relevance = 0.7
    faithfulness = 0.3

With no judge configured, the run uses the embedded local judge (``provider = "local"``).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .validation import first_problem

DEFAULT_CACHE = Path("cache/judgments.sqlite")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_COMPOSITES: dict[str, dict[str, float]] = {
    # seed 003, "Answer Correctness": relevance 70 %, faithfulness 30 %.
    "answer_correctness": {"relevance": 0.7, "faithfulness": 0.3},
}
_WEIGHT_TOLERANCE = 1e-9
M = TypeVar("M", bound=BaseModel)


class JudgeConfig(BaseModel):
    """One judge endpoint. Sampling fields (model, base_url, temperature, max_tokens) enter the cache
    key; the others (timeouts, limits, prices, the key's variable name) do not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
    provider: Literal["openai", "openai-sdk", "local"] = "openai"
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, gt=0)
    seed: int | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=6, ge=1, le=20)
    max_concurrency: int = Field(default=16, ge=1, le=4096)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    input_price_per_1m: float | None = Field(default=None, ge=0)
    output_price_per_1m: float | None = Field(default=None, ge=0)
    #: Token counting for estimates: "o200k_base", "cl100k_base" or "approx"; default: by model name.
    tokenizer: str | None = None

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str | None) -> str | None:
        known = ("o200k_base", "cl100k_base", "approx")
        if value is not None and value not in known:
            raise ValueError(f"unknown tokenizer {value!r} (known: {', '.join(known)})")
        return value

    @field_validator("input_price_per_1m", "output_price_per_1m", "rpm", "tpm")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def endpoint(self) -> str:
        """The base URL actually called: configured, else OPENAI_BASE_URL, else OpenAI's."""
        if self.provider == "local":
            return "local"
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    @property
    def has_prices(self) -> bool:
        return self.input_price_per_1m is not None and self.output_price_per_1m is not None


def local_judge_config() -> JudgeConfig:
    """The embedded judge: SmolLM2-135M-Instruct run in-process by llama-cpp-python. Its scores are
    not meaningful; it exists so the pipeline runs anywhere without a key."""
    return JudgeConfig(
        name="local-smollm2",
        provider="local",
        model="SmolLM2-135M-Instruct-Q4_1",
        max_concurrency=16,  # the judge keeps its own limit: 4 judgments per worker process, a worker per core
        max_tokens=48,
        seed=0,
        input_price_per_1m=0.0,
        output_price_per_1m=0.0,
    )


class HarnessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: a SQLite file path, or a postgresql:// URL kept as text (a Path would fold its //)
    cache: Path | str | None = None
    #: seconds a claim on a judgment in flight lives without renewal (a killed worker's keys are free after this)
    cache_lease_s: float = Field(default=30.0, gt=0)
    price_table: Path | None = None
    prompts: list[Path] = Field(default_factory=list)
    rubrics: list[str] | None = None
    judges: list[JudgeConfig] = Field(default_factory=list)
    composites: dict[str, dict[str, float]] = Field(default_factory=dict)

    # Field validators, so an error names the field it is about ("judges: ...", "composites: ...").
    @field_validator("cache", mode="before")
    @classmethod
    def _cache_location(cls, value: object) -> object:
        if isinstance(value, str) and "://" not in value:
            return Path(value)
        return value

    @field_validator("judges")
    @classmethod
    def _unique_names(cls, judges: list[JudgeConfig]) -> list[JudgeConfig]:
        first: dict[str, int] = {}
        for index, judge in enumerate(judges):
            if judge.name in first:
                raise ValueError(f"name {judge.name!r} is used by judges[{first[judge.name]}] and judges[{index}]")
            first[judge.name] = index
        return judges

    @field_validator("composites")
    @classmethod
    def _weights(cls, composites: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, weights in composites.items():
            check_weights(name, weights)
        return composites

    def all_composites(self) -> dict[str, dict[str, float]]:
        return {**DEFAULT_COMPOSITES, **self.composites}


def check_weights(name: str, weights: dict[str, float]) -> None:
    if not weights:
        raise ValueError(f"composite {name!r} has no weights")
    for rubric, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"composite {name!r}: weight of {rubric!r} must be a non-negative number")
    total = math.fsum(weights.values())
    if abs(total - 1.0) > _WEIGHT_TOLERANCE:
        raise ValueError(f"composite {name!r}: weights must sum to 1, they sum to {total:g}")


def load_toml_model(path: Path, model: type[M], what: str) -> M:
    """Read a TOML file into ``model``; every problem is one ConfigError line naming file and field."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc)}") from None


def load_config(path: str | Path | None) -> HarnessConfig:
    """Read ``harness.toml``; every problem is a one-line ConfigError naming the file and field."""
    if path is None:
        return HarnessConfig()
    path = Path(path)
    config = load_toml_model(path, HarnessConfig, "config file")
    # Relative paths in the file are relative to the file, as users expect of a config.
    base = path.parent
    config.prompts = [p if p.is_absolute() else base / p for p in config.prompts]
    if isinstance(config.cache, Path) and not config.cache.is_absolute():
        config.cache = base / config.cache
    if config.price_table is not None and not config.price_table.is_absolute():
        config.price_table = base / config.price_table
    return config


def _describe(exc: ValidationError) -> str:
    return str(first_problem(exc, noun="key", whole="config", brackets=True))


def api_key_for(judge: JudgeConfig) -> str | None:
    """The judge's API key, read from its environment variable at call time and kept nowhere else."""
    if judge.provider == "local":
        return None
    return os.environ.get(judge.api_key_env) or None
