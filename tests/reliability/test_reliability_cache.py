"""What the cache key holds, and a cache from an older schema.

tests/test_replay.py::test_what_changes_the_cache_key already runs the judge model and temperature
(miss) and timeout, concurrency, max_attempts, the key's variable name and prices (hit);
test_a_changed_api_key_value_still_hits the key itself. Here: base URL, rubric text and rubric
version (miss), a rubric's description (hit: it is never sent), and a run on a cache written by
the first schema migration.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from harness.cache import MIGRATIONS, migrate
from harness.cache import keys as cache_keys
from harness.planning import RunOptions, build_plan, make_entry
from harness.traces.loader import iter_transcripts
from tests.e2e_support import (
    KEY,
    KEY_ENV,
    cache_rows,
    judge,
    serve,
    write_config,
    write_jsonl,
)
from tests.reliability.support import run, transcripts

CUSTOM = """+++
name = "concise"
version = "{version}"
description = "{description}"
scale = [0.0, 1.0]
inputs = ["query", "response"]
+++
{text}

{{{{query}}}}

{{{{response}}}}
"""


def write_rubric(directory: Path, version: str = "1", text: str = "How concise is the response?", description: str = "") -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "concise.md").write_text(CUSTOM.format(version=version, text=text, description=description), encoding="utf-8")
    return directory


async def test_another_base_url_misses(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(3))
    with serve() as first, serve() as second:
        assert first.base_url and second.base_url
        write_config(tmp_path / "harness.toml", [judge("j", first.base_url)])
        await run(tmp_path, "a", rubrics=["relevance"])
        write_config(tmp_path / "harness.toml", [judge("j", second.base_url)])  # same model, same name
        outcome, out, _ = await run(tmp_path, "b", rubrics=["relevance"])
        # ... and back: the first endpoint's judgments are still there.
        write_config(tmp_path / "harness.toml", [judge("j", first.base_url)])
        _, back, _ = await run(tmp_path, "c", rubrics=["relevance"])
        counts = (first.count(), second.count())
    assert outcome.exit_code == 0
    assert counts == (3, 3)
    assert not any(j["cached"] for j in out.judgments)
    assert all(j["cached"] for j in back.judgments)
    assert {r["base_url"] for r in cache_rows(tmp_path / "cache.sqlite")} == {first.base_url, second.base_url}


@pytest.mark.parametrize(
    ("change", "hits"),
    [
        ({"text": "How concise is the response? Penalise filler."}, False),
        ({"version": "2"}, False),
        ({"description": "a new description, never sent to the judge"}, True),
    ],
    ids=["rubric-text", "rubric-version", "rubric-description"],
)
async def test_rubric_text_and_version_miss(tmp_path: Path, change: dict[str, str], hits: bool) -> None:
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(3))
    prompts = write_rubric(tmp_path / "prompts")
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        await run(tmp_path, "a", rubrics=["concise"], prompts=[prompts])
        assert server.count() == 3
        write_rubric(prompts, **change)
        outcome, out, _ = await run(tmp_path, "b", rubrics=["concise"], prompts=[prompts])
        sent = server.count() - 3
    assert outcome.exit_code == 0
    assert sent == (0 if hits else 3)
    assert all(j["cached"] is hits for j in out.judgments)
    if "version" in change:
        assert {j["rubric_version"] for j in out.judgments} == {"2"}
        assert {r["rubric_version"] for r in cache_rows(tmp_path / "cache.sqlite")} == {"1", "2"}


def planned_keys(tmp_path: Path, rubric: str) -> list[str]:
    plan = build_plan(RunOptions(input=tmp_path / "transcripts.jsonl", config=tmp_path / "harness.toml", rubrics=[rubric]), require_keys=False)
    assert plan.rubrics is not None
    return [
        job.key  # type: ignore[misc]
        for _, record in iter_transcripts(plan.input)
        for job in make_entry(record.resolved(), plan.rubrics, plan.judges).jobs
    ]


def insert_v1_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as the first schema (migration 1 alone) stored them: no status, score or attempts."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for row in rows:
            db.execute(
                "INSERT INTO judgments (key, judge_model, base_url, rubric, rubric_version, raw_output, prompt_tokens, "
                "completion_tokens, latency_ms, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row["key"], "judge-model", row["base_url"], "relevance", "1", row["raw_output"], 100, 3, 250.0, None, "2025-01-01T00:00:00+00:00"),
            )
    finally:
        db.close()


async def test_a_cache_from_the_first_schema_is_migrated_and_its_rows_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(MIGRATIONS) >= 2, "the test needs an older schema to start from"
    write_jsonl(tmp_path / "transcripts.jsonl", transcripts(4))
    cache = tmp_path / "cache.sqlite"
    with serve() as server:
        assert server.base_url
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        current = planned_keys(tmp_path, "relevance")
        # t3's row was written under an older key format: same prompt, another key.
        monkeypatch.setattr(cache_keys, "KEY_FORMAT", cache_keys.KEY_FORMAT - 1)
        old_format = planned_keys(tmp_path, "relevance")[3]
        monkeypatch.undo()
        monkeypatch.setenv(KEY_ENV, KEY)
        assert old_format != current[3]

        db = sqlite3.connect(cache, isolation_level=None)
        migrate(db, MIGRATIONS[:1])
        db.close()
        stored = [{"key": k, "base_url": server.base_url, "raw_output": f"Score: 0.{i + 1}"} for i, k in enumerate(current[:3])]
        insert_v1_rows(cache, [*stored, {"key": old_format, "base_url": server.base_url, "raw_output": "Score: 0.9"}])

        outcome, out, _ = await run(tmp_path, rubrics=["relevance"])
        asked = server.count()

    assert outcome.exit_code == 0, outcome.message
    judgments = {j["transcript_id"]: j for j in out.judgments}
    for i in range(3):  # the old rows are served, re-parsed by today's parser
        assert (judgments[f"t{i}"]["cached"], judgments[f"t{i}"]["score"]) == (True, float(f"0.{i + 1}"))
    assert judgments["t3"]["cached"] is False  # the older key format misses: asked (and paid) again
    assert asked == 1
    db = sqlite3.connect(cache)
    try:
        assert [v for (v,) in db.execute("SELECT version FROM _migrations ORDER BY version")] == list(range(1, len(MIGRATIONS) + 1))
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        old = dict(db.execute("SELECT key, raw_output FROM judgments WHERE created_at = '2025-01-01T00:00:00+00:00'").fetchall())
    finally:
        db.close()
    # Nothing discarded: all four old rows are still there, untouched, beside the new one.
    assert old == {r["key"]: r["raw_output"] for r in [*stored, {"key": old_format, "raw_output": "Score: 0.9"}]}
    assert len(cache_rows(cache)) == 5
