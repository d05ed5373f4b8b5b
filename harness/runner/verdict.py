"""From a reply to a judgment: pure functions, no I/O, no clock, no state.

Every judgment the engine reports comes from one of these, whether its reply was just received,
replayed from the cache, shared with an in-run repeat of the same key or taken from one choice of
an ``n = k`` request. Because a cached reply is read by the same ``read_reply`` as a live one, a
replay and the run it replays always agree on how a reply reads; because a truncated reply is
cached with its flag, it replays as the same ``unscored``/``truncated`` judgment.

``tests/test_verdict.py`` tests this module alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from ..cache.base import COLUMNS, CachedJudgment, CachedReply, FailedCall
from ..cost.prices import call_cost
from ..errors import JudgeError
from ..judges.base import JudgeReply, TokenAlternatives
from ..planning import Job, Judgment
from ..planning.judgment import Reason
from ..rubrics.logprob_score import logprob_score
from ..rubrics.parsing import parse_label, parse_score
from ..rubrics.schema import parse_structured_label, parse_structured_score
from ..usage import Usage

Logprobs = Sequence[tuple[str, TokenAlternatives]]

#: Added to a 400 answered to a structured-output request: the usual cause is an endpoint without it.
SCHEMA_HINT = " (this judge has structured_output = true: if the endpoint does not support JSON Schema output, set it to false)"


def truncation_note(budget: int, completion_tokens: int | None, reasoning_tokens: int | None) -> str:
    thinking = f", {reasoning_tokens} of them reasoning" if reasoning_tokens else ""
    return (
        f"reply cut off at the completion budget of {budget} tokens ({completion_tokens} used{thinking}): "
        "raise the judge's max_tokens or reasoning_budget"
    )


def budget_stop(job: Job) -> Judgment:
    return job.judgment("unscored", reason="budget_exhausted", error="--max-cost reached before this call")


def read_reply(job: Job, text: str, logprobs: Logprobs | None = None) -> Judgment:
    """The judgment a complete reply's text (and, for G-Eval, its logprobs) gives."""
    structured = job.request is not None and job.request.schema is not None
    rubric = job.rubric
    if rubric.labels is not None:  # categorical rubric: one of its labels, else unscored
        label = parse_structured_label(text, rubric.labels) if structured else parse_label(text, rubric.labels)
        return job.judgment(label.status, label=label.label, reason=label.reason, raw_output=text)
    # A rubric's calibration (``harness align``) maps the score read onto the human scale; the
    # number read stays in raw_score.
    if job.judge.logprobs:  # G-Eval: never the text's score when the logprobs are missing
        weighted = logprob_score(logprobs, rubric.lo, rubric.hi)
        return job.judgment(
            weighted.status,
            score=weighted.score if weighted.score is None else rubric.calibrated(weighted.score),
            raw_score=weighted.score,
            reason=weighted.reason,
            raw_output=text,
            score_distribution=weighted.distribution,
            score_mass=weighted.mass,
            error="the judge's reply carried no top_logprobs" if weighted.reason == "logprobs_unavailable" else None,
        )
    parsed = (
        parse_structured_score(text, rubric.lo, rubric.hi) if structured else parse_score(text, rubric.lo, rubric.hi, strict=rubric.layout == "data")
    )
    score = parsed.score if parsed.score is None else rubric.calibrated(parsed.score)
    return job.judgment(parsed.status, score=score, raw_score=parsed.raw_score, clamped=parsed.clamped, reason=parsed.reason, raw_output=text)


def _read(job: Job, text: str, logprobs: Logprobs | None, truncated: bool | int | None, completion: int | None, reasoning: int | None) -> Judgment:
    if truncated:  # cut off at the completion budget: the text is partial, never read for a score
        assert job.request is not None
        note = truncation_note(job.request.max_tokens, completion, reasoning)
        return job.judgment("unscored", reason="truncated", raw_output=text, error=note)
    return read_reply(job, text, logprobs)


def from_reply(job: Job, reply: JudgeReply, *, attempts: int, latency_ms: float, billed_retries: int = 0) -> Judgment:
    """The judgment of a call's reply: read, with the call's usage priced at the judge's prices."""
    return from_parts(
        job, reply.text, reply.usage, reply.truncated, reply.logprobs, attempts=attempts, latency_ms=latency_ms, billed_retries=billed_retries
    )


def from_parts(
    job: Job, text: str, usage: Usage | None, truncated: bool, logprobs: Logprobs | None, *, attempts: int, latency_ms: float, billed_retries: int = 0
) -> Judgment:
    """``from_reply`` of a reply given by its parts (a batch result is read without a ``JudgeReply``
    made for it: one frozen object less for each of 100,000)."""
    if usage is None:
        prompt = completion = reasoning = cached = cache_write = None
    else:
        prompt, completion, reasoning, cached, cache_write = usage.prompt, usage.completion, usage.reasoning, usage.cached_read, usage.cache_write
    judgment = _read(job, text, logprobs, truncated, completion, reasoning)
    judgment.prompt_tokens = prompt
    judgment.completion_tokens = completion
    judgment.reasoning_tokens = reasoning
    judgment.cached_tokens = cached
    judgment.cache_write_tokens = cache_write
    judgment.cost_usd = call_cost(job.judge, prompt, completion, cached, cache_write)
    judgment.latency_ms = round(latency_ms, 3)
    judgment.attempts = attempts
    judgment.retries = max(attempts - 1, 0)
    judgment.billed_retries = billed_retries
    return judgment


def from_failure(job: Job, exc: JudgeError, *, attempts: int, latency_ms: float, billed_retries: int = 0) -> Judgment:
    """A call that produced no usable reply: failed, with the error's kind and message."""
    schema_refused = job.request is not None and job.request.schema is not None and exc.status == 400
    return job.judgment(
        "failed",
        reason=exc.kind,
        error=str(exc) + (SCHEMA_HINT if schema_refused else ""),
        attempts=attempts,
        retries=max(attempts - 1, 0),
        latency_ms=latency_ms,
        billed_retries=billed_retries,
    )


def from_cache(job: Job, hit: CachedJudgment | CachedReply) -> Judgment:
    """A cached reply replayed: read again (not the stored score), priced as the call was."""
    judgment = _read(job, hit.raw_output, stored_logprobs(hit.logprobs), hit.truncated, hit.completion_tokens, hit.reasoning_tokens)
    judgment.prompt_tokens = hit.prompt_tokens
    judgment.completion_tokens = hit.completion_tokens
    judgment.reasoning_tokens = hit.reasoning_tokens
    judgment.cached_tokens = hit.cached_tokens
    judgment.cache_write_tokens = hit.cache_write_tokens
    # A batch reply keeps the batch price it was paid at; any other is priced at today's prices,
    # with the prompt-cache reads and writes the call had.
    judgment.cost_usd = (
        hit.cost_usd
        if hit.tier == "batch"
        else call_cost(job.judge, hit.prompt_tokens, hit.completion_tokens, hit.cached_tokens, hit.cache_write_tokens)
    )
    judgment.latency_ms = hit.latency_ms
    judgment.cached = True
    return judgment


def to_failed(job: Job, failed: Judgment, base_url: str) -> FailedCall:
    """The record of a failed judgment (``failed_calls``): what an offline replay reports for its key."""
    assert job.key is not None and failed.reason is not None
    return FailedCall(job.key, job.judge.model, base_url, job.rubric.name, failed.reason, failed.error, failed.attempts)


def from_failed(job: Job, failed: FailedCall) -> Judgment:
    """A recorded failure replayed offline: failed as the run that made the call reported it, and
    ``cached`` (nothing is sent; a failed call saved nothing and cost nothing known)."""
    judgment = job.judgment("failed", reason=cast(Reason, failed.reason), error=failed.error)
    judgment.cached = True
    return judgment


def repeat(job: Job, paid: Judgment) -> Judgment:
    """A repeat of a key already judged in this run (or by another shard of its plan): the paid
    judgment's outcome, usage and cost, marked ``cached`` with no attempts of its own. The one
    rule for in-run repeats: the engine applies it to the jobs sharing a key in flight, and
    ``harness merge`` gives the paid copy to the first of them in file order, as a single run does."""
    if paid.status == "failed" or paid.raw_output is None:
        return job.judgment(paid.status, reason=paid.reason, error=paid.error)
    copied = job.judgment(
        paid.status,
        score=paid.score,
        raw_score=paid.raw_score,
        clamped=paid.clamped,
        label=paid.label,
        reason=paid.reason,
        error=paid.error,
        raw_output=paid.raw_output,
        score_distribution=paid.score_distribution,
        score_mass=paid.score_mass,
    )
    copied.prompt_tokens, copied.completion_tokens = paid.prompt_tokens, paid.completion_tokens
    copied.reasoning_tokens, copied.cached_tokens, copied.cache_write_tokens = paid.reasoning_tokens, paid.cached_tokens, paid.cache_write_tokens
    copied.cost_usd, copied.latency_ms, copied.cached = paid.cost_usd, paid.latency_ms, True
    return copied


def from_choice(job: Job, request_judgment: Judgment, text: str, logprobs: Logprobs | None) -> Judgment:
    """Choice i > 0 of an ``n = k`` request, for the sample ``job``: its tokens and cost are on the
    request's (first) judgment, where the usage was reported; attempts 0, as it sent nothing. A
    usage detail the request's reply did not report stays unknown here too, so the samples' sum is."""
    judgment = read_reply(job, text, logprobs)
    judgment.prompt_tokens, judgment.completion_tokens, judgment.cost_usd = 0, 0, 0.0
    judgment.reasoning_tokens = None if request_judgment.reasoning_tokens is None else 0
    judgment.cached_tokens = None if request_judgment.cached_tokens is None else 0
    judgment.cache_write_tokens = None if request_judgment.cache_write_tokens is None else 0
    judgment.latency_ms = request_judgment.latency_ms
    return judgment


def to_cached(
    job: Job, judgment: Judgment, text: str, logprobs: Logprobs | None, *, attempts: int, tier: str | None = None, base_url: str | None = None
) -> CachedJudgment:
    """The cache row of ``judgment``, the reply ``text`` read; ``truncated`` marks a reply cut at
    the completion budget (the budget is in the key, so a new budget asks again). ``base_url``:
    the judge's endpoint when the caller has it resolved (resolving reads the environment)."""
    return CachedJudgment(*cache_row(job, judgment, text, logprobs, attempts=attempts, tier=tier, base_url=base_url))


def cache_row(
    job: Job, judgment: Judgment, text: str, logprobs: Logprobs | None, *, attempts: int, tier: str | None = None, base_url: str | None = None
) -> tuple[Any, ...]:
    """``to_cached``'s row as its values, in ``COLUMNS`` order (``created_at`` None: stamped when it
    is written). A collect keeps 100,000 of them as values: making each a ``CachedJudgment`` from
    keywords, then reading its values back for the writer, cost 1.4 µs a row (this tuple 0.02),
    and the garbage collector scanned them all (a tuple of plain values it stops tracking); as
    values, ``batch collect`` of 100,000 took 4.50 s, not 4.85 (bench/batch_bench.py)."""
    assert job.key is not None
    judge, rubric = job.judge, job.rubric
    return (
        job.key,
        judge.model,
        judge.endpoint if base_url is None else base_url,
        rubric.name,
        rubric.version,
        text,
        judgment.prompt_tokens,
        judgment.completion_tokens,
        judgment.latency_ms,
        judgment.cost_usd,
        attempts,
        judgment.status,
        judgment.score,
        None,
        tier,
        None if logprobs is None else json.dumps(logprobs),
        judgment.reasoning_tokens,
        judgment.cached_tokens,
        judgment.cache_write_tokens,
        judgment.reason == "truncated",
    )


#: The columns ``cache_row`` gives, in its order: checked against ``CachedJudgment``'s fields at
#: import, so a field added or moved there cannot shift a value into the wrong column.
_ROW_ORDER = (
    "key", "judge_model", "base_url", "rubric", "rubric_version", "raw_output", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd",
    "attempts", "status", "score", "created_at", "tier", "logprobs", "reasoning_tokens", "cached_tokens", "cache_write_tokens", "truncated",
)  # fmt: skip
if _ROW_ORDER != COLUMNS:
    raise ImportError(f"verdict.cache_row gives the columns {_ROW_ORDER}, the cache has {COLUMNS}: update cache_row")


def stored_logprobs(text: str | None) -> tuple[tuple[str, TokenAlternatives], ...] | None:
    """The cache's JSON of a reply's logprobs back as the reply had them."""
    if text is None:
        return None
    return tuple((token, tuple((alt, float(lp)) for alt, lp in alts)) for token, alts in json.loads(text))
