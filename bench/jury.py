"""Juries (issue 37) by simulation: accuracy of each method against a known truth, and the calls a
sequential jury saves at identical verdicts.

    python bench/jury.py            # 10 populations of 4,000 transcripts each (about 90 s)
    python bench/jury.py --quick    # 5 populations

Each transcript passes or fails (half of them pass). Each judge votes 1 (pass) or 0 (fail) on a
0..1 rubric with known error rates: P(votes pass | pass) and P(votes fail | fail). The juries run
through the harness's own code (``harness.jury.outputs.JuryRun``: votes observed as a run writes
them, verdicts, weights from human labels), with 200 transcripts labelled by humans (the truth)
for the weighted jury and the anchored Dawid–Skene one. A verdict is right when it passes
(score >= 0.5) exactly when the transcript does.

The sequential jury asks members cheapest first and stops when the remaining votes cannot change
the majority (``harness.jury.sequential``); "calls" counts the member judgments it asked for, and
every verdict is checked equal to the whole jury's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.jury.classes import Classes
from harness.jury.methods import plurality
from harness.jury.outputs import JuryRun
from harness.jury.panel import HumanLabels, Panel
from harness.jury.sequential import votes_needed
from harness.planning import Judgment

RUBRIC = Classes("quality", 0.0, 1.0)
LABELLED = 200
METHODS = ("majority", "mean", "median", "weighted", "dawid_skene", "dawid_skene_anchored")


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    #: P(votes pass | passes), P(votes fail | fails)
    sensitivity: float
    specificity: float
    #: USD per judgment
    price: float


#: Two honest judges (a small one and a large one) and one biased towards "pass": it passes 99% of
#: what passes and 85% of what fails (its "fail" is telling, its "pass" is not).
ONE_BIASED = (
    Member("small", 0.70, 0.70, 0.0002),
    Member("lenient", 0.99, 0.15, 0.0010),
    Member("large", 0.90, 0.90, 0.0030),
)
#: Five judges: three honest of different skill, two lenient.
FIVE = (
    Member("a", 0.80, 0.80, 0.0002),
    Member("b", 0.75, 0.75, 0.0004),
    Member("c", 0.70, 0.70, 0.0006),
    Member("lenient", 0.97, 0.30, 0.0010),
    Member("lenient2", 0.97, 0.30, 0.0030),
)


def population(rng: np.random.Generator, n: int, members: tuple[Member, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The truth (n,) and the members' votes (n x members: 1.0 pass, 0.0 fail)."""
    truth = rng.random(n) < 0.5
    votes = np.empty((n, len(members)))
    for i, m in enumerate(members):
        right = rng.random(n) < np.where(truth, m.sensitivity, m.specificity)
        votes[:, i] = np.where(right == truth, 1.0, 0.0)
    return truth, votes


def _jury(method: str, members: tuple[Member, ...], labels: HumanLabels | None) -> Panel:
    anchored = method == "dawid_skene_anchored"
    base = "dawid_skene" if anchored else method
    names = tuple(m.name for m in members)
    return Panel(method, names, names, base, anchored=anchored, labels=labels if base == "weighted" or anchored else None)


def verdicts(truth: np.ndarray, votes: np.ndarray, members: tuple[Member, ...], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each method's verdict scores, decided by the harness's JuryRun as a run decides them."""
    ids = [f"t{i}" for i in range(truth.size)]
    labelled = rng.choice(truth.size, LABELLED, replace=False)
    labels = HumanLabels(Path("simulated-labels.jsonl"), "-", {RUBRIC.rubric: {ids[i]: "pass" if truth[i] else "fail" for i in labelled}})
    panels = [_jury(method, members, labels) for method in METHODS]
    jury = JuryRun(panels, [RUBRIC], {RUBRIC.rubric: "1"})
    for i, tid in enumerate(ids):
        rows = [Judgment(tid, RUBRIC.rubric, "1", m.name, "scored", score=float(votes[i, k])) for k, m in enumerate(members)]
        jury.observe(tid, None, rows, len(rows))
    jury.finish()
    return {method: jury.verdicts(method, RUBRIC.rubric).score for method in METHODS}


def accuracy(truth: np.ndarray, scores: np.ndarray) -> float:
    return float(((scores >= 0.5) == truth).mean())


def sequential(votes: np.ndarray, members: tuple[Member, ...]) -> tuple[int, float, bool]:
    """The calls and cost of a sequential majority jury (cheapest first), and whether every one of
    its verdicts is the whole jury's."""
    order = np.argsort([m.price for m in members], kind="stable")
    rank = RUBRIC.rank
    calls, cost, same = 0, 0.0, True
    whole = plurality(RUBRIC.codes(votes), rank)[0]
    for i in range(votes.shape[0]):
        asked = 0
        while (
            need := votes_needed("majority", [int(c) for c in RUBRIC.codes(votes[i, order[:asked]])], len(order) - asked, rank=rank, lo=0, hi=1)
        ) > 0:
            asked += need
        calls += asked
        cost += sum(members[k].price for k in order[:asked])
        cast = np.full(votes.shape[1], np.nan)
        cast[order[:asked]] = votes[i, order[:asked]]
        same &= bool(plurality(RUBRIC.codes(cast[None, :]), rank)[0][0] == whole[i])
    return calls, cost, same


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repetitions, n = (5 if args.quick else 10), 4000
    started = time.perf_counter()
    for title, members in (("three judges, one biased (lenient)", ONE_BIASED), ("five judges, two of them lenient", FIVE)):
        rng = np.random.default_rng(37)
        found: dict[str, list[float]] = {m: [] for m in METHODS}
        saved, cost_saved, identical = [], [], True
        for _ in range(repetitions):
            truth, votes = population(rng, n, members)
            for method, scores in verdicts(truth, votes, members, rng).items():
                found[method].append(accuracy(truth, scores))
            calls, cost, same = sequential(votes, members)
            identical &= same
            saved.append(1 - calls / votes.size)
            cost_saved.append(1 - cost / (n * sum(m.price for m in members)))
        print(f"\n{title}: " + ", ".join(f"{m.name} ({m.sensitivity:.2f}/{m.specificity:.2f}, ${m.price:g})" for m in members))
        print(f"{'method':<24}{'accuracy (mean of ' + str(repetitions) + ')':>26}{'min':>8}{'max':>8}")
        for method, values in found.items():
            print(f"{method:<24}{statistics.fmean(values):>26.4f}{min(values):>8.4f}{max(values):>8.4f}")
        print(
            f"sequential majority: {statistics.fmean(saved):.1%} of member calls saved, {statistics.fmean(cost_saved):.1%} of the cost; "
            f"verdicts identical to the whole jury's on every transcript: {identical}"
        )
    print(f"\n({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
