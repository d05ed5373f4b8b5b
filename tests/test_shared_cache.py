"""A cache shared between workers: the PostgreSQL store, claims on keys in flight, shards and merge.

Everything runs against real parts: a PostgreSQL server the session starts (``postgres`` fixture,
tests/postgres_server.py), SQLite files, and a judge server on 127.0.0.1 that counts the requests
it gets per prompt. Workers are separate ``python -m harness`` processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cache import MIGRATIONS, CachedJudgment, CachedReply, open_store, writebehind
from harness.cache.base import REPLY_COLUMNS
from harness.cli import app
from harness.cost import staleness
from harness.exit_codes import EXIT_IO, EXIT_USER_ERROR
from tests.e2e_support import KEY, KEY_ENV, chat_requests, judge, read_jsonl, serve, user_prompt, write_config, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
RUBRICS = ["relevance", "faithfulness"]


def row(key: str, text: str = '{"score": 0.5}', model: str = "m", created_at: str | None = None) -> CachedJudgment:
    return CachedJudgment(key, model, "http://127.0.0.1:1/v1", "relevance", "1", text, 10, 2, 5.0, 0.001, 1, "scored", 0.5, created_at)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return tmp_path / "cache.sqlite"
    return request.getfixturevalue("postgres").new_database()


def transcripts(n: int, *, repeat_every: int | None = None) -> list[dict[str, Any]]:
    """``n`` transcripts; with ``repeat_every`` the content (not the id) cycles, so prompts repeat."""
    rows = []
    for i in range(n):
        c = i % repeat_every if repeat_every else i
        rows.append(
            {
                "id": f"t{i:05d}",
                "query": f"q{c} What does the factsheet say? [[score={(c % 10) / 10}]]",
                "response": f"r{c} The answer.",
                "contexts": [f"c{c} The factsheet. [[score={(c % 7) / 7:.3f}]]"],
            }
        )
    return rows


def harness(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        env={**os.environ, KEY_ENV: KEY, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def per_prompt(server: Any) -> Counter[str]:
    return Counter(user_prompt(r) for r in chat_requests(server))


def setup_run(
    tmp_path: Path, base_url: str, n: int, *, repeat_every: int | None = None, lease: float = 30.0, concurrency: int = 16
) -> tuple[Path, Path]:
    data = write_jsonl(tmp_path / "data.jsonl", transcripts(n, repeat_every=repeat_every))
    config = write_config(tmp_path / "harness.toml", [judge("j", base_url, max_concurrency=concurrency)], cache_lease_s=lease, rubrics=RUBRICS)
    return data, config


# --- the store interface on both stores --------------------------------------------------------


@pytest.mark.timeout(60)
async def test_both_stores_migrate_the_same_schema_and_round_trip(location: Any) -> None:
    import psycopg

    async with open_store(location) as store:
        store.put(row("a"))
        store.put(row("b", text="é ünïcode", created_at="2020-01-01T00:00:00+00:00"))
        await store.flush()
        got = await store.get_many(["a", "b", "missing"])
    assert set(got) == {"a", "b"}
    assert got["b"] == row("b", text="é ünïcode", created_at="2020-01-01T00:00:00+00:00")
    assert got["a"].created_at is not None and got["a"].cost_usd == 0.001  # double precision, not float4
    async with open_store(location) as store:  # reopening migrates nothing and keeps the rows
        assert len(await store.get_many(["a", "b"])) == 2
        stats = await store.stats()
        # what a replay reads: the same values as the full rows, of CachedReply's columns only
        truncated = CachedJudgment(
            "t", "m", "u", "relevance", "1", "Score: 0.", 9, 64, 7.5, 0.002, 1, "unscored", None, None, None, "[[]]", 60, 3, 1, True
        )
        store.put(truncated)
        await store.flush()
        full, replies = await store.get_many(["a", "b", "t", "missing"]), await store.replies(["a", "b", "t", "missing"])
        assert set(replies) == {"a", "b", "t"}
        for key, reply in replies.items():
            assert isinstance(reply, CachedReply)
            projected = {name: getattr(full[key], name) for name in REPLY_COLUMNS}
            assert {name: getattr(reply, name) for name in REPLY_COLUMNS} == {**projected, "truncated": reply.truncated}
            assert bool(reply.truncated) is full[key].truncated
        assert replies["t"].reasoning_tokens == 60 and replies["t"].cache_write_tokens == 1 and replies["t"].logprobs == "[[]]"
    assert stats.rows == 2 and stats.groups[0]["rows"] == 2
    if isinstance(location, str):
        with psycopg.connect(location) as conn:
            names = [n for (n,) in conn.execute("SELECT name FROM _migrations ORDER BY version")]
            columns = [
                c
                for (c,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'judgments' ORDER BY ordinal_position"
                )
            ]
    else:
        import sqlite3

        db = sqlite3.connect(location)
        names = [n for (n,) in db.execute("SELECT name FROM _migrations ORDER BY version")]
        columns = [r[1] for r in db.execute("PRAGMA table_info(judgments)")]
        db.close()
    assert names == [m.__name__ for m in MIGRATIONS]
    assert columns == [
        "key", "judge_model", "base_url", "rubric", "rubric_version", "raw_output", "prompt_tokens",
        "completion_tokens", "latency_ms", "cost_usd", "created_at", "status", "score", "attempts", "tier", "logprobs",
        "reasoning_tokens", "cached_tokens", "cache_write_tokens", "truncated",
    ]  # fmt: skip


@pytest.mark.timeout(60)
async def test_a_claimed_key_is_not_granted_to_another_owner_until_written(location: Any) -> None:
    async with open_store(location) as a, open_store(location) as b:
        assert await a.claim(["k1", "k2"]) == {"k1", "k2"}
        assert await b.claim(["k2", "k3"]) == {"k3"}
        assert await a.claim(["k1"]) == {"k1"}  # ours already: granted again (renewed)
        a.put(row("k2"))
        await a.flush()
        # Written: a's claim on k2 stays beside the row until a deletes written claims in bulk,
        # so b is still refused the claim, and finds the row.
        assert await b.claim(["k2"]) == set()
        assert "k2" in await b.get_many(["k2"])
        await a.release(["k1"])
        assert await b.claim(["k1"]) == {"k1"}
        assert (await b.stats()).claims == 3  # k1 and k3 held by b, k2 still a's


@pytest.mark.timeout(60)
async def test_written_keys_claims_are_deleted_together_and_on_close(location: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A written key's claim is deleted after its row is committed: by the write that brings the
    written keys to ``STALE_CLAIMS`` (all of them at once), or on close; never before the row."""
    monkeypatch.setattr(writebehind, "STALE_CLAIMS", 3)
    async with open_store(location) as b:
        a = await open_store(location).open()
        try:
            assert await a.claim(["k1", "k2", "k3", "k4", "k5"]) == {"k1", "k2", "k3", "k4", "k5"}
            for key in ("k1", "k2"):
                a.put(row(key))
                await a.flush()
            assert (await b.stats()).claims == 5  # two written, not yet deleted
            assert await b.claim(["k1", "k2"]) == set() and set(await b.get_many(["k1", "k2"])) == {"k1", "k2"}
            a.put(row("k3"))
            await a.flush()
            assert (await b.stats()).claims == 2  # the third write deleted all three written claims
            assert await b.claim(["k1", "k2", "k3"]) == {"k1", "k2", "k3"}
            a.put(row("k4"))
            await a.flush()
        finally:
            await a.close()
        assert await b.claim(["k4", "k5"]) == {"k4", "k5"}  # on close: the written claim and the unwritten one


@pytest.mark.timeout(60)
async def test_a_claim_of_another_host_is_taken_over_only_when_its_lease_lapses(location: Any) -> None:
    import psycopg

    async with open_store(location, lease_s=1.0) as store:
        await store.claim(["setup"])  # the claims table exists
        expires = time.time() + 1.0
        if isinstance(location, str):
            with psycopg.connect(location, autocommit=True) as conn:
                conn.execute("INSERT INTO claims VALUES ('k', 'elsewhere:1:x', extract(epoch from clock_timestamp()) + 1.0)")
        else:
            import sqlite3

            db = sqlite3.connect(location)
            db.execute("INSERT INTO claims VALUES ('k', 'elsewhere:1:x', ?)", (expires,))
            db.commit()
            db.close()
        assert await store.claim(["k"]) == set()  # pid 1 on another host: only its lease can tell
        await asyncio.sleep(1.3)
        assert await store.claim(["k"]) == {"k"}


@pytest.mark.timeout(60)
async def test_a_killed_owner_on_this_host_gives_its_claims_up_at_once(location: Any, tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from harness.cache import open_store\n"
        "async def main():\n"
        f"    store = await open_store({str(location)!r}, lease_s=30.0).open()\n"
        "    print(sorted(await store.claim(['k1', 'k2'])), flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "['k1', 'k2']"
        async with open_store(location, lease_s=30.0) as other:
            assert await other.claim(["k1", "k2"]) == set()  # held: the owner is alive
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            # The owner's pid is gone from this host: no need to wait 30 s for the lease.
            assert await other.claim(["k1", "k2"]) == {"k1", "k2"}
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# --- cache commands ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_cache_moves_from_sqlite_to_postgres_and_back(tmp_path: Path, postgres: Any) -> None:
    source = tmp_path / "a.sqlite"

    async def fill() -> None:
        async with open_store(source) as store:
            for i in range(1500):
                store.put(row(f"k{i:04d}", model="m1" if i % 3 else "m2", created_at=f"202{i % 5}-01-01T00:00:00+00:00"))

    asyncio.run(fill())
    url = postgres.new_database()
    runner = CliRunner()
    first = runner.invoke(app, ["cache", "export", str(tmp_path / "a.jsonl"), "--cache", str(source)])
    assert first.exit_code == 0, first.output
    moved = runner.invoke(app, ["cache", "import", str(source), "--cache", url])
    assert moved.exit_code == 0 and "imported 1,500" in moved.output
    back = runner.invoke(app, ["cache", "import", url, "--cache", str(tmp_path / "b.sqlite")])
    assert back.exit_code == 0, back.output
    runner.invoke(app, ["cache", "export", str(tmp_path / "pg.jsonl"), "--cache", url])
    runner.invoke(app, ["cache", "export", str(tmp_path / "b.jsonl"), "--cache", str(tmp_path / "b.sqlite")])
    exported = (tmp_path / "a.jsonl").read_bytes()
    assert len(exported.splitlines()) == 1500
    assert (tmp_path / "pg.jsonl").read_bytes() == exported
    assert (tmp_path / "b.jsonl").read_bytes() == exported

    stats = runner.invoke(app, ["cache", "stats", "--cache", url, "--json"])
    groups = {g["judge_model"]: g["rows"] for g in json.loads(stats.stdout)["groups"]}
    assert groups == {"m1": 1000, "m2": 500}
    pruned = runner.invoke(app, ["cache", "prune", "--cache", url, "--judge", "m2"])
    assert "deleted 500" in pruned.output
    # Rows of 2020 and 2021 are older than a year; m1 keeps those of 2022-2024... all older than a year too.
    old = runner.invoke(app, ["cache", "prune", "--cache", str(tmp_path / "b.sqlite"), "--older-than", "36500d"])
    assert "deleted 0" in old.output
    old = runner.invoke(app, ["cache", "prune", "--cache", str(tmp_path / "b.sqlite"), "--older-than", "1d", "--judge", "m2"])
    assert "deleted 500" in old.output
    after = json.loads(runner.invoke(app, ["cache", "stats", "--cache", str(tmp_path / "b.sqlite"), "--json"]).stdout)
    assert after["rows"] == 1000


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["cache", "stats", "--cache", "postgresql://127.0.0.1:1/db"], "cannot connect to the PostgreSQL cache", EXIT_IO),
        (["cache", "stats", "--cache", "postgresql://host:notaport/db"], "not a valid PostgreSQL URL", EXIT_USER_ERROR),
        (["cache", "stats", "--cache", "postgresql://127.0.0.1:5432"], "names no database", EXIT_USER_ERROR),
        (["cache", "stats", "--cache", "mysql://h/db"], "unknown scheme", EXIT_USER_ERROR),
        (["cache", "prune", "--cache", "{tmp}/none.sqlite", "--judge", "x"], "no cache file there", EXIT_IO),
        (["cache", "prune", "--cache", "{tmp}/c.sqlite", "--older-than", "soon"], "expected a number and a unit", EXIT_USER_ERROR),
        (["run", "{tmp}/data.jsonl", "--out", "{tmp}/o", "--shard", "5/4"], "i must be between 1 and n", EXIT_USER_ERROR),
        (["run", "{tmp}/data.jsonl", "--out", "{tmp}/o", "--shard", "half"], "expected i/n", EXIT_USER_ERROR),
        (
            [
                "run",
                "{tmp}/data.jsonl",
                "--out",
                "{tmp}/o",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:1/v1",
                "--cache",
                "postgresql://u:secret@127.0.0.1:1/db",
            ],
            "cannot connect",
            EXIT_IO,
        ),
        (["merge", "{tmp}/o1", "--out", "{tmp}/m"], "not a run directory", EXIT_USER_ERROR),
    ],
)
def test_bad_cache_urls_and_shards_are_one_line(tmp_path: Path, args: list[str], message: str, code: int) -> None:
    write_jsonl(tmp_path / "data.jsonl", transcripts(3))
    (tmp_path / "o1").mkdir()

    async def make_cache() -> None:  # a real cache file for prune
        async with open_store(tmp_path / "c.sqlite"):
            pass

    asyncio.run(make_cache())
    result = CliRunner().invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    # A cache that cannot be reached or read is an I/O failure (main's exit codes: EXIT_IO), the rest bad input.
    assert result.exit_code == code
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert "secret" not in result.output


# --- workers ----------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_workers_on_the_same_transcripts_pay_each_judgment_once(tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    cache = str(tmp_path / "cache.sqlite") if store == "sqlite" else request.getfixturevalue("postgres").new_database()
    with serve(latency_s=0.02) as server:
        data, config = setup_run(tmp_path, server.base_url or "", 300)
        workers = [
            harness("run", str(data), "--config", str(config), "--out", str(tmp_path / f"w{i}"), "--cache", cache, "--no-progress") for i in range(4)
        ]
        codes = [finish(w) for w in workers]
        counts = per_prompt(server)
    assert [c for c, _ in codes] == [0, 0, 0, 0], [e.strip().splitlines()[-1] for c, e in codes if c]
    assert len(counts) == 600 and set(counts.values()) == {1}  # every judgment paid exactly once
    outs = [read_jsonl(tmp_path / f"w{i}" / "judgments.jsonl") for i in range(4)]
    assert all(len(o) == 600 and {j["status"] for j in o} == {"scored"} for o in outs)
    # Each worker paid for some and was served the rest from the others' work, with the same scores.
    paid = [sum(not j["cached"] for j in o) for o in outs]
    assert sum(paid) == 600
    assert [[j["score"] for j in o] for o in outs[1:]] == [[j["score"] for j in outs[0]]] * 3


def comparable(run: Path) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """A run's outputs without what is measured, not decided: latencies and wall time."""
    judgments = [{k: v for k, v in j.items() if k != "latency_ms"} for j in read_jsonl(run / "judgments.jsonl")]
    results = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary.pop("wall_time_s")
    summary.pop("cache")
    for stats in summary["judges"].values():
        stats.pop("latency_ms")
    return judgments, results, summary


@pytest.mark.timeout(400)
def test_acceptance_four_sharded_workers_on_postgres_pay_once_and_merge_to_the_single_run(tmp_path: Path, postgres: Any) -> None:
    # 1,200 transcripts × 2 rubrics: 2,400 judgments, of which 2,000 distinct prompts (the last
    # 200 transcripts repeat the content of earlier ones that other shards hold).
    n, distinct = 1200, 1000
    url = postgres.new_database()
    with serve(latency_s=0.02) as server:
        data, config = setup_run(tmp_path, server.base_url or "", n, repeat_every=distinct)
        workers = [
            harness("run", str(data), "--config", str(config), "--out", str(tmp_path / f"s{i}"), "--cache", url, "--shard", f"{i}/4", "--no-progress")
            for i in range(1, 5)
        ]
        codes = [finish(w) for w in workers]
        counts = per_prompt(server)
        merged = CliRunner().invoke(app, ["merge", *(str(tmp_path / f"s{i}") for i in (4, 2, 1, 3)), "--out", str(tmp_path / "merged")])
        server.requests.clear()
        single = harness(
            "run", str(data), "--config", str(config), "--out", str(tmp_path / "single"), "--cache", str(tmp_path / "single.sqlite"), "--no-progress"
        )
        single_code = finish(single)
    assert [c for c, _ in codes] == [0] * 4, [e.strip().splitlines()[-1] for c, e in codes if c]
    assert len(counts) == 2 * distinct and set(counts.values()) == {1}, Counter(counts.values())
    assert merged.exit_code == 0, merged.output
    assert single_code[0] == 0, single_code
    m_judgments, m_results, m_summary = comparable(tmp_path / "merged")
    s_judgments, s_results, s_summary = comparable(tmp_path / "single")
    assert len(m_judgments) == 2 * n
    # The single run served the 400 repeats from its own in-run sharing; the shards from the
    # shared cache: both mark them cached, at the same cost.
    assert m_results == s_results
    assert m_judgments == s_judgments
    assert m_summary == s_summary


@pytest.mark.timeout(240)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_merge_reads_the_judges_back_from_the_shards_records(
    tmp_path: Path, store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A judge with no price (the summary names its model), one whose provider's prompt cache saved
    # money (priced from its cached-input price) and one whose model retires soon: what a merge
    # needs of a judge beyond its name, read back from the shards' judge_configs as JudgeConfig.
    monkeypatch.setattr(staleness, "today", lambda: date(2026, 11, 25))  # gpt-5-mini retires 2026-12-11
    cache = str(tmp_path / "cache.sqlite") if store == "sqlite" else request.getfixturevalue("postgres").new_database()
    runner = CliRunner()
    with serve(cached_tokens=8) as server:
        base = server.base_url or ""
        data = write_jsonl(tmp_path / "data.jsonl", transcripts(12))
        judges = [
            judge("free", base, model="unlisted-model", prices=False),
            judge("paid", base, cached_input_price_per_1m=0.075),
            judge("soon", base, model="gpt-5-mini"),
        ]
        config = write_config(tmp_path / "harness.toml", judges, rubrics=RUBRICS)
        common = [str(data), "--config", str(config), "--no-progress"]
        for i in range(1, 5):
            done = runner.invoke(app, ["run", *common, "--cache", cache, "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/4"])
            assert done.exit_code == 0, done.output
        single = runner.invoke(app, ["run", *common, "--cache", str(tmp_path / "single.sqlite"), "--out", str(tmp_path / "single")])
    merged = runner.invoke(app, ["merge", *(str(tmp_path / f"s{i}") for i in (3, 1, 4, 2)), "--out", str(tmp_path / "merged")])
    assert single.exit_code == 0, single.output
    assert merged.exit_code == 0, merged.output
    m_judgments, m_results, m_summary = comparable(tmp_path / "merged")
    s_judgments, s_results, s_summary = comparable(tmp_path / "single")
    assert m_summary["cost"]["unpriced_models"] == ["unlisted-model"]
    assert m_summary["judges"]["paid"]["prompt_cache_saved_usd"] > 0
    assert m_summary["judge_configs"]["free"]["model"] == "unlisted-model"
    assert [r["judge"] for r in m_summary["judge_retirements"]] == ["soon"]
    assert (m_judgments, m_results, m_summary) == (s_judgments, s_results, s_summary)


def test_merge_refuses_shards_without_their_judges_record(tmp_path: Path) -> None:
    runner = CliRunner()
    with serve() as server:
        data, config = setup_run(tmp_path, server.base_url or "", 4)
        for spec in ("1/2", "2/2"):
            args = ["run", str(data), "--config", str(config), "--cache", str(tmp_path / "c.sqlite"), "--no-progress"]
            done = runner.invoke(app, [*args, "--out", str(tmp_path / spec[0]), "--shard", spec])
            assert done.exit_code == 0, done.output
    path = tmp_path / "1" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["judge_configs"]  # as written by a harness before the record
    path.write_text(json.dumps(summary))
    merged = runner.invoke(app, ["merge", str(tmp_path / "1"), str(tmp_path / "2"), "--out", str(tmp_path / "m")])
    assert merged.exit_code == EXIT_USER_ERROR
    assert f"{path}: judge_configs: missing" in " ".join(merged.output.split())
    assert not (tmp_path / "m" / "summary.json").exists()


@pytest.mark.timeout(300)
def test_a_worker_killed_mid_run_loses_nothing(tmp_path: Path, postgres: Any) -> None:
    url = postgres.new_database()
    with serve(latency_s=0.05) as server:
        # A 3 s lease, renewed each second: a live worker's renewal delayed past a 1 s lease on a
        # loaded machine let the other worker take its claims over and pay them again (27 > 16).
        data, config = setup_run(tmp_path, server.base_url or "", 400, lease=3.0, concurrency=8)
        args = ["run", str(data), "--config", str(config), "--cache", url, "--no-progress"]
        victim = harness(*args, "--out", str(tmp_path / "victim"))
        survivor = harness(*args, "--out", str(tmp_path / "survivor"))
        deadline = time.monotonic() + 60
        while len(chat_requests(server)) < 150 and time.monotonic() < deadline:
            time.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=30)  # reaps it and closes its pipes
        code, err = finish(survivor)
        before_rerun = per_prompt(server)
        rerun = finish(harness(*args, "--out", str(tmp_path / "rerun")))
        after_rerun = per_prompt(server)
    assert code == 0, err
    survivor_rows = read_jsonl(tmp_path / "survivor" / "judgments.jsonl")
    assert len(survivor_rows) == 800 and {j["status"] for j in survivor_rows} == {"scored"}
    assert any(j["cached"] for j in survivor_rows)  # the victim had judged some before it died
    assert len(before_rerun) == 800  # every judgment asked for
    # Paid twice: only what the victim had paid but not committed when it died (its 8 calls in
    # flight, and at most one write batch of finished ones), taken over once its leases lapsed.
    twice = [p for p, c in before_rerun.items() if c > 1]
    assert len(twice) <= 2 * 8 and max(before_rerun.values()) <= 2
    assert rerun[0] == 0 and after_rerun == before_rerun  # the rerun is served wholly from the cache
    assert all(j["cached"] for j in read_jsonl(tmp_path / "rerun" / "judgments.jsonl"))


@pytest.mark.timeout(120)
def test_estimate_and_offline_replay_read_a_postgres_cache(tmp_path: Path, postgres: Any) -> None:
    url = postgres.new_database()
    runner = CliRunner()
    with serve() as server:
        data, config = setup_run(tmp_path, server.base_url or "", 20)
        before = json.loads(runner.invoke(app, ["estimate", str(data), "--config", str(config), "--cache", url, "--json"]).stdout)
        first = runner.invoke(app, ["run", str(data), "--config", str(config), "--cache", url, "--out", str(tmp_path / "a"), "--no-progress"])
        asked = len(chat_requests(server))
    after = json.loads(runner.invoke(app, ["estimate", str(data), "--config", str(config), "--cache", url, "--json"]).stdout)
    replay = runner.invoke(
        app, ["run", str(data), "--config", str(config), "--cache", url, "--out", str(tmp_path / "b"), "--offline", "--no-progress"]
    )
    assert first.exit_code == 0 and asked == 40
    assert sum(line["cache_hits"] for line in before["lines"]) == 0
    assert sum(line["cache_hits"] for line in after["lines"]) == 40
    assert replay.exit_code == 0, replay.output
    replayed = read_jsonl(tmp_path / "b" / "judgments.jsonl")
    assert all(j["cached"] for j in replayed)
    assert [j["score"] for j in replayed] == [j["score"] for j in read_jsonl(tmp_path / "a" / "judgments.jsonl")]
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["cache"] == url and summary["cache_mode"] == "offline"


@pytest.mark.timeout(120)
def test_merge_refuses_shards_that_are_not_one_complete_plan(tmp_path: Path) -> None:
    runner = CliRunner()
    with serve() as server:
        data, config = setup_run(tmp_path, server.base_url or "", 9)
        common = ["--config", str(config), "--cache", str(tmp_path / "c.sqlite"), "--no-progress"]
        for spec in ("1/3", "2/3", "3/3"):
            done = runner.invoke(app, ["run", str(data), *common, "--out", str(tmp_path / spec.replace("/", "of")), "--shard", spec])
            assert done.exit_code == 0, done.output
        other = write_jsonl(tmp_path / "other.jsonl", transcripts(9)[::-1])
        runner.invoke(app, ["run", str(other), *common, "--out", str(tmp_path / "x"), "--shard", "3/3"])
        runner.invoke(app, ["run", str(data), *common, "--out", str(tmp_path / "half"), "--shard", "1/2"])
        runner.invoke(app, ["run", str(data), *common, "--out", str(tmp_path / "whole")])
    shard_sizes = [len(read_jsonl(tmp_path / f"{i}of3" / "results.jsonl")) for i in (1, 2, 3)]
    assert shard_sizes == [3, 3, 3]
    assert [r["transcript_id"] for r in read_jsonl(tmp_path / "2of3" / "results.jsonl")] == ["t00001", "t00004", "t00007"]

    def merge(*names: str) -> list[str]:
        result = runner.invoke(app, ["merge", *(str(tmp_path / n) for n in names), "--out", str(tmp_path / "m")])
        return [str(result.exit_code), *result.output.strip().splitlines()]

    assert merge("1of3", "3of3")[0] == "2" and "shard(s) 2 of 3 missing" in merge("1of3", "3of3")[1]
    assert "given twice" in merge("1of3", "1of3", "3of3")[1]
    assert "input differs" in merge("1of3", "2of3", "x")[1]
    assert "another run is a shard of 3" in merge("1of3", "2of3", "half")[1]
    assert "not a shard" in merge("1of3", "whole")[1]
    assert merge("3of3", "1of3", "2of3")[0] == "0"
    assert (tmp_path / "m" / "results.jsonl").read_text() == (tmp_path / "whole" / "results.jsonl").read_text()


def test_locations_and_shards_parse_as_documented(tmp_path: Path) -> None:
    from harness.cache import describe, parse_location
    from harness.planning import parse_shard

    assert parse_location("postgresql://u:pw@db:5432/evals") == "postgresql://u:pw@db:5432/evals"
    assert parse_location("cache/j.sqlite", base=tmp_path) == tmp_path / "cache/j.sqlite"
    assert describe("postgresql://u:pw@db:5432/evals") == "postgresql://u:***@db:5432/evals"
    assert describe("postgres://db/evals") == "postgres://db/evals"
    for n in (1, 2, 3, 4, 7):
        shards = [parse_shard(f"{i}/{n}") for i in range(1, n + 1)]
        for total in (0, 1, 5, 13, 100):
            slices = [[k for k in range(total) if s.holds(k)] for s in shards]
            assert sorted(k for part in slices for k in part) == list(range(total))  # each record in exactly one shard
            assert [len(part) for part in slices] == [s.size(total) for s in shards]
            assert max(map(len, slices)) - min(map(len, slices)) <= 1
            assert slices == [list(range(total))[i::n] for i in range(n)]
