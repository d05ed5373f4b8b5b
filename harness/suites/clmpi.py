"""CLMPI model ranking (seeds/001_7afcf93c1f006c61.txt), its errata corrected where each formula is used.

Input: JSONL, one row per (model, item)::

    {"model": "m", "item_id": "q1", "kind": "qa" | "multi_turn" | "open",
     "prompt": "..." | "messages": [{"role": "user", "content": "..."}, ...],
     "response": "...", "reference": "..." | ["...", ...], "latency_s": 1.2, "memory_mb": 850,
     "error": "timeout"}

Components (the document leaves how items feed them open; these are the harness's choices):

- ACC: over items with a ``reference``: normalised exact match (lowercase, punctuation and the
  articles a/an/the removed, whitespace collapsed; any of several references may match), or with
  ``--judge-accuracy`` the ``correctness`` rubric (0/1; a score of 0.5 or more is correct).
- CON: ``contextual_understanding`` (0–5) on multi-turn items (``messages`` with earlier turns), / 5.
- COH, FLU: ``coherence`` and ``fluency`` (0–5) on every answered item, mean / 5.
- EFF_raw = 1 / (mean latency_s + mean memory_mb / 100) over the model's answered items;
  EFF_norm min–max across the models of the run, with the document's +1e-9 (so the best model
  gets 0.99999998, and when every EFF_raw is equal, or there is one model, every EFF_norm is 0).
- Graceful degradation: an item with ``error`` or no ``response`` is failed and left out of every
  component; judgments that are unscored or failed are left out of their component; counts of all
  of these are reported. A component a model has no data for is missing, and that model's CLMPI
  uses the remaining weights rescaled to sum to 1 (``weights_used``, ``missing_components``);
  in the ranking it comes after every model that has a component it lacks (a missing component is
  never an advantage). A model with no answered item at all is an input error (there is nothing to rank).
"""

from __future__ import annotations

import csv
import math
import re
import tomllib
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config import check_weights
from ..errors import ConfigError, UserInputError
from ..planning import JudgeOptions
from .common import hardware_record, judge_records, pydantic_problem, read_jsonl_records, write_json

COMPONENTS = ("ACC", "CON", "COH", "FLU", "EFF")
#: seed 001, "Default Weights"
DEFAULT_WEIGHTS: dict[str, float] = {"ACC": 0.25, "CON": 0.20, "COH": 0.20, "FLU": 0.20, "EFF": 0.15}
#: seed 001, "Score Interpretation": lower bound (inclusive) → band
BANDS = ((0.8, "Excellent"), (0.6, "Good"), (0.4, "Fair"), (0.2, "Poor"), (0.0, "Very Poor"))
SUITABILITY = {
    "Excellent": "Optimal for edge deployment",
    "Good": "Suitable with minor optimizations",
    "Fair": "Requires significant optimization",
    "Poor": "Not recommended for edge use",
    "Very Poor": "Unsuitable for edge deployment",
}
RUBRIC_OF = {"CON": "contextual_understanding", "COH": "coherence", "FLU": "fluency"}

# --- formulas (seed 001), one per function -------------------------------------------------------


def accuracy(correct: Sequence[bool]) -> float | None:
    """ACC = correct_answers / total_answers (seed 001, component 1). Empty: None (no data)."""
    flags = np.asarray(correct, dtype=float)
    return float(flags.mean()) if flags.size else None


def quality_norm(scores: Sequence[float]) -> float | None:
    """Mean of 0–5 scores, normalised score / 5.0 (seed 001, components 2–4, "Quality Scores").
    Empty: None (no data)."""
    values = np.asarray(scores, dtype=float)
    return float(values.mean() / 5.0) if values.size else None


def eff_raw(latency_seconds: float, memory_mb: float) -> float:
    """EFF_raw = 1 / (latency_seconds + memory_mb/100) (seed 001, component 5). Zero latency and
    memory: inf is refused upstream (latency must be positive)."""
    return 1.0 / (latency_seconds + memory_mb / 100.0)


def eff_norm(raw: Sequence[float]) -> np.ndarray:
    """EFF_norm = (EFF_raw − EFF_min) / (EFF_max − EFF_min + 1e-9), min–max per run (seed 001,
    "Efficiency Score"). All equal (or one model): every value is 0 (the document divides by zero there)."""
    values = np.asarray(raw, dtype=float)
    if values.size == 0:
        return values
    return (values - values.min()) / (values.max() - values.min() + 1e-9)


def clmpi(weights: Mapping[str, float], scores: Mapping[str, float]) -> float:
    """CLMPI = Σ wᵢ × sᵢ (seed 001, "Formula"), over the components in ``scores``."""
    return math.fsum(weights[name] * scores[name] for name in scores)


def clmpi_100(value: float) -> float:
    """The 0–100 scale: CLMPI × 100 (seed 001, "Final Output")."""
    return value * 100.0


def interpretation(value: float) -> str:
    """The band of seed 001's "Score Interpretation" table (a bound belongs to the band above).
    Compared at 9 decimals, so float rounding (0.7999999999999999 for 0.8) never moves a band."""
    for lower, band in BANDS:
        if round(value, 9) >= lower:
            return band
    return BANDS[-1][1]


def rescaled_weights(weights: Mapping[str, float], present: Sequence[str]) -> dict[str, float]:
    """The weights of the present components rescaled to sum to 1 (graceful degradation)."""
    total = math.fsum(weights[name] for name in present)
    if total <= 0:
        return {name: 0.0 for name in present}
    return {name: weights[name] / total for name in present}


_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _without_punctuation(text: str) -> str:
    # Unicode-aware: every punctuation character (category P*), not only ASCII's, so "«Paris»" and
    # "Paris" match, while letters such as "é" are kept.
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def normalise_answer(text: str) -> str:
    """NFKC, casefold, drop punctuation (any script) and the articles a/an/the, collapse whitespace."""
    return " ".join(_ARTICLES.sub(" ", _without_punctuation(unicodedata.normalize("NFKC", text).casefold())).split())


def exact_match(response: str, references: Sequence[str]) -> bool:
    answer = normalise_answer(response)
    return any(answer == normalise_answer(r) for r in references)


# --- input ---------------------------------------------------------------------------------------


class ChatTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class ClmpiRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: str = Field(min_length=1)
    item_id: str | int
    kind: Literal["qa", "multi_turn", "open"] = "open"
    prompt: str | None = None
    messages: list[ChatTurn] | None = None
    response: str | None = None
    reference: str | list[str] | None = None
    latency_s: float | None = Field(default=None, gt=0)
    memory_mb: float | None = Field(default=None, ge=0)
    error: str | None = None

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> ClmpiRow:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt and messages")
        if self.messages is not None and not any(m.role == "user" for m in self.messages):
            raise ValueError("messages: needs at least one user message")
        if self.kind == "multi_turn" and self.messages is None:
            raise ValueError("kind multi_turn needs messages")
        return self

    @property
    def failed(self) -> bool:
        return self.error is not None or not (self.response or "").strip()

    @property
    def references(self) -> list[str]:
        if self.reference is None:
            return []
        return [self.reference] if isinstance(self.reference, str) else list(self.reference)


class WeightsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    weights: dict[Literal["ACC", "CON", "COH", "FLU", "EFF"], float]


def load_weights(path: Path | None) -> dict[str, float]:
    """``--weights FILE``: TOML or YAML with a ``weights`` table of ACC, CON, COH, FLU, EFF that sum
    to 1 (seed 001: "Weights configurable"). None: the document's default weights."""
    if path is None:
        return dict(DEFAULT_WEIGHTS)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such weights file") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            raw = yaml.safe_load(text)
        else:
            raw = tomllib.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is the user's file
        raise ConfigError(f"{path}: cannot be read: {exc}".splitlines()[0]) from None
    try:
        weights: dict[str, float] = {str(k): v for k, v in WeightsFile.model_validate(raw).weights.items()}
    except ValidationError as exc:
        raise ConfigError(f"{path}: {pydantic_problem(exc)}") from None
    missing = [c for c in COMPONENTS if c not in weights]
    if missing:
        raise ConfigError(f"{path}: weights: {missing[0]} is missing (give all of {', '.join(COMPONENTS)})")
    try:
        check_weights("clmpi", weights)
    except ValueError as exc:
        raise ConfigError(f"{path}: weights: {exc}") from None
    return weights


def load_rows(path: Path) -> list[tuple[int, ClmpiRow]]:
    rows = []
    seen: dict[tuple[str, str], int] = {}
    for line, raw in read_jsonl_records(path):
        try:
            row = ClmpiRow.model_validate(raw)
        except ValidationError as exc:
            raise UserInputError(f"{path}:{line}: {pydantic_problem(exc)}") from None
        key = (row.model, str(row.item_id))
        if key in seen:
            raise UserInputError(f"{path}:{line}: model {row.model!r} item {row.item_id!r} repeats line {seen[key]}")
        seen[key] = line
        rows.append((line, row))
    return rows


# --- the suite -----------------------------------------------------------------------------------


@dataclass(slots=True)
class RankedModel:
    """One model's CLMPI, its components (None: no data) and what they were computed from."""

    model: str
    clmpi: float
    clmpi_100: float
    interpretation: str
    edge_suitability: str
    components: dict[str, float | None]
    raw: dict[str, float | None]
    weights_used: dict[str, float]
    missing_components: list[str]
    counts: dict[str, Any]
    components_missing_in_run: int = 0
    rank: int = 0


@dataclass(frozen=True, slots=True)
class ClmpiResult:
    """What ``harness clmpi`` found; :meth:`as_dict` is clmpi.json."""

    input: str
    weights: dict[str, float]
    judge_accuracy: bool
    judged: bool
    ranking: list[RankedModel]
    hardware: dict[str, Any]
    judge: dict[str, Any] | None
    exit_code: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def transcript_id(row: ClmpiRow) -> str:
    return f"{row.model}::{row.item_id}"


def to_transcript(row: ClmpiRow) -> dict[str, Any]:
    """The judge's view of one answered item: the last user turn is the query, earlier turns the
    contexts (so ``contextual_understanding`` is only asked where there are earlier turns)."""
    contexts: list[str] | None = None
    if row.messages is not None:
        last = max(i for i, m in enumerate(row.messages) if m.role == "user")
        query = row.messages[last].content
        earlier = [f"{m.role}: {m.content}" for m in row.messages[:last] if m.role != "system"]
        contexts = earlier or None
    else:
        query = row.prompt or ""
    record: dict[str, Any] = {
        "id": transcript_id(row),
        "query": query,
        "response": row.response,
        "metadata": {"model": row.model, "item_id": str(row.item_id), "kind": row.kind},
    }
    if contexts:
        record["contexts"] = contexts
    if row.references:
        record["reference"] = "\n".join(row.references)
    return record


@dataclass(slots=True)
class _ModelData:
    lines: list[int] = field(default_factory=list)
    items: int = 0
    failed: int = 0
    correct: list[bool] = field(default_factory=list)
    quality: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    quality_lost: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    accuracy_lost: int = 0
    latencies: list[float] = field(default_factory=list)
    memories: list[float] = field(default_factory=list)


def evaluate_clmpi(
    path: Path, out: Path, judge: JudgeOptions | None, weights: Mapping[str, float] | None = None, judge_accuracy: bool = False
) -> ClmpiResult:
    """The whole suite; ``judge=None`` (``--no-judge``) computes ACC and EFF only (exact match)."""
    if judge is None and judge_accuracy:
        raise ConfigError("--judge-accuracy needs a judge; it cannot be combined with --no-judge")
    weights = dict(weights or DEFAULT_WEIGHTS)
    rows = load_rows(path)
    data: dict[str, _ModelData] = defaultdict(_ModelData)
    answered = []
    for line, row in rows:
        d = data[row.model]
        d.lines.append(line)
        d.items += 1
        if row.failed:
            d.failed += 1
            continue
        answered.append(row)
        if row.latency_s is not None and row.memory_mb is not None:
            d.latencies.append(row.latency_s)
            d.memories.append(row.memory_mb)
    for model, d in data.items():
        if d.items == d.failed:
            raise UserInputError(f"{path}:{d.lines[0]}: model {model!r} has no answered item ({d.items} failed): nothing to rank")

    judge_summary = None
    exit_code = 0
    if judge is not None:
        rubrics = ["contextual_understanding", "coherence", "fluency"] + (["correctness"] if judge_accuracy else [])
        judged = judge_records((to_transcript(r) for r in answered), rubrics, out, judge, "clmpi")
        exit_code = judged.outcome.exit_code
        judge_summary = judged.summary()
        per_item: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for j in judged.judgments:
            per_item[(j["transcript_id"], j["rubric"])].append(j)
    for row in answered:
        d = data[row.model]
        tid = transcript_id(row)
        if judge is not None:
            for component, rubric in RUBRIC_OF.items():
                found = per_item.get((tid, rubric), [])
                if found and all(j["reason"] == "missing_input" for j in found):
                    continue  # not applicable: e.g. CON on a single-turn item
                scores = [j["score"] for j in found if j["status"] == "scored"]
                if scores:
                    d.quality[component].append(sum(scores) / len(scores))
                else:
                    d.quality_lost[component] += 1
        if row.references:
            if judge_accuracy:
                scores = [j["score"] for j in per_item.get((tid, "correctness"), []) if j["status"] == "scored"]
                if scores:
                    d.correct.append(sum(scores) / len(scores) >= 0.5)
                else:
                    d.accuracy_lost += 1
            else:
                d.correct.append(exact_match(row.response or "", row.references))

    models = sorted(data)
    raws = {m: eff_raw(float(np.mean(data[m].latencies)), float(np.mean(data[m].memories))) for m in models if data[m].latencies}
    norms = dict(zip(raws, eff_norm(list(raws.values())).tolist(), strict=True))
    ranking: list[RankedModel] = []
    for m in models:
        d = data[m]
        components: dict[str, float | None] = {
            "ACC": accuracy(d.correct),
            "CON": quality_norm(d.quality["CON"]),
            "COH": quality_norm(d.quality["COH"]),
            "FLU": quality_norm(d.quality["FLU"]),
            "EFF": norms.get(m),
        }
        present = [c for c in COMPONENTS if components[c] is not None]
        used = weights if len(present) == len(COMPONENTS) else rescaled_weights(weights, present)
        value = clmpi(used, {c: components[c] for c in present})  # type: ignore[misc]
        band = interpretation(value)
        ranking.append(
            RankedModel(
                model=m,
                clmpi=value,
                clmpi_100=clmpi_100(value),
                interpretation=band,
                edge_suitability=SUITABILITY[band],
                components=components,
                raw={
                    "CON_0_5": _mean(d.quality["CON"]),
                    "COH_0_5": _mean(d.quality["COH"]),
                    "FLU_0_5": _mean(d.quality["FLU"]),
                    "EFF_raw": raws.get(m),
                    "latency_s_mean": _mean(d.latencies),
                    "memory_mb_mean": _mean(d.memories),
                },
                weights_used=used,
                missing_components=[c for c in COMPONENTS if components[c] is None],
                counts={
                    "items": d.items,
                    "failed_items": d.failed,
                    "accuracy_items": len(d.correct),
                    "accuracy_unjudged": d.accuracy_lost,
                    "quality_items": {c: len(d.quality[c]) for c in RUBRIC_OF},
                    "quality_unscored": {c: d.quality_lost[c] for c in RUBRIC_OF},
                    "efficiency_items": len(d.latencies),
                },
            )
        )
    # A missing component is never an advantage: a model lacking a component that another model of
    # the run has is ranked after every model with more of them (its score uses fewer weights).
    in_run: set[str] = {c for r in ranking for c in COMPONENTS if c not in r.missing_components}
    for r in ranking:
        r.components_missing_in_run = len(set(r.missing_components) & in_run)
    ranking.sort(key=lambda r: (r.components_missing_in_run, -r.clmpi, r.model))
    for rank, ranked in enumerate(ranking, start=1):
        ranked.rank = rank
    result = ClmpiResult(
        input=str(path),
        weights=weights,
        judge_accuracy=judge_accuracy,
        judged=judge is not None,
        ranking=ranking,
        hardware=hardware_record(),
        judge=judge_summary,
        exit_code=exit_code,
    )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "clmpi.json", result.as_dict())
    with (out / "ranking.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["rank", "model", *COMPONENTS, "clmpi", "clmpi_100", "interpretation", "items", "failed_items"])
        for r in ranking:
            writer.writerow(
                [
                    r.rank,
                    r.model,
                    *("" if r.components[c] is None else f"{r.components[c]:.6f}" for c in COMPONENTS),
                    f"{r.clmpi:.6f}",
                    f"{r.clmpi_100:.2f}",
                    r.interpretation,
                    r.counts["items"],
                    r.counts["failed_items"],
                ]
            )
    return result


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None
