"""The sequential comparison (harness race) by simulation: its error rate under the null with a
look after every round, and the judgments it spends under alternatives against a fixed-size paired
t-test of the same α and power (planned knowing the true effect, and planned for the smallest
effect of interest, as a fixed design must be).

    python bench/sequential.py            # 2,000 null sequences, 4 effect sizes x 500 (about 2 min)
    python bench/sequential.py --quick    # 400 and 100

Scores are 1..5 judge scores of two agents on the same tasks, drawn independently (the judge's
noise dominates, as it does in practice: the difference's sd is about 2). Under the null A and B
are drawn alike; under an alternative B's score gains one point with probability p (clipped at 5),
so δ = 0.8·p. The t-test's n is the smallest with power ≥ 0.8 at the difference's true standard
deviation (noncentral t).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.stats.sequential import PairedDifferenceCS

ALPHA = 0.05
ROUND = 20
MAX_PAIRS = 5000


def draw(rng: np.random.Generator, p: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(1, 6, n).astype(float)
    b = rng.integers(1, 6, n).astype(float)
    return a, np.clip(b + (rng.random(n) < p), 1, 5)


def sequence(rng: np.random.Generator, p: float) -> tuple[bool, int, bool]:
    """(decided, pairs judged, decided for B)."""
    a, b = draw(rng, p, MAX_PAIRS)
    cs = PairedDifferenceCS(1, 5, ALPHA)
    for start in range(0, MAX_PAIRS, ROUND):
        iv = cs.update(a[start : start + ROUND], b[start : start + ROUND])
        if iv.excludes(0.0):
            return True, start + ROUND, iv.lo > 0
    return False, MAX_PAIRS, False


def ttest_n(delta: float, sd: float, power: float = 0.8) -> int:
    for n in range(2, 100_000):
        df = n - 1
        crit = stats.t.ppf(1 - ALPHA / 2, df)
        nc = delta / sd * math.sqrt(n)
        if stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc) >= power:
            return n
    raise ValueError("no n up to 100,000")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    nulls, alts = (400, 100) if args.quick else (2000, 500)
    rng = np.random.default_rng(20261125)
    started = time.perf_counter()
    false = sum(sequence(rng, 0.0)[0] for _ in range(nulls))
    rate = false / nulls
    se = math.sqrt(ALPHA * (1 - ALPHA) / nulls)
    print(f"null: {false} false decisions in {nulls} sequences ({rate:.2%}; α = {ALPHA:.0%}, ±{1.96 * se:.2%} at 95%), a look every {ROUND} pairs")
    effects = (0.25, 0.375, 0.5, 0.75)
    planned = None
    print(f"{'p':>5} {'δ':>6} {'decided':>8} {'mean pairs':>11} {'median':>7} {'t-test n':>9} {'ratio':>6} {'vs planned':>10}")
    for p in effects:
        runs = [sequence(rng, p) for _ in range(alts)]
        pairs = [n for _, n, _ in runs]
        decided = sum(d and up for d, _, up in runs) / alts
        a, b = draw(np.random.default_rng(1), p, 200_000)
        d = b - a
        n_t = ttest_n(float(d.mean()), float(d.std(ddof=1)))
        planned = planned or n_t  # the fixed design planned for the smallest effect
        mean_pairs = statistics.fmean(pairs)
        print(
            f"{p:5.3f} {d.mean():6.3f} {decided:8.1%} {mean_pairs:11.1f} {statistics.median(pairs):7.0f} {n_t:9d} "
            f"{mean_pairs / n_t:6.2f} {mean_pairs / planned:10.2f}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
