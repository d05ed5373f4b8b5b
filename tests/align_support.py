"""Judges whose agreement with people depends on the prompt they get, for ``harness align``'s tests.

Every transcript's response carries its true verdict (``truth=pass`` or ``truth=fail``) among
random words, so no two transcripts are near-duplicates. `AlignJudgeServer` (a real
:class:`tests.judge_server.JudgeServer` on 127.0.0.1) answers by the judge model:

- ``sensitive``: right with probability ``PLAIN`` on a prompt without labelled examples and
  ``WITH_EXAMPLES`` on one with them (harness align's ``<example`` blocks): the few-shot candidate
  truly agrees with people better. The draw is one uniform number per transcript (from its id),
  right when below the accuracy, so the transcripts it gets right with examples include those it
  gets right without.
- ``blind``: right with probability ``PLAIN`` whatever the prompt: no candidate can do better.

A right answer is ``{"score": 0.9}`` for a pass and ``{"score": 0.1}`` for a fail; a wrong one the
other. The criteria-rewriting request (``ALIGN REWRITE``) is answered with the rubric it was
sent, one line changed, between ``<rubric>`` tags.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from tests.e2e_support import judge, user_prompt, write_config, write_jsonl
from tests.judge_server import JudgeServer, prompt_text

PLAIN = 0.6
WITH_EXAMPLES = 0.95
_TRUTH = re.compile(r"truth=(pass|fail) id=(\S+)")
_RUBRIC = re.compile(r"<query>\n\(scale [^)]*\)\n(.*)\n</query>", re.DOTALL)
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ri", "so", "tu", "vo", "ze") for b in ("ba", "de", "fi", "go", "hu", "ja", "ke", "li")]


def draw(tid: str) -> float:
    """The transcript's uniform number in [0, 1): whether the judge gets it right."""
    return int.from_bytes(hashlib.sha256(tid.encode()).digest()[:8], "big") / 2**64


def right(model: str, tid: str, examples: bool) -> bool:
    accuracy = WITH_EXAMPLES if model == "sensitive" and examples else PLAIN
    return draw(tid) < accuracy


class AlignJudgeServer(JudgeServer):
    def __init__(self) -> None:
        super().__init__(reply=self._reply)

    def _reply(self, body: dict[str, Any]) -> str:
        prompt = user_prompt({"body": body})
        if prompt.startswith("ALIGN REWRITE"):
            template = _RUBRIC.search(prompt)
            assert template is not None, prompt[:300]
            revised = template.group(1).replace("EVALUATION CRITERIA:", "EVALUATION CRITERIA (what people value: a right answer):")
            return f"Here it is.\n<rubric>\n{revised}\n</rubric>"
        truth, tid = _TRUTH.findall(prompt)[-1]  # the material judged comes after any examples
        # the examples are part of the rubric's instructions: the system message in the data layout
        correct = right(body["model"], tid, "<example" in prompt_text(body["messages"]))
        passed = (truth == "pass") == correct
        return json.dumps({"score": 0.9 if passed else 0.1})


def transcripts(n: int, seed: int = 0, per_task: int = 2) -> list[dict[str, Any]]:
    """n transcripts, ``per_task`` of each task; the tasks pass and fail in turn."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        tid = f"t{i:03d}"
        truth = "pass" if (i // per_task) % 2 == 0 else "fail"
        query = " ".join(rng.choice(WORDS) for _ in range(12)) + "?"
        response = " ".join(rng.choice(WORDS) for _ in range(25)) + f" truth={truth} id={tid}"
        rows.append({"id": tid, "query": query, "response": response, "task": f"task-{i // per_task}"})
    return rows


def labels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"transcript_id": r["id"], "rubric": "relevance", "label": r["response"].split("truth=")[1].split()[0]} for r in rows]


def setup(tmp: Path, server: JudgeServer, model: str, n: int = 200, labelled: int | None = None) -> dict[str, Path]:
    """n transcripts, labels of the first ``labelled`` (default all) and a harness.toml with the
    judge ``mini`` of ``model``, in ``tmp``; returns their paths."""
    assert server.base_url
    tmp.mkdir(parents=True, exist_ok=True)
    rows = transcripts(n)
    data = write_jsonl(tmp / "transcripts.jsonl", rows)
    labelled_file = write_jsonl(tmp / "labels.jsonl", labels(rows[: n if labelled is None else labelled]))
    config = write_config(tmp / "harness.toml", [judge("mini", server.base_url, model=model, max_attempts=1)], rubrics=["relevance"])
    return {"transcripts": data, "labels": labelled_file, "config": config, "cache": tmp / "cache.sqlite"}
