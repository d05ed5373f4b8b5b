"""Clients of the two batch APIs, over aiohttp, behind one small interface.

``submit(lines)`` sends one batch (OpenAI: upload the JSONL with ``purpose=batch``, then create the
batch from the file; Anthropic: one ``POST /v1/messages/batches``; every URL is made by
``providers.root_of``, the rule the live judges use); ``get`` polls it; ``results``
downloads its result lines (to a temporary file first, so a 200 MB output is never held whole);
``find`` looks for a batch made from an uploaded file (OpenAI only), which is how a submit
killed between upload and creation is re-attached instead of sent again.

Every HTTP failure is a :class:`harness.errors.BatchHTTPError` whose ``definite`` tells whether the
provider certainly did not act (a 4xx answer, a refused connection) or might have (timeout,
connection lost, 5xx). The transport is the harness's one HTTP layer (``net.Session``: timeouts,
redirects never followed, every answer read up to a cap and decoded depth-bounded, the key
redacted) and its status table (``net.failures``). Every step retries a bounded number of times:
a read (poll, list, download) on any retried failure; a write (upload, create) only where the
provider certainly did not act (a 429, a refused connection), so a retry never makes a second batch.
"""

from __future__ import annotations

import asyncio
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import aiohttp

from ..cache.batches import Outcome
from ..errors import BatchError, BatchHTTPError
from ..jsonlines import decode_json
from ..judges.protocol import error_fields
from ..judges.retry import MAX_RETRY_AFTER_S, Attempts, call_with_retries
from ..net import RETRIED, Failure, Session, Timeouts, retry_after, status_failure
from ..net.failures import definite
from ..providers import PROFILES, root_of
from .wire import OPENAI_ENDPOINT, Limits, read_anthropic_result, read_openai_result

#: Seconds for a whole request (a 200 MB upload), to connect, and between two reads of an answer.
TIMEOUTS = Timeouts(total_s=600, connect_s=30, read_s=120)
#: The largest JSON answer read (a batch object, a page of the batch list).
ANSWER_BYTE_CAP = 16 << 20
#: The largest result file downloaded (to disk): well above what a 50,000-request batch produces.
DOWNLOAD_BYTE_CAP = 8 << 30
#: Attempts of one poll, list or create step (the first and its retries), with the judges' backoff.
MAX_ATTEMPTS = 4
#: Waits before each retry of a result download (a 5xx, a 429, a connection lost mid-body):
#: bounded, so a provider that keeps failing ends the collect with the reason.
RETRY_DELAYS_S: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)


@dataclass(slots=True)
class Results:
    """A batch's result lines, read lazily, and why some could not be read (filled while reading):
    the requests without a line are then failed with that reason, so their keys are free again."""

    outcomes: Iterator[Outcome] = field(default_factory=lambda: iter(()))
    problems: list[str] = field(default_factory=list)
    #: the body of a download ended early: its last line may be a part
    cut: bool = False

    def missing_reason(self, otherwise: str) -> str:
        """Why a request has no result line: the reading problem if there was one."""
        if not self.problems:
            return otherwise
        more = f" (and {len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 else ""
        return f"the batch output could not be read whole: {self.problems[0]}{more}; submit again to resend"


def _spooled(spool: BinaryIO) -> Iterator[bytes]:
    with spool:
        yield from spool


@dataclass(frozen=True, slots=True)
class Remote:
    """A batch as the provider last described it."""

    id: str
    status: str
    ended: bool
    detail: dict[str, Any]
    input_file_id: str | None = None

    def progress(self) -> str:
        counts = self.detail.get("request_counts") or {}
        return ", ".join(f"{k} {v}" for k, v in counts.items())


class BatchAPI(ABC):
    name: str
    max_requests: int
    max_bytes: int

    def __init__(self, base_url: str, api_key: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self._session: Session | None = None
        #: the sleep between retries (a test passes a fake clock)
        self.sleep: Callable[[float], Any] | None = None

    def url(self, path: str) -> str:
        """``path`` of this API at the judge's base URL, by the rule the live judges use (``providers.root_of``)."""
        return root_of(self.name, self.base_url) + path

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = Session(self.name, "batch", timeouts=TIMEOUTS, headers=self._headers(), secrets=[self._key])
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.aclose()
            self._session = None

    def _headers(self) -> dict[str, str]:
        """The key's headers, as the provider of the same name sends them live (``providers/``)."""
        return PROFILES[self.name].auth_headers(self._key)

    async def _request(self, method: str, url: str, what: str, **kwargs: Any) -> Any:
        """The decoded answer of one step, retried at most ``MAX_ATTEMPTS`` times: a GET on any
        failure the table retries, a write only where the provider certainly did not act."""
        write = method != "GET"

        def again(exc: BaseException) -> bool:
            failure = Failure(exc.failure) if isinstance(exc, BatchHTTPError) and exc.failure else None
            return failure is not None and failure in RETRIED and (not write or definite(failure))

        async def attempt() -> Any:
            # A body made by a function (an upload's form, read from its file) is made again per attempt.
            data = kwargs.get("data")
            return await self._once(method, url, what, **{**kwargs, "data": data()} if callable(data) else kwargs)

        return await call_with_retries(attempt, MAX_ATTEMPTS, Attempts(), self.sleep, retried=(BatchHTTPError,), retry_if=again)

    async def _once(self, method: str, url: str, what: str, **kwargs: Any) -> Any:
        where = f"{self.name} {what}"
        reply = await self.session.request(method, url, where=where, cap=ANSWER_BYTE_CAP, **kwargs)
        if reply.ok:
            return reply.json()
        body: Any = reply.json_or_none()
        code, message = error_fields(body)
        failure = status_failure(reply.status, code) or Failure.MALFORMED
        detail = f"{code + ': ' if code else ''}{message or body or reply.text(200) or reply.reason}"
        raise self.session.error(failure, f"{where}: HTTP {reply.status}: {detail}", status=reply.status, retry_after=retry_after(reply.headers))

    async def _download(self, url: str, what: str, read: Results) -> Iterator[bytes]:
        """The lines of ``url``, spooled to a temporary file. A 5xx, a 429 or a connection lost
        (mid-body too) is retried, ``len(RETRY_DELAYS_S)`` times with those waits (a 429's
        Retry-After if longer); a 4xx is not.
        When no attempt reads the whole file, the longest body read is used (its complete lines)
        and ``read.problems`` says why the rest is missing."""
        best: BinaryIO | None = None
        problem = ""
        for attempt, delay in enumerate((*RETRY_DELAYS_S, None), start=1):
            spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed here or by the line iterator
            try:
                reply = await self.session.request("GET", url, where=what, cap=DOWNLOAD_BYTE_CAP, sink=spool)
                if not reply.ok:
                    problem = f"{what}: HTTP {reply.status}: {reply.text(200)}"
                    if status_failure(reply.status) not in RETRIED:
                        spool.close()
                        read.problems.append(problem)  # gone (OpenAI deletes files after 30 days) or refused: not retried
                        break
                else:
                    spool.seek(0)
                    if best is not None:
                        best.close()
                    return _spooled(spool)
            except BatchHTTPError as exc:
                problem = str(exc)
                reply = None
            if best is None or spool.tell() > best.tell():
                if best is not None:
                    best.close()
                best = spool
            else:
                spool.close()
            if delay is None:
                read.problems.append(f"{problem} (after {attempt} attempts)")
                break
            said = retry_after(reply.headers) if reply is not None and reply.status == 429 else None
            await asyncio.sleep(min(max(delay, said or 0.0), MAX_RETRY_AFTER_S))
        if best is None:
            return iter(())
        read.cut = best.tell() > 0
        best.seek(0)
        return _spooled(best)

    @abstractmethod
    async def submit(self, lines: BinaryIO, on_uploaded: Callable[[str], None]) -> Remote:
        """Send one batch of request lines (a file of JSONL, read from its start);
        ``on_uploaded(file_id)`` is called between upload and creation."""

    @abstractmethod
    async def get(self, remote_id: str) -> Remote: ...

    @abstractmethod
    async def results(self, remote: Remote) -> Results: ...

    @abstractmethod
    def missing_reason(self, remote: Remote) -> str:
        """Why a request of an ended batch has no result line."""

    async def find(self, input_file_id: str) -> Remote | None:
        return None

    async def create_from_file(self, input_file_id: str) -> Remote:
        raise BatchError(f"{self.name}: batches are not created from files")


def _lines(chunks: Iterator[bytes], reader: Any, where: str, read: Results) -> Iterator[Outcome]:
    """The outcomes of the complete lines; a line that is not one is skipped and noted in
    ``read.problems`` (its request, unknown, is failed with that reason as having no line)."""
    for number, raw in enumerate(chunks, start=1):
        if not raw or raw.isspace():  # (not strip(): that copies every line)
            continue
        try:
            yield reader(decode_json(raw), f"{where}:{number}")
        except ValueError as exc:
            last = not raw.endswith(b"\n")
            said = "cut off (the body ended inside it)" if last and read.cut else f"not a batch result line ({exc})"
            read.problems.append(f"{where}:{number}: {said}")


class OpenAIBatchAPI(BatchAPI):
    name = "openai"
    max_requests = Limits.OPENAI_REQUESTS
    max_bytes = Limits.OPENAI_BYTES

    def _remote(self, detail: Any) -> Remote:
        if not isinstance(detail, dict) or not isinstance(detail.get("id"), str):
            raise BatchHTTPError(f"{self.name}: the answer is not a batch object", definite=False)
        status = str(detail.get("status"))
        return Remote(detail["id"], status, status in ("completed", "failed", "expired", "cancelled"), detail, detail.get("input_file_id"))

    async def upload(self, data: BinaryIO) -> str:
        def form() -> aiohttp.FormData:
            data.seek(0)  # a retried upload reads its file again from the start
            made = aiohttp.FormData()
            made.add_field("purpose", "batch")
            made.add_field("file", data, filename="harness-batch.jsonl", content_type="application/jsonl")  # streamed from the file
            return made

        answer = await self._request("POST", self.url("/files"), "upload", data=form)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise BatchHTTPError(f"{self.name} upload: the answer is not a file object", definite=False)
        return str(answer["id"])

    async def create_from_file(self, input_file_id: str) -> Remote:
        body = {"input_file_id": input_file_id, "endpoint": OPENAI_ENDPOINT, "completion_window": "24h", "metadata": {"created_by": "harness"}}
        return self._remote(await self._request("POST", self.url("/batches"), "create batch", json=body))

    async def submit(self, lines: BinaryIO, on_uploaded: Callable[[str], None]) -> Remote:
        file_id = await self.upload(lines)
        on_uploaded(file_id)  # recorded before the batch is created: a crash after it is re-attached by find()
        return await self.create_from_file(file_id)

    async def get(self, remote_id: str) -> Remote:
        return self._remote(await self._request("GET", self.url(f"/batches/{remote_id}"), f"batch {remote_id}"))

    async def find(self, input_file_id: str) -> Remote | None:
        after: str | None = None
        while True:
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._request("GET", self.url("/batches"), "list batches", params=params)
            data = page.get("data") if isinstance(page, dict) else None
            if not isinstance(data, list):
                raise BatchHTTPError(f"{self.name} list batches: the answer is not a list", definite=False)
            for item in data:
                if isinstance(item, dict) and item.get("input_file_id") == input_file_id:
                    return self._remote(item)
            if not page.get("has_more") or not data:
                return None
            after = page.get("last_id") or data[-1].get("id")

    async def results(self, remote: Remote) -> Results:
        read = Results()
        parts: list[Iterator[Outcome]] = []
        for name in ("output_file_id", "error_file_id"):
            file_id = remote.detail.get(name)
            if file_id:
                where = f"{self.name} batch {remote.id} {name.removesuffix('_id')}"
                chunks = await self._download(self.url(f"/files/{file_id}/content"), where, read)
                parts.append(_lines(chunks, read_openai_result, where, read))
        read.outcomes = (outcome for part in parts for outcome in part)
        return read

    def missing_reason(self, remote: Remote) -> str:
        if remote.status == "failed":
            errors = (remote.detail.get("errors") or {}).get("data") or []
            said = "; ".join(
                f"{e.get('code')}: {e.get('message')}" + (f" (line {e['line']})" if e.get("line") else "") for e in errors if isinstance(e, dict)
            )
            return f"batch {remote.id} failed: {said or 'no reason given'}"
        return f"batch {remote.id} {remote.status}: no result for this request"


class AnthropicBatchAPI(BatchAPI):
    name = "anthropic"
    max_requests = Limits.ANTHROPIC_REQUESTS
    max_bytes = Limits.ANTHROPIC_BYTES

    def _remote(self, detail: Any) -> Remote:
        if not isinstance(detail, dict) or not isinstance(detail.get("id"), str):
            raise BatchHTTPError(f"{self.name}: the answer is not a message batch", definite=False)
        status = str(detail.get("processing_status"))
        return Remote(detail["id"], status, status == "ended", detail)

    async def submit(self, lines: BinaryIO, on_uploaded: Callable[[str], None]) -> Remote:
        # The request lines are already JSON: join them into the body without decoding them again
        # (one body of at most the 256 MB limit).
        body = b'{"requests":[' + b",".join(line.rstrip(b"\n") for line in lines if line.strip()) + b"]}"
        headers = {"content-type": "application/json"}
        return self._remote(await self._request("POST", self.url("/messages/batches"), "create batch", data=body, headers=headers))

    async def get(self, remote_id: str) -> Remote:
        return self._remote(await self._request("GET", self.url(f"/messages/batches/{remote_id}"), f"batch {remote_id}"))

    async def results(self, remote: Remote) -> Results:
        read = Results()
        url = remote.detail.get("results_url")
        if url:
            where = f"{self.name} batch {remote.id} results"
            read.outcomes = _lines(await self._download(str(url), where, read), read_anthropic_result, where, read)
        return read

    def missing_reason(self, remote: Remote) -> str:
        return f"batch {remote.id} ended with no result for this request"


def make_api(api: str, base_url: str, api_key: str | None) -> BatchAPI:
    if api == "openai":
        return OpenAIBatchAPI(base_url, api_key)
    if api == "anthropic":
        return AnthropicBatchAPI(base_url, api_key)
    raise BatchError(f"unknown batch API {api!r} (openai or anthropic)")
