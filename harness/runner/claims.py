"""A shared cache's claims, for one run: which missing keys this worker holds, which wait.

With a read-write cache, a key that misses is claimed before it is queued (one statement per
batch; see ``cache/base.py``). A key another worker holds waits here until its judgment appears
in the cache or its lease lapses (then this worker claims it), so each judgment is paid once
across workers and a killed worker's keys are taken over. A written judgment's claim is deleted
by the store after its row (in bulk); every called key is released in ``settle``, which the store
makes a no-op for a key whose judgment it was given (pending or written): only a call that wrote
nothing (failed, stopped) frees its key there.
"""

from __future__ import annotations

from ..cache.base import CachedReply, CacheStore
from ..planning import Job


class Claims:
    def __init__(self, cache: CacheStore | None, active: bool) -> None:
        self.cache = cache
        #: claims are taken only with a cache this run reads and writes
        self.active = active and cache is not None
        #: key -> the job waiting for another worker's judgment of it
        self.waiting: dict[str, Job] = {}

    async def sort(self, jobs: list[Job]) -> tuple[list[Job], list[tuple[Job, CachedReply]]]:
        """The jobs whose keys this worker now holds, and those the cache answers meanwhile; the
        rest wait in ``waiting``."""
        assert self.cache is not None
        keys = [job.key for job in jobs if job.key]
        granted = await self.cache.claim(keys)
        # Looked up after claiming: a key whose judgment was written since the batch's lookup (its
        # claim deleted after the row, or lapsed) is found here rather than paid for again.
        hits = await self.cache.replies(keys)
        ours: list[Job] = []
        served: list[tuple[Job, CachedReply]] = []
        for job in jobs:
            assert job.key is not None
            if job.key in hits:
                served.append((job, hits[job.key]))
            elif job.key in granted:
                ours.append(job)
            else:
                self.waiting[job.key] = job
        given_back = [key for key in granted if key in hits]
        if given_back:
            await self.cache.release(given_back)
        return ours, served

    def take_waiting(self) -> list[Job]:
        waiting = list(self.waiting.values())
        self.waiting.clear()
        return waiting

    async def settle(self, key: str) -> None:
        """A called key's claim: if its judgment was given to the cache, the store deletes the claim
        after the row; otherwise (failed, stopped) it is released here, so another worker may call it."""
        if self.active:
            assert self.cache is not None
            await self.cache.release([key])
