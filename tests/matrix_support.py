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
- ``run_two_workers``: two runs at once on one cache (the workers path of test_matrix.py and
  test_jury_paths.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from harness.planning import RunOptions
from harness.runner.session import RunOutcome, run_evaluation
from tests.anthropic_server import AnthropicServer
from tests.batch_server import BatchServer
from tests.e2e_support import KEY, read_jsonl
from tests.judge_server import JudgeServer, reasoning_model_refusal
from tests.scripted_judges import _logprob_content, _tokens, score_distribution

REASONING_TOKENS = 7
_SCORE = re.compile(r"\[\[score=(\d)\]\]")
#: A transcript marked ``[[sure]]`` gets the same score in every sample and choice, and most of its
#: logprob mass on it: a judge sure of its verdict (the cascade's tests route on it).
SURE = "[[sure]]"

#: A transcript marked ``[[aligned=N]]`` is scored N by a judge shown labelled examples (harness
#: align's few-shot candidate), and by its ``[[score=N]]`` otherwise.
_ALIGNED = re.compile(r"\[\[aligned=(\d)\]\]")


def judged_text(text: str) -> str:
    """What a prompt judges: the material after any few-shot examples (their markers are not its
    own), with the score its ``[[aligned=N]]`` marker gives once examples were shown."""
    if "<example" not in text:
        return text
    material = text.rsplit("</example>", 1)[-1]
    aligned = _ALIGNED.search(material)
    return material if aligned is None else _SCORE.sub(f"[[score={aligned.group(1)}]]", material)


#: The judge table (model, provider) each family's cells are run with.
FAMILY_JUDGE: dict[str, dict[str, Any]] = {
    "chat": {"model": "gpt-4o-mini"},
    "reasoning": {"model": "gpt-5-mini"},
    "anthropic": {"model": "claude-haiku-4-5", "provider": "anthropic"},
    "local": {"model": "SmolLM2-135M-Instruct-Q4_1", "provider": "local"},
}


def _last_user(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _choices(body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
    text = judged_text(_last_user(body["messages"]))
    found = _SCORE.search(text)
    base = int(found.group(1)) if found else 3
    sure = SURE in text
    seed = 0 if sure else int(body.get("seed") or 0)
    out: list[tuple[str, list[dict[str, Any]] | None]] = []
    for index in range(int(body.get("n") or 1)):
        value = 1 + (base - 1 + seed + (0 if sure else index)) % 5
        content = '{"score": ' + str(value) + "}"
        if body.get("logprobs"):
            tokens = _tokens(content)
            spread = {s: (0.9 if s == value else 0.025) for s in range(1, 6)} if sure else score_distribution(value, 1, 5)
            alternatives = {str(s): p for s, p in spread.items()}
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
        reply = super()._reply(body, judged_text(last_user), max_tokens)
        usage = reply["usage"]
        prompt = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        self.billed.append((prompt, usage["output_tokens"]))
        return reply


@dataclass
class Servers:
    openai: MatrixOpenAIServer
    anthropic: MatrixAnthropicServer
    batch: BatchServer
    live_refs: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    #: what a module's tests keep of a run to compare other paths with (a workflow's live run)
    kept: dict[Any, Any] = field(default_factory=dict)

    def billed(self, family: str) -> list[tuple[int, int]]:
        return self.anthropic.billed if family == "anthropic" else self.openai.billed

    def sent(self) -> int:
        """Every judge request any server has answered (a batch's requests counted one by one)."""
        return len(self.openai.requests) + len(self.anthropic.requests) + self.batch.requests_received

    def contacted(self) -> int:
        """Every HTTP request any server has received (a batch upload, create or poll included)."""
        return len(self.openai.requests) + len(self.anthropic.requests) + len(self.batch.paths)


@contextmanager
def running_servers() -> Iterator[Servers]:
    """The live servers and the batch server that answers as they do, for a test module."""
    openai, anthropic = MatrixOpenAIServer(), MatrixAnthropicServer()
    openai.start()
    anthropic.start()
    batch = BatchServer(key=KEY, openai_answer=partial(openai_answer, openai), anthropic_answer=partial(anthropic_answer, anthropic))
    batch.start()
    try:
        yield Servers(openai, anthropic, batch)
    finally:
        batch.stop()
        anthropic.stop()
        openai.stop()


class CellRuns:
    """A cell's runs, for a dataclass that sets ``tmp``, ``data`` (its transcripts) and ``prompts``
    (its rubric folder) and names its ``rubrics``: the options of a run into ``tmp/out`` and the
    run itself (test_matrix.py's and test_jury_paths.py's cells)."""

    tmp: Path
    data: Path
    prompts: Path
    rubrics: ClassVar[Sequence[str]]

    def options(self, config: Path, out: str | None, **kw: Any) -> RunOptions:
        return RunOptions(
            input=self.data,
            out=None if out is None else self.tmp / out,
            config=config,
            rubrics=list(self.rubrics),
            prompts=[self.prompts],
            progress=False,
            **kw,
        )

    def run(self, config: Path, out: str, **kw: Any) -> tuple[RunOutcome, list[dict[str, Any]]]:
        outcome = asyncio.run(run_evaluation(self.options(config, out, **kw)))
        return outcome, read_jsonl(self.tmp / out / "judgments.jsonl")


def run_two_workers(options: Callable[[str], RunOptions], names: tuple[str, str] = ("w1", "w2")) -> None:
    """Runs ``options(name)`` for both names at once, each on its own thread and event loop (two
    processes sharing one cache, as far as the cache can tell), started together by a barrier, and
    asserts both ended with exit code 0."""
    start = threading.Barrier(2)
    outcomes: dict[str, RunOutcome | BaseException] = {}

    def worker(name: str) -> None:
        start.wait()
        try:
            outcomes[name] = asyncio.run(run_evaluation(options(name)))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcomes[name] = exc

    threads = [threading.Thread(target=worker, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(outcomes) == 2 and all(isinstance(o, RunOutcome) and o.exit_code == 0 for o in outcomes.values()), outcomes


def batch_guide_table(name: str) -> str:
    """What docs/guide/batch.md holds between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``
    (each there once): a table ``python -m harness.capabilities`` generates."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "batch.md").read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    assert page.count(begin) == 1 and page.count(end) == 1
    return page.split(begin, 1)[1].split(end, 1)[0]


def live_url(servers: Servers, family: str) -> str:
    url = servers.anthropic.base_url if family == "anthropic" else servers.openai.base_url
    assert url is not None
    return url


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
