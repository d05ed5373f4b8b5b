"""A transcript's jobs: one per (rubric, judge), the path ``run`` and ``estimate`` share.

For each (rubric, judge): a rubric whose inputs the transcript lacks gives an ``unscored``/
``missing_input`` judgment at once; otherwise the prompt is rendered, the request built and its
cache key computed. Nothing here touches the network or the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cache.keys import cache_key
from ..config import JudgeConfig
from ..judges.base import JudgeRequest
from ..rubrics.logprob_score import TOP_LOGPROBS
from ..rubrics.rubric import Rubric
from ..transcripts.models import Resolved
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


def make_entry(transcript: Resolved, rubrics: Sequence[Rubric], judges: Sequence[JudgeConfig], *, keyed: bool = True) -> Entry:
    """The transcript's jobs. ``keyed=False`` (an estimate with no cache to look in) skips the
    cache key and the rate limiter's token guess, which nothing would read."""
    entry = Entry(transcript)
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
            samples = rubric.samples or judge.samples
            top = TOP_LOGPROBS if judge.logprobs else None
            max_tokens = rubric.max_tokens or judge.max_tokens
            for sample in range(samples):
                # Each sample is its own job: cached, retried and budgeted like any judgment; with
                # a seed, sample i asks with seed + i so that k samples are not k copies of one.
                seed = None if judge.seed is None else judge.seed + sample
                job = Job(entry, rubric, judge, sample=sample, samples=samples)
                entry.jobs.append(job)
                job.request = JudgeRequest(messages, max_tokens, judge.temperature, seed, top_logprobs=top)
                if not keyed:
                    continue
                job.key = cache_key(
                    model=judge.model,
                    base_url=judge.endpoint,
                    messages=messages,
                    temperature=judge.temperature,
                    max_tokens=max_tokens,
                    seed=seed,
                    rubric=rubric.name,
                    rubric_version=rubric.version,
                    sample=sample,
                    logprobs=top,
                )
                job.est_tokens = estimate_tokens(messages, max_tokens)
    entry.pending = sum(1 for job in entry.jobs if job.result is None)
    if entry.pending == 0:
        entry.done.set()
    return entry
