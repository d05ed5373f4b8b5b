"""The sequential jury gives the whole jury's verdict on every transcript (``harness.jury.sequential``).

The rule is checked on every pattern of votes of up to five members (each a score, or no vote:
asked but unscored), on random larger juries (hypothesis), for majority on bins and on labels and
for the median; and in a run against a scripted server, with a member that sometimes gives no
score and one that answers with three samples, live and replayed offline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.jury.classes import Classes
from harness.jury.methods import verdicts
from harness.jury.sequential import votes_needed
from harness.planning import RunOptions
from harness.runner.session import run_evaluation
from tests.analysis_support import CANNOT, ScriptedJudges, record
from tests.e2e_support import judge, read_jsonl, write_jsonl

SCALE = Classes("r", 1.0, 5.0)
LABELS = Classes("r", 0.0, 1.0, labels=("good", "fair", "poor"))


def ask(method: str, votes: np.ndarray, classes: Classes) -> int:
    """How many members (cheapest first: in column order) a sequential jury asks for ``votes``."""
    asked = 0
    while True:
        cast = [v for v in votes[:asked] if not np.isnan(v)]
        if method == "majority":
            cast = [int(c) for c in classes.codes(np.array(cast))] if cast else []
        need = votes_needed(method, cast, votes.size - asked, rank=classes.rank, lo=classes.lo, hi=classes.hi)
        if need == 0:
            return asked
        asked += need


def same_verdict(method: str, votes: np.ndarray, classes: Classes) -> tuple[bool, int]:
    asked = ask(method, votes, classes)
    cast = votes.copy()
    cast[asked:] = np.nan
    whole, part = verdicts(method, votes[None, :], classes), verdicts(method, cast[None, :], classes)
    return bool(whole.code[0] == part.code[0] and (whole.score[0] == part.score[0] or np.isnan(whole.score[0]) and np.isnan(part.score[0]))), asked


@pytest.mark.parametrize("members", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(
    ("method", "classes", "values"),
    [("majority", SCALE, (1.0, 2.0, 3.0, 5.0)), ("median", SCALE, (1.0, 2.0, 3.0, 5.0)), ("majority", LABELS, (0.0, 1.0, 2.0))],
)
def test_every_pattern_of_votes(members: int, method: str, classes: Classes, values: tuple[float, ...]) -> None:
    asked_total = 0
    for pattern in itertools.product((np.nan, *values), repeat=members):
        same, asked = same_verdict(method, np.array(pattern), classes)
        assert same, (method, pattern, asked)
        asked_total += asked
    assert asked_total <= members * (len(values) + 1) ** members


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_juries(data: st.DataObject) -> None:
    members = data.draw(st.integers(1, 7))
    method = data.draw(st.sampled_from(["majority", "median"]))
    continuous = method == "median" and data.draw(st.booleans())
    classes = Classes("r", 0.0, 1.0) if continuous else SCALE
    vote = st.one_of(st.just(float("nan")), st.floats(0.0, 1.0) if continuous else st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0]))
    votes = np.array(data.draw(st.lists(vote, min_size=members, max_size=members)))
    same, asked = same_verdict(method, votes, classes)
    assert same and asked <= members


def test_asking_in_waves_asks_no_more_than_one_at_a_time() -> None:
    for pattern in itertools.product((np.nan, 1.0, 3.0, 5.0), repeat=5):
        votes = np.array(pattern)
        for method in ("majority", "median"):
            one_by_one = 0
            while True:
                cast = [v for v in votes[:one_by_one] if not np.isnan(v)]
                if method == "majority":
                    cast = [int(c) for c in SCALE.codes(np.array(cast))] if cast else []
                if votes_needed(method, cast, 5 - one_by_one, rank=SCALE.rank, lo=1.0, hi=5.0) == 0:
                    break
                one_by_one += 1
            assert ask(method, votes, SCALE) == one_by_one


# -- in a run -------------------------------------------------------------------------------------

N = 30


def _setup(tmp: Path, scripted: ScriptedJudges, method: str, sequential: bool, name: str) -> Path:
    """x (cheapest, three samples), y (no score on every fifth transcript), z (dearest)."""
    scripted.table = {}
    for i in range(N):
        tid, q = f"t{i:02d}", (i % 11) / 10
        scripted.table[(tid, "relevance", "x")] = q
        scripted.table[(tid, "relevance", "y")] = CANNOT if i % 5 == 0 else round(min(1.0, q + (0.1 if i % 3 == 0 else 0.0)), 1)
        scripted.table[(tid, "relevance", "z")] = round(max(0.0, q - (0.2 if i % 4 == 0 else 0.0)), 1)
    write_jsonl(tmp / "t.jsonl", [record(f"t{i:02d}") for i in range(N)])
    lines = [f'cache = "{tmp / name}.sqlite"', 'rubrics = ["relevance"]']
    for model, price, samples in (("x", 0.05, 3), ("y", 0.2, 1), ("z", 3.0, 1)):
        fields = judge(
            model, scripted.base_url or "", model=model, input_price_per_1m=price, output_price_per_1m=price, samples=samples, max_attempts=1
        )
        lines += ["", "[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    lines += ["", "[[juries]]", 'name = "panel"', 'members = ["z", "y", "x"]', f'method = "{method}"', f"sequential = {str(sequential).lower()}"]
    (tmp / f"{name}.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp / f"{name}.toml"


def _run(tmp: Path, config: Path, out: str, **kw: object) -> list[dict]:
    outcome = asyncio.run(run_evaluation(RunOptions(input=tmp / "t.jsonl", out=tmp / out, config=config, progress=False, **kw)))  # type: ignore[arg-type]
    assert outcome.exit_code == 0, outcome.message
    return read_jsonl(tmp / out / "judgments.jsonl")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["majority", "median"])
def test_in_a_run_the_sequential_verdicts_are_the_whole_jurys(tmp_path: Path, scripted: ScriptedJudges, method: str) -> None:
    whole = _run(tmp_path, _setup(tmp_path, scripted, method, False, "whole"), "whole")
    before = len(scripted.requests)
    config = _setup(tmp_path, scripted, method, True, "seq")
    seq = _run(tmp_path, config, "seq")
    sent = len(scripted.requests) - before

    def jury(rows: list[dict]) -> list[tuple]:
        return [(r["transcript_id"], r["status"], r["score"], r["reason"]) for r in rows if r["judge"] == "panel"]

    assert jury(seq) == jury(whole) and len(jury(seq)) == N
    settled = [r for r in seq if r["reason"] == "jury_settled"]
    assert settled, "the cheaper members decided some verdicts"
    assert "z" in {r["judge"] for r in settled}  # the dearest member is the one saved
    # x asks three samples a transcript; the server saw exactly the calls of the members asked
    asked = [r for r in seq if r["judge"] != "panel" and r["reason"] != "jury_settled"]
    assert sent == sum(3 if r["judge"] == "x" else 1 for r in asked)
    # the same decisions replayed from the cache, with no network
    before = len(scripted.requests)
    replay = _run(tmp_path, config, "replay", offline=True)
    assert len(scripted.requests) == before
    assert jury(replay) == jury(seq)
    assert [r["reason"] for r in replay if r["judge"] != "panel"] == [r["reason"] for r in seq if r["judge"] != "panel"]
