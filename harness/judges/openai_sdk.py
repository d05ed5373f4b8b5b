"""A judge on any OpenAI-compatible chat-completions endpoint, through the ``openai`` SDK
(provider ``openai-sdk``). The default provider ``openai`` is ``openai_aiohttp.py``, chosen by
measurement (see bench/throughput.py); this one stays for users who want the SDK's own stack.

The SDK rides on httpx2, not on ``net.Session``'s aiohttp, but is held to the same layer: its own
retries are off (``max_retries=0``: ``retry.py`` retries every judge the same way); redirects are
never followed; the whole call is bounded by ``timeout_s`` (httpx bounds each read, not the
call: a server dripping a byte a second would hold it for ever); every body, a 2xx's or an
error's, is read through :class:`BoundedTransport` and refused past the reply's byte cap before
the SDK holds it; decoding is ``net``'s depth-bounded one; SDK exceptions are translated once by
``net.failures``' table; the API key (and any credential header or query parameter the server
quotes back) is masked by ``net.Redactor`` in every message, the SDK's own chained one too.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator

import httpx2
import openai

from ..config import JudgeConfig, api_key_for
from ..errors import JudgeError, MalformedReply
from ..net import Failure, Redactor, error_for
from ..providers import api_root
from .base import Judge, JudgeReply, JudgeRequest
from .protocol import decode_json, read_completion, reply_byte_cap, request_body, status_error

#: Placeholder sent when a judge is configured with ``api_key_env = ""`` (local servers need none).
NO_KEY = "no-key"
#: The byte cap of the request being sent (set by ``send``, read by the transport of the same task).
_CAP: contextvars.ContextVar[int | None] = contextvars.ContextVar("reply_byte_cap", default=None)


class ReplyTooLarge(httpx2.ReadError):
    """A body past the request's byte cap: read no further."""


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: int) -> None:
        self._inner, self._cap = inner, cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._cap:
                raise ReplyTooLarge(f"reply body larger than {self._cap:,} bytes; not read")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport so that no body is read past the current request's byte cap."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        cap = _CAP.get()
        response.stream = _Bounded(stream, reply_byte_cap(0) if cap is None else cap)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class OpenAISDKJudge(Judge):
    def __init__(self, config: JudgeConfig, *, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        self._redact = Redactor([self._key])
        limits = httpx2.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
        inner = transport or httpx2.AsyncHTTPTransport(limits=limits)
        self._client = openai.AsyncOpenAI(
            api_key=self._key or NO_KEY,
            base_url=api_root(config),
            max_retries=0,
            timeout=config.timeout_s,
            # Redirects are never followed: a POST redirected elsewhere must not be answered from there.
            http_client=openai.DefaultAsyncHttpxClient(transport=BoundedTransport(inner), timeout=config.timeout_s, follow_redirects=False),
        )

    @property
    def _where(self) -> str:
        return f"{self.name} ({self.config.endpoint})"

    async def send(self, request: JudgeRequest) -> JudgeReply:
        where = self._where
        body = request_body(self.config.model, request)
        tokens = request.max_tokens * max(request.n, 1)
        _CAP.set(reply_byte_cap(tokens))
        try:
            async with asyncio.timeout(self.config.timeout_s):
                response = await self._client.chat.completions.with_raw_response.create(**body)
            data = decode_json(response.http_response.content)
        except TimeoutError:
            raise self._error(Failure.TRANSIENT, f"{where}: timed out after {self.config.timeout_s:g} s") from None
        except openai.APIError as exc:
            self._scrub_sdk_error(exc)
            raise self._translate(exc, tokens) from exc
        except RecursionError as exc:  # the SDK decoding a deeply nested error body itself
            raise MalformedReply(f"{where}: malformed response body (JSON nested too deeply)") from exc
        except (ValueError, TypeError) as exc:  # a body that is not JSON, or nested deeper than the bound
            raise MalformedReply(f"{where}: malformed response body ({exc or type(exc).__name__})") from exc
        return read_completion(data, where, self._key)

    def _scrub(self, message: str) -> str:
        return self._redact(message)

    def _error(self, failure: Failure, message: str) -> JudgeError:
        error = error_for("judge", failure, self._redact(message))
        assert isinstance(error, JudgeError)
        return error

    def _scrub_sdk_error(self, exc: openai.APIError) -> None:
        """The SDK's message quotes the error body, which a server may fill with the key; the SDK
        error stays chained to ours (``from exc``) and shows in any traceback, so scrub it too."""
        exc.args = tuple(self._scrub(a) if isinstance(a, str) else a for a in exc.args)
        exc.message = self._scrub(exc.message)

    def _translate(self, exc: openai.APIError, tokens: int) -> JudgeError:
        where = self._where
        if isinstance(exc, openai.APITimeoutError):
            return self._error(Failure.TRANSIENT, f"{where}: timed out after {self.config.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            if isinstance(cause, ReplyTooLarge):
                return self._error(Failure.MALFORMED, f"{where}: {cause} (max_tokens={tokens})")
            refused = isinstance(cause, httpx2.ConnectError)
            failure = Failure.CONNECT if refused else Failure.TRANSIENT
            return self._error(failure, f"{where}: {'connection refused' if refused else 'connection error'}: {cause or exc}")
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            error = status_error(response.status_code, exc.body, response.headers, where, response.reason_phrase, base_url=self.config.endpoint)
            error.args = (self._scrub(str(error)),)
            return error
        # APIResponseValidationError and friends: the server answered 2xx with something unusable.
        return self._error(Failure.MALFORMED, f"{where}: malformed response: {exc}")

    async def aclose(self) -> None:
        await self._client.close()
