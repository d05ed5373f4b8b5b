"""``harness race`` on a bounded agent metric: no judge, nothing sent, $0, the decision worked by
hand and by the confidence sequence itself, the same offline; a count refused in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import UserInputError
from harness.stats.sequential import PairedDifferenceCS
from harness.workflows.race import RaceOptions, race
from tests.e2e_support import KEY, KEY_ENV, judge, read_jsonl, serve, write_config, write_jsonl

pytestmark = pytest.mark.timeout(120)

REFERENCE = [{"name": "get_nav", "arguments": {"scheme": "X"}}, {"name": "get_ter", "arguments": {"scheme": "X"}}]
#: both expected calls: match 1, F1 1
RIGHT = [{"name": "get_nav", "arguments": {"scheme": "X"}}, {"name": "get_ter", "arguments": {"scheme": "X"}}]
#: one expected call and one other: match 0, precision 1/2, recall 1/2, F1 1/2
HALF = [{"name": "get_nav", "arguments": {"scheme": "X"}}, {"name": "search", "arguments": {"query": "X"}}]


def _transcript(tid: str, steps: list[dict[str, Any]] | None, reference: bool = True) -> dict[str, Any]:
    record: dict[str, Any] = {"id": tid, "query": f"What are the NAV and TER of X? ({tid})", "response": "r"}
    if steps is not None:
        record["steps"] = steps
    if reference:
        record["reference_trajectory"] = REFERENCE
    return record


def _sides(tmp_path: Path, n: int, extra: int = 0) -> tuple[Path, Path]:
    """A makes HALF of the calls on every pair, B all of them; ``extra`` pairs more have no
    reference on either side (the trajectory metrics do not apply to them)."""
    a = [_transcript(f"t{i:03d}", HALF) for i in range(n)] + [_transcript(f"x{i}", HALF, reference=False) for i in range(extra)]
    b = [_transcript(f"t{i:03d}", RIGHT) for i in range(n)] + [_transcript(f"x{i}", RIGHT, reference=False) for i in range(extra)]
    return write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)


def _first_decisive(diff: float) -> int:
    """The oracle: the confidence sequence itself, fed one constant difference at a time."""
    cs = PairedDifferenceCS(0.0, 1.0, 0.05)
    for n in range(1, 200):
        if cs.update([0.0], [diff]).excludes(0.0):
            return n
    raise AssertionError("never decided")


def test_trajectory_match_is_decided_after_ten_pairs_with_nothing_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By hand: B − A = 1 on every pair maps to x = 1; the bet on m = 0.5 (no difference) is capped
    at c/m = 1, so its capital grows by 1.5 a pair and the hedged capital is 1.5^n / 2. It reaches
    1/α = 20 first at n = 10 (1.5^9 / 2 = 19.2, 1.5^10 / 2 = 28.8): decided after 10 pairs."""
    a, b = _sides(tmp_path, 40)
    monkeypatch.delenv(KEY_ENV, raising=False)  # no key: none is needed, since no judge is asked
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)])
        options = RaceOptions(
            a=a, b=b, out=tmp_path / "race", metric="trajectory_match", config=tmp_path / "harness.toml", cache=tmp_path / "c.sqlite", round_size=1
        )
        result = asyncio.run(race(options))
        replay = asyncio.run(race(dataclasses.replace(options, out=tmp_path / "replay", offline=True)))
        assert server.requests == []
    assert _first_decisive(1.0) == 10
    assert (result.stop, result.verdict, result.better, result.pairs_judged) == ("decided", "B is better than A", "B", 10)
    assert [look.pairs_judged for look in result.looks] == list(range(1, 11))
    assert result.looks[8].lo <= 0 <= result.looks[8].hi and result.interval[0] > 0
    assert (result.judge, result.judgments, result.cost_usd, result.saved_usd, result.exit_code) == (None, 0, 0.0, None, 0)
    assert not (tmp_path / "c.sqlite").exists()  # no cache was opened, let alone written
    # the run directories hold the values the decision used, and no judgment
    rows = read_jsonl(tmp_path / "race" / "b" / "results.jsonl")
    assert len(rows) == 10 and {r["agent"]["trajectory_match"] for r in rows} == {1.0}
    assert {r["agent"]["trajectory_match"] for r in read_jsonl(tmp_path / "race" / "a" / "results.jsonl")} == {0.0}
    assert (tmp_path / "race" / "a" / "judgments.jsonl").read_text() == ""
    # offline is the same race: same order, same looks, same decision
    assert replay.looks == result.looks
    assert json.loads((tmp_path / "replay" / "race.json").read_text()) == json.loads((tmp_path / "race" / "race.json").read_text())


def test_trajectory_f1_decision_matches_the_sequence_and_counts_pairs_it_does_not_apply_to(tmp_path: Path) -> None:
    """A's F1 is 1/2 and B's 1 on every pair with a reference (B − A = 1/2, x = 3/4: the capital
    grows by 1.25 a pair, 1.25^n / 2 ≥ 20 first at n = 17); 6 pairs with no reference enter no
    sequence and are counted."""
    a, b = _sides(tmp_path, 60, extra=6)
    result = asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "race", metric="trajectory_f1", round_size=1)))
    assert _first_decisive(0.5) == 17
    assert (result.stop, result.better) == ("decided", "B")
    assert result.looks[-1].pairs_used == 17 and result.looks[-1].mean == pytest.approx(0.5)
    # pairs without a reference are judged as they come in the order, but enter no sequence
    skipped = result.pairs_judged - 17
    assert skipped >= 1  # seed 0 puts one of them among the first 18
    assert result.pairs_not_scored == {"does not apply (no reference_trajectory)": skipped}
    b_rows = {r["transcript_id"]: r for r in read_jsonl(tmp_path / "race" / "b" / "results.jsonl")}
    assert sum(1 for r in b_rows.values() if "trajectory_f1" in r["agent"]) == 17


def test_a_count_is_refused_in_one_line(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 5)
    with pytest.raises(UserInputError, match=r"--metric 'steps': an agent metric that counts \(tool calls made\) has no upper bound"):
        asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "race", metric="steps")))
    done = CliRunner().invoke(
        app, ["race", str(a), str(b), "--metric", "repeated_calls", "--out", str(tmp_path / "r")], env={"COLUMNS": "400", "NO_COLOR": "1"}
    )
    assert done.exit_code == 2, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--metric 'repeated_calls'" in lines[0] and "no upper bound" in lines[0]
    assert "Traceback" not in done.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "race").exists()


def test_race_on_an_agent_metric_from_the_command_line(tmp_path: Path) -> None:
    _sides(tmp_path, 30)
    done = CliRunner().invoke(
        app,
        [
            "race",
            str(tmp_path / "a.jsonl"),
            str(tmp_path / "b.jsonl"),
            "--metric",
            "trajectory_recall",
            "--out",
            str(tmp_path / "race"),
            "--round",
            "5",
        ],
        env={"COLUMNS": "400", "NO_COLOR": "1"},
    )
    assert done.exit_code == 0, done.output
    # recall: A 1/2, B 1 (as F1): decided at the first look at or after 17 pairs, 20
    assert "B is better than A (trajectory_recall, 95% confidence sequence for B - A [" in done.output
    assert "after 20 of 30 pairs: 0 judgments, $0.0000" in done.output
    decision = json.loads((tmp_path / "race" / "race.json").read_text())
    assert (decision["judge"], decision["cost_usd"], decision["pairs_judged"]) == (None, 0.0, 20)


def test_a_composite_of_a_rubric_and_an_agent_metric_judges_only_the_rubric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relevance is judged (0.5 on both sides, by the test judge's marker), trajectory_f1 comes
    with the run (A 1/2, B 1): the composite's B − A is 1/4 on every pair, one request per side and
    pair, none for the agent metric."""
    monkeypatch.setenv(KEY_ENV, KEY)
    a, b = _sides(tmp_path, 60)
    for path, side in ((a, "a"), (b, "b")):  # other texts: B's judgments are not A's from the cache
        rows = read_jsonl(path)
        write_jsonl(path, [{**r, "query": r["query"] + f" [[score=0.5]] {side}"} for r in rows])
    with serve() as server:
        write_config(tmp_path / "harness.toml", [judge("j", server.base_url)], {"both": {"relevance": 0.5, "trajectory_f1": 0.5}})
        result = asyncio.run(
            race(RaceOptions(a=a, b=b, out=tmp_path / "race", metric="both", config=tmp_path / "harness.toml", cache=tmp_path / "c.sqlite"))
        )
        sent = len(server.requests)
    assert (result.stop, result.better, result.judge) == ("decided", "B", "j")
    assert sent == result.judgments == 2 * result.pairs_judged
    assert {r["rubric"] for r in read_jsonl(tmp_path / "race" / "a" / "judgments.jsonl")} == {"relevance"}
    assert result.looks[-1].mean == pytest.approx(0.25)


def test_a_composite_of_agent_metrics_only_is_refused_in_one_line(tmp_path: Path) -> None:
    a, b = _sides(tmp_path, 5)
    write_config(tmp_path / "harness.toml", [], {"path": {"trajectory_f1": 0.5, "trajectory_match": 0.5}})
    with pytest.raises(UserInputError, match="--metric 'path': the composite weighs only agent metrics"):
        asyncio.run(race(RaceOptions(a=a, b=b, out=tmp_path / "race", metric="path", config=tmp_path / "harness.toml")))
