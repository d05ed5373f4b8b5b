"""The one HTTP layer's table and redaction (``harness/net``), and every client family reading them
alike: for each status, a judge's error, a trace server's and a batch step's are retried exactly
when the table says, and are fatal exactly when it says. The table is checked against the
statuses as the providers document them (hand-written below), not against itself."""

from __future__ import annotations

import base64
import json

import pytest

from harness.errors import BatchHTTPError, FatalJudgeError, QuotaExhausted, RateLimited, ServerRateLimited, ServerRefused, ServerUnavailable
from harness.judges.protocol import status_error as judge_status_error
from harness.judges.retry import RETRIED as JUDGE_RETRIED
from harness.judges.retry import SERVER_RETRIED
from harness.net import REDACTED, RETRIED, Failure, Redactor, error_for, retried_classes, secrets_of, status_failure
from harness.servers.http import status_error as server_status_error

#: (status, error code, what it means), as OpenAI, Anthropic and the trace servers document them.
DOCUMENTED = [
    (200, None, None),
    (204, None, None),
    (301, None, Failure.REDIRECT),
    (307, None, Failure.REDIRECT),
    (308, None, Failure.REDIRECT),
    (400, "invalid_request_error", Failure.FATAL),
    (401, "invalid_api_key", Failure.FATAL),
    (402, None, Failure.FATAL),
    (403, "permission_error", Failure.FATAL),
    (404, "not_found_error", Failure.FATAL),
    (408, None, Failure.TRANSIENT),
    (409, None, Failure.TRANSIENT),
    (413, "request_too_large", Failure.FATAL),
    (422, None, Failure.FATAL),
    (429, "rate_limit_exceeded", Failure.RATE_LIMITED),
    (429, "insufficient_quota", Failure.QUOTA),
    (500, "api_error", Failure.TRANSIENT),
    (502, None, Failure.TRANSIENT),
    (503, None, Failure.TRANSIENT),
    (529, "overloaded_error", Failure.TRANSIENT),
]


@pytest.mark.parametrize(("status", "code", "failure"), DOCUMENTED)
def test_the_table_says_what_each_status_means(status: int, code: str | None, failure: Failure | None) -> None:
    assert status_failure(status, code) is failure


@pytest.mark.parametrize(("status", "code", "failure"), [row for row in DOCUMENTED if row[2] is not None])
def test_every_client_family_retries_exactly_what_the_table_retries(status: int, code: str | None, failure: Failure) -> None:
    body = {"error": {"message": "said", "code": code}} if code else None
    raw = json.dumps(body or {"message": "said"}).encode()
    headers = {"retry-after": "3", "location": "http://elsewhere/"}
    judge = judge_status_error(status, body, headers, "j")
    server = server_status_error(status, raw, headers, "s")
    batch = error_for("batch", failure, "b", status=status)
    retried = failure in RETRIED
    assert isinstance(judge, JUDGE_RETRIED) is retried, judge
    assert isinstance(server, SERVER_RETRIED) is retried, server
    assert isinstance(batch, BatchHTTPError) and (Failure(batch.failure) in RETRIED) is retried
    # Fatal is fatal everywhere: a judge stops, a server refuses, a batch is known not to have acted.
    assert isinstance(judge, FatalJudgeError) is (not retried)
    assert isinstance(server, ServerRefused) is (not retried)
    assert batch.definite is (failure in (Failure.QUOTA, Failure.RATE_LIMITED, Failure.REDIRECT, Failure.FATAL))
    if failure is Failure.RATE_LIMITED:
        assert isinstance(judge, RateLimited) and judge.retry_after == 3.0
        assert isinstance(server, ServerRateLimited) and server.retry_after == 3.0
    if failure is Failure.QUOTA:
        assert isinstance(judge, QuotaExhausted)


def test_the_retried_classes_are_read_off_the_table() -> None:
    assert set(retried_classes("server")) == {ServerRateLimited, ServerUnavailable}
    assert retried_classes("judge") == JUDGE_RETRIED and retried_classes("server") == SERVER_RETRIED


def test_credentials_are_masked_wherever_a_message_quotes_them() -> None:
    key = "sk-proj-abcdefghijklmnop"
    basic = base64.b64encode(b"pk-lf-user:sk-lf-secret").decode()
    headers = {"Authorization": f"Basic {basic}", "Accept": "application/json"}
    assert secrets_of(headers) == sorted([f"Basic {basic}", basic, "pk-lf-user", "sk-lf-secret"], key=lambda s: (-len(s), s))
    redact = Redactor([key, *secrets_of(headers)])
    said = (
        f"bad key {key}; user pk-lf-user:sk-lf-secret; GET /x?api-key=other-1234&page=2 and ?key=AIzaXYZ; "
        "Authorization: Bearer someone-elses-token; x-api-key: sk-ant-zzzz"
    )
    masked = redact(said)
    for secret in (key, "pk-lf-user", "sk-lf-secret", "other-1234", "AIzaXYZ", "someone-elses-token", "sk-ant-zzzz"):
        assert secret not in masked, (secret, masked)
    assert masked.count(REDACTED) == 7 and "page=2" in masked
    # Text without credentials is left as it is.
    plain = "HTTP 404: The model `gpt-x` does not exist (keys: a, b)"
    assert redact(plain) == plain
