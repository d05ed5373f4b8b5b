"""Real run directories for the tests of ``harness agreement`` and ``harness compare``.

`ScriptedJudges` is a :class:`tests.judge_server.JudgeServer` whose reply is looked up in a table
keyed by (transcript id, rubric, judge model): a number becomes ``{"score": X}``, a string is sent
as the reply as it is (so "The answer looks fine to me." is unscored with ``no_score_found``). A
``[[fault:400]]`` marker in a transcript's query makes the rubrics that read the query fail.
`make_run` writes transcripts and a harness.toml and runs the real harness (``run_evaluation``,
no cache) into ``tmp/NAME``; the tests then read judgments.jsonl themselves to build their oracles.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.planning import RunOptions
from harness.rubrics.rubric import load_rubrics
from tests.e2e_support import (
    judge,
    judge_key,
    read_jsonl,
    run_and_show,
    user_prompt,
    write_config,
    write_jsonl,
)
from tests.judge_server import JudgeServer

RUBRIC_OF_LINE = {r.template.splitlines()[0]: name for name, r in load_rubrics().items()}
CANNOT = "The answer looks fine to me."


class ScriptedJudges(JudgeServer):
    """A judge server replying from ``self.table[(transcript id, rubric, model)]``."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str, str], float | str] = {}
        super().__init__(reply=self._reply)

    def _reply(self, body: dict[str, Any]) -> str:
        prompt = user_prompt({"body": body})
        # the rubric's first line opens the user message (inline layout) or the instructions in
        # the system message (the data layout)
        system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
        (rubric,) = {RUBRIC_OF_LINE[line] for line in [prompt.splitlines()[0], *system.splitlines()] if line in RUBRIC_OF_LINE}
        tid = prompt.split("id=", 1)[1].split()[0]
        value = self.table[(tid, rubric, body["model"])]
        return value if isinstance(value, str) else json.dumps({"score": value})


def record(tid: str, contexts: bool = True, fail_query: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": tid,
        "query": f"id={tid} What does the factsheet say?" + (" [[fault:400]]" if fail_query else ""),
        "response": f"id={tid} The answer.",
    }
    if contexts:
        row["contexts"] = [f"id={tid} Factsheet."]
    return row


def make_run(
    tmp: Path,
    name: str,
    server: JudgeServer,
    records: Iterable[Mapping[str, Any]],
    replies: Mapping[tuple[str, str, str], float | str] | None = None,
    judges: Iterable[str] = ("mini",),
    rubrics: Iterable[str] = ("relevance", "faithfulness", "hallucination"),
    prompts: Iterable[Path] = (),
) -> Path:
    """Run the harness on ``records`` with judges named (and modelled) ``judges``; returns the run directory.

    ``replies`` is the table of a `ScriptedJudges` server; a plain server answers ``[[score=X]]``
    markers. ``prompts`` are extra rubric directories.
    """
    assert server.base_url
    if isinstance(server, ScriptedJudges):
        server.table = dict(replies or {})
    folder = tmp / f"{name}-input"
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "transcripts.jsonl", list(records))
    top: dict[str, Any] = {"rubrics": list(rubrics)}
    if prompts:
        top["prompts"] = [str(p) for p in prompts]
    write_config(folder / "harness.toml", [judge(j, server.base_url, model=j, max_attempts=1) for j in judges], **top)
    out = tmp / name
    with judge_key():  # also from module-scoped fixtures
        options = RunOptions(input=folder / "transcripts.jsonl", out=out, config=folder / "harness.toml", no_cache=True, progress=False)
        outcome = asyncio.run(run_and_show(options, Console(file=io.StringIO())))
    assert outcome.exit_code in (0, 1), outcome.message
    return out


def scores(run: Path, rubric: str, judge_name: str) -> dict[str, float]:
    """Transcript id -> score of the scored judgments, read straight from judgments.jsonl."""
    return {
        r["transcript_id"]: r["score"]
        for r in read_jsonl(run / "judgments.jsonl")
        if r["rubric"] == rubric and r["judge"] == judge_name and r["status"] == "scored"
    }


def composite_scores(run: Path, name: str, judge_name: str) -> dict[str, float]:
    return {
        r["transcript_id"]: r["composites"][judge_name][name]
        for r in read_jsonl(run / "results.jsonl")
        if r["composites"].get(judge_name, {}).get(name) is not None
    }
