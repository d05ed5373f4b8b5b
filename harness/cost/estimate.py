"""``harness estimate``: what a run would cost and how long it would take, with no network call.

It plans every judgment exactly as ``run`` does (same validation, rubric selection, rendering and
cache keys: ``runner.jobs.plan_entry``), counts each prompt's tokens offline, and looks the keys
up in the cache: a hit costs nothing. Completion tokens are given two ways: the rubric's
``max_tokens`` (the most a call can cost) and, where the cache holds earlier replies of the same
judge model and rubric, their mean (what a call usually costs). The expected cost uses the mean
where there is one and ``max_tokens`` otherwise.

Duration per judge is the largest of three bounds: concurrency (requests × latency ÷
max_concurrency, latency from the cache's mean for that judge, else ``ASSUMED_LATENCY_S``), the
request rate (requests ÷ rpm) and the token rate (tokens ÷ tpm).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import JudgeConfig
from ..runner.jobs import plan_entry
from ..runner.plan import RunOptions, RunPlan, build_plan
from ..transcripts import ScanResult, iter_transcripts, scan
from .prices import cost_usd
from .tokens import TokenCounter

#: Judge latency assumed when the cache has no reply of that judge to measure it from.
ASSUMED_LATENCY_S = 2.0
_BATCH = 512


@dataclass(slots=True)
class Line:
    """One (judge, rubric) row of the estimate."""

    judge: str
    rubric: str
    requests: int = 0
    cache_hits: int = 0
    missing_input: int = 0
    prompt_tokens: int = 0
    completion_tokens_max: int = 0
    completion_tokens_expected: float = 0.0
    cached_completion_mean: float | None = None
    cost_usd_max: float | None = None
    cost_usd_expected: float | None = None
    saved_usd: float | None = None


@dataclass(slots=True)
class JudgeTotals:
    judge: str
    model: str
    tokenizer: str
    approximate: bool
    priced: bool
    requests: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens_expected: float = 0.0
    cost_usd_max: float | None = None
    cost_usd_expected: float | None = None
    latency_s: float = ASSUMED_LATENCY_S
    latency_measured: bool = False
    duration_s: float = 0.0
    duration_bound: str = "concurrency"


@dataclass(slots=True)
class Estimate:
    transcripts: int
    lines: list[Line] = field(default_factory=list)
    judges: list[JudgeTotals] = field(default_factory=list)

    @property
    def cost_usd_expected(self) -> float | None:
        costs = [j.cost_usd_expected for j in self.judges]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def cost_usd_max(self) -> float | None:
        costs = [j.cost_usd_max for j in self.judges]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def duration_s(self) -> float:
        # Judges run side by side, so the slowest one sets the run's length.
        return max((j.duration_s for j in self.judges), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "transcripts": self.transcripts,
            "cost_usd_expected": self.cost_usd_expected,
            "cost_usd_max": self.cost_usd_max,
            "duration_s": self.duration_s,
            "judges": [asdict(j) for j in self.judges],
            "lines": [asdict(line) for line in self.lines],
        }


@dataclass(frozen=True, slots=True)
class _CachedStats:
    completion_mean: dict[tuple[str, str, str], float]  # (model, base_url, rubric) -> mean completion tokens
    latency_mean: dict[tuple[str, str], float]  # (model, base_url) -> mean latency, seconds


def _open_read_only(path: Path | None) -> sqlite3.Connection | None:
    if path is None or not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.execute("SELECT 1 FROM judgments LIMIT 1")
    except sqlite3.DatabaseError:
        db.close()
        return None
    return db


def _cached_stats(db: sqlite3.Connection | None) -> _CachedStats:
    if db is None:
        return _CachedStats({}, {})
    completion = {
        (m, u, r): float(mean)
        for m, u, r, mean in db.execute(
            "SELECT judge_model, base_url, rubric, AVG(completion_tokens) FROM judgments "
            "WHERE completion_tokens IS NOT NULL GROUP BY 1, 2, 3"
        )
    }
    latency = {
        (m, u): float(mean) / 1000.0
        for m, u, mean in db.execute(
            "SELECT judge_model, base_url, AVG(latency_ms) FROM judgments WHERE latency_ms IS NOT NULL GROUP BY 1, 2"
        )
    }
    return _CachedStats(completion, latency)


def _hits(db: sqlite3.Connection | None, keys: list[str]) -> set[str]:
    if db is None or not keys:
        return set()
    found: set[str] = set()
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(k for (k,) in db.execute(f"SELECT key FROM judgments WHERE key IN ({marks})", chunk))
    return found


def _add(total: float | None, amount: float | None) -> float | None:
    return None if total is None or amount is None else total + amount


def _price(judge: JudgeConfig, prompt: float, completion: float) -> float | None:
    if not judge.has_prices:
        return None
    assert judge.input_price_per_1m is not None and judge.output_price_per_1m is not None
    return cost_usd(prompt, completion, judge.input_price_per_1m, judge.output_price_per_1m)


def estimate_plan(plan: RunPlan, transcripts: Iterable[Any], n_transcripts: int, rubric_inputs: set[str]) -> Estimate:
    rubrics = plan.select_rubrics(rubric_inputs)
    use_cache = plan.cache_mode in ("read-write", "offline")
    db = _open_read_only(plan.cache_path) if use_cache else None
    stats = _cached_stats(db)
    counters = {j.name: TokenCounter.for_model(j.model, j.tokenizer) for j in plan.judges}
    lines = {(j.name, r.name): Line(j.name, r.name) for j in plan.judges for r in rubrics}
    for line in lines.values():
        judge = next(j for j in plan.judges if j.name == line.judge)
        line.cached_completion_mean = stats.completion_mean.get((judge.model, judge.endpoint, line.rubric))
        priced = judge.has_prices
        line.cost_usd_max = line.cost_usd_expected = line.saved_usd = 0.0 if priced else None

    def account(batch: list[Any]) -> None:
        jobs = [job for entry in batch for job in entry.jobs]
        hits = _hits(db, [job.key for job in jobs if job.key])
        for job in jobs:
            line = lines[(job.judge.name, job.rubric.name)]
            if job.result is not None:
                line.missing_input += 1
                continue
            assert job.request is not None
            prompt = counters[job.judge.name].count_messages(job.request.messages)
            expected = line.cached_completion_mean if line.cached_completion_mean is not None else job.request.max_tokens
            if job.key in hits:
                line.cache_hits += 1
                line.saved_usd = _add(line.saved_usd, _price(job.judge, prompt, expected))
                continue
            line.requests += 1
            line.prompt_tokens += prompt
            line.completion_tokens_max += job.request.max_tokens
            line.completion_tokens_expected += expected
            line.cost_usd_max = _add(line.cost_usd_max, _price(job.judge, prompt, job.request.max_tokens))
            line.cost_usd_expected = _add(line.cost_usd_expected, _price(job.judge, prompt, expected))

    try:
        batch: list[Any] = []
        for record in transcripts:
            batch.append(plan_entry(record.resolved(), rubrics, plan.judges, keyed=db is not None))
            if len(batch) >= _BATCH:
                account(batch)
                batch = []
        account(batch)
    finally:
        if db is not None:
            db.close()

    estimate = Estimate(transcripts=n_transcripts, lines=list(lines.values()))
    for judge in plan.judges:
        own = [line for line in estimate.lines if line.judge == judge.name]
        counter = counters[judge.name]
        totals = JudgeTotals(judge=judge.name, model=judge.model, tokenizer=counter.encoding, approximate=not counter.exact, priced=judge.has_prices)
        totals.requests = sum(line.requests for line in own)
        totals.cache_hits = sum(line.cache_hits for line in own)
        totals.prompt_tokens = sum(line.prompt_tokens for line in own)
        totals.completion_tokens_expected = sum(line.completion_tokens_expected for line in own)
        totals.cost_usd_max = sum(line.cost_usd_max for line in own) if judge.has_prices else None  # type: ignore[misc]
        totals.cost_usd_expected = sum(line.cost_usd_expected for line in own) if judge.has_prices else None  # type: ignore[misc]
        measured = stats.latency_mean.get((judge.model, judge.endpoint))
        if measured is not None:
            totals.latency_s, totals.latency_measured = measured, True
        bounds = {"concurrency": totals.requests * totals.latency_s / judge.max_concurrency}
        if judge.rpm:
            bounds["rpm"] = totals.requests / judge.rpm * 60.0
        if judge.tpm:
            bounds["tpm"] = (totals.prompt_tokens + totals.completion_tokens_expected) / judge.tpm * 60.0
        totals.duration_bound, totals.duration_s = max(bounds.items(), key=lambda kv: kv[1])
        estimate.judges.append(totals)
    return estimate


def estimate_scanned(plan: RunPlan, scanned: ScanResult) -> Estimate:
    """Estimate a planned run whose transcripts ``scan`` has already validated."""
    records = (record for _, record in iter_transcripts(plan.input, plan.on_bad_record, plan.format))
    if plan.limit is not None:
        records = (r for r, _ in zip(records, range(plan.limit), strict=False))
    return estimate_plan(plan, records, scanned.good, scanned.inputs_seen)


def estimate_run(options: RunOptions) -> Estimate:
    """Validate the transcripts and estimate the run ``options`` describe. No network, no judge."""
    plan = build_plan(options, require_keys=False)
    return estimate_scanned(plan, scan(plan.input, plan.on_bad_record, plan.limit, plan.format))
