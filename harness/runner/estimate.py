"""``harness estimate``: what a run would cost and how long it would take, with no network call.

It plans every judgment exactly as ``run`` does (same validation, rubric selection, rendering and
cache keys: ``planning.Planner``), counts each prompt's tokens offline, and looks the keys
up in the cache: a hit costs nothing. Completion tokens are given two ways: the rubric's
``max_tokens`` (the most a call can cost) and, where the cache holds earlier replies of the same
judge model and rubric, their mean (what a call usually costs). The expected cost uses the mean
where there is one and ``max_tokens`` otherwise.

Duration is bounded per endpoint (base URL and key: its judges share its slots and rate limits,
``planning.Endpoint``), and is the largest of three bounds: concurrency (Σ requests × latency ÷
max_concurrency, latency from the cache's mean for that judge, else ``ASSUMED_LATENCY_S``), the
request rate (Σ requests ÷ rpm) and the token rate (Σ tokens ÷ tpm). Each judge of the endpoint
reports the endpoint's duration; with one judge per endpoint these are that judge's own bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..cache.location import open_reader
from ..cost.prices import call_cost, prompt_cache_saving
from ..cost.staleness import Retirement, StalePrice, retirements, stale_prices
from ..cost.tokens import TokenCounter
from ..planning import Endpoint, Entry, Planner, RunOptions, RunPlan, build_plan
from ..traces.loader import ScanResult, iter_transcripts, required_inputs
from ..transcripts import Transcript

#: Shortest prefix the providers cache (OpenAI: 1,024 tokens; Anthropic: 1,024, Haiku 2,048).
MIN_CACHEABLE_TOKENS = 1024
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
    #: prompts that cannot fit the judge's context window: no call would be made
    context_overflow: int = 0
    #: prompts cut to fit (truncate = "middle")
    truncated_input: int = 0
    #: prompts whose trajectory was compacted to fit its budget or the window
    compacted_input: int = 0
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
    context_overflow: int = 0
    prompt_tokens: int = 0
    completion_tokens_expected: float = 0.0
    cost_usd_max: float | None = None
    cost_usd_expected: float | None = None
    #: what the provider's prompt cache would save on the system prompt, the one prefix every
    #: request shares (None: no cached-input price); 0 when that prefix is under the provider's minimum
    prompt_cache_saving_usd: float | None = None
    latency_s: float = ASSUMED_LATENCY_S
    latency_measured: bool = False
    duration_s: float = 0.0
    duration_bound: str = "concurrency"


@dataclass(slots=True)
class Estimate:
    transcripts: int
    lines: list[Line] = field(default_factory=list)
    judges: list[JudgeTotals] = field(default_factory=list)
    #: judges whose model is retired or retires within 30 days (``staleness.py``)
    retirements: list[Retirement] = field(default_factory=list)
    #: judges priced from a table entry checked more than 180 days ago
    stale_prices: list[StalePrice] = field(default_factory=list)

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
            "retirements": [r.as_dict() for r in self.retirements],
            "stale_prices": [p.as_dict() for p in self.stale_prices],
        }


def _sum_known(amounts: Iterable[float | None]) -> float | None:
    """A priced judge's lines are all priced: their sum; None if one is not."""
    total: float | None = 0.0
    for amount in amounts:
        total = _add(total, amount)
    return total


def _add(total: float | None, amount: float | None) -> float | None:
    return None if total is None or amount is None else total + amount


def estimate_records(
    plan: RunPlan, transcripts: Iterable[Transcript], n_transcripts: int, rubric_inputs: set[str], suspected: Mapping[str, str] | None = None
) -> Estimate:
    """The estimate of ``plan`` over ``transcripts`` (already validated); ``suspected``: the
    transcripts ``injection = "unscored"`` sends nothing of (``injection.policy.screen``)."""
    rubrics = plan.select_rubrics(rubric_inputs)
    use_cache = plan.cache_mode in ("read-write", "offline")
    cache = open_reader(plan.cache_path) if use_cache else None
    completion_means = cache.completion_means() if cache is not None else {}
    latency_means = cache.latency_means_s() if cache is not None else {}
    counters = {j.name: TokenCounter.for_model(j.model, j.tokenizer) for j in plan.judges}
    lines = {(j.name, r.name): Line(j.name, r.name) for j in plan.judges for r in rubrics}
    #: per judge: fixed-prefix tokens (system prompt and the rubric's own text) sent in requests
    #: that could be served from the provider's prompt cache
    cacheable: dict[str, int] = dict.fromkeys((j.name for j in plan.judges), 0)
    #: tokens of each (judge, fixed prefix) seen so far, counted once
    prefix_tokens: dict[tuple[str, str], int] = {}
    for line in lines.values():
        judge = next(j for j in plan.judges if j.name == line.judge)
        line.cached_completion_mean = completion_means.get((judge.model, judge.endpoint, line.rubric))
        priced = judge.has_prices
        line.cost_usd_max = line.cost_usd_expected = line.saved_usd = 0.0 if priced else None

    #: keys of the requests counted so far: a run that reads the cache sends a key once and its
    #: in-run repeats (identical prompts, same judge and settings) share that call or its pending
    #: cache write (``engine``), so a repeat is counted as the run reports it, with the cache hits.
    #: (With --no-cache or --refresh a repeat shares only a call still in flight: each may be paid.)
    sent: set[str] | None = set() if use_cache else None

    def account(batch: list[Entry]) -> None:
        jobs = [job for entry in batch for job in entry.jobs]
        hits = cache.present([job.key for job in jobs if job.key]) if cache is not None else set()
        for job in jobs:
            line = lines[(job.judge.name, job.rubric.name)]
            if job.result is not None:
                if job.result.reason == "context_overflow":
                    line.context_overflow += 1
                elif job.result.reason == "injection_suspected":
                    pass  # not sent: no request, no cost
                else:
                    line.missing_input += 1
                continue
            line.truncated_input += job.truncated_input
            line.compacted_input += job.compacted_input
            assert job.request is not None
            prompt = counters[job.judge.name].count_messages(job.request.messages)
            expected = line.cached_completion_mean if line.cached_completion_mean is not None else job.request.max_tokens
            if job.key in hits or (sent is not None and job.key in sent):
                line.cache_hits += 1
                line.saved_usd = _add(line.saved_usd, call_cost(job.judge, prompt, expected))
                continue
            if sent is not None:
                assert job.key is not None
                sent.add(job.key)
            line.requests += 1
            line.prompt_tokens += prompt
            fixed = (job.judge.name, job.request.fixed_text)
            prefix = prefix_tokens.get(fixed)
            if prefix is None:  # the first request with this prefix writes the provider's cache
                prefix_tokens[fixed] = counters[job.judge.name].count_text(fixed[1]) if fixed[1] else 0
            elif prefix >= MIN_CACHEABLE_TOKENS:
                cacheable[job.judge.name] += prefix
            line.completion_tokens_max += job.request.max_tokens
            line.completion_tokens_expected += expected
            line.cost_usd_max = _add(line.cost_usd_max, call_cost(job.judge, prompt, job.request.max_tokens))
            line.cost_usd_expected = _add(line.cost_usd_expected, call_cost(job.judge, prompt, expected))

    try:
        batch: list[Entry] = []
        planner = Planner(
            rubrics, plan.judges, keyed=use_cache, suspected=suspected, turns=plan.turns
        )  # keyed: the cache's hits and the in-run repeats
        for record in transcripts:
            batch.append(planner.entry(record.resolved()))
            if len(batch) >= _BATCH:
                account(batch)
                batch = []
        account(batch)
    finally:
        if cache is not None:
            cache.close()

    estimate = Estimate(transcripts=n_transcripts, lines=list(lines.values()))
    estimate.retirements = retirements(plan.judges, plan.price_table)
    estimate.stale_prices = stale_prices(plan.judges, plan.price_table)
    for judge in plan.judges:
        own = [line for line in estimate.lines if line.judge == judge.name]
        counter = counters[judge.name]
        totals = JudgeTotals(judge=judge.name, model=judge.model, tokenizer=counter.encoding, approximate=not counter.exact, priced=judge.has_prices)
        totals.requests = sum(line.requests for line in own)
        totals.cache_hits = sum(line.cache_hits for line in own)
        totals.context_overflow = sum(line.context_overflow for line in own)
        totals.prompt_tokens = sum(line.prompt_tokens for line in own)
        totals.completion_tokens_expected = sum(line.completion_tokens_expected for line in own)
        totals.cost_usd_max = _sum_known(line.cost_usd_max for line in own) if judge.has_prices else None
        totals.cost_usd_expected = _sum_known(line.cost_usd_expected for line in own) if judge.has_prices else None
        if judge.cached_input_price_per_1m is not None:
            totals.prompt_cache_saving_usd = prompt_cache_saving(judge, cacheable[judge.name])
        measured = latency_means.get((judge.model, judge.endpoint))
        if measured is not None:
            totals.latency_s, totals.latency_measured = measured, True
        estimate.judges.append(totals)
    by_name = {totals.judge: totals for totals in estimate.judges}
    for endpoint in Endpoint.group(plan.judges):
        shared = [by_name[j.name] for j in endpoint.judges]
        requests = sum(t.requests for t in shared)
        bounds = {"concurrency": sum(t.requests * t.latency_s for t in shared) / endpoint.max_concurrency}
        if endpoint.rpm:
            bounds["rpm"] = requests / endpoint.rpm * 60.0
        if endpoint.tpm:
            bounds["tpm"] = sum(t.prompt_tokens + t.completion_tokens_expected for t in shared) / endpoint.tpm * 60.0
        bound, duration = max(bounds.items(), key=lambda kv: kv[1])
        for totals in shared:
            totals.duration_bound, totals.duration_s = bound, duration
    return estimate


def estimate_scanned(plan: RunPlan, scanned: ScanResult) -> Estimate:
    """Estimate a planned run whose transcripts ``scan`` has already validated."""
    suspected = {tid: "" for tid in scanned.findings} if plan.injection == "unscored" else None
    # (records lacking what a chosen rubric requires were refused or passed over by the scan: ``RunPlan.scan``)
    require = required_inputs(r.inputs for r in plan.select_rubrics(scanned.inputs_seen))
    records = (record for _, record in iter_transcripts(plan.input, plan.on_bad_record, plan.format, require, sessions=plan.sessions))
    if plan.limit is not None:
        records = (r for r, _ in zip(records, range(plan.limit), strict=False))
    shard = plan.shard
    if shard is not None:  # this shard's slice only; the rubrics are still chosen over the whole file
        records = (r for k, r in enumerate(records) if shard.holds(k))
        return estimate_records(plan, records, shard.size(scanned.good), scanned.inputs_seen, suspected)
    return estimate_records(plan, records, scanned.good, scanned.inputs_seen, suspected)


def estimate_run(options: RunOptions) -> Estimate:
    """Validate the transcripts and estimate the run ``options`` describe. No network, no judge."""
    plan = build_plan(options, require_keys=False)
    return estimate_scanned(plan, plan.scan(detect=plan.injection == "unscored")[0])
