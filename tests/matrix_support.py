"""Servers and files for ``tests/test_matrix.py``: every judge family through every path.

The live servers and the batch server answer a request the same way, so a judgment made through
any path can be compared with the live run's:

- ``MatrixOpenAIServer`` (OpenAI chat completions, reasoning-model rules of ``judge_server``): the
  score is the transcript's ``[[score=N]]`` (1..5) shifted by the request's seed and the choice
  index, so repeated samples differ; it honours ``n`` and, when ``logprobs`` is asked, returns
  OpenAI-shaped ``top_logprobs`` around the score. gpt-5 models spend ``REASONING_TOKENS``.
- ``MatrixAnthropicServer`` (Messages API): ``tests/anthropic_server.py`` with a prompt cache that
  keeps nothing, so every request writes its marked prefix and a request's usage does not depend
  on the order requests arrive in (a live run's order is not a batch's).
- ``openai_answer`` / ``anthropic_answer``: what those servers would answer, for
  ``BatchServer(openai_answer=..., anthropic_answer=...)`` and for the export + import path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.anthropic_server import AnthropicServer
from tests.judge_server import JudgeServer, reasoning_model_refusal
from tests.scripted_judges import _logprob_content, _tokens, score_distribution

REASONING_TOKENS = 7
_SCORE = re.compile(r"\[\[score=(\d)\]\]")


def _last_user(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _choices(body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
    found = _SCORE.search(_last_user(body["messages"]))
    base = int(found.group(1)) if found else 3
    seed = int(body.get("seed") or 0)
    out: list[tuple[str, list[dict[str, Any]] | None]] = []
    for index in range(int(body.get("n") or 1)):
        value = 1 + (base - 1 + seed + index) % 5
        content = '{"score": ' + str(value) + "}"
        if body.get("logprobs"):
            tokens = _tokens(content)
            alternatives = {str(s): p for s, p in score_distribution(value, 1, 5).items()}
            out.append((content, _logprob_content(tokens, tokens.index(str(value)), alternatives)))
        elif body.get("response_format"):
            out.append((content, None))
        else:  # 15 tokens: n = 3 of them pass one choice's budget (plus slack), as replies with a reason do
            out.append((content + " because the answer given matches what was asked and nothing in it is", None))
    return out


class MatrixOpenAIServer(JudgeServer):
    def __init__(self) -> None:
        super().__init__(choices=_choices, reasoning_tokens=REASONING_TOKENS)
        #: (prompt, completion) tokens of every reply it made, live or for the batch server
        self.billed: list[tuple[int, int]] = []

    def _completion(self, body: dict[str, Any], messages: list[Any], last_user: str) -> dict[str, Any]:
        completion = super()._completion(body, messages, last_user)
        self.billed.append((completion["usage"]["prompt_tokens"], completion["usage"]["completion_tokens"]))
        return completion


class _Forgetful(set[str]):
    """A prompt cache that never holds anything: every marked prefix is a cache write."""

    def __contains__(self, item: object) -> bool:
        return False

    def add(self, item: str) -> None:
        return None


class MatrixAnthropicServer(AnthropicServer):
    def __init__(self) -> None:
        super().__init__()
        self._prompt_cache = _Forgetful()
        self.billed: list[tuple[int, int]] = []

    def _reply(self, body: dict[str, Any], last_user: str, max_tokens: int) -> dict[str, Any]:
        reply = super()._reply(body, last_user, max_tokens)
        usage = reply["usage"]
        prompt = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        self.billed.append((prompt, usage["output_tokens"]))
        return reply


def openai_answer(server: JudgeServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(status, body) the live ``server`` answers to a chat-completions ``body`` (not recorded)."""
    refusal = reasoning_model_refusal(body)
    if refusal is not None:
        assert isinstance(refusal.body, bytes)
        return refusal.status, json.loads(refusal.body)
    messages = body["messages"]
    return 200, server._completion(body, messages, _last_user(messages))


def anthropic_answer(server: AnthropicServer, params: dict[str, Any]) -> dict[str, Any]:
    """A Message Batch result: what the live ``server`` answers to ``params`` (not recorded)."""
    message = server._reply(params, _last_user(params["messages"]), params["max_tokens"])
    return {"type": "succeeded", "message": message}


def answer_export(server: JudgeServer, requests: Path, output: Path) -> int:
    """Play the engine of ``batch export``'s file (vLLM ``run_batch``): write its output file. The
    number of requests answered."""
    lines = []
    count = 0
    for index, raw in enumerate(requests.read_text(encoding="utf-8").splitlines()):
        if not raw.strip():
            continue
        request = json.loads(raw)
        status, body = openai_answer(server, request["body"])
        response = {"status_code": status, "request_id": f"req_{index}", "body": body}
        lines.append(json.dumps({"id": f"batch_req_{index}", "custom_id": request["custom_id"], "response": response, "error": None}))
        count += 1
    output.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")  # out of order, as engines may
    return count


def likert_prompts(folder: Path) -> Path:
    """Two whole-number rubrics (1..5) with different budgets, which every option can score."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, budget in (("likert", 16), ("likert_long", 24)):
        (folder / f"{name}.md").write_text(
            f'+++\nname = "{name}"\nversion = "1"\nscale = [1, 5]\ninputs = ["query", "response"]\nmax_tokens = {budget}\n+++\n'
            f'Rate the answer ({name}) on a scale of 1 to 5.\n{{{{query}}}}\n{{{{response}}}}\nReply with ONLY {{"score": N}}.\n',
            encoding="utf-8",
        )
    return folder


#: Three distinct transcripts and a fourth whose prompt repeats the first's (an in-run repeat, in
#: another shard of two).
def transcripts(path: Path) -> Path:
    # t0 and t1 carry steps and a reference trajectory, so every path also writes agent metrics
    # (the rubrics read only query and response: the prompts are unchanged)
    calc = {"name": "calc", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}
    rows = [
        {
            "id": "t0",
            "query": "What is 2 + 2?",
            "response": "Four. [[score=4]]",
            "tools": [calc],
            "steps": [{"name": "calc", "arguments": {"expr": "2+2"}, "result": "4"}, {"name": "calc", "arguments": {"expr": "2+2"}, "result": "4"}],
            "reference_trajectory": [{"name": "calc", "arguments": {"expr": "2+2"}}],
            "task": "arith",
        },
        {
            "id": "t1",
            "query": "Capital of France?",
            "response": "Lyon. [[score=2]]",
            "tools": [calc],
            "steps": [{"name": "search", "arguments": {"q": "capital of France"}, "error": "HTTP 503"}],
            "reference_trajectory": [{"name": "search"}],
        },
        {"id": "t2", "query": "Boiling point of water?", "response": "100 C at sea level. [[score=5]]"},
        {"id": "t3", "query": "What is 2 + 2?", "response": "Four. [[score=4]]"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


DISTINCT_PROMPTS = 3
RUBRICS = ("likert", "likert_long")
