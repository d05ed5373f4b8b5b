"""A transcript's jobs: one per (rubric, judge), the path ``run`` and ``estimate`` share.

For each (rubric, judge): a rubric whose inputs the transcript lacks gives an ``unscored``/
``missing_input`` judgment at once; otherwise the prompt is rendered, the request built and its
cache key computed. Nothing here touches the network or the cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..cache.keys import request_key
from ..config import JudgeConfig, Sampling
from ..cost.tokens import TokenCounter
from ..judges.base import JudgeRequest
from ..judges.families import shape_request
from ..rubrics.logprob_score import TOP_LOGPROBS
from ..rubrics.rubric import Rubric
from ..rubrics.schema import schema_for
from ..transcripts.models import Resolved
from .fit import fit
from .judgment import Judgment, Reason, Status


@dataclass(slots=True)
class Job:
    entry: Entry
    rubric: Rubric
    judge: JudgeConfig
    request: JudgeRequest | None = None
    key: str | None = None
    est_tokens: int = 0
    result: Judgment | None = None
    #: the prompt was cut to fit the judge's context window
    truncated_input: bool = False
    #: repeated samples: this job is sample ``sample`` of ``samples`` for its (rubric, judge)
    sample: int = 0
    samples: int = 1

    def judgment(self, status: Status, reason: Reason | None = None, **fields: Any) -> Judgment:
        return Judgment(
            transcript_id=self.entry.transcript.id,
            rubric=self.rubric.name,
            rubric_version=self.rubric.version,
            judge=self.judge.name,
            status=status,
            reason=reason,
            cache_key=self.key,
            truncated_input=self.truncated_input,
            **fields,
        )


@dataclass(slots=True)
class Entry:
    transcript: Resolved
    jobs: list[Job] = field(default_factory=list)
    pending: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


def estimate_tokens(messages: tuple[dict[str, str], ...], max_tokens: int) -> int:
    """A cheap pre-send estimate for the TPM limiter (about 4 characters a token, plus the reply)."""
    return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages) + max_tokens


@lru_cache(maxsize=64)
def _counter(model: str, tokenizer: str | None) -> TokenCounter:
    return TokenCounter.for_model(model, tokenizer)


def make_entry(
    transcript: Resolved,
    rubrics: Sequence[Rubric],
    judges: Sequence[JudgeConfig],
    *,
    keyed: bool = True,
    samplings: Mapping[str, Sampling] | None = None,
) -> Entry:
    """The transcript's jobs. ``keyed=False`` (an estimate with no cache to look in) skips the
    cache key and the rate limiter's token guess, which nothing would read. ``samplings`` (judge
    name to ``judge.sampling``) lets a run resolve them once, not once per transcript."""
    entry = Entry(transcript)
    if samplings is None:
        samplings = {judge.name: judge.sampling for judge in judges} if keyed else {}
    blocks: dict[str, str] = {}
    present = transcript.present_inputs()
    for rubric in rubrics:
        missing = rubric.missing_inputs(transcript, present)
        messages = None if missing else tuple(rubric.render(transcript, blocks))
        for judge in judges:
            if messages is None:
                job = Job(entry, rubric, judge)
                entry.jobs.append(job)
                job.result = job.judgment("unscored", reason="missing_input", error=f"transcript has no {', '.join(missing)}")
                continue
            schema = schema_for(rubric) if judge.structured_output else None
            base = shape_request(judge, messages, rubric.max_tokens or judge.max_tokens, schema, rubric.fixed_prefix)
            truncated_input = False
            if judge.context_window is not None:
                truncate = (rubric.truncate or judge.truncate) == "middle"
                counter = _counter(judge.model, judge.tokenizer)
                fitted = fit(
                    messages,
                    transcript,
                    rubric,
                    window=judge.context_window,
                    completion_tokens=base.max_tokens,
                    counter=counter,
                    truncate=truncate,
                )
                if fitted.messages is None:
                    job = Job(entry, rubric, judge)
                    entry.jobs.append(job)
                    job.result = job.judgment(
                        "unscored",
                        reason="context_overflow",
                        prompt_tokens=fitted.prompt_tokens,
                        error=f"prompt of {fitted.prompt_tokens} tokens + {base.max_tokens} for the reply exceeds "
                        f"the context window of {judge.context_window}"
                        + (" even with its inputs cut" if truncate else ' (truncate = "middle" cuts it to fit)'),
                    )
                    continue
                if fitted.truncated:
                    truncated_input = True
                    base = dataclasses.replace(base, messages=fitted.messages)
            samples = rubric.samples or judge.samples
            top = TOP_LOGPROBS if judge.logprobs else None
            for sample in range(samples):
                # Each sample is its own job: cached, retried and budgeted like any judgment; with
                # a seed, sample i asks with seed + i so that k samples are not k copies of one.
                seed = None if judge.seed is None else judge.seed + sample
                job = Job(entry, rubric, judge, sample=sample, samples=samples)
                entry.jobs.append(job)
                job.truncated_input = truncated_input
                # (a frozen dataclass is costly to copy: only when a field changes)
                job.request = base if (seed, top) == (base.seed, base.top_logprobs) else dataclasses.replace(base, seed=seed, top_logprobs=top)
                if not keyed:
                    continue
                # The key is computed here, once, and carried by the job and its request: a batch
                # line's custom_id and a batch reply's match are this key, never a recomputation.
                job.key = request_key(samplings[judge.name], job.request, rubric=rubric.name, rubric_version=rubric.version, sample=sample)
                job.request = dataclasses.replace(job.request, key=job.key)
                job.est_tokens = estimate_tokens(job.request.messages, job.request.max_tokens)
    entry.pending = sum(1 for job in entry.jobs if job.result is None)
    if entry.pending == 0:
        entry.done.set()
    return entry
