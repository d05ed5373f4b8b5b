"""``harness labels sample``: which transcripts a human labels, and the design that makes it a sample.

Every transcript of the run (results.jsonl, judged or not: the ones the judge failed on are the
ones most likely to differ) is eligible. Two strategies:

- ``uniform``: a simple random sample of exactly n of the N transcripts, without replacement;
  each inclusion probability is n/N. `harness.stats.ppi.ppi_mean` (PPI++) applies.
- ``active``: each transcript is drawn independently (Poisson sampling) with probability π_i
  proportional to the judge's uncertainty u_i, mixed with the uniform rate so that
  π_i ≥ floor·n/N and Σπ_i = n (the expected sample size), capped at 1. Zrnic & Candès (ICML 2024,
  Section 4) show π ∝ sqrt(E[(Y − Ŷ)² | X]) is optimal; u_i estimates that root-mean-square error:
  the standard deviation of the judge's repeated samples (``spread``), of its logprob score
  distribution (``logprob``), or a model of its error fitted on labels already given
  (``error-model``: the root-mean-square judge error per bin of the judge's score). A judgment
  without a score gets the largest u. `harness.stats.ppi.active_mean` (IPW) applies.

design.json records the eligible transcripts, the strategy, the seed and each π_i and draw, so
``harness infer`` can tell a random sample from a convenience sample. The labeller gets
to_label.jsonl (one transcript per line, with its steps as the judge saw them when it has any) and
to_label.csv (UTF-8 with a byte-order mark; one row per transcript and rubric, an empty ``label``
column, the steps in the last column), in a random order and without the judge's scores or π.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator

from ..agent.render import timeline
from ..analysis.io import Labels, Metric, RunData, read_labels, read_run
from ..analysis.scales import bins_for
from ..errors import UserInputError
from ..outputs.files import atomic_write_text, dumps
from ..rows import JudgmentRow, iter_judgment_rows, judgments_path
from ..rundir import read_summary
from ..validation import first_problem

__all__ = ["DESIGN_FORMAT", "Collected", "Design", "collect_csv", "inclusion_probabilities", "read_design", "sample_labels"]

DESIGN_FORMAT = "harness-label-design/1"
Strategy = Literal["uniform", "active"]
UNCERTAINTIES = ("auto", "spread", "logprob", "error-model")


class DesignRow(BaseModel):
    """One eligible transcript (or pair): its inclusion probability, whether it was drawn, and the
    judge's uncertainty it came from (active sampling of a run)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    transcript_id: StrictStr
    pi: Annotated[float, Field(gt=0, le=1, strict=True)] | Annotated[int, Field(gt=0, le=1, strict=True)]
    drawn: bool = False
    uncertainty: float | None = None


class Design(BaseModel):
    """design.json: a recorded sampling design, as ``harness labels sample`` writes it and
    ``harness infer`` reads it back (:func:`read_design`), through this one type. Written with
    ``exclude_unset``: a run's design names its ``run``, a pairwise design its ``pairwise``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    format: str = DESIGN_FORMAT
    #: the run directory sampled (``labels sample`` of a run)
    run: str | None = None
    #: the pairwise.json sampled (``labels sample`` of pairwise results)
    pairwise: str | None = None
    strategy: Strategy
    #: the design in words
    sampling: str = ""
    seed: int = 0
    #: the sample size asked for (the expected size under Poisson sampling); read back from a file
    #: without it, the number drawn
    n: int
    drawn_count: int | None = None
    eligible_count: int | None = None
    rubrics: list[str] = []
    judge: str | None = None
    #: where the inclusion probabilities of active sampling came from
    uncertainty: str | None = None
    floor: float | None = None
    notes: list[str] = []
    eligible: list[DesignRow]
    #: the file it was read from (not written)
    path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """A design made here is of this format; one read without ``n`` was of the number drawn."""
        if not isinstance(data, dict):
            return data
        data = {"format": DESIGN_FORMAT, **data}
        if "n" not in data and isinstance(data.get("eligible"), list):
            data["n"] = sum(1 for row in data["eligible"] if (row.get("drawn") if isinstance(row, dict) else row.drawn) is True)
        return data

    @property
    def pi(self) -> dict[str, float]:
        """Transcript id -> inclusion probability, in the order the design lists them."""
        return {row.transcript_id: float(row.pi) for row in self.eligible}

    @property
    def drawn(self) -> frozenset[str]:
        return frozenset(row.transcript_id for row in self.eligible if row.drawn)

    def write(self, folder: Path) -> None:
        """``folder/design.json``."""
        atomic_write_text(folder / "design.json", json.dumps(self.model_dump(exclude_unset=True), indent=2) + "\n")


def inclusion_probabilities(u: np.ndarray, n: int, floor: float) -> np.ndarray:
    """π ∝ u mixed with the uniform rate: π = (1 − floor)·n·u/Σu + floor·n/N, then capped at 1
    with the excess spread over the rest in proportion, so Σπ = n and π ≥ floor·n/N."""
    big_n = u.size
    base = np.full(big_n, 1 / big_n) if not np.any(u > 0) else u / u.sum()
    weight = (1 - floor) * base + floor / big_n
    pi = n * weight
    fixed = np.zeros(big_n, dtype=bool)
    while True:
        over = ~fixed & (pi > 1)
        if not over.any():
            break
        fixed |= over
        pi[fixed] = 1.0
        free = ~fixed
        pi[free] = (n - fixed.sum()) * weight[free] / weight[free].sum()
    return np.minimum(pi, 1.0)


def _judgment_rows(run: RunData) -> list[JudgmentRow]:
    return list(iter_judgment_rows(judgments_path(run.path)))


def _spread_or_distribution(run: RunData, rubric: str, judge: str, kind: str) -> dict[str, float]:
    """Transcript id -> the judge's own uncertainty: sample spread, or the SD of its logprob scores."""
    out: dict[str, float] = {}
    for row in _judgment_rows(run):
        if row.rubric != rubric or row.judge != judge or row.status != "scored":
            continue
        if kind == "spread" and row.spread is not None:
            out[row.transcript_id] = float(row.spread)
        elif kind == "logprob" and row.score_distribution:
            dist = {float(k): float(v) for k, v in row.score_distribution.items()}
            mass = sum(dist.values())
            mean = sum(s * p for s, p in dist.items()) / mass
            out[row.transcript_id] = math.sqrt(max(0.0, sum(p * (s - mean) ** 2 for s, p in dist.items()) / mass))
    return out


def _error_model(run: RunData, labels: Labels, metric: Metric, judge: str) -> dict[str, float]:
    """Transcript id -> the RMS judge error on labelled transcripts in the same bin of the judge's score,
    shrunk towards the overall RMS error (weight 5 labels) so a bin with one label does not decide."""
    scored = run.scored(metric.name, judge)
    pairs = [(scored[lab.transcript_id], float(lab.value)) for lab in labels.by_metric.get(metric.name, []) if lab.transcript_id in scored]
    if len(pairs) < 2 or labels.kind.get(metric.name) != "numeric":
        return {}
    bins = bins_for(metric)
    yhat = np.array([p[0] for p in pairs])
    sq = (np.array([p[1] for p in pairs]) - yhat) ** 2
    codes = bins.codes(yhat)
    overall = float(sq.mean())
    per_bin = {int(c): (float(sq[codes == c].sum()) + 5 * overall) / (int((codes == c).sum()) + 5) for c in np.unique(codes)}
    ids = list(scored)
    all_codes = bins.codes(np.array([scored[t] for t in ids])) if ids else np.array([], dtype=int)
    return {t: math.sqrt(per_bin.get(int(c), overall)) for t, c in zip(ids, all_codes, strict=True)}


def _uncertainty(run: RunData, rubrics: Sequence[str], judge: str, kind: str, prior: Labels | None) -> tuple[np.ndarray, str]:
    """Per transcript, the mean over rubrics of u / (scale width); unscored judgments get each rubric's largest u."""
    kinds = [kind] if kind != "auto" else ["spread", "logprob", "error-model"]
    for k in kinds:
        columns = []
        for name in rubrics:
            metric = run.metrics[name]
            if k == "error-model":
                if prior is None:
                    continue
                found = _error_model(run, prior, metric, judge)
            else:
                found = _spread_or_distribution(run, name, judge, k)
            if not found:
                continue
            top = max(found.values())
            width = metric.scale[1] - metric.scale[0]
            columns.append([found.get(t, top) / width for t in run.transcripts])
        if columns:
            return np.mean(np.array(columns), axis=0), k
    raise UserInputError(
        f"{run.path}: active sampling needs the judge's uncertainty and the run has none "
        f"({'the chosen source: ' + kind if kind != 'auto' else 'no sample spread, no logprob distributions, no --labels to fit its error'}): "
        "run with repeated samples or logprob scoring, pass --labels with labels already given, or use --strategy uniform"
    )


def _unmatched(labels: Labels, run: RunData) -> str | None:
    """A note when some of ``labels`` are for transcripts the run does not hold; none of them is refused."""
    known = set(run.transcripts)
    given = [lab for rows in labels.by_metric.values() for lab in rows]
    outside = sum(1 for lab in given if lab.transcript_id not in known)
    if outside == len(given):
        raise UserInputError(
            f"--labels: none of the {outside} labels in {labels.path} is for a transcript of the run {run.path} (are they the labels of this run?)"
        )
    if not outside:
        return None
    return f"{outside} of the {len(given)} labels in {labels.path} are for transcripts not in the run {run.path}: not used to fit the judge's error"


def _transcript_texts(run: RunData, summary_input: str | None) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Transcript id -> query, response, contexts and reference from the run's input file, when it is readable."""
    if not summary_input or not Path(summary_input).is_file():
        return {}, f"the run's input file ({summary_input}) is not readable here: to_label holds transcript ids only"
    from ..traces.loader import iter_transcripts

    out: dict[str, dict[str, Any]] = {}
    for _, record in iter_transcripts(summary_input, on_bad="skip"):
        r = record.resolved()
        out[r.id] = {"query": r.query, "response": r.response, "contexts": list(r.contexts) if r.contexts else None, "reference": r.reference}
        if r.steps is not None:  # a trajectory rubric's labeller sees the steps the judge saw
            out[r.id]["steps"] = timeline(r.steps)
    return out, None


def sample_labels(
    run_dir: str | Path,
    n: int,
    seed: int,
    out: str | Path | None = None,
    strategy: Strategy = "uniform",
    rubrics: Sequence[str] = (),
    judge: str | None = None,
    uncertainty: str = "auto",
    floor: float = 0.2,
    prior_labels: str | Path | None = None,
    prompts: Sequence[str | Path] = (),
) -> Design:
    """Draw the transcripts to label and write design.json, to_label.jsonl and to_label.csv to ``out``
    (default RUN_DIR/labels); returns the design as written."""
    run = read_run(run_dir, prompts, categorical=True)  # a categorical rubric's transcripts are drawn like any other's
    big_n = len(run.transcripts)
    if strategy not in ("uniform", "active"):
        raise UserInputError(f"--strategy: {strategy!r} is not uniform or active")
    if uncertainty not in UNCERTAINTIES:
        raise UserInputError(f"--uncertainty: {uncertainty!r} is not one of {', '.join(UNCERTAINTIES)}")
    if not 0 < floor <= 1:
        raise UserInputError(f"--floor: {floor} must be in (0, 1]")
    if not 1 <= n <= big_n:
        raise UserInputError(f"--n: {n} must be between 1 and the run's {big_n} transcripts")
    names = list(rubrics) or [m.name for m in run.metrics.values() if m.kind == "rubric"]
    for name in names:
        if name not in run.metrics:
            raise UserInputError(f"--rubric: {name!r} is not a rubric or composite of the run {run.path}")
    judge = judge or run.judges[0]
    if judge not in run.judges:
        raise UserInputError(f"--judge: {judge!r} is not a judge of the run {run.path} (it has: {', '.join(run.judges)})")
    rng = np.random.default_rng(seed)
    source = None
    u = None
    prior_note = None
    if strategy == "uniform":
        pi = np.full(big_n, n / big_n)
        drawn = np.zeros(big_n, dtype=bool)
        drawn[rng.choice(big_n, size=n, replace=False)] = True
        sampling = f"simple random sample of {n} of {big_n} transcripts, without replacement"
    else:
        prior = read_labels(prior_labels, run) if prior_labels is not None else None
        prior_note = _unmatched(prior, run) if prior is not None else None
        rubric_names = [m for m in names if run.metrics[m].kind == "rubric"]
        u, source = _uncertainty(run, rubric_names, judge, uncertainty, prior)
        pi = inclusion_probabilities(u, n, floor)
        drawn = rng.random(big_n) < pi
        sampling = f"Poisson sampling: each transcript drawn independently with its probability pi (expected {n}, drawn {int(drawn.sum())})"
    folder = Path(out) if out is not None else run.path / "labels"
    folder.mkdir(parents=True, exist_ok=True)
    texts, text_note = _transcript_texts(run, read_summary(run.path).input)
    order = [run.transcripts[i] for i in rng.permutation(big_n) if drawn[i]]
    design = Design(
        run=str(run.path),
        strategy=strategy,
        sampling=sampling,
        seed=seed,
        n=n,
        drawn_count=int(drawn.sum()),
        eligible_count=big_n,
        rubrics=names,
        judge=judge,
        uncertainty=source,
        floor=floor if strategy == "active" else None,
        notes=[note for note in (text_note, prior_note) if note],
        eligible=[
            DesignRow(transcript_id=t, pi=float(pi[i]), drawn=bool(drawn[i]), **({"uncertainty": float(u[i])} if u is not None else {}))
            for i, t in enumerate(run.transcripts)
        ],
    )
    design.write(folder)
    _write_to_label(folder, order, names, texts)
    return design


def _write_to_label(folder: Path, order: Sequence[str], rubrics: Sequence[str], texts: Mapping[str, Mapping[str, Any]]) -> None:
    lines = [dumps({"transcript_id": t, "rubrics": list(rubrics), **texts.get(t, {})}) + "\n" for t in order]
    atomic_write_text(folder / "to_label.jsonl", "".join(lines))
    # With a byte-order mark: a spreadsheet opening the file then reads it as UTF-8, not its locale's code page.
    with (folder / "to_label.csv").open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["transcript_id", "rubric", "label", "query", "response", "contexts", "reference", "steps"])
        for t in order:
            text = texts.get(t, {})
            contexts = "\n---\n".join(text.get("contexts") or [])
            steps = "\n".join(text.get("steps") or [])
            for rubric in rubrics:
                writer.writerow([t, rubric, "", text.get("query") or "", text.get("response") or "", contexts, text.get("reference") or "", steps])


def read_design(path: str | Path) -> Design:
    """Read design.json through :class:`Design`; every problem names the file and the field."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserInputError(f"{file}: no such design file (write one with harness labels sample)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{file}: <json>: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != DESIGN_FORMAT:
        raise UserInputError(f"{file}: format: not a {DESIGN_FORMAT} design file")
    if data.get("strategy") not in ("uniform", "active"):
        raise UserInputError(f"{file}: strategy: expected uniform or active, got {data.get('strategy')!r}")
    try:
        design = Design.model_validate({**data, "eligible": data.get("eligible") or []})
    except ValidationError as exc:
        problem = first_problem(exc, whole="document")
        if len(problem.loc) >= 2 and problem.loc[0] == "eligible" and isinstance(problem.loc[1], int):
            raise UserInputError(f"{file}: eligible[{problem.loc[1]}]: expected transcript_id and pi in (0, 1]") from None
        raise UserInputError(f"{file}: {problem}") from None
    if not design.eligible:
        raise UserInputError(f"{file}: eligible: no eligible transcripts")
    return design.model_copy(update={"path": file})


@dataclass(frozen=True, slots=True)
class Collected:
    """What ``harness labels collect`` wrote: labels written, and rows left blank (not written)."""

    labels: int
    blank: int


def collect_csv(csv_path: str | Path, out: str | Path) -> Collected:
    """Turn a filled to_label.csv into labels JSONL (the ``harness agreement`` format); blank labels are counted, not written."""
    file = Path(csv_path)
    rows: list[str] = []
    blank = 0
    try:
        with file.open(encoding="utf-8-sig", newline="") as handle:  # with or without a byte-order mark
            reader = csv.DictReader(handle)
            for line, row in enumerate(reader, start=2):
                for name in ("transcript_id", "rubric", "label"):
                    if row.get(name) is None:
                        raise UserInputError(f"{file}:{line}: {name}: missing")
                text = row["label"].strip()
                if not text:
                    blank += 1
                    continue
                label: Any = text
                try:
                    label = float(text)
                except ValueError:
                    if text.lower() in ("true", "false"):
                        label = text.lower() == "true"
                rows.append(dumps({"transcript_id": row["transcript_id"], "rubric": row["rubric"], "label": label}) + "\n")
    except FileNotFoundError:
        raise UserInputError(f"{file}: no such file") from None
    atomic_write_text(Path(out), "".join(rows))
    return Collected(labels=len(rows), blank=blank)
