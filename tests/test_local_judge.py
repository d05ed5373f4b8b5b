"""End to end with the embedded judge: SmolLM2-135M run by llama-cpp-python, a real LLM.

This is the ``harness run examples/transcripts.jsonl`` path of the README (no judge configured,
no key, no network), cut to a few transcripts so it takes seconds, not minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.planning import RunOptions
from harness.runner import run_evaluation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts.jsonl"

pytestmark = pytest.mark.local_model


async def test_local_judge_scores_and_replays(tmp_path: Path) -> None:
    cache = tmp_path / "judgments.sqlite"
    options = RunOptions(input=EXAMPLES, out=tmp_path / "a", rubrics=["relevance"], limit=2, cache=cache, progress=False)
    outcome = await run_evaluation(options)

    rows = [json.loads(line) for line in (tmp_path / "a" / "judgments.jsonl").read_text().splitlines()]
    assert outcome.exit_code == 0, outcome.message
    assert [r["judge"] for r in rows] == ["local-smollm2", "local-smollm2"]
    for row in rows:
        # The reply is schema-constrained JSON, so the tiny model's answer always parses.
        assert row["status"] == "scored", row
        assert 0.0 <= row["score"] <= 1.0
        assert json.loads(row["raw_output"])["score"] == row["raw_score"]
        assert row["prompt_tokens"] > 50 and row["completion_tokens"] > 0
        assert row["cost_usd"] == 0.0 and row["cached"] is False
    assert outcome.summary["judges"]["local-smollm2"]["requests"] == 2

    # Offline replay: no model is even loaded, and the scores are the same.
    replay = await run_evaluation(RunOptions(input=EXAMPLES, out=tmp_path / "b", rubrics=["relevance"], limit=2, cache=cache, offline=True, progress=False))
    again = [json.loads(line) for line in (tmp_path / "b" / "judgments.jsonl").read_text().splitlines()]
    assert replay.exit_code == 0
    assert [(r["score"], r["raw_output"]) for r in again] == [(r["score"], r["raw_output"]) for r in rows]
    assert all(r["cached"] for r in again)
