"""``harness.evaluate`` / ``aevaluate``: the notebook API against a real judge server on 127.0.0.1.

What is checked: every kind of data (list of dicts, Transcript objects, a DataFrame, a path) gives
the same judgments; the results read back as DataFrames with one row per judgment and per
transcript; a notebook run and ``harness run`` share the cache (the second pays nothing); it works
inside a running event loop; bad data is one clear error.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.notebook import EvaluationError
from harness.transcripts import Transcript
from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_jsonl
from tests.reliability.support import cli

pytestmark = pytest.mark.timeout(120)

RECORDS = [
    {"id": "t1", "query": "What is 2+2? [[score=0.9]]", "response": "4", "contexts": ["2+2=4 [[score=0.8]]"]},
    {"id": "t2", "query": "Capital of France? [[score=0.3]]", "response": "Paris", "contexts": ["Paris is the capital [[score=0.7]]"]},
    {"id": "t3", "query": "Colour of the sky? [[score=0.5]]", "response": "blue"},
]


def _scores(results: harness.notebook.Results) -> dict[tuple[str, str], Any]:
    return {(j.transcript_id, j.rubric): (j.status, j.score) for j in results.judgments}


def test_every_kind_of_data_gives_the_same_judgments(tmp_path: Path) -> None:
    import pandas as pd

    with serve() as server:
        judges = [judge("j", server.base_url)]
        common: dict[str, Any] = {"judges": judges, "rubrics": ["relevance", "faithfulness"], "progress": False}
        from_dicts = harness.evaluate(RECORDS, cache=tmp_path / "a.sqlite", out=tmp_path / "a", **common)
        from_objects = harness.evaluate([Transcript.model_validate(r) for r in RECORDS], cache=tmp_path / "b.sqlite", out=tmp_path / "b", **common)
        frame = pd.DataFrame(RECORDS)  # t3 has no contexts: NaN in the frame, absent in the record
        from_frame = harness.evaluate(frame, cache=tmp_path / "c.sqlite", out=tmp_path / "c", **common)
        path = tmp_path / "in.jsonl"
        write_jsonl(path, RECORDS)
        from_path = harness.evaluate(path, cache=tmp_path / "d.sqlite", out=tmp_path / "d", **common)
    expected = _scores(from_dicts)
    assert len(expected) == 6
    assert expected[("t1", "relevance")] == ("scored", 0.9)
    assert expected[("t3", "faithfulness")][0] == "unscored"  # no contexts: missing input, not a NaN score
    for other in (from_objects, from_frame, from_path):
        assert _scores(other) == expected
    assert from_dicts.exit_code == 0


def test_results_as_dataframes_and_summary(tmp_path: Path) -> None:
    with serve() as server:
        results = harness.evaluate(
            RECORDS, judges=[judge("j", server.base_url)], rubrics=["relevance"], cache=tmp_path / "c.sqlite", out=tmp_path / "run", progress=False
        )
    per_judgment = results.to_pandas()
    assert len(per_judgment) == 3
    assert {"transcript_id", "rubric", "judge", "status", "score", "cost_usd"} <= set(per_judgment.columns)
    assert per_judgment.set_index("transcript_id").loc["t2", "score"] == pytest.approx(0.3)
    per_transcript = results.to_pandas("transcript")
    assert list(per_transcript["transcript_id"]) == ["t1", "t2", "t3"]
    assert per_transcript["j/relevance"].tolist() == pytest.approx([0.9, 0.3, 0.5])
    # summary is the run's summary.json, as the CLI wrote it
    assert results.summary == json.loads((tmp_path / "run" / "summary.json").read_text())
    report = results.report()
    assert report.path == tmp_path / "run" / "report.html" and report.path.stat().st_size > 1000
    assert report._repr_html_().startswith("<iframe srcdoc=")
    with pytest.raises(ValueError, match="level"):
        results.to_pandas("rubric")


def test_notebook_and_cli_share_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "shared.sqlite"
    with serve() as server:
        harness.evaluate(RECORDS, judges=[judge("j", server.base_url)], rubrics=["relevance"], cache=cache, out=tmp_path / "nb", progress=False)
        paid = len(server.requests)
        assert paid == 3
        config = tmp_path / "harness.toml"
        table = judge("j", server.base_url)
        lines = ["[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
        config.write_text("\n".join(lines) + "\n")
        write_jsonl(tmp_path / "in.jsonl", RECORDS)
        done = cli(
            ["run", "in.jsonl", "--config", "harness.toml", "--rubric", "relevance", "--cache", str(cache), "--out", "cli", "--no-progress"],
            cwd=tmp_path,
            env={KEY_ENV: KEY},
        )
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == paid  # every judgment came from the notebook's cache
    cli_rows = [json.loads(line) for line in (tmp_path / "cli" / "judgments.jsonl").read_text().splitlines()]
    assert all(row["cached"] for row in cli_rows)
    nb_rows = [json.loads(line) for line in (tmp_path / "nb" / "judgments.jsonl").read_text().splitlines()]
    assert [(r["transcript_id"], r["score"]) for r in cli_rows] == [(r["transcript_id"], r["score"]) for r in nb_rows]


def test_evaluate_inside_a_running_event_loop(tmp_path: Path) -> None:
    """Jupyter runs cells inside an event loop: evaluate() must not call asyncio.run on it, and
    aevaluate() must be awaitable there."""
    with serve() as server:
        judges = [judge("j", server.base_url)]

        async def cell() -> tuple[Any, Any]:
            synced = harness.evaluate(RECORDS, judges=judges, rubrics=["relevance"], cache=tmp_path / "c.sqlite", out=tmp_path / "a", progress=False)
            awaited = await harness.aevaluate(
                RECORDS, judges=judges, rubrics=["relevance"], cache=tmp_path / "c.sqlite", out=tmp_path / "b", progress=False
            )
            return synced, awaited

        synced, awaited = asyncio.run(cell())
    assert _scores(synced) == _scores(awaited)
    assert not any(j.cached for j in synced.judgments) and all(j.cached for j in awaited.judgments)


def test_bad_data_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match="record 1: expected a dict or a Transcript, not int"):
        harness.evaluate([RECORDS[0], 7], out=tmp_path / "x", progress=False)
    with pytest.raises(EvaluationError, match="not one dict"):
        harness.evaluate(RECORDS[0], out=tmp_path / "y", progress=False)
    with pytest.raises(EvaluationError, match=r"input.jsonl:1: query") as info:  # the run checks the record
        harness.evaluate([{"id": "t", "query": 5}], judges=[judge("j", "http://127.0.0.1:9/v1")], out=tmp_path / "z", progress=False)
    assert info.value.exit_code == 2
