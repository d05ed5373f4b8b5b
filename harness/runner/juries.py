"""Sequential juries in the engine: which members of a (transcript, rubric) are asked, and when.

For each transcript, rubric and sequential jury the members are ordered cheapest first (the
expected cost of the request each would send: its prompt at the judge's input price, its whole
completion budget at the output price, times its samples; a judge with no price last, ties in the
config's order). The engine sends only the first wave, as many as could decide the verdict
(``jury.sequential.votes_needed``), and holds the others back. As each wave's judgments complete,
the verdict is final (the rest are completed ``unscored``/``jury_settled``, no call, no cost) or
the next wave is released, through the same cache lookups, claims, budget and queues as any job:
a replay (``--offline``) or a rerun makes the same decisions from the same votes.

A member's vote is its judgment (its samples folded as judgments.jsonl folds them): a score, or for
majority the score's bin (a label's index for a label rubric); a member that gave none (unscored,
failed) is neither a vote nor still to come, as for the whole jury.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..config import JudgeConfig, JuryConfig
from ..cost.prices import call_cost
from ..jury.classes import Classes
from ..jury.sequential import votes_needed
from ..planning import Entry, Job, Judgment, estimate_tokens
from ..planning.samples import combine_samples
from ..rubrics.rubric import Rubric


@dataclass(slots=True)
class _Group:
    """One (transcript, rubric, sequential jury): its members' jobs, cheapest member first."""

    jury: JuryConfig
    classes: Classes
    members: list[list[Job]]
    asked: int = 0
    #: released members whose jobs are not all complete
    waiting: int = 0
    #: waiting for votes (counted in ``Sequencer._open``)
    open: bool = False


def _expected_cost(judge: JudgeConfig, jobs: list[Job]) -> float:
    """What asking this member is expected to cost: 0 when it needs no call, inf with no price."""
    pending = [job for job in jobs if job.result is None and job.request is not None]
    if not pending:
        return 0.0
    request = pending[0].request
    assert request is not None
    cost = call_cost(judge, estimate_tokens(request.messages, 0), request.max_tokens)
    return math.inf if cost is None else cost * len(pending)


class Sequencer:
    """The groups of a run's sequential juries, and what each completed job releases or settles."""

    def __init__(self, juries: Iterable[JuryConfig], rubrics: Sequence[Rubric], judges: Sequence[JudgeConfig]) -> None:
        self._juries = [j for j in juries if j.sequential]
        self._classes = {r.name: Classes.of(r) for r in rubrics}
        self._judges = {j.name: j for j in judges}
        self._group_of: dict[int, _Group] = {}
        self._open = 0
        #: set while no group waits for votes (the engine ends its workers only then)
        self.idle = asyncio.Event()
        self.idle.set()

    def hold(self, entries: Iterable[Entry]) -> tuple[set[int], list[tuple[Job, Judgment]]]:
        """Group the entries' members' jobs: the ids of the jobs held back, and the jobs already
        settled (a verdict decided by judgments made without a call). The others go out now."""
        held: set[int] = set()
        settled: list[tuple[Job, Judgment]] = []
        for entry in entries:
            by_pair: dict[tuple[str, str], list[Job]] = {}
            for job in entry.jobs:
                by_pair.setdefault((job.rubric.name, job.judge.name), []).append(job)
            for jury in self._juries:
                for rubric in dict.fromkeys(job.rubric.name for job in entry.jobs):
                    members = [by_pair.get((rubric, m), []) for m in jury.members]
                    costs = [_expected_cost(self._judges[m], jobs) for m, jobs in zip(jury.members, members, strict=True)]
                    order = sorted(range(len(members)), key=lambda i: costs[i])
                    group = _Group(jury, self._classes[rubric], [members[i] for i in order])
                    for jobs in group.members:
                        held.update(id(job) for job in jobs if job.result is None)
                    release, settle = self._advance(group)
                    held.difference_update(id(job) for job in release)
                    settled.extend(settle)
        return held, settled

    def answered(self, job: Job) -> tuple[list[Job], list[tuple[Job, Judgment]]]:
        """``job`` has its judgment: the jobs this releases (to send) and settles (to complete)."""
        group = self._group_of.pop(id(job), None)
        if group is None:
            return [], []
        member = next(jobs for jobs in group.members if any(j is job for j in jobs))
        if any(j.result is None for j in member):
            return [], []
        group.waiting -= 1
        if group.waiting:
            return [], []
        return self._advance(group)

    def _vote(self, group: _Group, jobs: list[Job]) -> float | None:
        judgment: Judgment | None = jobs[0].result if len(jobs) == 1 else combine_samples(jobs)
        if judgment is None or judgment.status != "scored":
            return None
        classes = group.classes
        if classes.labels is not None:
            return float(classes.labels.index(judgment.label)) if judgment.label in classes.labels else None
        if judgment.score is None:
            return None
        if group.jury.method == "majority":
            return float(classes.codes(np.array([judgment.score]))[0])
        return judgment.score

    def _advance(self, group: _Group) -> tuple[list[Job], list[tuple[Job, Judgment]]]:
        """The next wave of ``group`` to send, or, its verdict final, the rest settled."""
        classes = group.classes
        method = "majority" if classes.labels is not None else group.jury.method
        while True:
            cast = [v for jobs in group.members[: group.asked] if (v := self._vote(group, jobs)) is not None]
            need = votes_needed(method, cast, len(group.members) - group.asked, rank=classes.rank, lo=classes.lo, hi=classes.hi)
            if need == 0:
                self._close(group)
                rest = [job for jobs in group.members[group.asked :] for job in jobs if job.result is None]
                return [], [(job, settled_judgment(job, group.jury.name)) for job in rest]
            wave = group.members[group.asked : group.asked + need]
            group.asked += need
            release = [job for jobs in wave for job in jobs if job.result is None]
            if not release:  # these members needed no call (no input, a prompt too long): decide again
                continue
            for jobs in wave:
                pending = [job for job in jobs if job.result is None]
                if pending:
                    group.waiting += 1
                    self._group_of.update((id(job), group) for job in pending)
            if not group.open:
                group.open = True
                self._open += 1
                self.idle.clear()
            return release, []

    def _close(self, group: _Group) -> None:
        for jobs in group.members:
            for job in jobs:
                self._group_of.pop(id(job), None)
        if group.open:
            group.open = False
            self._open -= 1
            if self._open == 0:
                self.idle.set()


def settled_judgment(job: Job, jury: str) -> Judgment:
    """A member a sequential jury did not need: unscored, no call, no cost."""
    return job.judgment("unscored", reason="jury_settled", error=f"not asked: jury {jury}'s verdict was decided by its cheaper members' votes")
