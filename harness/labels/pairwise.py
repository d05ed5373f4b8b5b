"""Pairwise win rates (``harness pairwise``) corrected with human preference labels.

The population is every pair of pairwise.json's inputs (read again through
`harness.suites.pairwise.read_pairs`). The judge's verdict on a pair is the one ``harness
pairwise`` counts: A, B or tie when both orders agree, a tie when they disagree (inconsistent).
Human labels are rows ``{"transcript_id": PAIR, "rubric": "pairwise", "label": "a" | "b" |
"tie"}``. Three means are estimated as `harness.labels.infer.estimate` does for a rubric: the B
win rate, the A win rate, and the net preference B − A (+1 B, −1 A, 0 tie). A pair the judge did
not judge in both orders keeps its place, with the judge's mean in place of a verdict.

``harness labels sample pairwise.json`` draws the pairs to label, uniformly or actively: a pair
whose verdict flipped with the order (inconsistent) or was not judged is the uncertain one.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserInputError
from ..jsonlines import iter_json_objects, line_error
from ..outputs.files import atomic_write_text, dumps
from ..stats.ppi import z_interval
from ..suites.common import read_json
from ..suites.pairwise import read_pairs
from .design import Design, DesignRow, inclusion_probabilities, read_design
from .infer import MIN_LABELS, NOT_RANDOM, estimate

__all__ = ["ESTIMANDS", "infer_pairwise", "is_pairwise_file", "pairwise_lines", "read_preferences", "sample_pairs"]

PREFERENCES = ("a", "b", "tie")
#: name -> the value of each preference
ESTIMANDS: dict[str, dict[str, float]] = {
    "b_wins": {"b": 1.0, "a": 0.0, "tie": 0.0},
    "a_wins": {"a": 1.0, "b": 0.0, "tie": 0.0},
    "net_b_minus_a": {"b": 1.0, "a": -1.0, "tie": 0.0},
}


def is_pairwise_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".json"


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("judges"), dict) or "pairs" not in data:
        raise UserInputError(f"{path}: judges: not a pairwise.json written by harness pairwise")
    first, second = Path(str(data.get("a"))), Path(str(data.get("b")))
    if not first.exists():
        raise UserInputError(f"{path}: a: the pairs' input {first} is not readable here (the population of pairs comes from it)")
    pairs, _ = read_pairs(first, None if data.get("a") == data.get("b") else second)
    return data, pairs


def _verdicts(data: Mapping[str, Any], judge: str) -> dict[str, str]:
    return {p: ("tie" if v == "inconsistent" else v) for p, v in (data["judges"][judge].get("verdicts") or {}).items()}


def read_preferences(path: str | Path, pair_ids: set[str]) -> tuple[dict[str, str], int]:
    """Pair id -> "a" / "b" / "tie", and how many labels name pairs that are not in pairwise.json."""
    file = Path(path)
    out: dict[str, str] = {}
    unknown = 0
    for line, row in iter_json_objects(file):
        for name in ("transcript_id", "rubric", "label"):
            if name not in row:
                raise line_error(file, line, name, "missing")
        extra = sorted(set(row) - {"transcript_id", "rubric", "label"})
        if extra:
            raise line_error(file, line, extra[0], "unknown field (expected transcript_id, rubric, label)")
        if row["rubric"] != "pairwise":
            raise line_error(file, line, "rubric", f'expected "pairwise", got {row["rubric"]!r}')
        label = row["label"].strip().lower() if isinstance(row["label"], str) else None
        if label not in PREFERENCES:
            raise line_error(file, line, "label", f'{row["label"]!r} is not a preference: give "a", "b" or "tie"')
        tid = str(row["transcript_id"])
        if tid in out:
            raise line_error(file, line, "transcript_id", f"{tid!r} is labelled twice")
        if tid in pair_ids:
            out[tid] = label
        else:
            unknown += 1
    if not out and not unknown:
        raise UserInputError(f"{file}: holds no labels")
    return out, unknown


def sample_pairs(
    path: str | Path, n: int, seed: int, out: str | Path | None = None, strategy: str = "uniform", judge: str | None = None, floor: float = 0.2
) -> Design:
    """Draw the pairs to label; write design.json, to_label.jsonl and to_label.csv beside pairwise.json (or to ``out``)."""
    file = Path(path)
    data, pairs = _load(file)
    ids = [p["id"] for p in pairs]
    big_n = len(ids)
    if strategy not in ("uniform", "active"):
        raise UserInputError(f"--strategy: {strategy!r} is not uniform or active")
    if not 1 <= n <= big_n:
        raise UserInputError(f"--n: {n} must be between 1 and the {big_n} pairs")
    if not 0 < floor <= 1:
        raise UserInputError(f"--floor: {floor} must be in (0, 1]")
    judge = judge or next(iter(data["judges"]), None)
    if judge not in data["judges"]:
        raise UserInputError(f"--judge: {judge!r} is not a judge of {file} (it has: {', '.join(data['judges'])})")
    rng = np.random.default_rng(seed)
    raw = data["judges"][judge].get("verdicts") or {}
    if strategy == "uniform":
        pi = np.full(big_n, n / big_n)
        drawn = np.zeros(big_n, dtype=bool)
        drawn[rng.choice(big_n, size=n, replace=False)] = True
        sampling = f"simple random sample of {n} of {big_n} pairs, without replacement"
    else:
        u = np.array([0.0 if raw.get(p) in ("a", "b", "tie") else 1.0 for p in ids])
        pi = inclusion_probabilities(u, n, floor)
        drawn = rng.random(big_n) < pi
        sampling = f"Poisson sampling: each pair drawn independently with its probability pi (expected {n}, drawn {int(drawn.sum())})"
    folder = Path(out) if out is not None else file.parent / "labels"
    folder.mkdir(parents=True, exist_ok=True)
    design = Design(
        pairwise=str(file),
        strategy=strategy,  # type: ignore[arg-type]  # checked above
        sampling=sampling,
        seed=seed,
        n=n,
        drawn_count=int(drawn.sum()),
        eligible_count=big_n,
        rubrics=["pairwise"],
        judge=judge,
        uncertainty="inconsistent or unjudged verdict" if strategy == "active" else None,
        floor=floor if strategy == "active" else None,
        notes=[],
        eligible=[DesignRow(transcript_id=p, pi=float(pi[i]), drawn=bool(drawn[i])) for i, p in enumerate(ids)],
    )
    design.write(folder)
    order = [pairs[i] for i in rng.permutation(big_n) if drawn[i]]
    atomic_write_text(
        folder / "to_label.jsonl", "".join(dumps({"transcript_id": p["id"], "query": p["query"], "a": p["a"], "b": p["b"]}) + "\n" for p in order)
    )
    with (folder / "to_label.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["transcript_id", "rubric", "label", "query", "a", "b"])
        for p in order:
            writer.writerow([p["id"], "pairwise", "", p["query"], p["a"], p["b"]])
    return design


def infer_pairwise(
    path: str | Path,
    labels_path: str | Path,
    design_path: str | Path | None = None,
    alpha: float = 0.05,
    min_labels: int = MIN_LABELS,
    no_design: bool = False,
) -> dict[str, Any]:
    """Per judge of pairwise.json: the judge-only, human-only and corrected B / A win rates and net preference."""
    file = Path(path)
    data, pairs = _load(file)
    ids = [p["id"] for p in pairs]
    prefs, unknown = read_preferences(labels_path, set(ids))
    found = None
    if not no_design:
        found = (
            Path(design_path)
            if design_path is not None
            else next((c for c in (Path(labels_path).parent / "design.json", file.parent / "labels" / "design.json") if c.is_file()), None)
        )
    design = read_design(found) if found is not None else None
    notes = (
        [f"{unknown} of the {unknown + len(prefs)} labels in {labels_path} name pairs that are not in {file}: not used"] if unknown and prefs else []
    )
    unmatched = f"none of the {unknown} labels in {labels_path} names a pair of {file}: 0 labels used (are they the labels of these pairs?)"
    if design is None:
        notes.append(f"{NOT_RANDOM}: no design file was given or found; the estimates are shown as computed")
    judges = []
    for judge in data["judges"]:
        verdicts = _verdicts(data, judge)
        missing = [p for p in ids if p not in verdicts]
        entry: dict[str, Any] = {"judge": judge, "N": len(ids), "not_judged_in_both_orders": len(missing), "estimands": []}
        for name, value in ESTIMANDS.items():
            judged = np.array([value[verdicts[p]] for p in ids if p in verdicts])
            fill = float(judged.mean()) if judged.size else 0.0
            yhat = np.array([value[verdicts[p]] if p in verdicts else fill for p in ids])
            labels = {p: value[v] for p, v in prefs.items()}
            result = estimate(ids, yhat, labels, design, alpha, min_labels).model_dump(by_alias=True, exclude_unset=True)
            if unknown and not prefs:
                result["refused"] = unmatched
            mean = float(judged.mean()) if judged.size else None
            se = float(judged.std() / np.sqrt(judged.size)) if judged.size > 1 else 0.0
            judge_only = {"mean": mean, "ci": list(z_interval(mean, se, alpha)) if mean is not None and judged.size > 1 else None}
            if missing:
                result["notes"].insert(
                    0,
                    f"{len(missing)} of {len(ids)} pairs were not judged in both orders: they stay with the judge's mean ({fill:.3g}) in place of a verdict",
                )
            entry["estimands"].append({"estimand": name, "judge_only": judge_only, **result})
        judges.append(entry)
    return {
        "pairwise": str(file),
        "labels": [str(labels_path)],
        "alpha": alpha,
        "min_labels": min_labels,
        "design": None if design is None else {"path": str(design.path), "strategy": design.strategy, "seed": design.seed, "n": design.n},
        "notes": notes + ([f"design read from {found}"] if found is not None and design_path is None else []),
        "judges": judges,
    }


def pairwise_lines(result: Mapping[str, Any]) -> Sequence[str]:
    """The terminal lines of `infer_pairwise`: one per judge and estimand, then the notes."""
    lines = []
    for entry in result["judges"]:
        for row in entry["estimands"]:
            head = f"{entry['judge']} {row['estimand']}:"
            if "refused" in row:
                lines.append(f"{head} refused: {row['refused']}")
                continue
            c, h, j = row["corrected"], row["human_only"], row["judge_only"]
            judge_text = f"{j['mean']:.3f}" + (f" [{j['ci'][0]:.3f}, {j['ci'][1]:.3f}]" if j["ci"] else "")
            lines.append(
                f"{head} corrected {c['mean']:.3f} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]; human-only {h['mean']:.3f} [{h['ci'][0]:.3f}, {h['ci'][1]:.3f}]; "
                f"judge-only {judge_text}; lambda {row['lambda']:.2f}, n {row['n']}, N {entry['N']}, effective labels {row['effective_labels'] or 0:.0f}"
                + ("" if row["valid"] else f"; {NOT_RANDOM}")
            )
            lines.extend(f"  {entry['judge']} {row['estimand']}: {note}" for note in row["notes"])
    lines.extend(f"note: {n}" for n in result["notes"])
    return lines
