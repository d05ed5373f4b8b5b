"""``harness sync`` against the Langfuse fake: the seeded sample, the budget per pass, overlapping
passes, the cursor in a PostgreSQL cache; and the pieces (sources, durations, the cursor's advance)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UserInputError
from harness.planning import RunOptions
from harness.servers.base import PulledTrace, parse_duration, parse_when
from harness.servers.source import parse_source
from harness.servers.sync import Position, SyncOptions, advance, cursor_key, parse_sample, sampled, sync_once
from tests.e2e_support import serve
from tests.servers import support
from tests.servers.fakes import PUBLIC_KEY, SECRET_KEY, FakeLangfuse, clone_langfuse
from tests.servers.support import chat_prompts, cli, judge_config
from tests.traces.support import LANGFUSE

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)


def many_traces(n: int) -> list[dict[str, Any]]:
    base = json.loads(LANGFUSE.read_text(encoding="utf-8"))["data"]
    first = [o for o in base if o["traceId"] == base[0]["traceId"]]
    return [o for i in range(n) for o in clone_langfuse(first, f"t{i}", timedelta(minutes=i), city=f"City-{i}")]


def trace_ids(fake: FakeLangfuse) -> list[str]:
    return sorted({o["traceId"] for o in fake.observations}, key=lambda t: min(o["startTime"] for o in fake.observations if o["traceId"] == t))


def judged_traces(fake: FakeLangfuse) -> set[str]:
    return {s["traceId"] for s in fake.scores.values()}


def sync_args(fake: FakeLangfuse, tmp: Path, config: Path, *extra: str | Path) -> list[str | Path]:
    return support.sync_args(f"langfuse://127.0.0.1:{fake.port}/weather", tmp, config, *extra, rubrics=["relevance"])


def test_the_sample_is_seeded_and_the_same_traces_wherever_it_runs(tmp_path: Path) -> None:
    with FakeLangfuse(many_traces(12)) as fake, serve() as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        expected = {t for t in trace_ids(fake) if sampled(t, 0.5, 7)}
        assert 0 < len(expected) < 12
        result = cli(*sync_args(fake, tmp_path, config, "--sample", "50%", "--seed", "7"))
        assert result.exit_code == 0, result.output
        assert f"pulled 12 new traces from langfuse+http://127.0.0.1:{fake.port}/weather, {12 - len(expected)} outside the sample" in result.output
        assert judged_traces(fake) == expected
        # another machine (its own cache and cursor) samples the same traces
        other = tmp_path / "other"
        other.mkdir()
        fake.scores.clear()
        again = cli(*sync_args(fake, other, config, "--sample", "0.5", "--seed", "7"))
        assert again.exit_code == 0 and judged_traces(fake) == expected
        # and a trace outside the sample is never judged by a later pass
        assert "pulled 0 new traces" in cli(*sync_args(fake, tmp_path, config, "--sample", "50%", "--seed", "7")).output


def test_a_pass_judges_what_its_budget_affords_and_the_next_pass_the_rest(tmp_path: Path) -> None:
    with FakeLangfuse(many_traces(6)) as fake, serve() as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        broke = cli(*sync_args(fake, tmp_path / "broke", config, "--max-cost", "0.000001"))
        assert broke.exit_code == 4 and "affords none of the 6 new transcripts: nothing was judged" in broke.output
        assert not fake.scores
        order = trace_ids(fake)
        budget = "0.00015"  # one or two traces' relevance judgments at the test prices
        first = cli(*sync_args(fake, tmp_path, config, "--max-cost", budget))
        assert first.exit_code == 0, first.output
        assert "--max-cost affords" in first.output
        done = judged_traces(fake)
        assert 0 < len(done) < 6 and done == set(order[: len(done)])  # the oldest first
        passes = 1
        while len(judged_traces(fake)) < 6 and passes < 6:
            assert cli(*sync_args(fake, tmp_path, config, "--max-cost", budget)).exit_code == 0
            passes += 1
        assert judged_traces(fake) == set(order) and passes > 1
        prompts = chat_prompts(judge_server)
        assert len(prompts) == len(set(prompts)) == 6  # nothing judged twice


def test_overlapping_passes_never_judge_or_write_twice(tmp_path: Path) -> None:
    with FakeLangfuse(many_traces(4)) as fake, serve(latency_s=0.05) as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        source = f"langfuse://127.0.0.1:{fake.port}/weather"

        def options(out: Path) -> SyncOptions:
            run = RunOptions(input=out, config=config, cache=tmp_path / "c.sqlite", rubrics=["relevance"], progress=False)
            return SyncOptions(source=source, run=run, out=out, settle_s=0.0)

        async def both() -> list[Any]:
            return list(await asyncio.gather(sync_once(options(tmp_path / "a")), sync_once(options(tmp_path / "b"))))

        results = asyncio.run(both())
        assert sorted(r.locked_out for r in results) == [False, True]
        locked = next(r for r in results if r.locked_out)
        assert locked.message == f"another harness sync of {parse_source(source).url} is running; this pass did nothing"
        assert len(fake.scores) == 4 and len(chat_prompts(judge_server)) == 4
        posts = sum(1 for r in fake.requests if r["path"] == "/api/public/scores")
        assert posts == 1
        # the lock is released: the next pass runs (and finds nothing new)
        later = asyncio.run(sync_once(options(tmp_path / "c")))
        assert not later.locked_out and later.pulled is not None and later.pulled.traces == []
        assert later.pass_dir is None and not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_the_cursor_lives_in_a_postgresql_cache_too(tmp_path: Path, postgres: Any) -> None:
    import psycopg

    url = postgres.new_database()
    with FakeLangfuse(many_traces(3)) as fake, serve() as judge_server:
        config = judge_config(tmp_path, judge_server.base_url)
        source = f"langfuse://127.0.0.1:{fake.port}/weather"
        args = ["sync", source, "--out", tmp_path / "passes", "--config", config, "--cache", url, "--rubric", "relevance", "--settle", "0s"]
        first = cli(*args)
        assert first.exit_code == 0, first.output
        assert "judged 3 traces" in first.output
        with psycopg.connect(url) as conn:
            [(source_key, position)] = conn.execute("SELECT source, position FROM sync_cursors").fetchall()
        assert source_key == cursor_key(parse_source(source).url, "default")
        assert Position.parse(position) is not None
        second = cli(*args)
        assert "pulled 0 new traces" in second.output and len(chat_prompts(judge_server)) == 3


# -- the pieces ---------------------------------------------------------------------------------


async def test_migration_10_gives_an_older_cache_its_cursors(tmp_path: Path) -> None:
    import sqlite3

    from harness.cache import open_store
    from harness.cache.migrations import MIGRATIONS, migrate

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    assert migrate(db, MIGRATIONS[:9])[-1] == "m009_batch_requests_by_key"  # a cache written before sync
    db.close()
    async with open_store(path) as store:
        assert await store.cursor("phoenix+http://h/p#default") is None
        await store.set_cursor("phoenix+http://h/p#default", Position(1.5, "t").text())
        await store.set_cursor("phoenix+http://h/p#default", Position(2.5, "u").text())
        assert Position.parse(await store.cursor("phoenix+http://h/p#default")) == Position(2.5, "u")
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM _migrations WHERE version = 11").fetchone() == ("m011_sync_cursors",)
    assert db.execute("SELECT count(*) FROM sync_cursors").fetchone() == (1,)
    db.close()


def test_sources_parse_with_their_keys_from_the_environment() -> None:
    phoenix = parse_source("phoenix://127.0.0.1:6006/my%20app", {"PHOENIX_API_KEY": "k"})
    assert (phoenix.base_url, phoenix.project, phoenix.headers) == ("http://127.0.0.1:6006", "my app", {"Authorization": "Bearer k"})
    assert phoenix.url == "phoenix+http://127.0.0.1:6006/my%20app"
    remote = parse_source("langsmith://api.smith.langchain.com/proj", {"LANGSMITH_API_KEY": "ls"})
    assert remote.base_url == "https://api.smith.langchain.com" and remote.headers == {"x-api-key": "ls"}
    prefixed = parse_source("mlflow+http://example.test:5000/ml/exp", {})
    assert (prefixed.base_url, prefixed.project) == ("http://example.test:5000/ml", "exp")
    assert parse_source("langfuse://cloud.langfuse.com", {"LANGFUSE_PUBLIC_KEY": "p", "LANGFUSE_SECRET_KEY": "s"}).project == ""
    for bad, words in [
        ("datadog://x/y", "KIND one of"),
        ("phoenix://127.0.0.1:6006", "name the project"),
        ("phoenix+ftp://h/p", "http or https"),
        ("phoenix://user:pw@h/p", "not in the URL"),
        ("langsmith://h/p", "LANGSMITH_API_KEY"),
    ]:
        with pytest.raises(UserInputError, match=words):
            parse_source(bad, {})


def test_durations_times_and_samples() -> None:
    assert [parse_duration(t) for t in ("90s", "30m", "1h", "2d", "1w", "15")] == [90, 1800, 3600, 172800, 604800, 15]
    assert parse_when("1h", 10_000.0) == 6_400.0
    assert parse_when("2026-11-27T00:00:00Z", 0.0) == parse_when("2026-11-27T00:00:00", 0.0) == 1795737600.0
    assert parse_sample("5%") == pytest.approx(0.05) and parse_sample("0.25") == 0.25 and parse_sample(None) is None
    for bad in ("0%", "150%", "x"):
        with pytest.raises(UserInputError):
            parse_sample(bad)
    with pytest.raises(UserInputError):
        parse_duration("-1h")
    # the sample is a property of the trace id and the seed: about the fraction asked, stable
    ids = [f"trace-{i}" for i in range(4000)]
    share = sum(sampled(t, 0.05, 1) for t in ids) / len(ids)
    assert 0.04 < share < 0.06 and [sampled(t, 0.05, 1) for t in ids] == [sampled(t, 0.05, 1) for t in ids]
    assert [sampled(t, 0.05, 1) for t in ids] != [sampled(t, 0.05, 2) for t in ids]


def test_the_cursor_stops_before_the_first_trace_not_handled() -> None:
    traces = [PulledTrace(f"t{i}", 100.0 + i, []) for i in range(4)]
    assert advance(traces, set(), 200.0, None) == Position(200.0, "")
    assert advance(traces, {"t2"}, 200.0, None) == Position(101.0, "t1")
    assert advance(traces, {"t0"}, 200.0, Position(50.0, "x")) == Position(50.0, "x")
    assert advance([], set(), 200.0, Position(150.0, "y")) == Position(200.0, "")
    assert Position(101.0, "t1").before(traces[1]) and not Position(101.0, "t1").before(traces[2])
