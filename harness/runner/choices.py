"""Repeated samples through one ``n = k`` request (``samples_via = "n"``).

The missing samples of one (transcript, rubric, judge) go as one request: the first sample's job
is queued with ``n`` = their number, the others wait for its reply's choices 1..n-1. A choice the
endpoint did not return is asked for on its own, so every sample ends with a reply.
"""

from __future__ import annotations

from dataclasses import replace

from ..judges.base import JudgeReply, TokenAlternatives
from ..planning import Job

ChoiceLogprobs = tuple[tuple[str, TokenAlternatives], ...] | None


class NChoices:
    def __init__(self) -> None:
        #: the leader's key -> the other samples waiting for its choices
        self._members: dict[str, list[Job]] = {}
        #: the leader's key -> choices 1..n-1 of its reply (texts, logprobs) once it has answered
        self._replies: dict[str, tuple[tuple[str, ...], tuple[ChoiceLogprobs, ...]]] = {}

    def group(self, jobs: list[Job]) -> list[Job]:
        """The jobs to queue: one per n-request (its ``n`` raised to the samples it carries)."""
        sent: list[Job] = []
        leaders: dict[tuple[int, str, str], Job] = {}
        for job in jobs:
            if job.samples == 1 or job.judge.samples_via != "n":
                sent.append(job)
                continue
            group = (id(job.entry), job.rubric.name, job.judge.name)
            leader = leaders.get(group)
            if leader is None:
                leaders[group] = job
                sent.append(job)
                continue
            assert leader.key is not None and leader.request is not None
            members = self._members.setdefault(leader.key, [])
            members.append(job)
            leader.request = replace(leader.request, n=1 + len(members))
        return sent

    def answered(self, leader: Job, reply: JudgeReply) -> None:
        """Keep the choices 1..n-1 of the leader's reply for its members."""
        if reply.more_texts:
            assert leader.key is not None
            self._replies[leader.key] = (reply.more_texts, reply.more_logprobs)

    def members(self, leader: Job) -> list[tuple[Job, tuple[str, ChoiceLogprobs] | None]]:
        """The leader's other samples, each with its choice (text, logprobs), or None when the
        reply did not hold one."""
        assert leader.key is not None
        members = self._members.pop(leader.key, [])
        texts, logprobs = self._replies.pop(leader.key, ((), ()))
        return [(member, (texts[i], logprobs[i] if i < len(logprobs) else None) if i < len(texts) else None) for i, member in enumerate(members)]
