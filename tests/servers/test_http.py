"""The trace servers' HTTP client on its own: what is retried, how often, and what a message says."""

from __future__ import annotations

import pytest

from harness.errors import ServerRateLimited, ServerRefused, ServerUnavailable
from harness.exit_codes import EXIT_IO, EXIT_USER_ERROR, exit_code_for
from harness.servers.http import ServerClient, answer_text, secrets, status_error
from harness.servers.source import parse_source
from tests.e2e_support import closed_port_url
from tests.servers.fakes import FakeLangSmith


async def test_a_refused_connection_is_retried_a_bounded_number_of_times() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    port = closed_port_url().split(":")[2].split("/")[0]
    source = parse_source(f"phoenix://127.0.0.1:{port}/p", {})
    async with ServerClient(source, max_attempts=4, sleep=sleep) as http:
        with pytest.raises(
            ServerUnavailable, match=rf"phoenix at http://127.0.0.1:{port}: GET /v1/projects/p: connection refused \(ClientConnectorError\)"
        ):
            await http.get("/v1/projects/p")
        assert http.requests == 4 and len(waits) == 3 and all(0 <= w <= 20 for w in waits)


async def test_retry_after_is_honoured_and_a_refusal_is_not_retried() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with FakeLangSmith([]) as fake:
        source = parse_source(f"langsmith://127.0.0.1:{fake.port}/weather", {"LANGSMITH_API_KEY": "lsv2_pt_test"})
        fake.fail("/sessions", 429, times=2, retry_after="7")
        async with ServerClient(source, sleep=sleep) as http:
            assert await http.get("/sessions", {"name": "weather"}) != []
            assert waits == [7.0, 7.0] and http.requests == 3
            fake.fail("/sessions", 404, times=1)
            with pytest.raises(ServerRefused):
                await http.get("/sessions")
            assert http.requests == 4


def test_messages_and_exit_codes() -> None:
    assert answer_text(b'{"detail": "Invalid token"}') == "Invalid token"
    assert answer_text(b'{"error_code": "X", "message": "Could not find experiment"}') == "Could not find experiment"
    assert answer_text(b"<html>\n  <body>Not   Found</body></html>") == "<html> <body>Not Found</body></html>"
    limited = status_error(429, b'{"message": "slow down"}', {"retry-after": "3"}, "langfuse at x: GET /y")
    assert isinstance(limited, ServerRateLimited) and limited.retry_after == 3.0 and exit_code_for(limited) == EXIT_IO
    assert exit_code_for(status_error(503, b"", {}, "w")) == EXIT_IO
    refused = status_error(401, b'{"message": "no"}', {}, "w")
    assert str(refused) == "w: 401: no (check the key)" and exit_code_for(refused) == EXIT_USER_ERROR
    assert secrets({"Authorization": "Basic cGstbGY6c2stbGY="}) == ["Basic cGstbGY6c2stbGY=", "cGstbGY6c2stbGY=", "pk-lf", "sk-lf"]
