"""Coverage of the corrected (prediction-powered) interval on simulated judges of known bias and noise.

    python bench/ppi_coverage.py                       # 2,000 data sets per design (about 20 s)
    python bench/ppi_coverage.py --datasets 5000 --bias 0.8

Each data set is N transcripts drawn from one population: a human score Y ~ Normal(3, 1), a
difficulty X ~ Uniform(0, 1), and a judge score Ŷ = Y + bias + Normal(0, σ(X)) with
σ(X) = 0.2 + noise·X: the judge errs more on hard transcripts and knows it (its uncertainty, as
sample spread would show, is σ(X)). The human mean is 3 by construction. Per data set:

- uniform: n of the N transcripts labelled at random; PPI++ (`harness.stats.ppi.ppi_mean`);
- active: each transcript labelled with probability π ∝ σ(X) (floor 0.2, Σπ = n), the IPW
  estimator (`harness.stats.ppi.active_mean`);
- judge-only: the mean of Ŷ over all N with its CLT interval (it covers 3 + bias, not 3).

Printed: the share of data sets whose 95% interval covers 3 (the target is [94%, 96%]), the
judge-only coverage, and the width gain: the mean width of the human-only interval of the same
number of uniformly drawn labels divided by the mean corrected width.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.labels.design import inclusion_probabilities
from harness.stats.ppi import active_mean, ppi_mean, weighted_variance, z_interval

TRUTH = 3.0


def simulate(
    design: str, datasets: int = 2000, seed: int = 0, n: int = 200, big_n: int = 2000, bias: float = 0.5, noise: float = 1.5, alpha: float = 0.05
) -> dict[str, Any]:
    """Coverage, judge-only coverage and width gain of one design over ``datasets`` simulated data sets."""
    rng = np.random.default_rng(seed)
    z = 2 * float(z_interval(0.0, 1.0, alpha)[1])
    covered = judge_covered = 0
    widths, human_widths, lambdas = [], [], []
    for _ in range(datasets):
        y = rng.normal(TRUTH, 1.0, big_n)
        sigma = 0.2 + noise * rng.uniform(0, 1, big_n)
        yhat = y + bias + rng.normal(0, 1, big_n) * sigma
        if design == "uniform":
            mask = np.zeros(big_n, dtype=bool)
            mask[rng.choice(big_n, n, replace=False)] = True
            est = ppi_mean(y[mask], yhat[mask], yhat[~mask], alpha)
            human_widths.append(z * float(np.std(y[mask])) / np.sqrt(n))
        else:
            pi = inclusion_probabilities(sigma, n, 0.2)
            mask = rng.random(big_n) < pi
            est = active_mean(np.where(mask, y, np.nan), yhat, pi, mask, alpha)
            human_widths.append(z * np.sqrt(weighted_variance(y[mask], pi[mask]) / mask.sum()))
        covered += est.ci[0] <= TRUTH <= est.ci[1]
        widths.append(est.width)
        lambdas.append(est.lam)
        low, high = z_interval(float(yhat.mean()), float(yhat.std() / np.sqrt(big_n)), alpha)
        judge_covered += low <= TRUTH <= high
    return {
        "design": design,
        "datasets": datasets,
        "coverage": covered / datasets,
        "judge_only_coverage": judge_covered / datasets,
        "mean_width": float(np.mean(widths)),
        "human_only_width": float(np.mean(human_widths)),
        "width_gain": float(np.mean(human_widths) / np.mean(widths)),
        "effective_labels": n * float(np.mean(human_widths) / np.mean(widths)) ** 2,
        "mean_lambda": float(np.mean(lambdas)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=200, help="labels (expected labels for the active design)")
    parser.add_argument("--N", dest="big_n", type=int, default=2000, help="transcripts judged")
    parser.add_argument("--bias", type=float, default=0.5)
    parser.add_argument("--noise", type=float, default=1.5)
    args = parser.parse_args()
    print(f"{args.datasets} data sets, N={args.big_n}, n={args.n}, judge bias {args.bias:+g}, noise SD 0.2..{0.2 + args.noise:g}, 95% intervals")
    print(f"{'design':8} {'coverage':>9} {'judge-only':>11} {'width':>7} {'human-only':>11} {'gain':>5} {'eff. labels':>11} {'mean λ':>7}")
    failed = False
    for design in ("uniform", "active"):
        start = time.perf_counter()
        r = simulate(design, args.datasets, args.seed, args.n, args.big_n, args.bias, args.noise)
        ok = 0.94 <= r["coverage"] <= 0.96
        failed |= not ok
        print(
            f"{design:8} {r['coverage']:>9.1%} {r['judge_only_coverage']:>11.1%} {r['mean_width']:>7.3f} {r['human_only_width']:>11.3f} "
            f"{r['width_gain']:>5.2f} {r['effective_labels']:>11.0f} {r['mean_lambda']:>7.2f}  {'ok' if ok else 'OUTSIDE [94%, 96%]'} ({time.perf_counter() - start:.1f} s)"
        )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
