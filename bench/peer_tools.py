#!/usr/bin/env python
"""One tool judging one workload, as a whole process: the child that ``bench/peers.py`` times.

    python bench/peer_tools.py TOOL DATA BASE_URL CONCURRENCY WORKDIR

TOOL is ``openai`` (a plain loop with the openai SDK), ``ragas``, ``deepeval`` or ``inspect``;
``harness`` itself runs as ``python -m harness run`` and needs no child here. DATA is the
transcripts' JSONL (``id``, ``query``, ``response``); for ``openai`` it is instead the request
bodies ``harness`` renders for the same transcripts (one JSON body a line), so the loop sends the
very prompts the harness sends. Each tool judges every transcript once for relevance of the
response to the query, through its own usual API and its own prompt, with at most CONCURRENCY
calls in flight, against BASE_URL (an OpenAI-compatible server). WORKDIR holds what the tool
writes (its cache, logs, results); a second run with the same WORKDIR is the rerun.

The last line printed is one JSON object: ``{"judged": n, "scored": n, "eval_s": s}``, where
``eval_s`` is the wall time of the evaluation call alone (imports and set-up excluded) and
``scored`` counts the judgments that produced a score.

Only the standard library is imported at the top: each tool runs under the interpreter that has
it installed (``bench/README.md``: the peers live in their own virtual environments).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

MODEL = "gpt-4o-mini"
#: The same question each tool puts in its own words: is the response relevant to the query?
RELEVANCE = "Is the response relevant to the user's query: does it directly and completely answer the question asked?"
GEVAL_STEPS = [
    "Check whether the actual output directly answers the question in the input.",
    "Check whether the answer is complete: 1.0 answers fully, 0.5 partially, 0 does not address the question.",
]
INSPECT_CRITERION = "The submission directly and completely answers the question asked in the task."


def _records(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _quiet_environment(workdir: Path) -> None:
    """Each tool's documented switches: no telemetry, no update check, no hub downloads."""
    os.environ.update(
        {
            "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
            "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
            "DEEPEVAL_NO_INSPECT_PROMPT": "1",
            "RAGAS_DO_NOT_TRACK": "true",
            "INSPECT_CACHE_DIR": str(workdir / "inspect-cache"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "DO_NOT_TRACK": "1",
        }
    )


# --- openai: the loop a user writes by hand ---------------------------------------------------


def run_openai(data: str, base_url: str, concurrency: int, workdir: Path) -> dict[str, Any]:
    import openai

    bodies = _records(data)

    async def main() -> list[float | None]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=3)
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict[str, Any]) -> float | None:
            async with gate:
                reply = await client.chat.completions.create(**body)
            text = reply.choices[0].message.content or ""
            try:
                return float(json.loads(text)["score"])
            except (ValueError, KeyError, TypeError):
                return None

        try:
            return await asyncio.gather(*(one(b) for b in bodies))
        finally:
            await client.close()

    started = time.perf_counter()
    scores = asyncio.run(main())
    eval_s = time.perf_counter() - started
    (workdir / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return {"judged": len(scores), "scored": sum(s is not None for s in scores), "eval_s": eval_s}


# --- Ragas: AspectCritic through ragas.evaluate -----------------------------------------------


def run_ragas(data: str, base_url: str, concurrency: int, workdir: Path) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from openai import AsyncOpenAI
    from ragas import EvaluationDataset, SingleTurnSample, evaluate
    from ragas.cache import DiskCacheBackend
    from ragas.llms import llm_factory
    from ragas.metrics import AspectCritic
    from ragas.run_config import RunConfig

    records = _records(data)
    client = AsyncOpenAI(base_url=base_url, api_key="x")
    llm = llm_factory(MODEL, client=client, cache=DiskCacheBackend(str(workdir / "ragas-cache")))
    metric = AspectCritic(name="relevance", definition=RELEVANCE)
    dataset = EvaluationDataset(samples=[SingleTurnSample(user_input=r["query"], response=r["response"]) for r in records])
    started = time.perf_counter()
    result = evaluate(dataset, metrics=[metric], llm=llm, run_config=RunConfig(max_workers=concurrency), show_progress=False)
    eval_s = time.perf_counter() - started
    scores = [row.get("relevance") for row in result.scores]
    (workdir / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    scored = sum(isinstance(s, (int, float)) and s == s for s in scores)
    return {"judged": len(scores), "scored": scored, "eval_s": eval_s}


# --- DeepEval: GEval through deepeval.evaluate ------------------------------------------------


def run_deepeval(data: str, base_url: str, concurrency: int, workdir: Path) -> dict[str, Any]:
    os.chdir(workdir)  # DeepEval keeps its cache and test runs in ./.deepeval
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
    from deepeval.metrics import GEval
    from deepeval.models import OpenAIModel
    from deepeval.test_case import LLMTestCase, SingleTurnParams

    records = _records(data)
    model = OpenAIModel(model=MODEL, base_url=base_url, api_key="x")
    metric = GEval(
        name="Relevance",
        evaluation_steps=GEVAL_STEPS,
        evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
        model=model,
    )
    cases = [LLMTestCase(input=r["query"], actual_output=r["response"], name=r["id"]) for r in records]
    started = time.perf_counter()
    result = evaluate(
        test_cases=cases,
        metrics=[metric],
        async_config=AsyncConfig(run_async=True, max_concurrent=concurrency, throttle_value=0),
        display_config=DisplayConfig(print_results=False, show_indicator=False, verbose_mode=False, inspect_after_run=False),
        cache_config=CacheConfig(write_cache=True, use_cache=True),
        error_config=ErrorConfig(ignore_errors=True),
    )
    eval_s = time.perf_counter() - started
    scores = [t.metrics_data[0].score if t.metrics_data else None for t in result.test_results]
    (workdir / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return {"judged": len(scores), "scored": sum(s is not None for s in scores), "eval_s": eval_s}


# --- Inspect AI: model_graded_qa on the given responses ---------------------------------------


def run_inspect(data: str, base_url: str, concurrency: int, workdir: Path) -> dict[str, Any]:
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = "x"
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import model_graded_qa
    from inspect_ai.solver import Generate, TaskState, solver

    @solver
    def given_response() -> Any:
        """The agent already answered: its response is the output to grade (no model call)."""

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.output = ModelOutput.from_content(MODEL, state.metadata["response"])
            return state

        return solve

    records = _records(data)
    samples = [Sample(id=r["id"], input=r["query"], target=INSPECT_CRITERION, metadata={"response": r["response"]}) for r in records]
    task = Task(dataset=samples, solver=given_response(), scorer=model_graded_qa())
    started = time.perf_counter()
    logs = inspect_eval(
        task,
        model=f"openai/{MODEL}",
        max_connections=concurrency,
        max_samples=concurrency,
        cache=True,
        display="none",
        log_dir=str(workdir / "inspect-logs"),
    )
    eval_s = time.perf_counter() - started
    log = logs[0]
    if log.status != "success" or log.samples is None:
        raise SystemExit(f"inspect eval ended {log.status}: {log.error}")
    scores = [next(iter(s.scores.values())).value if s.scores else None for s in log.samples]
    (workdir / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return {"judged": len(scores), "scored": sum(v in ("C", "I", "P") for v in scores), "eval_s": eval_s}


TOOLS = {"openai": run_openai, "ragas": run_ragas, "deepeval": run_deepeval, "inspect": run_inspect}


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] not in TOOLS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    tool, data, base_url, concurrency, workdir = argv
    work = Path(workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    _quiet_environment(work)
    result = TOOLS[tool](str(Path(data).resolve()), base_url, int(concurrency), work)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
