"""A judge on any OpenAI-compatible chat-completions endpoint, through the ``openai`` SDK
(provider ``openai-sdk``). The default provider ``openai`` is ``openai_aiohttp.py``, chosen by
measurement (see bench/throughput.py); this one stays for users who want the SDK's own stack.

The SDK's own retries are off (``max_retries=0``): ``retry.py`` retries every judge the same way.
SDK exceptions are translated here, once, into the harness's error kinds. The API key is read
from the environment when the client is built and is scrubbed from every error message.
"""

from __future__ import annotations

import httpx2
import openai

from ..config import JudgeConfig, api_key_for
from ..errors import ConnectFailed, JudgeError, MalformedReply, TransientJudgeError
from ..providers import api_root
from .base import Judge, JudgeReply, JudgeRequest
from .protocol import decode_json, read_completion, redact, reply_byte_cap, request_body, status_error

#: Placeholder sent when a judge is configured with ``api_key_env = ""`` (local servers need none).
NO_KEY = "no-key"


class OpenAISDKJudge(Judge):
    def __init__(self, config: JudgeConfig, *, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        limits = httpx2.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
        http_client = httpx2.AsyncClient(transport=transport, limits=limits, timeout=config.timeout_s) if transport else None
        self._client = openai.AsyncOpenAI(
            api_key=self._key or NO_KEY,
            base_url=api_root(config),
            max_retries=0,
            timeout=config.timeout_s,
            # Redirects are never followed: a POST redirected elsewhere must not be answered from there.
            http_client=http_client or openai.DefaultAsyncHttpxClient(limits=limits, timeout=config.timeout_s, follow_redirects=False),
        )

    async def send(self, request: JudgeRequest) -> JudgeReply:
        where = f"{self.name} ({self.config.endpoint})"
        body = request_body(self.config.model, request)
        cap = reply_byte_cap(request.max_tokens * max(request.n, 1))
        try:
            response = await self._client.chat.completions.with_raw_response.create(**body)
            content = response.http_response.content
            # The SDK reads the body whole; a reply beyond the cap is refused, never parsed or kept.
            if len(content) > cap:
                raise MalformedReply(f"{where}: reply body larger than {cap:,} bytes for max_tokens={request.max_tokens}; refused")
            data = decode_json(content)
        except openai.APIError as exc:
            self._scrub_sdk_error(exc)
            raise self._translate(exc) from exc
        except RecursionError as exc:  # the SDK decoding a deeply nested error body itself
            raise MalformedReply(f"{where}: malformed response body (JSON nested too deeply)") from exc
        except (ValueError, TypeError) as exc:  # a body that is not JSON, or nested deeper than the bound
            raise MalformedReply(f"{where}: malformed response body ({exc or type(exc).__name__})") from exc
        return read_completion(data, where, self._key)

    def _scrub(self, message: str) -> str:
        return redact(message, self._key)

    def _scrub_sdk_error(self, exc: openai.APIError) -> None:
        """The SDK's message quotes the error body, which a server may fill with the key; the SDK
        error stays chained to ours (``from exc``) and shows in any traceback, so scrub it too."""
        if self._key:
            exc.args = tuple(self._scrub(a) if isinstance(a, str) else a for a in exc.args)
            exc.message = self._scrub(exc.message)

    def _translate(self, exc: openai.APIError) -> JudgeError:
        where = f"{self.name} ({self.config.endpoint})"
        if isinstance(exc, openai.APITimeoutError):
            return TransientJudgeError(f"{where}: timed out after {self.config.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            refused = isinstance(cause, httpx2.ConnectError)
            kind = ConnectFailed if refused else TransientJudgeError
            return kind(f"{where}: {'connection refused' if refused else 'connection error'}: {self._scrub(str(cause or exc))}")
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            error = status_error(response.status_code, exc.body, response.headers, where, response.reason_phrase, base_url=self.config.endpoint)
            error.args = (self._scrub(str(error)),)
            return error
        # APIResponseValidationError and friends: the server answered 2xx with something unusable.
        return MalformedReply(f"{where}: malformed response: {self._scrub(str(exc))}")

    async def aclose(self) -> None:
        await self._client.close()
