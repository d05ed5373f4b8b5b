"""How often ``harness align`` says "improved": when it cannot be (the false-improvement rate) and
when a candidate truly agrees better (the power), on simulated judges, in-process.

    python bench/align_simulation.py                    # 1,000 data sets per case (about 2.5 min on 2 cores)
    python bench/align_simulation.py --datasets 200 --resamples 1000

Each data set is ``labels`` human labels in tasks of 2 transcripts, half passing (pass/fail
labels) or uniform on 1..5 (numeric labels). The statistical part of the command runs as it is:
`harness.align.split` splits the labels, each candidate is measured on the select set and
`harness.align.measure.chosen` picks one, `harness.align.measure.measure_sealed_test` measures it once on
the test set, and "improved" is its verdict. Only the judge is simulated, on the scale 0..1 (pass/
fail) or 1..5 (numeric):

- pass/fail: the judge's score is 0.5 ± 0.2 (the label's side) plus Gaussian noise of SD
  ``noise``, clipped to 0..1; the threshold 0.5 is already the best one for it;
- numeric: the label plus Gaussian noise of SD ``noise``, rounded and clipped to 1..5.

The candidates that re-judge (few-shot, rewrite) draw fresh noise of the same SD under the null
("answers do not depend on the prompt": the judge is exactly as good), and of SD ``better`` for
few-shot in the effect case. The recalibration candidate is the isotonic map fitted on the fit
set (`harness.stats.isotonic`), applied to the judge's own scores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.align.measure import Scale, chosen, measure_sealed_test, primary_score
from harness.align.split import Item, split_labels, strata
from harness.analysis.io import Metric
from harness.stats.isotonic import isotonic_regression

SCALES = {"pass_fail": Metric("simulated", "rubric", (0.0, 1.0), "higher", "1"), "numeric": Metric("simulated", "rubric", (1.0, 5.0), "higher", "1")}
NOISE = {"pass_fail": 0.3, "numeric": 1.0}
BETTER = {"pass_fail": 0.12, "numeric": 0.4}


def _judge(kind: str, labels: list[Any], sd: float, rng: np.random.Generator) -> np.ndarray:
    if kind == "pass_fail":
        side = np.array([0.2 if v == "pass" else -0.2 for v in labels])
        return np.clip(0.5 + side + rng.normal(0.0, sd, len(labels)), 0.0, 1.0)
    values = np.array(labels, dtype=np.float64)
    return np.clip(np.round(values + rng.normal(0.0, sd, len(labels))), 1.0, 5.0)


def one(kind: str, effect: bool, rng: np.random.Generator, seed: int, labels: int, resamples: int) -> dict[str, Any]:
    """One simulated alignment: which candidate was chosen, whether "improved" was said, the test gain."""
    scale = Scale(SCALES[kind], kind, 0.5 if kind == "pass_fail" else 3.0)  # type: ignore[arg-type]
    ids = [f"t{i:04d}" for i in range(labels)]
    values: list[Any] = ["pass" if rng.random() < 0.5 else "fail" for _ in ids] if kind == "pass_fail" else rng.integers(1, 6, labels).tolist()
    label = dict(zip(ids, values, strict=True))
    groups = {t: f"task:{i // 2}" for i, t in enumerate(ids)}
    shares = (0.4, 0.2, 0.4)
    stratum_of, names = strata(label, groups, kind, scale.metric, shares, "simulated")
    split = split_labels([Item(t, groups[t], stratum_of[t], label[t]) for t in ids], names, shares, seed)
    noise = NOISE[kind]
    baseline = dict(zip(ids, _judge(kind, values, noise, rng), strict=True))

    def human(part: tuple[str, ...]) -> list[Any]:
        return [label[t] for t in part]

    def rejudged(part: tuple[str, ...], sd: float) -> np.ndarray:
        return _judge(kind, human(part), sd, rng)

    fit_x = np.array([baseline[t] for t in split.fit])
    mapping = isotonic_regression(fit_x, scale.human_values(human(split.fit)))
    select_base = np.array([baseline[t] for t in split.select])
    sds = {"few-shot": BETTER[kind] if effect else noise, "rewrite": noise}
    on_select = {name: rejudged(split.select, sd) for name, sd in sds.items()}
    on_select["recalibration"] = mapping(select_base)
    base_kappa = primary_score(scale, human(split.select), select_base)
    pick = chosen({name: primary_score(scale, human(split.select), scores) - base_kappa for name, scores in on_select.items()})
    test_base = np.array([baseline[t] for t in split.test])
    if pick is None:
        aligned = test_base
    elif pick == "recalibration":
        aligned = mapping(test_base)
    else:
        aligned = rejudged(split.test, sds[pick])
    report = measure_sealed_test(scale, human(split.test), test_base, aligned, [groups[t] for t in split.test], resamples, seed)
    gain = report.primary.difference.value
    return {"chosen": pick, "improved": pick is not None and report.improved, "gain": 0.0 if gain is None else gain}


def simulate(kind: str, effect: bool, datasets: int = 1000, labels: int = 150, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The share of ``datasets`` simulated alignments that said "improved", what was chosen, and
    the mean test gain in kappa of the ones that said it."""
    rng = np.random.default_rng(seed)
    runs = [one(kind, effect, rng, seed + i, labels, resamples) for i in range(datasets)]
    improved = [r for r in runs if r["improved"]]
    picks: dict[str, int] = {}
    for r in runs:
        picks[str(r["chosen"])] = picks.get(str(r["chosen"]), 0) + 1
    return {
        "kind": kind,
        "effect": effect,
        "datasets": datasets,
        "labels": labels,
        "improved_rate": len(improved) / datasets,
        "chosen": dict(sorted(picks.items())),
        "mean_gain_when_improved": float(np.mean([r["gain"] for r in improved])) if improved else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=150)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for kind in ("pass_fail", "numeric"):
        for effect in (False, True):
            started = time.perf_counter()
            found = simulate(kind, effect, args.datasets, args.labels, args.resamples, args.seed)
            case = "true effect" if effect else "null"
            print(
                f"{kind:9} {case:11} improved {found['improved_rate']:.1%} of {args.datasets} (chosen {found['chosen']}); "
                f"mean kappa gain when improved {found['mean_gain_when_improved'] or 0:+.3f} ({time.perf_counter() - started:.0f} s)"
            )


if __name__ == "__main__":
    main()
