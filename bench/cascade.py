"""Judge cascades (harness cascade) by simulation: over 1,000 repetitions of calibrate-then-run
with scripted judges of known accuracy and calibration, how often the realised agreement with the
reference is at least 1 − α (the guarantee says: in at least 1 − δ of them), and what the cascade
costs against the strongest judge alone.

    python bench/cascade.py            # 1,000 repetitions (about a minute)
    python bench/cascade.py --quick    # 200

Three judges answer against human labels. Each has a confidence drawn from a Beta distribution and
agrees with the human with probability confidence^power (the small judge overconfident, the
strong one calibrated):
a 7B-like judge (cost 1), a mid judge (cost 6) and a strong judge (cost 30, per judgment). A run
judges 5,000 transcripts after calibrating on 600.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.stats.selective import calibrate_cascade, route

#: (Beta a, Beta b) of the confidence, agreement = confidence^power (power > 1: overconfident), cost
JUDGES = {
    "small": (6.0, 1.0, 1.5, 1.0),
    "mid": (9.0, 1.0, 1.2, 6.0),
    "strong": (15.0, 1.0, 1.0, 30.0),
}


def draw(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    confs, agrees = [], []
    for a, b, power, _ in JUDGES.values():
        c = rng.beta(a, b, n)
        confs.append(c)
        agrees.append(rng.random(n) < c**power)
    return confs, agrees


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 200 if args.quick else 1000
    rng = np.random.default_rng(20261125)
    costs = np.array([j[3] for j in JUDGES.values()])
    started = time.perf_counter()
    for alpha, delta in ((0.1, 0.1), (0.05, 0.1), (0.1, 0.05)):
        held, coverage, saving, strong_alone = [], [], [], []
        for _ in range(reps):
            confs, agrees = draw(rng, 600)
            stages = calibrate_cascade(confs, agrees, alpha, delta)
            test_confs, test_agrees = draw(rng, 5000)
            answered = route(test_confs, stages)
            given = answered >= 0
            agreement = float(np.mean([test_agrees[s][i] for i, s in enumerate(answered) if s >= 0])) if given.any() else 1.0
            held.append(agreement >= 1 - alpha)
            coverage.append(float(given.mean()))
            # a transcript is judged by every stage up to the one that answers (or all, when abstained)
            reached = np.where(answered >= 0, answered, len(costs) - 1)
            spent = sum(costs[: r + 1].sum() for r in reached)
            saving.append(1 - spent / (costs[-1] * len(answered)))
            strong_alone.append(float(test_agrees[-1].mean()))
        print(
            f"α = {alpha:.2f}, δ = {delta:.2f}: agreement >= {1 - alpha:.0%} in {np.mean(held):.1%} of {reps} calibrations "
            f"(guarantee: >= {1 - delta:.0%}); coverage {statistics.median(coverage):.1%} (median); "
            f"cost {1 - statistics.median(saving):.1%} of the strong judge alone; strong judge alone agrees {statistics.median(strong_alone):.1%}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
