"""Topic-clustering evaluation (seeds/000_d71be046679063a5.txt), its arithmetic slips corrected where each formula is used.

Input: a benchmark file (``{"name": [message ids], ...}``, or ``{"clusters": [{"name", "message_ids"}]}``)
and one output file per model::

    {"model": "gpt-x", "clusters": [{"title": "...", "message_ids": [1, 2]}],
     "token_usage": {"input_tokens": 25474, "output_tokens": 2080},
     "prices_per_1k": {"input": 0.000075, "output": 0.0003}}

``token_usage`` may also sit on each cluster (summed); ``prices_per_1k`` is optional (else the
command's ``--input-price-per-1k``/``--output-price-per-1k``, else the cost is unknown, never $0).

Matching (the document says "largest overlap" and nothing more; these are the harness's choices):

- each benchmark cluster is matched to the model cluster sharing most message ids with it;
- ties go to the smaller model cluster (the higher precision), then to the one first in the file;
- a benchmark cluster sharing no id with any model cluster is unmatched: LLM count 0, so deviation
  −100 %, coverage, precision, recall and Final Score 0;
- a model cluster may be the best match of several benchmark clusters (a merged topic): each of
  them is scored against it independently, so its extra ids lower each one's precision, and the
  sharing is reported (``shared_matches``), not hidden by a one-to-one assignment.

All numbers are kept unrounded in the JSON; the CSV rounds to 2 decimals like the document.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UserInputError
from .common import pydantic_problem, read_json, write_json

# --- formulas (seed 000), one per function -------------------------------------------------------


def message_count_deviation_percent(llm_count: Any, benchmark_count: Any) -> Any:
    """((LLM − BENCHMARK) / BENCHMARK) × 100 (seed 000, formula 1). Vectorised; a benchmark count
    of 0 is refused upstream (an empty benchmark cluster is an input error)."""
    llm, bench = np.asarray(llm_count, dtype=float), np.asarray(benchmark_count, dtype=float)
    return (llm - bench) / bench * 100.0


def coverage_percentage(matched: Any, benchmark_count: Any) -> Any:
    """(MATCHED / BENCHMARK) × 100 (seed 000, formula 2)."""
    return np.asarray(matched, dtype=float) / np.asarray(benchmark_count, dtype=float) * 100.0


def precision_percent(matched: Any, llm_count: Any) -> Any:
    """(MATCHED / LLM) × 100 (seed 000, formula 3); an unmatched cluster (LLM count 0) gives 0."""
    m, n = np.asarray(matched, dtype=float), np.asarray(llm_count, dtype=float)
    return np.divide(m * 100.0, n, out=np.zeros(np.broadcast(m, n).shape), where=n > 0)


def recall_percent(matched: Any, benchmark_count: Any) -> Any:
    """(MATCHED / BENCHMARK) × 100 (seed 000, formula 4); by definition equal to the coverage."""
    return coverage_percentage(matched, benchmark_count)


def deviation_score(deviation_percent: Any) -> Any:
    """max(0, 100 − |deviation %|) (seed 000, formula 5, "Where")."""
    return np.maximum(0.0, 100.0 - np.abs(np.asarray(deviation_percent, dtype=float)))


def final_score(deviation_score_: Any, coverage_score: Any, precision_score: Any) -> Any:
    """Deviation×0.4 + Coverage×0.3 + Precision×0.3 (seed 000, formula 5). FitFusion (Example 2):
    0.4·72.34 + 0.3·100 + 0.3·78.33 = 82.44 (the document's 82.0 is an arithmetic slip)."""
    return (
        0.4 * np.asarray(deviation_score_, dtype=float)
        + 0.3 * np.asarray(coverage_score, dtype=float)
        + 0.3 * np.asarray(precision_score, dtype=float)
    )


def cluster_count_score(expected_clusters: int, total_clusters: int) -> float:
    """min(expected, total) / max(expected, total) × 100 (seed 000, formula 6); 0 when both are 0."""
    top = max(expected_clusters, total_clusters)
    return min(expected_clusters, total_clusters) / top * 100.0 if top else 0.0


def model_coverage_score(found_clusters: int, expected_clusters: int) -> float:
    """found benchmark clusters / expected × 100 (seed 000, formula 6); 0 with no expected cluster."""
    return found_clusters / expected_clusters * 100.0 if expected_clusters else 0.0


def model_precision_score(precisions: Sequence[float]) -> float:
    """average(PRECISION % across all clusters) (seed 000, formula 6): over every benchmark
    cluster, an unmatched one counting 0. Empty: 0 (nothing was found)."""
    return float(np.mean(precisions)) if len(precisions) else 0.0


def model_deviation_score(deviations: Sequence[float]) -> float:
    """max(0, 100 − average(|deviation %|)) (seed 000, formula 6). Empty: 0."""
    return max(0.0, 100.0 - float(np.mean(np.abs(deviations)))) if len(deviations) else 0.0


def improved_model_score(cluster_count: float, coverage: float, precision: float, deviation: float) -> float:
    """0.25 × each of the four scores (seed 000, formula 6). The example: (85.7 + 100 + 91.1 +
    91.1) / 4 = 91.975 (the document's 91.1 is an arithmetic slip)."""
    return 0.25 * cluster_count + 0.25 * coverage + 0.25 * precision + 0.25 * deviation


def token_cost(input_tokens: float, output_tokens: float, input_per_1k: float, output_per_1k: float) -> float:
    """INPUT/1000 × price_in + OUTPUT/1000 × price_out, prices per 1K tokens (seed 000, formula 7).
    The example: 25,474/1000 × 0.000075 + 2,080/1000 × 0.0003 = $0.00253455 (not $2.53455)."""
    return input_tokens / 1000 * input_per_1k + output_tokens / 1000 * output_per_1k


def overlap_percentage(benchmark_ids: set[str], llm_ids: set[str]) -> float:
    """len(benchmark ∩ llm) / len(benchmark) × 100 (seed 000, formula 8)."""
    return len(benchmark_ids & llm_ids) / len(benchmark_ids) * 100.0 if benchmark_ids else 0.0


# --- input ---------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TokenUsage(_Strict):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class Prices(_Strict):
    input: float = Field(ge=0)
    output: float = Field(ge=0)


def default_prices(input_per_1k: float | None, output_per_1k: float | None) -> Prices | None:
    """``--input-price-per-1k`` / ``--output-price-per-1k``: both or neither, finite and not negative."""
    if input_per_1k is None and output_per_1k is None:
        return None
    if input_per_1k is None or output_per_1k is None:
        raise UserInputError("give both --input-price-per-1k and --output-price-per-1k, or neither")
    for name, value in (("--input-price-per-1k", input_per_1k), ("--output-price-per-1k", output_per_1k)):
        if not math.isfinite(value) or value < 0:
            raise UserInputError(f"{name}: {value} is not a finite price of 0 or more")
    return Prices(input=input_per_1k, output=output_per_1k)


def _ids(value: list[int | str]) -> list[str]:
    return [str(v) for v in value]


class ModelCluster(_Strict):
    title: str = ""
    message_ids: list[int | str]
    token_usage: TokenUsage | None = None

    @field_validator("message_ids")
    @classmethod
    def _not_empty(cls, value: list[int | str]) -> list[int | str]:
        if not value:
            raise ValueError("cluster has no message ids")
        return value


class ModelOutput(_Strict):
    model: str
    clusters: list[ModelCluster]
    token_usage: TokenUsage | None = None
    prices_per_1k: Prices | None = None

    @field_validator("clusters")
    @classmethod
    def _some(cls, value: list[ModelCluster]) -> list[ModelCluster]:
        if not value:
            raise ValueError("the model has no clusters")
        return value


def load_benchmark(path: Path) -> dict[str, set[str]]:
    raw = read_json(path)
    if isinstance(raw, dict) and "clusters" in raw and isinstance(raw["clusters"], list):
        pairs = []
        for index, item in enumerate(raw["clusters"]):
            if not isinstance(item, dict) or "name" not in item or "message_ids" not in item:
                raise UserInputError(f"{path}: clusters[{index}]: needs name and message_ids")
            pairs.append((str(item["name"]), item["message_ids"]))
    elif isinstance(raw, dict):
        pairs = [(str(k), v) for k, v in raw.items()]
    else:
        raise UserInputError(f"{path}: must be an object of cluster name → message ids")
    clusters: dict[str, set[str]] = {}
    for name, ids in pairs:
        if not isinstance(ids, list) or not all(isinstance(i, int | str) and not isinstance(i, bool) for i in ids):
            raise UserInputError(f"{path}: benchmark cluster {name!r}: message ids must be a list of ids")
        if not ids:
            raise UserInputError(f"{path}: benchmark cluster {name!r} has no message ids")
        if name in clusters:
            raise UserInputError(f"{path}: benchmark cluster {name!r} appears twice")
        clusters[name] = set(_ids(ids))
    if not clusters:
        raise UserInputError(f"{path}: the benchmark has no clusters")
    return clusters


def load_model_output(path: Path) -> ModelOutput:
    raw = read_json(path)
    try:
        return ModelOutput.model_validate(raw)
    except ValidationError as exc:
        raise UserInputError(f"{path}: {pydantic_problem(exc)}") from None


# --- evaluation ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ClusterResult:
    benchmark_cluster: str
    llm_cluster: str | None
    llm_cluster_index: int | None
    benchmark_messages: int
    llm_messages: int
    matched_messages: int
    deviation_percent: float
    coverage_percent: float
    precision_percent: float
    recall_percent: float
    overlap_percent: float
    deviation_score: float
    final_score: float
    overlap: list[str]
    missing: list[str]
    extra: list[str]
    tie_broken: bool = False


@dataclass(slots=True)
class ModelResult:
    model: str
    source: str
    expected_clusters: int
    total_clusters: int
    found_clusters: int
    cluster_count_score: float
    coverage_score: float
    precision_score: float
    deviation_score: float
    improved_model_score: float
    input_tokens: int
    output_tokens: int
    token_cost_usd: float | None
    input_price_per_1k: float | None = None
    output_price_per_1k: float | None = None
    clusters: list[ClusterResult] = field(default_factory=list)
    #: model cluster title → the benchmark clusters it is the best match of, when more than one
    shared_matches: dict[str, list[str]] = field(default_factory=dict)


def _id_key(value: str) -> tuple[int, int | str]:
    return (0, int(value)) if value.isdigit() else (1, value)


def _sorted(ids: set[str]) -> list[str]:
    return sorted(ids, key=_id_key)


def best_match(benchmark_ids: set[str], clusters: Sequence[set[str]]) -> tuple[int | None, bool]:
    """Index of the model cluster with the largest overlap (ties: the smaller cluster, then the
    first); None when nothing overlaps. Also whether a tie was broken."""
    overlaps = np.array([len(benchmark_ids & c) for c in clusters])
    if overlaps.size == 0 or overlaps.max() == 0:
        return None, False
    best = np.flatnonzero(overlaps == overlaps.max())
    if best.size == 1:
        return int(best[0]), False
    sizes = np.array([len(clusters[int(i)]) for i in best])
    smallest = best[sizes == sizes.min()]
    return int(smallest[0]), True


def evaluate_model(benchmark: dict[str, set[str]], output: ModelOutput, source: str = "", default_prices: Prices | None = None) -> ModelResult:
    model_sets = [set(_ids(c.message_ids)) for c in output.clusters]
    titles = [c.title or f"cluster {i + 1}" for i, c in enumerate(output.clusters)]
    rows: list[ClusterResult] = []
    for name, bench in benchmark.items():
        index, tied = best_match(bench, model_sets)
        llm = model_sets[index] if index is not None else set()
        matched = len(bench & llm)
        dev = float(message_count_deviation_percent(len(llm), len(bench)))
        cov = float(coverage_percentage(matched, len(bench)))
        prec = float(precision_percent(matched, len(llm)))
        dscore = float(deviation_score(dev))
        rows.append(
            ClusterResult(
                benchmark_cluster=name,
                llm_cluster=titles[index] if index is not None else None,
                llm_cluster_index=index,
                benchmark_messages=len(bench),
                llm_messages=len(llm),
                matched_messages=matched,
                deviation_percent=dev,
                coverage_percent=cov,
                precision_percent=prec,
                recall_percent=float(recall_percent(matched, len(bench))),
                overlap_percent=overlap_percentage(bench, llm),
                deviation_score=dscore,
                final_score=float(final_score(dscore, cov, prec)) if index is not None else 0.0,
                overlap=_sorted(bench & llm),
                missing=_sorted(bench - llm),
                extra=_sorted(llm - bench),
                tie_broken=tied,
            )
        )
    shared: dict[str, list[str]] = {}
    for r in rows:
        if r.llm_cluster_index is not None:
            shared.setdefault(f"{r.llm_cluster_index}", []).append(r.benchmark_cluster)
    shared_matches = {titles[int(i)]: names for i, names in shared.items() if len(names) > 1}
    found = sum(r.llm_cluster_index is not None for r in rows)
    count_s = cluster_count_score(len(benchmark), len(output.clusters))
    cov_s = model_coverage_score(found, len(benchmark))
    prec_s = model_precision_score([r.precision_percent for r in rows])
    dev_s = model_deviation_score([r.deviation_percent for r in rows])
    usage = output.token_usage or TokenUsage(
        input_tokens=sum(c.token_usage.input_tokens for c in output.clusters if c.token_usage),
        output_tokens=sum(c.token_usage.output_tokens for c in output.clusters if c.token_usage),
    )
    prices = output.prices_per_1k or default_prices
    cost = token_cost(usage.input_tokens, usage.output_tokens, prices.input, prices.output) if prices else None
    return ModelResult(
        model=output.model,
        source=source,
        expected_clusters=len(benchmark),
        total_clusters=len(output.clusters),
        found_clusters=found,
        cluster_count_score=count_s,
        coverage_score=cov_s,
        precision_score=prec_s,
        deviation_score=dev_s,
        improved_model_score=improved_model_score(count_s, cov_s, prec_s, dev_s),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        token_cost_usd=cost,
        input_price_per_1k=prices.input if prices else None,
        output_price_per_1k=prices.output if prices else None,
        clusters=rows,
        shared_matches=shared_matches,
    )


def evaluate_clustering(benchmark_path: Path, outputs: Sequence[Path], default_prices: Prices | None = None) -> list[ModelResult]:
    if not outputs:
        raise UserInputError("give at least one model output file")
    benchmark = load_benchmark(benchmark_path)
    results = []
    seen: dict[str, Path] = {}
    for path in outputs:
        output = load_model_output(path)
        if output.model in seen:
            raise UserInputError(f"{path}: model {output.model!r} is also in {seen[output.model]}")
        seen[output.model] = path
        results.append(evaluate_model(benchmark, output, str(path), default_prices))
    return results


# --- writing and explaining ----------------------------------------------------------------------

CLUSTER_COLUMNS = (
    "model",
    "benchmark_cluster",
    "llm_cluster",
    "benchmark_messages",
    "llm_messages",
    "matched_messages",
    "deviation_percent",
    "coverage_percent",
    "precision_percent",
    "recall_percent",
    "final_score",
    "missing_messages",
    "extra_messages",
)
MODEL_COLUMNS = (
    "model",
    "expected_clusters",
    "total_clusters",
    "found_clusters",
    "cluster_count_score",
    "coverage_score",
    "precision_score",
    "deviation_score",
    "improved_model_score",
    "input_tokens",
    "output_tokens",
    "token_cost_usd",
)


def _r(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{round(value, digits):.{digits}f}"


def write_outputs(results: list[ModelResult], out: Path) -> dict[str, Path]:
    """``clustering.json`` (everything, unrounded), ``clusters.csv`` (one row per model × benchmark
    cluster, like the document's results table) and ``models.csv`` (one row per model)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "clustering.json", "clusters_csv": out / "clusters.csv", "models_csv": out / "models.csv"}
    write_json(paths["json"], {"models": [asdict(r) for r in results]})
    with paths["clusters_csv"].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CLUSTER_COLUMNS)
        for m in results:
            for c in m.clusters:
                writer.writerow(
                    [
                        m.model,
                        c.benchmark_cluster,
                        c.llm_cluster or "",
                        c.benchmark_messages,
                        c.llm_messages,
                        c.matched_messages,
                        _r(c.deviation_percent),
                        _r(c.coverage_percent),
                        _r(c.precision_percent),
                        _r(c.recall_percent),
                        _r(c.final_score),
                        len(c.missing),
                        len(c.extra),
                    ]
                )
    with paths["models_csv"].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(MODEL_COLUMNS)
        for m in results:
            writer.writerow(
                [
                    m.model,
                    m.expected_clusters,
                    m.total_clusters,
                    m.found_clusters,
                    _r(m.cluster_count_score),
                    _r(m.coverage_score),
                    _r(m.precision_score),
                    _r(m.deviation_score),
                    _r(m.improved_model_score),
                    m.input_tokens,
                    m.output_tokens,
                    "" if m.token_cost_usd is None else f"{m.token_cost_usd:.8f}",
                ]
            )
    return paths


def _g(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if math.isfinite(value) else str(value)


def explain(result: ModelResult) -> list[str]:
    """Every score of one model with its formula and the numbers put into it (seed 000: "every
    number can be traced")."""
    lines = [f"model {result.model} ({result.source})"]
    for c in result.clusters:
        lines.append(f"  benchmark cluster {c.benchmark_cluster!r} -> {c.llm_cluster!r}" + (" (tie: smaller cluster chosen)" if c.tie_broken else ""))
        b, n, m = c.benchmark_messages, c.llm_messages, c.matched_messages
        lines += [
            f"    deviation % = (({n} - {b}) / {b}) x 100 = {_g(c.deviation_percent)}",
            f"    coverage % = ({m} / {b}) x 100 = {_g(c.coverage_percent)}",
            f"    precision % = ({m} / {n}) x 100 = {_g(c.precision_percent)}" if n else "    precision % = 0 (no matching model cluster)",
            f"    recall % = ({m} / {b}) x 100 = {_g(c.recall_percent)}",
            f"    deviation score = max(0, 100 - |{_g(c.deviation_percent)}|) = {_g(c.deviation_score)}",
            f"    final score = {_g(c.deviation_score)} x 0.4 + {_g(c.coverage_percent)} x 0.3 + "
            f"{_g(c.precision_percent)} x 0.3 = {_g(c.final_score)}"
            if n
            else "    final score = 0 (unmatched)",
            f"    missing = {c.missing}",
            f"    extra = {c.extra}",
        ]
    e, t = result.expected_clusters, result.total_clusters
    precisions = " + ".join(_g(c.precision_percent) for c in result.clusters)
    deviations = " + ".join(_g(abs(c.deviation_percent)) for c in result.clusters)
    k = len(result.clusters)
    lines += [
        f"  cluster count score = min({e}, {t}) / max({e}, {t}) x 100 = {_g(result.cluster_count_score)}",
        f"  coverage score = {result.found_clusters} / {e} x 100 = {_g(result.coverage_score)}",
        f"  precision score = ({precisions}) / {k} = {_g(result.precision_score)}",
        f"  deviation score = max(0, 100 - ({deviations}) / {k}) = {_g(result.deviation_score)}",
        f"  improved model score = ({_g(result.cluster_count_score)} + {_g(result.coverage_score)} + "
        f"{_g(result.precision_score)} + {_g(result.deviation_score)}) x 0.25 = {_g(result.improved_model_score)}",
    ]
    if result.token_cost_usd is None:
        lines.append(f"  token cost = unknown (no prices per 1K tokens; {result.input_tokens} in, {result.output_tokens} out)")
    else:
        lines.append(
            f"  token cost = {result.input_tokens}/1000 x {result.input_price_per_1k:g} + "
            f"{result.output_tokens}/1000 x {result.output_price_per_1k:g} = ${result.token_cost_usd:.8f}"
        )
    for title, names in result.shared_matches.items():
        lines.append(f"  note: model cluster {title!r} is the best match of {len(names)} benchmark clusters: {names}")
    return lines
