"""Juries on simulated populations with known per-judge error rates (``bench/jury.py``): with one
judge biased, the weighted and the Dawid–Skene juries are right more often than the majority, and
the sequential jury gives the whole jury's verdict on every transcript for fewer calls.

The verdicts are decided by the harness's own ``JuryRun`` (votes observed as a run writes them,
weights from the human labels of 200 transcripts, Dawid–Skene by EM), as in a run.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.jury import FIVE, ONE_BIASED, accuracy, population, sequential, verdicts

ITEMS = 3000


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_weighted_and_dawid_skene_beat_the_majority_when_a_judge_is_biased(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth, votes = population(rng, ITEMS, ONE_BIASED)
    found = {method: accuracy(truth, scores) for method, scores in verdicts(truth, votes, ONE_BIASED, rng).items()}
    # majority: where the two honest judges disagree, the lenient one decides, and it says pass
    assert 0.79 < found["majority"] < 0.86, found
    # a 3,000-transcript accuracy has a standard error under 0.008: these margins are > 5 of them
    assert found["weighted"] > found["majority"] + 0.05, found
    assert found["dawid_skene_anchored"] > found["majority"] + 0.05, found
    assert found["dawid_skene"] > found["majority"] + 0.01, found


def test_with_five_judges_two_lenient_the_learned_juries_still_win() -> None:
    rng = np.random.default_rng(11)
    truth, votes = population(rng, ITEMS, FIVE)
    found = {method: accuracy(truth, scores) for method, scores in verdicts(truth, votes, FIVE, rng).items()}
    assert found["weighted"] > found["majority"] + 0.01, found
    assert found["dawid_skene"] > found["majority"] + 0.04, found
    assert found["dawid_skene_anchored"] >= found["dawid_skene"] - 0.005, found


@pytest.mark.parametrize("members", [ONE_BIASED, FIVE], ids=["three", "five"])
def test_the_sequential_jury_saves_calls_at_identical_verdicts(members: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(5)
    _, votes = population(rng, 1000, members)
    calls, cost, identical = sequential(votes, members)
    assert identical
    full = votes.size
    assert calls < full
    with capsys.disabled():
        print(f"\nsequential majority of {len(members)}: {calls} of {full} member calls ({1 - calls / full:.1%} saved), cost {cost:.4f} USD")
    # at least the members the cheapest majority makes unneeded whenever it agrees
    assert 1 - calls / full > 0.15
