"""A transcript's jobs: one per (rubric, judge), the path ``run`` and ``estimate`` share.

For each (rubric, judge): a rubric whose inputs the transcript lacks gives an ``unscored``/
``missing_input`` judgment at once; otherwise the prompt is rendered (a long trajectory compacted,
``agent.render``), fitted to the judge's context window (``fit``), the request built and its
cache key computed. Nothing here touches the network or the cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..cache.keys import KeyHasher, request_hasher
from ..config import JudgeConfig, Sampling
from ..cost.tokens import TokenCounter
from ..judges.base import JudgeRequest
from ..judges.families import shape_request
from ..rubrics.inputs import Block, present_inputs
from ..rubrics.logprob_score import TOP_LOGPROBS
from ..rubrics.rubric import Rubric
from ..rubrics.schema import schema_for
from ..transcripts.models import Resolved
from .fit import byte_bound, fit, fits_whole
from .judgment import MISSING_INPUT, Judgment, Reason, Status
from .turns import TurnOptions, turn_views


@dataclass(slots=True)
class Job:
    entry: Entry
    rubric: Rubric
    judge: JudgeConfig
    request: JudgeRequest | None = None
    key: str | None = None
    result: Judgment | None = None
    #: the prompt was cut to fit the judge's context window
    truncated_input: bool = False
    #: repeated samples: this job is sample ``sample`` of ``samples`` for its (rubric, judge)
    sample: int = 0
    samples: int = 1
    #: an input (the trajectory) was compacted by its rule to fit its budget or the window
    compacted_input: bool = False
    #: judged per turn (``turns.py``): the turn this job judges (from 1); None: the whole transcript
    turn: int | None = None

    @property
    def est_tokens(self) -> int:
        """The rate limiter's guess at the request's tokens (only a live call needs it)."""
        return 0 if self.request is None else estimate_tokens(self.request.messages, self.request.max_tokens)

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
            compacted_input=self.compacted_input,
            **fields,
        )


@dataclass(slots=True)
class Entry:
    transcript: Resolved
    jobs: list[Job] = field(default_factory=list)
    pending: int = 0
    #: judged per turn: the turns selected that the transcript does not have
    turns_absent: int = 0
    #: set by whoever waits for this entry's last job (the engine's writer, for the head of its
    #: window only): most entries finish before anyone waits, so none is made for them
    waiter: asyncio.Future[None] | None = None

    def finished_one(self) -> None:
        """One of its jobs has its judgment."""
        self.pending -= 1
        if self.pending == 0 and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait(self) -> None:
        """Until every job has its judgment."""
        if self.pending:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter


def estimate_tokens(messages: tuple[dict[str, str], ...], max_tokens: int) -> int:
    """A cheap pre-send estimate for the TPM limiter (about 4 characters a token, plus the reply)."""
    return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages) + max_tokens


@lru_cache(maxsize=64)
def _counter(model: str, tokenizer: str | None) -> TokenCounter:
    return TokenCounter.for_model(model, tokenizer)


@dataclass(slots=True)
class _Sample:
    """Sample ``index`` of a (rubric, judge): its request's shape (messages aside) and key hasher."""

    index: int
    shape: JudgeRequest
    hasher: KeyHasher | None


@dataclass(slots=True)
class _Pair:
    """One (rubric, judge): everything its request shares across transcripts, worked out once."""

    rubric: Rubric
    judge: JudgeConfig
    shape: JudgeRequest
    samples: list[_Sample]


class Planner:
    """Plans transcripts' jobs for fixed rubrics and judges: what a (rubric, judge) pair's requests
    share (shape, seeds, logprobs, the constant part of the key) is worked out once, in
    ``__init__``, and each transcript adds only its messages. ``keyed=False`` (an estimate with no
    cache to look in) skips the cache key, which nothing would read."""

    def __init__(
        self,
        rubrics: Sequence[Rubric],
        judges: Sequence[JudgeConfig],
        *,
        keyed: bool = True,
        samplings: Mapping[str, Sampling] | None = None,
        suspected: Mapping[str, str] | None = None,
        turns: TurnOptions | None = None,
    ) -> None:
        self.rubrics = list(rubrics)
        #: transcript id -> why its judgments are unscored ``injection_suspected`` and never sent
        self._suspected = suspected or {}
        #: judged per turn (``turns.py``); None: each transcript judged whole, as one exchange
        self.turns = turns
        if not keyed:
            samplings = None
        elif samplings is None:
            samplings = {judge.name: judge.sampling for judge in judges}
        self._pairs: list[list[_Pair]] = []
        self._windowed = any(judge.context_window is not None for judge in judges)
        #: a transcript's present inputs -> each rubric's missing ones
        self._missing: dict[frozenset[str], list[list[str]]] = {}
        for rubric in self.rubrics:
            pairs = []
            for judge in judges:
                schema = schema_for(rubric) if judge.structured_output else None
                shape = shape_request(judge, (), rubric.max_tokens or judge.max_tokens, schema, rubric.fixed_prefix)
                top = TOP_LOGPROBS if judge.logprobs else None
                samples = []
                for index in range(rubric.samples or judge.samples):
                    # Each sample is its own job: cached, retried and budgeted like any judgment;
                    # with a seed, sample i asks with seed + i so that k samples are not k copies of one.
                    seed = None if judge.seed is None else judge.seed + index
                    sample_shape = (
                        shape if (seed, top) == (shape.seed, shape.top_logprobs) else dataclasses.replace(shape, seed=seed, top_logprobs=top)
                    )
                    hasher = None
                    if samplings is not None:
                        hasher = request_hasher(samplings[judge.name], sample_shape, rubric=rubric.name, rubric_version=rubric.version, sample=index)
                    samples.append(_Sample(index, sample_shape, hasher))
                pairs.append(_Pair(rubric, judge, shape, samples))
            self._pairs.append(pairs)

    def entry(self, transcript: Resolved) -> Entry:
        """The transcript's jobs, one per (rubric, judge, sample), in that order; judged per turn,
        one per (turn, rubric, judge, sample)."""
        entry = Entry(transcript)
        if not self.rubrics:  # an agent-only run: no rubric, so no input of one to work out
            return entry
        if self.turns is None:
            self._plan(entry, transcript, None)
        else:
            views, entry.turns_absent = turn_views(transcript, self.turns)
            for view in views:
                self._plan(entry, view, view.turn)
        entry.pending = sum(1 for job in entry.jobs if job.result is None)
        return entry

    def _plan(self, entry: Entry, transcript: Resolved, turn: int | None) -> None:
        """Add ``transcript``'s jobs to ``entry`` (``turn``: the turn the view is, when judged per turn)."""
        jobs = entry.jobs
        blocks: dict[str, str] = {}
        compaction: dict[str, Block] = {}
        present = present_inputs(transcript)
        missing_by_rubric = self._missing.get(present)
        if missing_by_rubric is None:  # a few kinds of transcript per input file: worked out once each
            missing_by_rubric = self._missing[present] = [rubric.missing_inputs(transcript, present) for rubric in self.rubrics]
        suspected = self._suspected.get(transcript.id)
        for rubric, pairs, missing in zip(self.rubrics, self._pairs, missing_by_rubric, strict=True):
            if suspected is not None and not missing:
                for pair in pairs:  # (one judgment a pair, as for a missing input)
                    job = Job(entry, rubric, pair.judge, turn=turn)
                    jobs.append(job)
                    job.result = job.judgment("unscored", reason="injection_suspected", error=suspected)
                continue
            messages = None if missing else rubric.messages(transcript, blocks, compaction)
            shifted = transcript.history is not None and "history" not in rubric.inputs
            # one count of the prompt's bytes for every judge of the rubric that has a window
            bound = byte_bound(messages) if messages is not None and self._windowed else 0
            for pair in pairs:
                judge = pair.judge
                if messages is None:
                    job = Job(entry, rubric, judge, turn=turn)
                    jobs.append(job)
                    job.result = job.judgment("unscored", reason="missing_input", error=MISSING_INPUT + ", ".join(missing))
                    continue
                sent, truncated_input = messages, False
                compacted = bool(rubric.compactable and rubric.compacted(compaction))
                window = judge.context_window
                if window is not None and not fits_whole(bound, window, pair.shape.max_tokens):
                    truncate = (rubric.truncate or judge.truncate) == "middle"
                    fitted = fit(
                        messages,
                        transcript,
                        rubric,
                        window=window,
                        completion_tokens=pair.shape.max_tokens,
                        counter=_counter(judge.model, judge.tokenizer),
                        truncate=truncate,
                    )
                    if fitted.messages is None:
                        job = Job(entry, rubric, judge, turn=turn)
                        jobs.append(job)
                        job.result = job.judgment(
                            "unscored",
                            reason="context_overflow",
                            prompt_tokens=fitted.prompt_tokens,
                            error=f"prompt of {fitted.prompt_tokens} tokens + {pair.shape.max_tokens} for the reply exceeds "
                            f"the context window of {window}" + _overflow_note(rubric, truncate),
                        )
                        continue
                    sent = fitted.messages
                    truncated_input = fitted.truncated
                    compacted = compacted or fitted.compacted
                count = len(pair.samples)
                for sample in pair.samples:
                    # The key is computed here, once, and carried by the job and its request: a
                    # batch line's custom_id and a batch reply's match are this key, never a recomputation.
                    key = None if sample.hasher is None else sample.hasher.key(sent)
                    request = sample.shape.with_messages(sent, key)
                    if shifted:  # the history sits inside the rubric's fixed text: the cacheable prefix ends before it
                        request = dataclasses.replace(request, fixed_prefix=min(request.fixed_prefix, rubric.history_at))
                    jobs.append(Job(entry, rubric, judge, request, key, None, truncated_input, sample.index, count, compacted, turn))


def _overflow_note(rubric: Rubric, truncate: bool) -> str:
    """What was tried before a prompt was found not to fit."""
    tried = []
    if rubric.compactable:
        tried.append("its " + " and ".join(rubric.compactable) + " compacted to the kept steps")
    if truncate:
        tried.append("its inputs cut")
    if tried:
        return " even with " + " and ".join(tried) + ("" if truncate else ' (truncate = "middle" also cuts its text inputs)')
    return ' (truncate = "middle" cuts it to fit)'


def make_entry(
    transcript: Resolved,
    rubrics: Sequence[Rubric],
    judges: Sequence[JudgeConfig],
    *,
    keyed: bool = True,
    samplings: Mapping[str, Sampling] | None = None,
) -> Entry:
    """One transcript's jobs (a :class:`Planner` used once: one that plans many is faster)."""
    return Planner(rubrics, judges, keyed=keyed, samplings=samplings).entry(transcript)
