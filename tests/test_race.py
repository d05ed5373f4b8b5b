"""``harness race`` end to end against a real judge server: it stops early on a clear difference,
pays each judgment once, replays offline to the same decision, and says when it cannot decide."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError, UserInputError
from harness.workflows.race import RaceOptions, race
from tests.e2e_support import KEY, KEY_ENV, judge, read_jsonl, serve, write_config, write_jsonl
from tests.reliability.support import cli

pytestmark = pytest.mark.timeout(180)


def _sides(tmp_path: Path, n: int, a_scores: list[float], b_scores: list[float]) -> tuple[Path, Path]:
    rng = random.Random(1)
    a = [{"id": f"t{i}", "query": f"q{i} [[score={rng.choice(a_scores)}]]", "response": "r"} for i in range(n)]
    b = [{"id": f"t{i}", "query": f"q{i} [[score={rng.choice(b_scores)}]] b", "response": "r"} for i in range(n)]
    write_jsonl(tmp_path / "a.jsonl", a)
    write_jsonl(tmp_path / "b.jsonl", b)
    return tmp_path / "a.jsonl", tmp_path / "b.jsonl"


def test_a_clear_difference_is_decided_early_and_replays_offline(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 200, [0.2, 0.3, 0.4], [0.7, 0.8, 0.9])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        options = RaceOptions(a=a, b=b, out=tmp_path / "race", metric="relevance", config=tmp_path / "harness.toml", cache=tmp_path / "c.sqlite")
        result = asyncio.run(race(options))
        paid = len(server.requests)
    assert result.stop == "decided" and result.verdict == "B is better than A" and result.better == "B"
    assert result.interval[0] > 0
    assert result.pairs_judged < 200 and result.pairs_judged % 20 == 0
    # one request per judged transcript and side: the final run directories came from the cache
    assert paid == 2 * result.pairs_judged == result.judgments
    # saved: the pairs left unjudged, two judgments each, at this race's mean cost per judgment
    assert result.cost_usd is not None and result.saved_usd is not None
    assert result.saved_usd == pytest.approx(result.cost_usd / result.judgments * 2 * (200 - result.pairs_judged))
    assert result.saved_usd > 0
    judged_a = [json.loads(line) for line in (tmp_path / "race" / "a" / "judgments.jsonl").read_text().splitlines()]
    assert len(judged_a) == result.pairs_judged and all(j["cached"] for j in judged_a)
    looks = [json.loads(line) for line in (tmp_path / "race" / "sequence.jsonl").read_text().splitlines()]
    assert [look["pairs_judged"] for look in looks] == list(range(20, result.pairs_judged + 1, 20))
    # the intervals only narrow (a running intersection)
    assert all(x["lo"] <= y["lo"] and x["hi"] >= y["hi"] for x, y in zip(looks, looks[1:], strict=False))

    # offline: same order, same judgments, same decision, nothing sent
    replay = asyncio.run(race(dataclasses.replace(options, out=tmp_path / "replay", offline=True)))
    assert (replay.stop, replay.verdict, replay.pairs_judged, replay.interval) == (result.stop, result.verdict, result.pairs_judged, result.interval)


def test_no_difference_ends_within_the_margin_or_undecided(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 120, [0.4, 0.5, 0.6], [0.4, 0.5, 0.6])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        result = asyncio.run(
            race(
                RaceOptions(
                    a=a, b=b, out=tmp_path / "r", metric="relevance", config=tmp_path / "harness.toml", cache=tmp_path / "c.sqlite", round_size=40
                )
            )
        )
    assert result.stop == "exhausted" and result.verdict == "undecided"
    assert result.pairs_judged == 120
    lo, hi = result.interval
    assert lo < 0 < hi


def test_race_from_the_command_line(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 60, [0.2], [0.9])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = cli(
            [
                "race",
                "a.jsonl",
                "b.jsonl",
                "--metric",
                "relevance",
                "--config",
                "harness.toml",
                "--out",
                "race",
                "--cache",
                "c.sqlite",
                "--round",
                "10",
            ],
            cwd=tmp_path,
            env={KEY_ENV: KEY},
        )
    assert done.returncode == 0, done.stderr
    assert "B is better than A (relevance, 95% confidence sequence for B - A [" in done.stderr
    assert "of 60 pairs" in done.stderr


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 5, [0.2], [0.9])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        with pytest.raises(UserInputError, match="no such rubric, composite or agent metric"):
            asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "r", metric="nope", config=tmp_path / "harness.toml")))
        write_jsonl(tmp_path / "c.jsonl", [{"id": "other", "query": "q", "response": "r"}])
        with pytest.raises(UserInputError, match="share no transcript id"):
            asyncio.run(race(RaceOptions(a=a, b=tmp_path / "c.jsonl", out=tmp_path / "r", metric="relevance", config=tmp_path / "harness.toml")))
        # the judge options every command takes: a race replays its rounds from the cache, so it needs one
        with pytest.raises(ConfigError, match="no_cache"):
            asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "r", metric="relevance", config=tmp_path / "harness.toml", no_cache=True)))
        assert server.requests == []


# -- through the command line, asserting on what it wrote -------------------------------------------

ENV = {"COLUMNS": "400", "NO_COLOR": "1", KEY_ENV: KEY}


def _race(tmp_path: Path, *args: str, out: str = "race", a: str = "a.jsonl", b: str = "b.jsonl") -> Any:
    argv = ["race", str(tmp_path / a), str(tmp_path / b), "--config", str(tmp_path / "harness.toml"), "--out", str(tmp_path / out)]
    argv += ["--cache", str(tmp_path / "c.sqlite"), *args]
    return CliRunner().invoke(app, [*argv, "--metric", "relevance"] if "--metric" not in args else argv, env=ENV)


def _decision(out: Path) -> dict[str, Any]:
    """race.json without what an offline replay does not pay (cost, saved, each look's cost)."""
    data = json.loads((out / "race.json").read_text())
    for look in data["looks"]:
        look.pop("cost_usd")
    return {k: v for k, v in data.items() if k not in ("cost_usd", "saved_usd")}


def test_offline_judgments_not_in_the_cache_exit_3_with_the_decision_on_what_is_cached(tmp_path: Path) -> None:
    _sides(tmp_path, 60, [0.4, 0.5, 0.6], [0.4, 0.5, 0.6])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        assert _race(tmp_path, "--max-pairs", "20").exit_code == 0
        sent = len(server.requests)
        replay = _race(tmp_path, "--offline", out="replay")
        assert len(server.requests) == sent
    # the documented code of an offline run with misses, not "bad input"; the race went on
    assert replay.exit_code == 3, replay.output
    decision = json.loads((tmp_path / "replay" / "race.json").read_text())
    assert decision["exit_code"] == 3 and decision["pairs_judged"] == 60
    assert decision["pairs_not_scored"] == {"unscored (cache_miss)": 40}
    assert "40 unscored (cache_miss)" in replay.output
    assert not (tmp_path / "replay" / ".race").exists()


def _faulty_b(tmp_path: Path, n: int, faulty: set[int], fault: str) -> None:
    """A scores 0.3, B 0.4 (no early decision); B's transcripts in ``faulty`` carry ``fault``."""
    a = [{"id": f"t{i}", "query": f"q{i} [[score=0.3]]", "response": "r"} for i in range(n)]
    b = [{"id": f"t{i}", "query": f"q{i} [[score=0.4]] b{fault if i in faulty else ''}", "response": "r"} for i in range(n)]
    write_jsonl(tmp_path / "a.jsonl", a)
    write_jsonl(tmp_path / "b.jsonl", b)


def test_failed_judgments_replay_offline_to_the_same_race(tmp_path: Path) -> None:
    _faulty_b(tmp_path, 30, {1, 7, 12, 20, 29}, " [[fault:400]]")
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        live = _race(tmp_path, "--round", "10", "--margin", "0.001")
        sent = len(server.requests)
        replay = _race(tmp_path, "--round", "10", "--margin", "0.001", "--offline", out="replay")
        assert len(server.requests) == sent
    assert live.exit_code == 1, live.output
    assert "5 failed (fatal)" in live.output
    # same decision, same race.json, same exit code
    assert replay.exit_code == 1, replay.output
    assert _decision(tmp_path / "replay") == _decision(tmp_path / "race")
    assert _decision(tmp_path / "race")["pairs_not_scored"] == {"failed (fatal)": 5}


def test_outputs_hold_exactly_the_judgments_the_decision_used(tmp_path: Path) -> None:
    # a judge that fails once on three of B's transcripts: asked again, it would answer
    _faulty_b(tmp_path, 30, {3, 14, 25}, " [[fault:400:1]]")
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = _race(tmp_path, "--round", "10", "--margin", "0.001")
        requests = len(server.requests)
    assert done.exit_code == 1, done.output
    decision = json.loads((tmp_path / "race" / "race.json").read_text())
    assert decision["pairs_not_scored"] == {"failed (fatal)": 3} and decision["looks"][-1]["pairs_used"] == 27
    # what the race did not judge, counted: the sequence is on a subset of the pairs judged, and says so
    never = 30 - decision["pairs_judged"]
    assert decision["completeness"] == {
        "pairs_total": 30,
        "pairs_judged": 30 - never,
        "pairs_in_sequence": 27,
        "pairs_not_scored": 3,
        "pairs_never_judged": never,
        "ids_without_partner": {"a": 0, "b": 0},
    }
    said = f"the sequence is on 27 of the {30 - never} pairs judged (3 with a side not scored left out); {never} of 30 pairs never judged"
    assert said in " ".join(done.output.split())
    # nothing asked twice: one request per judgment the rounds made
    assert requests == decision["judgments"] == 60
    b_rows = read_jsonl(tmp_path / "race" / "b" / "judgments.jsonl")
    assert {r["transcript_id"] for r in b_rows if r["status"] == "failed"} == {"t3", "t14", "t25"}
    scored_b = {r["transcript_id"] for r in read_jsonl(tmp_path / "race" / "b" / "results.jsonl") if r["scores"]["j"]["relevance"] is not None}
    scored_a = {r["transcript_id"] for r in read_jsonl(tmp_path / "race" / "a" / "results.jsonl") if r["scores"]["j"]["relevance"] is not None}
    assert len(scored_a & scored_b) == 27
    # each side's run is of its own judged transcripts, a file the user keeps
    summary = json.loads((tmp_path / "race" / "b" / "summary.json").read_text())
    assert Path(summary["input"]) == tmp_path / "race" / "b.jsonl" and len(read_jsonl(tmp_path / "race" / "b.jsonl")) == 30


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--max-pairs", "0"], 2, "--max-pairs must be at least 1"),
        (["--max-pairs", "-3"], 2, "--max-pairs must be at least 1"),
        (["--round", "0"], 2, "--round must be at least 1"),
        (["--margin", "inf"], 2, "--margin must be a positive finite number"),
        (["--alpha", "nan"], 2, "--alpha must be between 0 and 1"),
        (["--concurrency", "0"], 2, "--concurrency must be at least 1"),
        (["--metric", "hallucination", "--metric", "nope"], 2, "--metric 'nope': no such rubric, composite or agent metric"),
    ],
)
def test_bad_options_are_refused_before_anything_is_sent(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    _sides(tmp_path, 5, [0.2], [0.9])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = _race(tmp_path, *args)
        assert server.requests == []
    assert done.exit_code == code, done.output
    assert message in done.output and ".race" not in done.output
    assert not (tmp_path / "race" / ".race").exists()


def test_an_unusable_out_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    _sides(tmp_path, 5, [0.2], [0.9])
    (tmp_path / "file").write_text("x")
    (tmp_path / "race").mkdir()
    (tmp_path / "race" / "b").write_text("not a directory")
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        not_dir = _race(tmp_path, out="file")
        taken = _race(tmp_path)
        assert server.requests == []
    assert not_dir.exit_code == 5 and "--out" in not_dir.output and "not a directory" in not_dir.output
    assert taken.exit_code == 5 and "race/b exists and is not a directory" in taken.output
    assert sorted(p.name for p in (tmp_path / "race").iterdir()) == ["b"]


def test_a_race_that_stops_leaves_no_internal_files_and_keeps_the_runs_code(tmp_path: Path) -> None:
    _sides(tmp_path, 5, [0.2], [0.9])
    (tmp_path / "c.sqlite").write_text("not a database")  # the first round cannot open it: it stops
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = _race(tmp_path)
        assert server.requests == []
    assert done.exit_code == 5, done.output
    assert ".race" not in done.output
    assert not (tmp_path / "race" / ".race").exists()


def test_unpaired_ids_are_counted_and_said(tmp_path: Path) -> None:
    a = [{"id": f"t{i}", "query": f"q{i} [[score=0.5]]", "response": "r"} for i in range(30)]
    b = [{"id": f"t{i}", "query": f"q{i} [[score=0.5]] b", "response": "r"} for i in range(10, 40)]
    write_jsonl(tmp_path / "a.jsonl", a)
    write_jsonl(tmp_path / "b.jsonl", b)
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = _race(tmp_path)
    assert done.exit_code == 0, done.output
    assert "after 20 of 20 pairs" in done.output
    assert f"ids with no partner in the other file, not judged: 10 of {tmp_path / 'a.jsonl'}, 10 of {tmp_path / 'b.jsonl'}" in done.output
    assert json.loads((tmp_path / "race" / "race.json").read_text())["unpaired"] == {"a": 10, "b": 10}


def test_a_lower_is_better_rubric_says_which_side_is_better(tmp_path: Path) -> None:
    # B hallucinates more: a higher score on a lower-is-better rubric, so B is worse
    a = [{"id": f"t{i}", "query": "q", "response": f"r{i} [[score=0.1]]", "contexts": ["c"]} for i in range(40)]
    b = [{"id": f"t{i}", "query": "q", "response": f"r{i} [[score=0.9]] b", "contexts": ["c"]} for i in range(40)]
    write_jsonl(tmp_path / "a.jsonl", a)
    write_jsonl(tmp_path / "b.jsonl", b)
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        done = _race(tmp_path, "--metric", "hallucination")
    assert done.exit_code == 0, done.output
    assert "B is worse than A (hallucination, lower is better, 95% confidence sequence for B - A [+" in done.output
    decision = json.loads((tmp_path / "race" / "race.json").read_text())
    assert (decision["verdict"], decision["better"], decision["direction"]) == ("B is worse than A", "A", "lower")
