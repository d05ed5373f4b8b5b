"""From a config file and command-line options to a checked :class:`RunPlan`: the one "plan" of a run.

Everything a user can get wrong is checked here, before a transcript is read or a judge called:
the config, the rubrics asked for, judges' API-key variables, and option combinations.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from ..cache.base import DEFAULT_LEASE_S
from ..cache.location import CacheLocation, parse_location
from ..config import DEFAULT_CACHE, HarnessConfig, JudgeConfig, check_weights, load_config, local_judge_config
from ..cost.prices import load_price_table, with_prices
from ..errors import ConfigError, UserInputError
from ..rubrics.rubric import Rubric, load_rubrics
from .shard import Shard, parse_shard

CacheMode = Literal["read-write", "refresh", "off", "offline"]


@dataclass(slots=True)
class RunOptions:
    """What ``harness run`` takes; every field has the CLI's default."""

    input: Path
    out: Path | None = None
    config: Path | None = None
    rubrics: list[str] = field(default_factory=list)
    prompts: list[Path] = field(default_factory=list)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None
    #: a SQLite file path or a postgresql:// URL
    cache: Path | str | None = None
    refresh: bool = False
    no_cache: bool = False
    offline: bool = False
    limit: int | None = None
    on_bad_record: Literal["fail", "skip"] = "fail"
    progress: bool = True
    max_cost: float | None = None
    #: "i/n": judge only the i-th of n deterministic slices of the transcripts (see ``planning.shard``)
    shard: str | None = None


@dataclass(slots=True)
class RunPlan:
    input: Path
    out: Path | None
    judges: list[JudgeConfig]
    rubrics: list[Rubric] | None  # None: every rubric the transcripts can feed (decided after the scan)
    available_rubrics: dict[str, Rubric]
    composites: dict[str, dict[str, float]]
    #: a SQLite file path or a PostgreSQL URL (``cache.location``)
    cache_path: CacheLocation | None
    cache_mode: CacheMode
    limit: int | None
    on_bad_record: Literal["fail", "skip"]
    max_cost: float | None = None
    cache_lease_s: float = DEFAULT_LEASE_S
    shard: Shard | None = None

    def select_rubrics(self, inputs_seen: set[str]) -> list[Rubric]:
        """The rubrics asked for, or by default every rubric at least one transcript can feed."""
        if self.rubrics is not None:
            return self.rubrics
        chosen = [r for _, r in sorted(self.available_rubrics.items()) if set(r.inputs) <= inputs_seen]
        if not chosen:
            raise UserInputError("no rubric can be fed by these transcripts (they lack the inputs every rubric needs)")
        return chosen


def _is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _adhoc_judge(options: RunOptions) -> JudgeConfig:
    assert options.model is not None
    name = re.sub(r"[^A-Za-z0-9_.:-]", "-", options.model).strip("-") or "judge"
    return JudgeConfig(
        name=name,
        model=options.model,
        base_url=options.base_url,
        api_key_env=options.api_key_env if options.api_key_env is not None else "OPENAI_API_KEY",
    )


def _check_keys(judges: list[JudgeConfig], source: str) -> None:
    for index, judge in enumerate(judges):
        if judge.provider == "local" or not judge.api_key_env:
            continue
        if os.environ.get(judge.api_key_env):
            continue
        if _is_loopback(judge.endpoint):
            continue  # local servers (vLLM, Ollama, llama.cpp) usually take no key
        raise ConfigError(
            f"{source}: judges[{index}].api_key_env: environment variable {judge.api_key_env} is not set (judge {judge.name!r} at {judge.endpoint})"
        )


def build_plan(options: RunOptions, *, require_keys: bool = True) -> RunPlan:
    """Check everything; ``require_keys=False`` for commands that never call a judge (estimate)."""
    if options.refresh and options.no_cache:
        raise ConfigError("--refresh and --no-cache cannot be used together")
    if options.offline and (options.refresh or options.no_cache):
        raise ConfigError("--offline replays from the cache; it cannot be combined with --refresh or --no-cache")
    if options.limit is not None and options.limit < 1:
        raise ConfigError("--limit must be at least 1")
    if options.max_cost is not None and not options.max_cost >= 0:
        raise ConfigError("--max-cost must be a non-negative number of USD")
    if options.concurrency is not None and options.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if options.config is None and (options.base_url or options.api_key_env) and not options.model:
        raise ConfigError("--base-url and --api-key-env describe an ad-hoc judge: give --model too")

    config: HarnessConfig = load_config(options.config)
    source = str(options.config) if options.config else "command line"
    judges = list(config.judges)
    if options.model:
        judges.append(_adhoc_judge(options))
    if not judges:
        judges = [local_judge_config()]
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: two judges share the name {next(n for n in names if names.count(n) > 1)!r}")
    user_prices = load_price_table(config.price_table) if config.price_table else None
    judges = [with_prices(j, user_prices) for j in judges]
    if options.concurrency is not None:
        judges = [j.model_copy(update={"max_concurrency": options.concurrency}) for j in judges]
    if require_keys and not options.offline:
        _check_keys(judges, source)

    available = load_rubrics([*config.prompts, *options.prompts])
    wanted = options.rubrics or config.rubrics
    rubrics = None
    if wanted:
        unknown = [name for name in wanted if name not in available]
        if unknown:
            raise UserInputError(f"unknown rubric {unknown[0]!r}; available: {', '.join(sorted(available))}")
        rubrics = [available[name] for name in dict.fromkeys(wanted)]

    composites = config.all_composites()
    for name, weights in composites.items():
        try:
            check_weights(name, weights)
        except ValueError as exc:
            raise ConfigError(f"{source}: composites.{name}: {exc}") from None
        unknown = [r for r in weights if r not in available]
        if unknown:
            raise ConfigError(f"{source}: composites.{name}: unknown rubric {unknown[0]!r}")

    if options.no_cache:
        mode: CacheMode = "off"
    elif options.offline:
        mode = "offline"
    elif options.refresh:
        mode = "refresh"
    else:
        mode = "read-write"
    cache_path = None if mode == "off" else parse_location(options.cache or config.cache or DEFAULT_CACHE)
    shard = parse_shard(options.shard) if options.shard is not None else None
    return RunPlan(
        input=options.input,
        out=options.out,
        judges=judges,
        rubrics=rubrics,
        available_rubrics=available,
        composites=composites,
        cache_path=cache_path,
        cache_mode=mode,
        limit=options.limit,
        on_bad_record=options.on_bad_record,
        max_cost=options.max_cost,
        cache_lease_s=config.cache_lease_s,
        shard=shard,
    )
