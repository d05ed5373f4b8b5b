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
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from . import providers
from .agent.records import ArgumentRule
from .errors import ConfigError
from .providers import ProviderProfile
from .validation import first_problem

DEFAULT_CACHE = Path("cache/judgments.sqlite")
DEFAULT_COMPOSITES: dict[str, dict[str, float]] = {
    # seed 003, "Answer Correctness": relevance 70 %, faithfulness 30 %.
    "answer_correctness": {"relevance": 0.7, "faithfulness": 0.3},
}
_WEIGHT_TOLERANCE = 1e-9
M = TypeVar("M", bound=BaseModel)


#: JudgeConfig's fields by what they are; only SAMPLING_FIELDS (with the endpoint) can change a
#: reply, so only they reach the cache key (``Sampling``). A judge's TOML may give each group as a
#: table (``[judges.sampling]``, ``[judges.limits]``, ``[judges.prices]``) or its keys flat.
SAMPLING_FIELDS = (
    "model",
    "temperature",
    "max_tokens",
    "seed",
    "token_param",
    "send_temperature",
    "reasoning_effort",
    "reasoning_budget",
    "instructions_role",
    "structured_output",
    "samples",
    "samples_via",
    "logprobs",
)
LIMIT_FIELDS = ("timeout_s", "max_attempts", "max_concurrency", "rpm", "tpm")
PRICE_FIELDS = ("input_price_per_1m", "output_price_per_1m", "cached_input_price_per_1m", "cache_write_price_per_1m")
_GROUPS = {"sampling": SAMPLING_FIELDS, "limits": LIMIT_FIELDS, "prices": PRICE_FIELDS}


class Sampling(BaseModel):
    """What a judge asks its model for, and where: everything that can change a reply and nothing
    else. The cache key is computed from this value and the request (``cache/keys.request_key``),
    so a timeout, a price or a rate limit cannot drift into it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    endpoint: str
    temperature: float
    max_tokens: int
    seed: int | None
    token_param: Literal["max_tokens", "max_completion_tokens"] | None
    send_temperature: bool | None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None
    reasoning_budget: int | None
    instructions_role: Literal["system", "developer"] | None = None
    structured_output: bool
    samples: int
    samples_via: Literal["requests", "n"]
    logprobs: bool


class _Registered:
    """A provider's name, checked against the registry of provider profiles (``providers/``)
    when a config is read, not when this module is imported: the names, the refusal ("Input should be
    'openai', ... or 'local'") and the JSON Schema's ``enum`` are the registry's, as a ``Literal``
    of them would give, and a provider added to the registry is accepted at once."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(_registered, json_schema_input_schema=core_schema.str_schema())

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"enum": list(providers.PROFILES), "type": "string"}


def _registered(value: object) -> str:
    if not isinstance(value, str) or value not in providers.PROFILES:
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": providers.choices()})
    return value


#: A provider the registry knows (``providers/``): what ``JudgeConfig.provider`` holds.
ProviderName = Annotated[str, _Registered]


class JudgeConfig(BaseModel):
    """One judge endpoint. Its ``sampling`` (model, endpoint, temperature, max_tokens, ...) enters
    the cache key; the rest (timeouts, limits, prices, the key's variable name) does not."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
    provider: ProviderName = "openai"
    model: str
    base_url: str | None = None
    #: default OPENAI_API_KEY, or ANTHROPIC_API_KEY for ``provider = "anthropic"``
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
    cached_input_price_per_1m: float | None = Field(default=None, ge=0)
    cache_write_price_per_1m: float | None = Field(default=None, ge=0)
    #: Token counting for estimates: "o200k_base", "cl100k_base" or "approx"; default: by model name.
    tokenizer: str | None = None
    # Request shape (harness/judges/families.py): None takes the model family's default.
    token_param: Literal["max_tokens", "max_completion_tokens"] | None = None
    send_temperature: bool | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    #: completion tokens on top of max_tokens for hidden reasoning (gpt-5, o-series: 4096)
    reasoning_budget: int | None = Field(default=None, ge=0)
    #: the role the rubric's instructions are sent with; default by model family (OpenAI's reasoning
    #: models: "developer"); set it for a reasoning model the family table does not know (OpenAI providers)
    instructions_role: Literal["system", "developer"] | None = None
    #: ask for the score as JSON Schema (response_format on OpenAI, a forced tool on Anthropic)
    structured_output: bool = False
    #: prompt + completion tokens the model takes; default from the price table for known models
    context_window: int | None = Field(default=None, gt=0)
    #: "middle": shorten the longest transcript fields of a prompt that would overflow
    truncate: Literal["none", "middle"] = "none"

    @model_validator(mode="before")
    @classmethod
    def _provider_defaults(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = _flattened(data)
        name = data.get("provider", "openai")
        # a provider's profile knows its key's variable
        profile = providers.PROFILES.get(name) if isinstance(name, str) else None
        if profile is not None and profile.key_env and "api_key_env" not in data:
            return {**data, "api_key_env": profile.key_env}
        return data

    @field_validator("structured_output")
    @classmethod
    def _structured_supported(cls, value: bool, info: ValidationInfo) -> bool:
        profile = providers.PROFILES.get(info.data.get("provider", ""))
        if value and profile is not None and (why := profile.cannot("structured_output")) is not None:
            raise ValueError(why)
        return value

    @field_validator("instructions_role")
    @classmethod
    def _role_supported(cls, value: str | None, info: ValidationInfo) -> str | None:
        profile = providers.PROFILES.get(info.data.get("provider", ""))
        if value is not None and profile is not None and (why := profile.cannot("instructions_role")) is not None:
            raise ValueError(why)
        return value

    #: Replies per judgment (README "Judges you can trust"): the score is their mean, a label their
    #: majority, and the judgment reports their spread. A rubric's own ``samples`` wins.
    samples: int = Field(default=1, ge=1, le=100)
    #: How k replies are asked for: k requests, each cached ("requests"), or one request with n = k
    #: ("n"; OpenAI and vLLM support it), its k choices cached as k entries.
    samples_via: Literal["requests", "n"] = "requests"
    #: G-Eval: ask for top_logprobs and score the probability-weighted mean over the score tokens
    #: (integer-scaled rubrics only); a reply without them is unscored ``logprobs_unavailable``.
    logprobs: bool = False

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str | None) -> str | None:
        known = ("o200k_base", "cl100k_base", "approx")
        if value is not None and value not in known:
            raise ValueError(f"unknown tokenizer {value!r} (known: {', '.join(known)})")
        return value

    @property
    def profile(self) -> ProviderProfile:
        """Its provider's profile (providers/): URL, key variable, judge class, what it accepts."""
        return providers.profile_of(self)

    @property
    def endpoint(self) -> str:
        """The base URL actually called: configured, else the provider's variable (OPENAI_BASE_URL,
        ANTHROPIC_BASE_URL), else the provider's default (providers/)."""
        return providers.endpoint(self)

    def api_url(self, path: str) -> str:
        """The URL of ``path`` of this judge's API: the version path added once (providers/)."""
        return providers.api_root(self) + path

    @property
    def sampling(self) -> Sampling:
        """The part of this judge that can change a reply."""
        return Sampling(endpoint=self.endpoint, **{name: getattr(self, name) for name in SAMPLING_FIELDS})

    @property
    def has_prices(self) -> bool:
        return self.input_price_per_1m is not None and self.output_price_per_1m is not None


def _flattened(data: dict[str, object]) -> dict[str, object]:
    """A judge's grouped tables (``sampling``, ``limits``, ``prices``) as the flat keys they hold.
    A key given both ways, or one a group does not hold, is refused naming ``group.key``."""
    if not any(isinstance(data.get(group), dict) for group in _GROUPS):
        return data
    flat = {k: v for k, v in data.items() if not (k in _GROUPS and isinstance(v, dict))}
    for group, names in _GROUPS.items():
        table = data.get(group)
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if name not in names:
                raise ValueError(f"{group}.{name}: unknown key (a {group} table holds {', '.join(names)})")
            if name in flat:
                raise ValueError(f"{group}.{name}: given twice (also as {name} outside the {group} table)")
            flat[name] = value
    return flat


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


class CascadeConfig(BaseModel):
    """``[cascade]``: judges from cheapest to strongest, and the agreement they must guarantee
    (harness/workflows/cascade.py)."""

    model_config = ConfigDict(extra="forbid")

    #: judge names, cheapest first, each judge once; the last is the strongest (the reference without human labels)
    stages: list[str] = Field(min_length=2)
    #: 1 − α: the least share of the cascade's verdicts that agree with the reference
    target_agreement: float = Field(gt=0, lt=1)
    #: 1 − δ: the probability, over the calibration set, that the guarantee holds
    confidence: float = Field(default=0.9, gt=0, lt=1)

    @field_validator("stages")
    @classmethod
    def _distinct(cls, stages: list[str]) -> list[str]:
        # A judge twice would be asked again for what it already passed on, and pay for it.
        for index, name in enumerate(stages):
            if name in stages[:index]:
                raise ValueError(f"judge {name!r} is stages[{stages.index(name)}] and stages[{index}]: each stage is another judge")
        return stages


class TrajectoryConfig(BaseModel):
    """``[trajectory]``: how a transcript's steps are matched with its ``reference_trajectory``
    (harness/agent/match.py)::

        [trajectory]
        mode = "in_order"                  # strict | unordered | subset | superset | in_order | actions
        [trajectory.arguments.search]      # per tool; the default compares arguments exactly
        mode = "fields"
        fields = ["query"]
        fold = true
    """

    model_config = ConfigDict(extra="forbid")

    #: how the steps must match the reference: strict, unordered, subset, superset, in_order or actions (docs/reference/trajectories.md)
    mode: Literal["strict", "unordered", "subset", "superset", "in_order", "actions"] = "strict"
    #: per tool: how its arguments are compared
    arguments: dict[str, ArgumentRule] = Field(default_factory=dict)
    #: for tools not named in ``arguments``
    default: ArgumentRule = Field(default_factory=ArgumentRule)


JuryMethod = Literal["majority", "mean", "median", "weighted", "dawid_skene"]
#: the methods whose verdict the remaining votes can be shown not to change (``sequential = true``)
SEQUENTIAL_METHODS: tuple[JuryMethod, ...] = ("majority", "median")


class JuryConfig(BaseModel):
    """``[[juries]]``: a panel of the config's judges that is one judge (harness/jury). Its verdict
    per (transcript, rubric) is a judgment row of its own, named ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the jury's name in outputs, as a judge's (it may not be a judge's name)
    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
    #: the judges' names (at least two, each once)
    members: list[str] = Field(min_length=2)
    #: majority (plurality of labels or binned scores), mean, median, weighted (a vote weighted by
    #: each member's agreement with the human labels) or dawid_skene (confusions estimated by EM)
    method: JuryMethod = "majority"
    #: human labels (JSONL as for `harness agreement`): each member's agreement with them is
    #: reported; "weighted" takes its weights from them; "dawid_skene" with `anchored` fixes the
    #: labelled transcripts to them. Relative to the config file. `harness run --jury-labels` wins.
    labels: Path | None = None
    #: dawid_skene only: the labelled transcripts' classes are fixed to their human labels
    anchored: bool = False
    #: ask the members cheapest first and stop once the remaining votes cannot change the verdict
    #: (majority and median); the verdicts are those of the whole jury
    sequential: bool = False

    @field_validator("members")
    @classmethod
    def _distinct_members(cls, members: list[str]) -> list[str]:
        twice = [m for m in dict.fromkeys(members) if members.count(m) > 1]
        if twice:
            raise ValueError(f"judge {twice[0]!r} is named twice")
        return members

    @model_validator(mode="after")
    def _method_options(self) -> JuryConfig:
        if self.sequential and self.method not in SEQUENTIAL_METHODS:
            raise ValueError(f"sequential: needs method majority or median (a {self.method} verdict can change with any vote)")
        if self.anchored and self.method != "dawid_skene":
            raise ValueError(f"anchored: only a dawid_skene jury is anchored on labels (this one is {self.method})")
        return self


class HarnessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: a SQLite file path, or a postgresql:// URL kept as text (a Path would fold its //)
    cache: Path | str | None = None
    #: seconds a claim on a judgment in flight lives without renewal (a killed worker's keys are free after this)
    cache_lease_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    price_table: Path | None = None
    prompts: list[Path] = Field(default_factory=list)
    rubrics: list[str] | None = None
    #: "data" (the default): the built-in rubrics send their instructions apart from the judged
    #: text (their ``-data`` versions, docs/guide/injection.md); "inline": their templates as one
    #: user message, as before (the versions without ``-data``, which runs made before recorded)
    rubric_layout: Literal["inline", "data"] = "data"
    #: what a transcript with judge-directed text in its inputs does (harness/injection): "off"
    #: (not scanned), "flag" (judged, listed), "unscored" (not sent, unscored injection_suspected),
    #: "fail" (the run stops before anything is sent)
    injection: Literal["off", "flag", "unscored", "fail"] = "off"
    judges: list[JudgeConfig] = Field(default_factory=list)
    composites: dict[str, dict[str, float]] = Field(default_factory=dict)
    #: a judge cascade ([cascade]: stages, target_agreement, confidence; harness cascade calibrate|run)
    cascade: CascadeConfig | None = None
    #: how a transcript's steps are matched with its reference_trajectory ([trajectory]: mode, arguments per tool)
    trajectory: TrajectoryConfig = Field(default_factory=TrajectoryConfig)
    #: panels of judges, each one judge of the run ([[juries]]: name, members, method, ...)
    juries: list[JuryConfig] = Field(default_factory=list)

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

    @field_validator("juries")
    @classmethod
    def _unique_juries(cls, juries: list[JuryConfig]) -> list[JuryConfig]:
        first: dict[str, int] = {}
        for index, jury in enumerate(juries):
            if jury.name in first:
                raise ValueError(f"name {jury.name!r} is used by juries[{first[jury.name]}] and juries[{index}]")
            first[jury.name] = index
        return juries

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
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
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
    config.juries = [
        j.model_copy(update={"labels": base / j.labels}) if j.labels is not None and not j.labels.is_absolute() else j for j in config.juries
    ]
    return config


def _describe(exc: ValidationError) -> str:
    return str(first_problem(exc, noun="key", whole="config", brackets=True))


#: A key shorter than this cannot be told from ordinary text (a key ``5`` would be masked inside
#: the digits of a score), so it is refused when the judge is built.
MIN_KEY_LENGTH = 8
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")


def check_key(key: str, variable: str) -> str | None:
    """Why ``key`` (read from ``variable``) cannot be used, or None. Stray whitespace or control
    characters would corrupt the Authorization header; a very short key could not be masked
    without altering ordinary text."""
    if key != key.strip():
        return f"${variable} has leading or trailing whitespace (a stray newline?); remove it"
    if not _KEY_CHARS.fullmatch(key):
        return f"${variable} holds spaces, control or non-ASCII characters; an API key is printable ASCII"
    if len(key) < MIN_KEY_LENGTH:
        return f"${variable} is {len(key)} characters long; keys under {MIN_KEY_LENGTH} cannot be told from ordinary text (use a longer one)"
    return None


def api_key_for(judge: JudgeConfig) -> str | None:
    """The judge's API key, read from its environment variable at call time and kept nowhere else
    (None for a provider that reads no key)."""
    if judge.profile.key_env is None:
        return None
    return os.environ.get(judge.api_key_env) or None
