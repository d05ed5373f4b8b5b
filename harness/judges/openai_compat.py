"""A judge on any OpenAI-compatible chat-completions endpoint, through the ``openai`` SDK.

The SDK's own retries are off (``max_retries=0``): ``retry.py`` retries every judge the same way.
SDK exceptions are translated here, once, into the harness's error kinds. The API key is read
from the environment when the client is built and is scrubbed from every error message.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx2
import openai

from ..config import JudgeConfig, api_key_for
from ..errors import FatalJudgeError, JudgeError, MalformedReply, QuotaExhausted, RateLimited, TransientJudgeError
from .base import Judge, JudgeReply, JudgeRequest

#: Placeholder sent when a judge is configured with ``api_key_env = ""`` (local servers need none).
NO_KEY = "no-key"


class OpenAICompatibleJudge(Judge):
    def __init__(self, config: JudgeConfig, *, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(config)
        self._key = api_key_for(config) if config.api_key_env else None
        limits = httpx2.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
        http_client = httpx2.AsyncClient(transport=transport, limits=limits, timeout=config.timeout_s) if transport else None
        self._client = openai.AsyncOpenAI(
            api_key=self._key or NO_KEY,
            base_url=config.endpoint,
            max_retries=0,
            timeout=config.timeout_s,
            http_client=http_client or openai.DefaultAsyncHttpxClient(limits=limits, timeout=config.timeout_s),
        )

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        try:
            completion = await self._client.chat.completions.create(**kwargs)
        except openai.APIError as exc:
            raise self._translate(exc) from exc
        except (ValueError, TypeError) as exc:  # a body the SDK could not decode
            raise MalformedReply(f"{self.name}: malformed response body ({type(exc).__name__})") from exc
        return self._reply(completion)

    def _reply(self, completion: Any) -> JudgeReply:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise MalformedReply(f"{self.name}: malformed response: no choices")
        message = choices[0].message
        text = message.content
        if text is None:
            if getattr(message, "refusal", None):
                text = message.refusal
            else:
                raise MalformedReply(f"{self.name}: malformed response: empty message content")
        usage = getattr(completion, "usage", None)
        return JudgeReply(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=choices[0].finish_reason,
        )

    def _scrub(self, message: str) -> str:
        return message.replace(self._key, "[REDACTED]") if self._key else message

    def _translate(self, exc: openai.APIError) -> JudgeError:
        where = f"{self.name} ({self.config.endpoint})"
        if isinstance(exc, openai.APITimeoutError):
            return TransientJudgeError(f"{where}: timed out after {self.config.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            refused = isinstance(cause, httpx2.ConnectError)
            error = TransientJudgeError(f"{where}: {'connection refused' if refused else 'connection error'}: {self._scrub(str(cause or exc))}")
            error.connect_failed = refused  # type: ignore[attr-defined]
            return error
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = self._scrub(_error_message(exc))
            if status == 429:
                if _error_code(exc) == "insufficient_quota":
                    return QuotaExhausted(f"{where}: quota exhausted: {detail}", status=429)
                return RateLimited(f"{where}: rate limited (429): {detail}", retry_after=_retry_after(exc.response))
            if status >= 500 or status in (408, 409):
                return TransientJudgeError(f"{where}: server error {status}: {detail}", status=status)
            return FatalJudgeError(f"{where}: HTTP {status}: {detail}", status=status)
        # APIResponseValidationError and friends: the server answered 2xx with something unusable.
        return MalformedReply(f"{where}: malformed response: {self._scrub(str(exc))}")

    async def aclose(self) -> None:
        await self._client.close()


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        return inner if isinstance(inner, dict) else {}
    return {}


def _error_code(exc: openai.APIStatusError) -> str | None:
    body = _error_body(exc)
    return body.get("code") or body.get("type")


def _error_message(exc: openai.APIStatusError) -> str:
    message = _error_body(exc).get("message")
    return str(message) if message else exc.response.reason_phrase or "no detail"


def _retry_after(response: httpx2.Response) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    headers = response.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None
