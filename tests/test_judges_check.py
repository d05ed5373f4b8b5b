"""``harness judges check`` (issue 26) against real servers on 127.0.0.1: a good judge, a bad key,
an unknown model, an unreachable or silent endpoint, a reasoning model's request shape, a
shutdown date from /models, and Anthropic's Models API. Every check is bounded in time."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from typer.testing import CliRunner

from harness.checks.judges import CHECK_ATTEMPTS, PROBE_REASONING_BUDGET, PROBE_TOKENS
from harness.cli import app
from harness.cost import staleness
from tests.anthropic_server import AnthropicServer
from tests.judge_server import JudgeServer

pytestmark = pytest.mark.timeout(120)

KEY = "sk-check-test-key-0123456789"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(staleness, "today", lambda: date(2026, 11, 25))


def write_config(tmp_path: Path, *judges: dict[str, Any]) -> Path:
    lines = []
    for fields in judges:
        lines.append("[[judges]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in fields.items())
    path = tmp_path / "harness.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def check(config: Path, *extra: str) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    result = CliRunner().invoke(app, ["judges", "check", "--config", str(config), "--json", *extra])
    elapsed = time.monotonic() - started
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout), elapsed


def chats(server: JudgeServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"].endswith("/chat/completions")]


def test_a_good_judge_is_usable_and_costs_one_tiny_request(tmp_path: Path) -> None:
    with JudgeServer() as server:
        server.models = [{"id": "judge-test", "shutdown_date": None, "max_model_len": 8192}]
        path = write_config(tmp_path, {"name": "good", "model": "judge-test", "base_url": server.base_url})
        code, data, _ = check(path)
        (request,) = chats(server)
    assert code == 0 and data["usable"]
    (verdict,) = data["judges"]
    assert (verdict["reachable"], verdict["key_accepted"], verdict["model_known"]) == (True, True, True)
    assert (verdict["context_window"], verdict["context_source"]) == (8192, "/models max_model_len")
    assert verdict["accepts"]["request shape"]["how"] == "verified"
    assert verdict["accepts"]["logprobs"] == {"accepted": True, "how": "inferred", "note": "a chat model"}
    assert verdict["retires"] is None and verdict["problems"] == []
    assert request["body"]["max_tokens"] == PROBE_TOKENS and request["headers"]["Authorization"] == f"Bearer {KEY}"


def test_a_reasoning_model_is_sent_its_own_shape_and_its_shutdown_date_is_read(tmp_path: Path) -> None:
    # The server answers a reasoning model only without max_tokens and temperature, as OpenAI does.
    with JudgeServer() as server:
        server.models = [{"id": "gpt-5-mini", "shutdown_date": "2026-12-11"}]
        path = write_config(tmp_path, {"name": "r", "model": "gpt-5-mini", "base_url": server.base_url, "structured_output": True})
        code, data, _ = check(path)
        (request,) = chats(server)
    (verdict,) = data["judges"]
    assert code == 0, verdict["problems"]
    body = request["body"]
    assert "max_tokens" not in body and "temperature" not in body
    assert body["max_completion_tokens"] == PROBE_TOKENS + PROBE_REASONING_BUDGET
    assert body["response_format"]["type"] == "json_schema"
    assert verdict["accepts"]["request shape"]["note"].startswith("max_completion_tokens, no temperature")
    assert verdict["accepts"]["structured_output"]["how"] == "verified"
    assert verdict["accepts"]["logprobs"]["accepted"] is False  # OpenAI's reasoning models refuse them
    # 16 days before the shutdown date: usable, with the warning.
    assert verdict["retirement"]["days_left"] == 16 and verdict["retirement"]["source"] == "/models shutdown_date"
    assert any(n.startswith("warning: judge 'r': gpt-5-mini retires on 2026-12-11 (in 16 days)") for n in verdict["notes"])


def test_a_model_past_its_shutdown_date_is_unusable(tmp_path: Path) -> None:
    with JudgeServer() as server:
        server.models = [{"id": "judge-test", "shutdown_date": "2026-10-23"}]
        path = write_config(tmp_path, {"name": "old", "model": "judge-test", "base_url": server.base_url})
        code, data, _ = check(path)
    (verdict,) = data["judges"]
    assert code == 1 and verdict["retirement"]["retired"] is True
    assert verdict["problems"] == [
        "judge 'old': judge-test was retired on 2026-10-23 (33 days ago): its requests fail; choose another model (from the /models shutdown_date)"
    ]


def test_the_price_tables_date_is_used_where_models_gives_none(tmp_path: Path) -> None:
    with JudgeServer() as server:
        server.models = [{"id": "o4-mini"}]  # listed, with no shutdown_date
        path = write_config(tmp_path, {"name": "o4", "model": "o4-mini", "base_url": server.base_url})
        code, data, _ = check(path)
    (verdict,) = data["judges"]
    assert code == 1 and verdict["retires"] == "2026-10-23" and verdict["retirement"]["source"] == "price table"
    assert (verdict["context_window"], verdict["context_source"]) == (200000, "price table")


class KeyedServer(JudgeServer):
    """OpenAI's behaviour for a wrong key: 401 on /models (``models_key``) and on chat completions."""

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.models_key}":

            async def refuse(_body: Any) -> web.Response:
                body = {
                    "error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}
                }
                return web.json_response(body, status=401)

            return await self._recorded(request, refuse)
        return await super()._chat(request)


def test_a_refused_key_is_said_once_and_never_shown(tmp_path: Path) -> None:
    with KeyedServer() as server:
        server.models_key = "sk-the-right-key-9876543210"
        path = write_config(tmp_path, {"name": "k", "model": "judge-test", "base_url": server.base_url})
        result = CliRunner().invoke(app, ["judges", "check", "--config", str(path)], env={"COLUMNS": "80"}, terminal_width=80)
        code, data, _ = check(path)
    assert result.exit_code == 1 and code == 1
    (verdict,) = data["judges"]
    assert verdict["key_accepted"] is False and verdict["reachable"] is True
    assert len(verdict["problems"]) == 1 and verdict["problems"][0].startswith("the key in $OPENAI_API_KEY was refused")
    assert KEY not in result.output and KEY not in json.dumps(data)
    assert "unusable" in result.stdout and "key accepted" in result.stdout


def test_an_unknown_model_is_unusable(tmp_path: Path) -> None:
    with JudgeServer() as server:
        path = write_config(tmp_path, {"name": "u", "model": "no-such-model", "base_url": server.base_url})
        code, data, _ = check(path)
        paths = [r["path"] for r in server.requests]
    (verdict,) = data["judges"]
    assert code == 1 and verdict["model_known"] is False
    assert verdict["problems"] == [f"'no-such-model' is not among the 1 models {verdict['endpoint']} lists"]
    assert "/v1/models/no-such-model" in paths  # asked for by name too (an alias is not listed)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_endpoint_is_unusable_at_once(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"name": "down", "model": "judge-test", "base_url": f"http://127.0.0.1:{free_port()}/v1"})
    code, data, elapsed = check(path)
    (verdict,) = data["judges"]
    assert code == 1 and verdict["reachable"] is False and verdict["problems"][0].startswith("unreachable:")
    assert elapsed < 10


def test_a_silent_endpoint_ends_within_its_timeouts(tmp_path: Path) -> None:
    with JudgeServer() as server:
        server.hold = threading.Event()  # chat completions never answer until released
        path = write_config(tmp_path, {"name": "silent", "model": "judge-test", "base_url": server.base_url, "timeout_s": 1})
        code, data, elapsed = check(path)
        server.hold.set()
    (verdict,) = data["judges"]
    assert code == 1 and verdict["model_known"] is True  # /models answered
    assert verdict["reachable"] is True  # /models answered; the judge request did not
    assert verdict["problems"][0].startswith("no answer to the tiny request:") and "timed out after 1 s" in verdict["problems"][0]
    assert len(chats(server)) == CHECK_ATTEMPTS
    assert elapsed < CHECK_ATTEMPTS * 1 + 8


def test_a_missing_key_sends_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with AnthropicServer() as server:
        # a non-loopback name is never resolved: nothing is sent without a key
        path = write_config(tmp_path, {"name": "h", "provider": "anthropic", "model": "claude-haiku-4-5", "base_url": "https://anthropic.invalid"})
        code, data, _ = check(path)
        assert server.count() == 0
    (verdict,) = data["judges"]
    assert code == 1 and verdict["key_accepted"] is False
    assert verdict["problems"] == ["$ANTHROPIC_API_KEY is not set: nothing was sent"]


def test_anthropic_alias_context_window_and_structured_output_from_its_models_api(tmp_path: Path) -> None:
    with AnthropicServer() as server:
        path = write_config(tmp_path, {"name": "haiku", "provider": "anthropic", "model": "claude-haiku-4-5", "base_url": server.base_url})
        code, data, _ = check(path)
        requests = [(r["path"], r["status"]) for r in server.requests]
        message = next(r for r in server.requests if r["path"] == "/v1/messages")
    (verdict,) = data["judges"]
    assert code == 0, verdict["problems"]
    # The list holds the dated id; the alias is asked for by name (GET /v1/models/{alias}).
    assert requests == [("/v1/models", 200), ("/v1/models/claude-haiku-4-5", 200), ("/v1/messages", 200)]
    assert message["headers"]["x-api-key"] == KEY and message["body"]["max_tokens"] == PROBE_TOKENS
    assert (verdict["context_window"], verdict["context_source"]) == (200000, "/models max_input_tokens")
    assert verdict["accepts"]["structured_output"] == {"accepted": True, "how": "inferred", "note": "/models capabilities"}
    assert verdict["accepts"]["n"]["accepted"] is False


def test_several_judges_exit_1_when_one_is_unusable_and_the_terminal_fits_80_columns(tmp_path: Path) -> None:
    with JudgeServer() as server:
        path = write_config(
            tmp_path,
            {"name": "good", "model": "judge-test", "base_url": server.base_url},
            {"name": "bad", "model": "nope", "base_url": server.base_url},
        )
        result = CliRunner().invoke(app, ["judges", "check", "--config", str(path)], env={"COLUMNS": "80"}, terminal_width=80)
        only_good = CliRunner().invoke(app, ["judges", "check", "--config", str(path), "--judge", "good"])
    assert result.exit_code == 1 and only_good.exit_code == 0
    lines = result.stdout.splitlines()
    assert "good: usable" in lines[0] and any(line.startswith("bad: unusable") for line in lines)
    assert max(len(line.rstrip()) for line in lines) <= 80
