"""A project's tests of its agent's answers, judged through the harness's pytest plugin.

No conftest: installing the harness registers the plugin, which finds harness.toml beside this file.
A vague answer is judged by two tests, so two tests fail and show what a failure says. Each test records
when it judged, in which xdist worker, and what the cache answered, in $SAMPLE_LOG (when set), so the
test that runs this project can see that two workers judged the same answers at once (with
``pytest -n 2``, xdist hands each worker a chunk of two tests first: the first and the third).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from harness.testing import Judged, assert_judged


def answer(tid: str, question: str, text: str, quality: float) -> dict[str, object]:
    return {"id": tid, "query": question, "response": f"[{tid}] {text} (quality={quality})", "contexts": [f"The factsheet of {tid}."]}


SHARED = [
    answer("nav", "What is the NAV of HDFC Top 100?", "1,184.37 as of 8 Dec 2025.", 0.9),
    answer("ter", "What is its expense ratio?", "1.04% for the direct plan.", 0.85),
    answer("aum", "How large is the fund?", "35,000 crore of assets.", 0.8),
    answer("exit", "Is there an exit load?", "1% within a year.", 0.75),
]
VAGUE = [answer("vague", "Should I invest in it?", "It depends on many things.", 0.35)]
EACH = [answer(f"each-{i}", f"Question {i}?", f"Answer {i}.", 0.7 + 0.05 * i) for i in range(4)]


@pytest.fixture(autouse=True)
def record(request: pytest.FixtureRequest) -> Iterator[dict[str, object]]:
    seen: dict[str, object] = {"test": request.node.name, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": time.time()}
    yield seen
    seen["end"] = time.time()
    log = os.environ.get("SAMPLE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(seen) + "\n")


def test_shared_answers_are_relevant(harness_judge, record) -> None:
    judged: Judged = harness_judge(SHARED, rubric="relevance")
    record["cached"] = judged.cached
    assert judged >= 0.6


def test_shared_answers_are_faithful(harness_judge) -> None:
    harness_judge.assert_judged(SHARED, rubric="faithfulness", at_least=0.6)


def test_shared_answers_again(record) -> None:
    judged = assert_judged(SHARED, rubric="relevance", at_least=0.6, judge="mini")
    record["cached"] = judged.cached


def test_a_vague_answer_is_caught() -> None:
    assert_judged(VAGUE, rubric="relevance", at_least=0.7)


def test_a_vague_answer_by_comparison(harness_judge) -> None:
    assert harness_judge(VAGUE, rubric="relevance") >= 0.7


@pytest.mark.parametrize("item", EACH, ids=[a["id"] for a in EACH])
def test_each_answer(item: dict[str, object]) -> None:
    assert_judged([item], rubric="relevance", at_least=0.7)
