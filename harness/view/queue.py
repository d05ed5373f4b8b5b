"""The annotation queue: human labels given in the browser, from a labels design.

A queue is the folder ``harness labels sample`` wrote (design.json, to_label.jsonl). Its units are
(transcript, rubric) pairs in the file's order (already random). With annotators ``A`` (names, in
the order given) and an overlap ``k`` (annotators per unit, at most ``len(A)``), unit ``i`` goes to
``A[(i*k + j) mod len(A)]`` for ``j < k``: every unit is labelled by k annotators and every
annotator gets an equal share, give or take one.

**Storage.** Each annotator's labels are ``FOLDER/annotators/NAME.jsonl``, rows
``{"transcript_id", "rubric", "label"}``: exactly the labels file ``harness infer``, ``align``,
``agreement``, cascades and juries read (`harness.analysis.io.read_labels`), one label per unit.
A label is appended and fsynced before the browser is told it is saved, so a browser or server
that stops loses nothing already acknowledged; a changed label rewrites the file whole (written
beside it, fsynced, renamed into place). Nothing else is written: not the run's files, not the design.

**Agreement between annotators**, per rubric, on the units two or more of them labelled:
Krippendorff's alpha (`harness.stats.krippendorff.krippendorff_alpha`) at the interval level for
a scale, the nominal level for a categorical rubric, and for each pair of annotators Cohen's
kappa over the rubric's choices (`harness.stats.agreement.kappa_from_matrix`): unweighted, and
quadratic-weighted for a scale only (categories have no order); and Fleiss' kappa over the
choices as categories, on the items all their annotators labelled (`harness.stats.agreement.fleiss_kappa`).

A scale's choices are the integers of an integer scale of 3 to 11 points (1..5, 0..10), else five
points evenly spaced on the scale (0, 0.25, 0.5, 0.75, 1 of 0..1); a categorical rubric's are its
labels, in its order, saved as the rubric writes them (`harness.analysis.io` reads them back).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserInputError
from ..jsonlines import iter_json_objects
from ..outputs.files import dumps
from ..report.run import iter_texts, open_run
from ..rows import iter_judgment_rows
from ..rubrics.rubric import Rubric

if TYPE_CHECKING:  # numpy, the statistics and the design reader (numpy) are imported where used, not at start-up
    import numpy as np

    from ..labels.design import Design
    from ..stats.krippendorff import Level

#: a label as given: a number on a scale, or a categorical rubric's label
Value = float | str
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
ANNOTATORS_DIR = "annotators"


def choices(rubric: Rubric) -> list[float] | list[str]:
    """The values an annotator picks from (see the module docstring)."""
    if rubric.labels is not None:
        return list(rubric.labels)
    lo, hi = rubric.lo, rubric.hi
    if float(lo).is_integer() and float(hi).is_integer() and 2 <= hi - lo <= 10:
        return [float(v) for v in range(int(lo), int(hi) + 1)]
    return [lo + (hi - lo) * i / 4 for i in range(5)]


@dataclass(frozen=True, slots=True)
class Unit:
    index: int
    transcript_id: str
    rubric: str
    annotators: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PairKappa:
    a: str
    b: str
    n: int
    kappa: float | None
    kappa_quadratic: float | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class RubricAgreement:
    rubric: str
    units: int
    alpha: float | None
    alpha_problem: str | None
    pairs: list[PairKappa]
    #: Krippendorff's level: "interval" for a scale, "nominal" for a categorical rubric
    level: str = "interval"
    #: Fleiss' kappa over the rubric's choices as categories, on the items all their annotators labelled
    fleiss: float | None = None
    fleiss_problem: str | None = None
    fleiss_items: int = 0


@dataclass
class Queue:
    folder: Path
    design: Design
    annotators: tuple[str, ...]
    overlap: int
    units: list[Unit]
    rubrics: dict[str, Rubric]
    texts: dict[str, dict[str, Any]]
    judge_scores: dict[tuple[str, str], Any]
    notes: list[str]
    labels: dict[str, dict[tuple[str, str], Value]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def path_of(self, annotator: str) -> Path:
        return self.folder / ANNOTATORS_DIR / f"{annotator}.jsonl"

    def assigned(self, annotator: str) -> list[Unit]:
        return [u for u in self.units if annotator in u.annotators]

    def progress(self) -> dict[str, tuple[int, int]]:
        """Annotator -> (labelled, assigned)."""
        return {
            a: (sum(1 for u in self.assigned(a) if (u.transcript_id, u.rubric) in self.labels.get(a, {})), len(self.assigned(a)))
            for a in self.annotators
        }

    def give(self, annotator: str, transcript_id: str, rubric: str, value: Value) -> None:
        """Record ``annotator``'s label of the unit; on disk (fsynced) before this returns."""
        if annotator not in self.annotators:
            raise UserInputError(f"annotator {annotator!r} is not one of this queue's ({', '.join(self.annotators)})")
        unit = next((u for u in self.units if u.transcript_id == transcript_id and u.rubric == rubric), None)
        if unit is None or annotator not in unit.annotators:
            raise UserInputError(f"{transcript_id} · {rubric} is not assigned to {annotator}")
        offered: Sequence[Value] = choices(self.rubrics[rubric])
        if isinstance(value, str) != isinstance(offered[0], str) or value not in offered:
            raise UserInputError(f"label {value!r} is not one of {rubric}'s choices ({', '.join(map(str, offered))})")
        with self.lock:
            given = self.labels.setdefault(annotator, {})
            key = (transcript_id, rubric)
            path = self.path_of(annotator)
            path.parent.mkdir(parents=True, exist_ok=True)
            if key in given:  # a changed label: the file is rewritten whole, so it stays one label per unit
                given[key] = value
                _rewrite(path, given)
                return
            line = dumps({"transcript_id": transcript_id, "rubric": rubric, "label": _number(value)}) + "\n"
            with path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            given[key] = value

    def _fleiss(self, ratings: np.ndarray, values: Sequence[float]) -> tuple[float | None, str | None, int]:
        return _fleiss_of(ratings, values, self.overlap)

    def agreement(self) -> list[RubricAgreement]:
        import numpy as np

        from ..stats.krippendorff import krippendorff_alpha

        out = []
        for rubric in self.rubrics:
            units = [u for u in self.units if u.rubric == rubric]
            offered: Sequence[Value] = choices(self.rubrics[rubric])
            categorical = self.rubrics[rubric].labels is not None
            # a categorical label is coded by its place among the rubric's labels (nominal: only equality counts)
            code = {v: float(i) for i, v in enumerate(offered)} if categorical else None
            ratings = np.full((len(self.annotators), len(units)), np.nan)
            for r, a in enumerate(self.annotators):
                given = self.labels.get(a, {})
                for c, u in enumerate(units):
                    if (u.transcript_id, rubric) in given:
                        value = given[(u.transcript_id, rubric)]
                        ratings[r, c] = code[value] if code is not None else float(value)
            shared = int(np.sum(np.sum(~np.isnan(ratings), axis=0) >= 2))
            level: Level = "nominal" if categorical else "interval"
            alpha = krippendorff_alpha(ratings, level) if units else None
            values = [float(v) for v in range(len(offered))] if code is not None else [float(v) for v in offered]
            pairs = [
                _pair(self.annotators[i], self.annotators[j], ratings[i], ratings[j], values, weighted=not categorical)
                for i, j in combinations(range(len(self.annotators)), 2)
            ]
            fleiss, fleiss_problem, complete = self._fleiss(ratings, values)
            out.append(
                RubricAgreement(
                    rubric,
                    shared,
                    alpha.value if alpha else None,
                    alpha.problem if alpha else "no units",
                    [p for p in pairs if p.n],
                    level,
                    fleiss,
                    fleiss_problem,
                    complete,
                )
            )
        return out


def _fleiss_of(ratings: np.ndarray, values: Sequence[float], overlap: int) -> tuple[float | None, str | None, int]:
    """Fleiss' kappa on the items labelled by all ``overlap`` of their annotators (the others left out)."""
    import numpy as np

    from ..stats.agreement import fleiss_kappa

    if overlap < 2:
        return None, "needs 2 or more annotators per item", 0
    rated = np.sum(~np.isnan(ratings), axis=0)
    complete = ratings[:, rated == overlap]
    index = {v: i for i, v in enumerate(values)}
    counts = np.zeros((complete.shape[1], len(values)), dtype=np.int64)
    for c in range(complete.shape[1]):
        for v in complete[:, c]:
            if not np.isnan(v):
                counts[c, index[float(v)]] += 1
    if counts.shape[0] == 0:
        return None, "no item is labelled by all its annotators yet", 0
    value, problem = fleiss_kappa(counts)
    return value, problem, int(counts.shape[0])


def _pair(a: str, b: str, x: np.ndarray, y: np.ndarray, scale: Sequence[float], weighted: bool = True) -> PairKappa:
    import numpy as np

    from ..stats.agreement import kappa_from_matrix

    both = ~np.isnan(x) & ~np.isnan(y)
    n = int(both.sum())
    if n == 0:
        return PairKappa(a, b, 0, None, None, None)
    index = {v: i for i, v in enumerate(scale)}
    cm = np.zeros((len(scale), len(scale)), dtype=np.int64)
    for u, v in zip(x[both], y[both]):
        cm[index[float(u)], index[float(v)]] += 1
    k, problem = kappa_from_matrix(cm)
    kq = kappa_from_matrix(cm, "quadratic")[0] if weighted else None
    if problem is not None:
        return PairKappa(a, b, n, None, None, problem)
    return PairKappa(a, b, n, k, kq, None)


def _number(value: Value) -> Value | int:
    """A label as the file holds it: a categorical label as written, an integral number as an integer."""
    if isinstance(value, str):
        return value
    return int(value) if float(value).is_integer() else value


def _rewrite(path: Path, given: dict[tuple[str, str], Value]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for (tid, rubric), value in given.items():
            fh.write(dumps({"transcript_id": tid, "rubric": rubric, "label": _number(value)}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_given(path: Path) -> dict[tuple[str, str], Value]:
    """An annotator's labels file as written (a line cut short by a crash mid-write is the only loss, and is not acknowledged)."""
    out: dict[tuple[str, str], Value] = {}
    if not path.is_file():
        return out
    for _, row in iter_json_objects(path):
        label = row["label"]
        out[(str(row["transcript_id"]), str(row["rubric"]))] = label if isinstance(label, str) else float(label)
    return out


def open_queue(folder: Path, annotators: Sequence[str], overlap: int, prompts: Sequence[Path] = ()) -> Queue:
    """The queue of the design in ``folder`` for ``annotators`` with ``overlap`` annotators per unit."""
    from ..labels.design import read_design

    design = read_design(folder / "design.json")
    names = tuple(annotators)
    for name in names:
        if not NAME.match(name):
            raise UserInputError(f"--annotator: {name!r} must be 1 to 40 letters, digits, '.', '_' or '-'")
    if len(set(names)) != len(names) or not names:
        raise UserInputError("--annotator: give each annotator once, at least one")
    if not 1 <= overlap <= len(names):
        raise UserInputError(f"--overlap: {overlap} must be between 1 and the {len(names)} annotator(s)")
    if design.run is None:
        raise UserInputError(f"{folder / 'design.json'}: a design of pairwise results; the queue labels a run's transcripts")
    view = open_run(design.run, prompts=prompts)
    notes: list[str] = []
    rubrics: dict[str, Rubric] = {}
    for name in design.rubrics:
        rubric = view.rubrics.get(name)
        if rubric is None:
            notes.append(f"rubric {name}: no rubric file found, so its scale is unknown: not offered")
        else:
            rubrics[name] = rubric
    order = [str(row["transcript_id"]) for _, row in iter_json_objects(folder / "to_label.jsonl")]
    pairs = [(t, r) for t in order for r in design.rubrics if r in rubrics]
    units = [Unit(i, t, r, tuple(names[(i * overlap + j) % len(names)] for j in range(overlap))) for i, (t, r) in enumerate(pairs)]
    texts = {tid: t.as_dict() for tid, t in iter_texts(view, set(order), notes)}
    judge = design.judge
    scores: dict[tuple[str, str], Any] = {}
    wanted = set(order)
    for j in iter_judgment_rows(view.judgments_path):
        if j.judge == judge and j.transcript_id in wanted:
            scores[(j.transcript_id, j.rubric)] = j.shown if j.status == "scored" else j.reason or j.status
    queue = Queue(folder, design, names, overlap, units, rubrics, texts, scores, notes)
    for name in names:
        queue.labels[name] = _read_given(queue.path_of(name))
    return queue


def find_queue(run_dir: Path) -> Path | None:
    """The labels design of a run (RUN/labels/design.json, where ``labels sample`` writes it), if any."""
    folder = run_dir / "labels"
    return folder if (folder / "design.json").is_file() and (folder / "to_label.jsonl").is_file() else None


def label_rows(queue: Queue, annotator: str) -> list[dict[str, Any]]:
    """An annotator's labels as the labels file holds them (for the page's list)."""
    return [{"transcript_id": t, "rubric": r, "label": _number(v)} for (t, r), v in queue.labels.get(annotator, {}).items()]


def as_json(queue: Queue) -> str:
    return json.dumps({a: p for a, p in queue.progress().items()})
