"""``harness race`` end to end against a real judge server: it stops early on a clear difference,
pays each judgment once, replays offline to the same decision, and says when it cannot decide."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from pathlib import Path

import pytest

from harness.errors import UserInputError
from harness.runner.race import RaceOptions, race
from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_config, write_jsonl
from tests.reliability.support import cli

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


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
    assert result.stop == "decided" and result.verdict == "B > A"
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
    assert "B > A (relevance, 95% confidence sequence [" in done.stderr
    assert "of 60 pairs" in done.stderr


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 5, [0.2], [0.9])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        with pytest.raises(UserInputError, match="no such rubric or composite"):
            asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "r", metric="nope", config=tmp_path / "harness.toml")))
        write_jsonl(tmp_path / "c.jsonl", [{"id": "other", "query": "q", "response": "r"}])
        with pytest.raises(UserInputError, match="share no transcript id"):
            asyncio.run(race(RaceOptions(a=a, b=tmp_path / "c.jsonl", out=tmp_path / "r", metric="relevance", config=tmp_path / "harness.toml")))
        assert server.requests == []
