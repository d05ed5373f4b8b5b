"""``harness batch``: submit a run to a provider's batch API, follow it, collect it into the cache.

- ``submit`` plans the run exactly as ``harness run`` does (``build_plan`` + ``Planner``: same
  validation, rubrics, rendering and cache keys), leaves out cache hits and keys another batch
  holds, splits each judge's requests at its provider's limits, and for each batch *claims* its
  keys in the cache database before anything is sent (``cache/batches.py``). The provider's ids
  are recorded as soon as it gives them.
- ``refresh`` polls every open batch and re-attaches any that a killed process left half-sent.
- ``collect`` downloads every ended batch's results into the cache database, then (when nothing
  of the plan is still out) runs the plan through the ordinary run with the downloaded results
  answering its cache misses (``collected.py``): each reply is read, priced (batch rates) and
  cached exactly like a live reply, each errored/expired/cancelled request is ``failed`` with the
  provider's reason, and the usual outputs are written. Nothing is sent to any judge.
- ``export``/``import`` do the same through files, for engines without a REST batch endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import BinaryIO

from ..cache.batches import BatchRecord, BatchStore, Outcome, ledger_path, sort_results
from ..cache.location import CacheLocation
from ..capabilities import check_supported
from ..config import JudgeConfig
from ..errors import BatchError, ConfigError, UserInputError
from ..injection.policy import screen
from ..jsonlines import decode_json
from ..judges.base import JudgeRequest
from ..planning import Job, Judgment, Planner, RunOptions, RunPlan, build_plan
from ..providers import profile_of
from ..rubrics.rubric import Rubric
from ..runner.session import RunOutcome, collector_tuned, run_evaluation
from ..traces.loader import iter_transcripts
from .collected import Collected, Downloaded, Settled, settle_downloads
from .providers import BatchAPI, BatchHTTPError, Remote, make_api
from .wire import anthropic_line, openai_line, read_openai_result

#: A batch left "submitting" this long by its process is taken to be abandoned and re-attached.
STALE_AFTER_S = 300.0
#: ``api`` of a batch written to a file by ``export`` (run elsewhere, taken back by ``import``).
FILE_API = "file"


def batch_api_for(judge: JudgeConfig, forced: str | None = None) -> str:
    """Which batch API serves ``judge``: ``forced``, else its provider's (providers/)."""
    provider = profile_of(judge)
    if provider.batch_api is None:
        raise ConfigError(f"judge {judge.name!r} is {provider.title}: it has no batch API (use harness run)")
    if forced is not None:
        if forced not in ("openai", "anthropic"):
            raise ConfigError(f"--api must be openai or anthropic, not {forced!r}")
        return forced
    return provider.batch_api


def _line(api: str, key: str, judge: JudgeConfig, request: JudgeRequest) -> bytes:
    return anthropic_line(key, judge.model, request) if api == "anthropic" else openai_line(key, judge.model, request)


def _plan(options: RunOptions) -> tuple[RunOptions, RunPlan]:
    options = replace(options, batch=True)
    if options.offline or options.refresh or options.no_cache:
        raise ConfigError("batches are recorded in the cache: --offline, --refresh and --no-cache cannot be used with harness batch")
    plan = build_plan(options)
    assert plan.cache_path is not None
    ledger_path(plan.cache_path)  # a PostgreSQL cache is refused before anything is read or sent
    return options, plan


def _jobs(plan: RunPlan) -> tuple[list[Rubric], Iterator[Job]]:
    """Every planned job, as ``harness run`` makes them (the transcripts validated first)."""
    scanned, rubrics, require = plan.scan(detect=plan.injection != "off")
    suspected = screen(plan.injection, plan.input, scanned.findings)

    def jobs() -> Iterator[Job]:
        planner = Planner(rubrics, plan.judges, suspected=suspected, turns=plan.turns)  # judged per turn: a request per turn
        for count, (_, record) in enumerate(iter_transcripts(plan.input, plan.on_bad_record, plan.format, require)):
            if plan.limit is not None and count >= plan.limit:
                return
            yield from planner.entry(record.resolved()).jobs

    return rubrics, jobs()


def _age_s(record: BatchRecord) -> float:
    return (datetime.now(UTC) - datetime.fromisoformat(record.updated_at)).total_seconds()


# -- submit ------------------------------------------------------------------------------------


@dataclass(slots=True)
class SubmitReport:
    judgments: int = 0
    missing_input: int = 0
    #: already in the cache, held by another batch, or the same request twice in this plan
    skipped: int = 0
    sent: int = 0
    batches: list[BatchRecord] = field(default_factory=list)
    #: requests bigger than the provider's whole batch limit: left for a live run
    too_large: list[str] = field(default_factory=list)


class _Chunk:
    """One batch being filled: its request lines spooled to a temporary file, not kept in memory."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by flush()
        self.sizes: dict[str, int] = {}
        self.bytes = 0

    def add(self, key: str, line: bytes) -> None:
        self.file.write(line)
        self.sizes[key] = len(line)
        self.bytes += len(line)

    def only(self, keys: list[str]) -> BinaryIO:
        """The file of the lines of ``keys`` (all of them: this chunk's own file), from its start."""
        self.file.seek(0)
        if len(keys) == len(self.sizes):
            return self.file
        wanted = set(keys)
        kept = tempfile.TemporaryFile()  # noqa: SIM115 - closed by flush()
        for key, size in self.sizes.items():
            line = self.file.read(size)
            if key in wanted:
                kept.write(line)
        self.file.close()
        self.file = kept
        kept.seek(0)
        return kept


async def submit(options: RunOptions, *, api: str | None = None, max_requests: int | None = None) -> SubmitReport:
    """Submit every judgment of the plan that is neither cached nor held by another batch."""
    options, plan = _plan(options)
    check_supported(plan.judges, "batch", plan.juries)
    assert plan.cache_path is not None
    if max_requests is not None and max_requests < 1:
        raise ConfigError("--max-requests must be at least 1")
    apis: dict[str, tuple[str, BatchAPI]] = {}
    for judge in plan.judges:
        name = batch_api_for(judge, api)
        apis[judge.name] = (name, make_api(name, judge.endpoint, os.environ.get(judge.api_key_env) or None))
    report = SubmitReport()
    _, jobs = _jobs(plan)
    chunks = {judge.name: _Chunk() for judge in plan.judges}
    judges = {judge.name: judge for judge in plan.judges}
    store = BatchStore(plan.cache_path)
    try:

        async def flush(judge: JudgeConfig) -> None:
            chunk = chunks[judge.name]
            if not chunk.sizes:
                return
            chunks[judge.name] = _Chunk()
            name, client = apis[judge.name]
            try:
                keys = list(chunk.sizes)
                claimed = store.claim(
                    api=name, endpoint=judge.endpoint, api_key_env=judge.api_key_env, judge=judge.name, model=judge.model, keys=keys
                )
                if claimed is None:
                    report.skipped += len(keys)
                    return
                batch_id, free = claimed
                report.skipped += len(keys) - len(free)
                try:
                    remote = await client.submit(chunk.only(free), lambda file_id: store.update(batch_id, input_file_id=file_id))
                except BatchHTTPError as exc:
                    if exc.definite:
                        store.release(batch_id)
                        raise BatchError(f"{exc} (batch {batch_id} was not created; its requests were released)") from exc
                    raise BatchError(f"{exc} (batch {batch_id} may have been created: `harness batch status` re-attaches it)") from exc
            finally:
                chunk.file.close()
            store.update(batch_id, remote_id=remote.id, status=remote.status, detail=json.dumps(remote.detail))
            report.sent += len(free)
            record = store.get(batch_id)
            assert record is not None
            report.batches.append(record)

        for job in jobs:
            report.judgments += 1
            if job.result is not None:
                report.missing_input += 1
                continue
            assert job.key is not None and job.request is not None
            name, client = apis[job.judge.name]
            limit = min(max_requests or client.max_requests, client.max_requests)
            chunk = chunks[job.judge.name]
            if job.key in chunk.sizes:
                report.skipped += 1
                continue
            line = _line(name, job.key, job.judge, job.request)
            if len(line) > client.max_bytes:
                report.too_large.append(job.key)
                continue
            if len(chunk.sizes) >= limit or chunk.bytes + len(line) > client.max_bytes:
                await flush(job.judge)
                chunk = chunks[job.judge.name]
            chunk.add(job.key, line)
        for judge in judges.values():
            await flush(judge)
    finally:
        for chunk in chunks.values():
            chunk.file.close()
        store.close()
        for _, client in apis.values():
            await client.aclose()
    return report


# -- status ------------------------------------------------------------------------------------


@dataclass(slots=True)
class BatchView:
    record: BatchRecord
    note: str = ""


def _client(record: BatchRecord) -> BatchAPI:
    return make_api(record.api, record.endpoint, os.environ.get(record.api_key_env) or None)


async def _resolve(store: BatchStore, record: BatchRecord, client: BatchAPI, stale_after_s: float) -> str:
    """A batch a process left "submitting": re-attach it, finish creating it, or release it."""
    if _age_s(record) < stale_after_s:
        return "being submitted by another process"
    if record.input_file_id:
        remote = await client.find(record.input_file_id)
        if remote is None:  # uploaded, never created: create it now from the same file
            remote = await client.create_from_file(record.input_file_id)
            note = "created from its uploaded file"
        else:
            note = "re-attached"
        store.update(record.id, remote_id=remote.id, status=remote.status, detail=json.dumps(remote.detail))
        return note
    if record.api == "openai":  # nothing uploaded: nothing at the provider
        store.release(record.id)
        return "never sent: released"
    return (
        "unconfirmed: the process was killed while creating it; check the provider's console and, "
        f"if no such batch exists, run `harness batch release {record.id}`"
    )


async def refresh(cache: CacheLocation, *, stale_after_s: float = STALE_AFTER_S) -> list[BatchView]:
    """Poll every open batch of the cache and record what the providers say."""
    views: list[BatchView] = []
    with BatchStore(cache) as store:
        for record in store.batches(open_only=True):
            if record.api == FILE_API:
                views.append(BatchView(record, "exported: waiting for `harness batch import`"))
                continue
            client = _client(record)
            note = ""
            try:
                if record.remote_id is None:
                    note = await _resolve(store, record, client, stale_after_s)
                elif not record.ended:
                    remote = await client.get(record.remote_id)
                    store.update(record.id, status=remote.status, detail=json.dumps(remote.detail))
            except BatchError as exc:
                note = f"could not poll: {exc}"
            finally:
                await client.aclose()
            fresh = store.get(record.id)
            assert fresh is not None
            views.append(BatchView(fresh, note))
    return views


def batches(cache: CacheLocation) -> list[BatchRecord]:
    with BatchStore(cache) as store:
        return store.batches()


def release(cache: CacheLocation, batch_id: int) -> BatchRecord:
    """Give up a batch: its keys without a result may be submitted again. Refused only for a
    batch still running at the provider, whose results are still to come."""
    with BatchStore(cache) as store:
        record = store.get(batch_id)
        if record is None:
            raise UserInputError(f"no batch {batch_id} in {cache}")
        if record.remote_id is not None and record.open and not record.ended and record.api != FILE_API:
            raise UserInputError(f"batch {batch_id} is still running at the provider ({record.remote_id}, {record.status}): collect it when it ends")
        store.release(batch_id)
        fresh = store.get(batch_id)
        assert fresh is not None
        return fresh


# -- collect -----------------------------------------------------------------------------------


@dataclass(slots=True)
class CollectReport:
    #: each downloaded batch (its record as settled), its counts and reading problems
    downloaded: list[Settled] = field(default_factory=list)
    #: open batches of the plan's judges: the outputs wait for them
    waiting: list[BatchRecord] = field(default_factory=list)
    outcome: RunOutcome | None = None
    notes: list[str] = field(default_factory=list)


async def download_ended(cache: CacheLocation) -> list[Downloaded]:
    """Download every ended, uncollected batch's results into memory, in batch order. Nothing is
    recorded: a collect that dies before ``settle_downloads`` downloads them again."""
    done: list[Downloaded] = []
    with BatchStore(cache) as store:
        for record in store.batches(open_only=True):
            if not record.ended or record.remote_id is None or record.api == FILE_API:
                continue
            client = _client(record)
            try:
                remote = Remote(record.remote_id, record.status, True, record.detail_json())
                read = await client.results(remote)
                # Every complete line is kept; a request whose line could not be read is failed
                # with the reason, which frees its key for the next submit.
                reason = partial(read.missing_reason, client.missing_reason(remote))
                results, counts = sort_results(store.keys(record.id), read.outcomes, reason)
            finally:
                await client.aclose()
            done.append(Downloaded(record, results, counts, read.problems))
    return done


def _waiting(store: BatchStore, plan: RunPlan) -> list[BatchRecord]:
    mine = {(j.name, j.model, j.endpoint) for j in plan.judges}
    return [r for r in store.batches(open_only=True) if (r.judge, r.model, r.endpoint) in mine]


async def write_outputs(
    options: RunOptions,
    downloads: Sequence[Downloaded] = (),
    *,
    on_start: Callable[[int], None] | None = None,
    on_judgment: Callable[[Judgment], None] | None = None,
) -> RunOutcome:
    """Run the plan with the results (``downloads``, and those the ledger keeps) answering its cache
    misses: cache, outputs, exit code; then settle the downloads. A result is matched by its
    ``custom_id``, the key the plan wrote onto the request at submit and computes again now
    (``cache/keys.request_key``)."""
    return (await _write_outputs(options, downloads, on_start=on_start, on_judgment=on_judgment))[0]


async def _write_outputs(
    options: RunOptions,
    downloads: Sequence[Downloaded],
    *,
    on_start: Callable[[int], None] | None = None,
    on_judgment: Callable[[Judgment], None] | None = None,
) -> tuple[RunOutcome, list[Settled]]:
    options, plan = _plan(options)
    assert plan.cache_path is not None
    answers = Collected(plan.cache_path, downloads)
    try:
        outcome = await run_evaluation(options, on_start=on_start, on_judgment=on_judgment, answers=answers)
    except BaseException:
        # The run never got to settle (refused before judging, or stopped): keep what was
        # downloaded in the ledger; if even that fails, the next collect downloads it again.
        if answers.settled is None:
            with contextlib.suppress(Exception):
                answers.settle()
        raise
    # ``settled`` is None when settling failed: that is the run's error, and the batches stay uncollected.
    return outcome, answers.settled or []


async def collect(
    options: RunOptions,
    *,
    write: bool = True,
    on_start: Callable[[int], None] | None = None,
    on_judgment: Callable[[Judgment], None] | None = None,
) -> CollectReport:
    """Poll, download what has ended, and when none of the plan is still out write the outputs."""
    options, plan = _plan(options)
    assert plan.cache_path is not None
    report = CollectReport()
    for view in await refresh(plan.cache_path):
        if view.note:
            report.notes.append(f"batch {view.record.id}: {view.note}")
    with collector_tuned():  # 100,000 parsed results are many young objects: as in a run
        downloads = await download_ended(plan.cache_path)
    ended = {d.record.id for d in downloads}
    with BatchStore(plan.cache_path) as store:
        report.waiting = [r for r in _waiting(store, plan) if r.id not in ended]
    if write and not report.waiting:
        report.outcome, report.downloaded = await _write_outputs(options, downloads, on_start=on_start, on_judgment=on_judgment)
    else:
        report.downloaded = settle_downloads(plan.cache_path, downloads)
    return report


async def wait(
    cache: Path,
    *,
    first_s: float = 5.0,
    most_s: float = 60.0,
    timeout_s: float | None = None,
    on_poll: Callable[[list[BatchView]], None] | None = None,
) -> list[BatchView]:
    """Poll until every open batch has ended (or ``timeout_s`` has passed), backing off from
    ``first_s`` to ``most_s``. Batches polling cannot end (exported, unconfirmed) are not waited for."""
    delay = first_s
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        views = await refresh(cache)
        if on_poll is not None:
            on_poll(views)
        if all(v.record.ended or v.record.api == FILE_API or v.record.remote_id is None for v in views):
            return views
        if deadline is not None and time.monotonic() + delay > deadline:
            return views
        await asyncio.sleep(delay)
        delay = min(most_s, delay * 2)


# -- files: export and import ------------------------------------------------------------------


@dataclass(slots=True)
class ExportReport:
    judgments: int = 0
    missing_input: int = 0
    skipped: int = 0
    exported: int = 0
    batch: BatchRecord | None = None


def export(options: RunOptions, path: Path) -> ExportReport:
    """Write the plan's unanswered requests as OpenAI batch JSONL to ``path`` and hold their keys
    (one batch of api "file") until ``import`` takes the results back."""
    options, plan = _plan(options)
    check_supported(plan.judges, "export", plan.juries)
    assert plan.cache_path is not None
    report = ExportReport()
    chunk = _Chunk()  # spooled to a temporary file: 100,000 requests are not held in memory
    _, jobs = _jobs(plan)
    try:
        for job in jobs:
            report.judgments += 1
            if job.result is not None:
                report.missing_input += 1
                continue
            assert job.key is not None and job.request is not None
            if job.key in chunk.sizes:
                report.skipped += 1
                continue
            chunk.add(job.key, openai_line(job.key, job.judge.model, job.request))
        judge = plan.judges[0] if len(plan.judges) == 1 else None
        path.parent.mkdir(parents=True, exist_ok=True)
        with BatchStore(plan.cache_path) as store:
            claimed = store.claim(
                api=FILE_API,
                endpoint=judge.endpoint if judge else "several",
                api_key_env="",
                judge=judge.name if judge else ",".join(j.name for j in plan.judges),
                model=judge.model if judge else ",".join(j.model for j in plan.judges),
                keys=list(chunk.sizes),
            )
            if claimed is None:
                report.skipped += len(chunk.sizes)
                path.write_bytes(b"")
                return report
            batch_id, free = claimed
            report.skipped += len(chunk.sizes) - len(free)
            tmp = path.with_name(path.name + ".part")
            with tmp.open("wb") as fh:
                shutil.copyfileobj(chunk.only(free), fh, 1 << 20)
            tmp.replace(path)
            store.update(batch_id, remote_id=str(path.resolve()), status="exported")
            report.exported = len(free)
            report.batch = store.get(batch_id)
    finally:
        chunk.file.close()
    return report


def _read_output_file(path: Path) -> Iterator[Outcome]:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read: {exc.strerror}") from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield read_openai_result(decode_json(raw), f"{path}:{number}")
            except ValueError as exc:
                raise UserInputError(f"{path}:{number}: custom_id: not a batch output line ({exc})") from None


def import_results(options: RunOptions, paths: Sequence[Path]) -> dict[str, int]:
    """Take OpenAI-format batch output files (vLLM ``run_batch`` writes them) into the cache
    database. Every exported batch is marked collected; its requests missing from the files are
    failed ("not in the imported output")."""
    options, plan = _plan(options)
    assert plan.cache_path is not None
    outcomes: dict[str, Outcome] = {}
    for path in paths:
        for outcome in _read_output_file(path):  # every file is read (and checked) before anything is stored
            outcomes[outcome.key] = outcome
    totals = {"succeeded": 0, "failed": 0, "unknown": 0, "duplicate": 0}
    with BatchStore(plan.cache_path) as store:
        exported = [r for r in store.batches(open_only=True) if r.api == FILE_API]
        held = {key: record.id for record in exported for key in store.keys(record.id)}
        totals["unknown"] = sum(1 for key in outcomes if key not in held)
        settled: list[tuple[int, dict[str, Outcome]]] = []
        for record in exported:
            mine = (o for key, o in outcomes.items() if held.get(key) == record.id)
            results, counts = sort_results(store.keys(record.id), mine, "not in the imported output")
            settled.append((record.id, results))
            for name in ("succeeded", "failed"):
                totals[name] += counts[name]
        store.settle(settled)  # kept in the ledger: the next collect (or write_outputs) stores them
    return totals
