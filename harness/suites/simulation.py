"""Simulated-guest conversation quality (seeds/002_c6b7c3d1b14f6206.txt; its composite is section 6,
there is no section 5).

Input: JSONL, one conversation per line::

    {"id": "c1", "experiment": 5,
     "persona": {"type": "busy_professional",
                 "expected": {"exploration": "no_exploration", "moods": ["casual"],
                              "ordering": "all_at_once", "complete": true}},
     "target_order": ["Margherita pizza"], "current_order": ["margherita pizza"],
     "messages": [{"role": "guest", "content": "...",
                   "attributes": {"exploration": "explores_menu", "mood": "casual",
                                  "ordering": "one_by_one", "complete": false},
                   "tools": {"order_tracking": true, "behavioral_tracking": true,
                             "message_attributes": false, "basic_tools": true}},
                  {"role": "waiter", "content": "..."}]}

The harness's choices where the document is open:

- N (PAS, DEI) and the behavioural states (BVS) are the guest messages, without ``exit`` messages
  (content ``exit``, any case); tool flags are read from those messages. No guest message: an
  input error naming the conversation.
- A guest attribute missing from a message is classified by a categorical judge rubric
  (``prompts/simulation/guest_*.md``, fixed label sets; a reply that is not one of the labels is
  unscored). Every message missing any attribute is judged on all four rubrics (one judge input
  file, so ``harness estimate`` prices it); only the missing attributes are taken from the judge.
- With ``--no-judge``, or when the judge leaves an attribute unscored, it stays unknown: PAS skips
  that message and BVS that state, and both report the counts.
- The fallback heuristic applies when the persona has no ``expected`` attributes; persona types
  (case, spaces and hyphens ignored): busy_professional, curious_explorer (or curious, explorer),
  indecisive, family_group (or family, group). Any other type is an input error.
- BVS with fewer than two states: TR_avg = 0, so BVS = 0 (no variance observable).
- ORA normalisation: NFKD with accents dropped and casefolded ("Café" is "cafe"), filler words
  removed as whole words, then every character other than letters, digits and spaces, and spaces
  collapsed; items that normalise to nothing are dropped.
- Comparisons: every pair of experiments with at least two conversations, per metric: Welch's t,
  Cohen's d (signed, and |d| as the document writes it), and each experiment's 95 % CI from
  ``harness.stats.mean_interval`` (Student's t, not 1.96: few conversations per experiment).
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserInputError
from ..planning import JudgeOptions
from ..stats import UndefinedMetricWarning, cohens_d, mean_interval, welch_ttest
from .common import judge_records, pydantic_problem, read_jsonl_records, write_json

METRICS = ("PAS", "BVS", "ORA", "DEI", "CRRS")
#: seed 002, section 6: fixed across experiments
CRRS_WEIGHTS = {"PAS": 0.25, "BVS": 0.20, "ORA": 0.35, "DEI": 0.20}
FILLER_WORDS = frozenset({"the", "a", "an", "with", "and", "or", "of", "in", "on", "at"})
ATTRIBUTES = ("exploration", "mood", "ordering", "complete")
RUBRIC_OF = {"exploration": "guest_exploration", "mood": "guest_mood", "ordering": "guest_ordering", "complete": "guest_complete"}
PERSONA_ALIASES = {
    "busy_professional": "busy_professional",
    "busy": "busy_professional",
    "professional": "busy_professional",
    "curious_explorer": "curious_explorer",
    "curious": "curious_explorer",
    "explorer": "curious_explorer",
    "indecisive": "indecisive",
    "family_group": "family_group",
    "family": "family_group",
    "group": "family_group",
}

# --- formulas (seed 002), one per function -------------------------------------------------------


def message_score(c1: Any, c2: Any, c3: Any, c4: Any) -> Any:
    """MS_i = 0.25·C₁ + 0.25·C₂ + 0.25·C₃ + 0.25·C₄ (seed 002, section 1). Vectorised."""
    return 0.25 * (np.asarray(c1, float) + np.asarray(c2, float) + np.asarray(c3, float) + np.asarray(c4, float))


def persona_adherence_score(message_scores: Sequence[float]) -> float:
    """PAS = (1/N) Σ MS_i (seed 002, section 1). No scorable message: 0.0 (nothing adhered)."""
    values = np.asarray(message_scores, dtype=float)
    return float(values.mean()) if values.size else 0.0


def heuristic_message_score(persona_type: str, exploration: str, mood: str, ordering: str) -> float:
    """The fallback heuristic of seed 002, section 1, for one message (persona attributes absent)."""
    if persona_type == "busy_professional":
        return 0.33 * (ordering == "all_at_once") + 0.33 * (exploration == "no_exploration") + 0.34 * (mood in ("casual", "frustrated"))
    if persona_type == "curious_explorer":
        return 0.5 * (exploration == "explores_menu") + 0.5 * (mood in ("enthusiastic", "casual"))
    if persona_type == "indecisive":
        return 0.5 * (ordering == "one_by_one") + 0.5 * (mood in ("confused", "casual"))
    if persona_type == "family_group":
        return 0.5 * (ordering == "one_by_one") + 0.5 * (exploration == "explores_menu")
    raise ValueError(f"unknown persona type {persona_type!r}")


def transition_rate(states: Sequence[str]) -> float:
    """TR = (1/(M−1)) Σ_{i=2..M} δ(S_i ≠ S_{i−1}) (seed 002, section 2). M < 2: 0.0 (no transition)."""
    if len(states) < 2:
        return 0.0
    arr = np.asarray(states, dtype=object)
    return float(np.mean(arr[1:] != arr[:-1]))


def behavioral_variance_score(tr_avg: Any) -> Any:
    """BVS = TR/0.2 if TR ≤ 0.2 else 1 − (TR − 0.2)/0.8, clipped to [0, 1] (seed 002, section 2):
    peaked at TR_avg = 0.2. Vectorised."""
    tr = np.asarray(tr_avg, dtype=float)
    return np.clip(np.where(tr <= 0.2, tr / 0.2, 1.0 - (tr - 0.2) / 0.8), 0.0, 1.0)


# Special characters: anything but letters and digits of any script, and whitespace ("é" is a letter).
_SPECIAL = re.compile(r"[^\w\s]|_")


def fold_text(text: str) -> str:
    """NFKD, combining marks (accents) dropped, casefolded: "Crème Brûlée" and "creme brulee" are one
    item, as a guest typing without accents means the same dish."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def normalize_item(item: str) -> str:
    """normalize(s) = lowercase(remove_special_chars(remove_filler_words(s))) (seed 002, section 3),
    with "lowercase" made Unicode-aware by :func:`fold_text`."""
    words = [w for w in fold_text(item).split() if w not in FILLER_WORDS]
    return " ".join(_SPECIAL.sub("", " ".join(words)).split())


def order_restriction_adherence(target: Sequence[str], current: Sequence[str]) -> float:
    """ORA: F1 of the normalised item sets T and C (seed 002, section 3); 0 when either is empty
    or nothing overlaps."""
    t = {x for x in map(normalize_item, target) if x}
    c = {x for x in map(normalize_item, current) if x}
    both = len(c & t)
    precision = both / len(c) if c else 0.0
    recall = both / len(t) if t else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def decision_explainability_index(experiment: int, flags: Mapping[str, Sequence[bool]], n: int) -> float:
    """DEI with the per-experiment caps of seed 002, section 4. ``flags``: per tool flag, one value
    per guest message; ``n`` > 0 guest messages."""

    def ed(*names: str) -> float:
        return float(sum(np.sum(np.asarray(flags.get(name, []), dtype=bool)) for name in names))

    if experiment == 5:
        return min(1.0, ed("order_tracking", "behavioral_tracking") / (n * 2))
    if experiment == 4:
        return min(0.5, ed("message_attributes") / n * 0.5)
    if experiment == 3:
        return min(0.5, ed("order_tracking") / n * 0.5)
    if experiment == 2:
        return min(0.2, ed("basic_tools") / n * 0.2)
    return 0.0


def crrs(pas: Any, bvs: Any, ora: Any, dei: Any) -> Any:
    """CRRS = 0.25·PAS + 0.20·BVS + 0.35·ORA + 0.20·DEI (seed 002, section 6). Vectorised."""
    return (
        CRRS_WEIGHTS["PAS"] * np.asarray(pas, float)
        + CRRS_WEIGHTS["BVS"] * np.asarray(bvs, float)
        + CRRS_WEIGHTS["ORA"] * np.asarray(ora, float)
        + CRRS_WEIGHTS["DEI"] * np.asarray(dei, float)
    )


def crrs_interpretation(value: float) -> str:
    """Seed 002, section 6: > 0.85 Excellent, [0.70, 0.85] Good, [0.50, 0.70) Acceptable, else Poor."""
    if value > 0.85:
        return "Excellent"
    if value >= 0.70:
        return "Good"
    if value >= 0.50:
        return "Acceptable"
    return "Poor"


# --- input ---------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Attributes(_Strict):
    exploration: Literal["explores_menu", "no_exploration"] | None = None
    mood: Literal["casual", "enthusiastic", "frustrated", "confused", "neutral"] | None = None
    ordering: Literal["all_at_once", "one_by_one", "not_ordering"] | None = None
    complete: bool | None = None


class Tools(_Strict):
    order_tracking: bool = False
    behavioral_tracking: bool = False
    message_attributes: bool = False
    basic_tools: bool = False


class SimMessage(_Strict):
    role: Literal["guest", "waiter", "system"]
    content: str
    attributes: Attributes | None = None
    tools: Tools | None = None


class Expected(_Strict):
    exploration: Literal["explores_menu", "no_exploration"]
    moods: list[str] = Field(min_length=1)
    ordering: Literal["all_at_once", "one_by_one", "not_ordering"]
    complete: bool


class Persona(_Strict):
    type: str
    expected: Expected | None = None


class Conversation(_Strict):
    id: str | int
    experiment: int = Field(ge=1, le=5)
    persona: Persona
    target_order: list[str]
    current_order: list[str]
    messages: list[SimMessage]


def persona_key(raw: str) -> str | None:
    return PERSONA_ALIASES.get(re.sub(r"[\s\-/]+", "_", raw.strip().lower()))


def load_conversations(path: Path) -> list[tuple[int, Conversation]]:
    rows: list[tuple[int, Conversation]] = []
    seen: dict[str, int] = {}
    for line, raw in read_jsonl_records(path):
        try:
            conv = Conversation.model_validate(raw)
        except ValidationError as exc:
            raise UserInputError(f"{path}:{line}: {pydantic_problem(exc)}") from None
        cid = str(conv.id)
        if cid in seen:
            raise UserInputError(f"{path}:{line}: conversation {cid!r} repeats line {seen[cid]}")
        seen[cid] = line
        if conv.persona.expected is None and persona_key(conv.persona.type) is None:
            raise UserInputError(
                f"{path}:{line}: conversation {cid!r}: persona type {conv.persona.type!r} has no fallback heuristic "
                f"and no expected attributes (known types: busy_professional, curious_explorer, indecisive, family_group)"
            )
        if not guest_messages(conv):
            raise UserInputError(f"{path}:{line}: conversation {cid!r} has no guest message (besides 'exit')")
        rows.append((line, conv))
    return rows


def guest_messages(conv: Conversation) -> list[tuple[int, SimMessage]]:
    return [(i, m) for i, m in enumerate(conv.messages) if m.role == "guest" and m.content.strip().lower() != "exit"]


# --- the suite -----------------------------------------------------------------------------------


def _attr_value(attrs: Attributes | None, name: str) -> str | None:
    value = getattr(attrs, name) if attrs is not None else None
    if name == "complete" and value is not None:
        return "complete" if value else "incomplete"
    return value


def judge_inputs(conv: Conversation) -> list[dict[str, Any]]:
    """One record per guest message missing an attribute: the conversation so far, and the message."""
    records = []
    for index, message in guest_messages(conv):
        if all(_attr_value(message.attributes, a) is not None for a in ATTRIBUTES):
            continue
        history = "\n".join(f"{m.role}: {m.content}" for m in conv.messages[:index]) or "(start of conversation)"
        records.append(
            {
                "id": f"{conv.id}::{index}",
                "query": history,
                "response": message.content,
                "metadata": {"conversation": str(conv.id), "message_index": index},
            }
        )
    return records


@dataclass(slots=True)
class ConversationResult:
    id: str
    experiment: int
    persona_type: str
    used_heuristic: bool
    PAS: float
    BVS: float
    ORA: float
    DEI: float
    CRRS: float
    interpretation: str
    transition_rates: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)


def score_conversation(conv: Conversation, judged: Mapping[tuple[str, int, str], str]) -> ConversationResult:
    guests = guest_messages(conv)
    states: list[dict[str, str | None]] = []
    from_judge = 0
    for index, message in guests:
        state = {}
        for name in ATTRIBUTES:
            value = _attr_value(message.attributes, name)
            if value is None and (str(conv.id), index, name) in judged:
                value = judged[(str(conv.id), index, name)]
                from_judge += 1
            state[name] = value
        states.append(state)
    known = [s for s in states if all(s[a] is not None for a in ATTRIBUTES)]
    expected = conv.persona.expected
    persona = persona_key(conv.persona.type) or conv.persona.type
    if expected is not None:
        scores = (
            message_score(
                [s["exploration"] == expected.exploration for s in known],
                [s["mood"] in expected.moods for s in known],
                [s["ordering"] == expected.ordering for s in known],
                [s["complete"] == ("complete" if expected.complete else "incomplete") for s in known],
            )
            if known
            else []
        )
    else:
        scores = [heuristic_message_score(persona, str(s["exploration"]), str(s["mood"]), str(s["ordering"])) for s in known]
    pas = persona_adherence_score(scores)
    bvs_states = [s for s in states if all(s[a] is not None for a in ("ordering", "exploration", "mood"))]
    rates = {dim: transition_rate([str(s[dim]) for s in bvs_states]) for dim in ("ordering", "exploration", "mood")}
    tr_avg = (rates["ordering"] + rates["exploration"] + rates["mood"]) / 3
    bvs = float(behavioral_variance_score(tr_avg))
    ora = order_restriction_adherence(conv.target_order, conv.current_order)
    tools = [m.tools or Tools() for _, m in guests]
    flags = {name: [getattr(t, name) for t in tools] for name in Tools.model_fields}
    dei = decision_explainability_index(conv.experiment, flags, len(guests))
    total = float(crrs(pas, bvs, ora, dei))
    return ConversationResult(
        id=str(conv.id),
        experiment=conv.experiment,
        persona_type=persona,
        used_heuristic=expected is None,
        PAS=pas,
        BVS=bvs,
        ORA=ora,
        DEI=dei,
        CRRS=total,
        interpretation=crrs_interpretation(total),
        transition_rates={**rates, "average": tr_avg},
        counts={
            "guest_messages": len(guests),
            "pas_messages": len(known),
            "pas_skipped_unknown": len(states) - len(known),
            "bvs_states": len(bvs_states),
            "attributes_from_judge": from_judge,
        },
    )


@dataclass(frozen=True, slots=True)
class ExperimentComparison:
    """One metric of one pair of experiments: Welch's t and Cohen's d, or why they are undefined."""

    experiments: tuple[int, int]
    metric: str
    mean_a: float
    mean_b: float
    welch_t: float | None
    df: float | None
    p_value: float | None
    notes: list[str]
    cohens_d: float | None
    cohens_d_abs: float | None
    significant_at_0_05: bool | None
    undefined: str | None


@dataclass(frozen=True, slots=True)
class SkippedComparison:
    experiments: tuple[int, int]
    skipped: str


@dataclass(frozen=True, slots=True)
class Experiment:
    n: int
    means: dict[str, float]
    ci95: dict[str, tuple[float, float] | None]
    interpretation: str

    @property
    def crrs_ci95(self) -> tuple[float, float] | None:
        return self.ci95["CRRS"]


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """What ``harness simulation`` found; :meth:`as_dict` is simulation.json."""

    input: str
    judged: bool
    conversations: list[ConversationResult]
    experiments: dict[int, Experiment]
    comparisons: list[ExperimentComparison | SkippedComparison]
    judge: dict[str, Any] | None
    exit_code: int
    unjudged_messages: int

    def as_dict(self) -> dict[str, Any]:
        """NaN/inf → None so the JSON stays strict (an interval of identical values can be degenerate)."""
        return _clean(
            {
                "input": self.input,
                "judged": self.judged,
                "weights": CRRS_WEIGHTS,
                "conversations": [asdict(r) for r in self.conversations],
                "experiments": {str(k): {**asdict(e), "crrs_ci95": e.crrs_ci95} for k, e in self.experiments.items()},
                "comparisons": [asdict(c) for c in self.comparisons],
                "judge": self.judge,
                "exit_code": self.exit_code,
                "unjudged_messages": self.unjudged_messages,
            }
        )


def compare_experiments(results: Sequence[ConversationResult]) -> list[ExperimentComparison | SkippedComparison]:
    """Welch's t and Cohen's d for every pair of experiments and metric (seed 002, "Statistical
    validation"); pairs where either side has fewer than two conversations are listed as skipped."""
    by_exp: dict[int, list[ConversationResult]] = defaultdict(list)
    for r in results:
        by_exp[r.experiment].append(r)
    rows: list[ExperimentComparison | SkippedComparison] = []
    for a, b in itertools.combinations(sorted(by_exp), 2):
        if len(by_exp[a]) < 2 or len(by_exp[b]) < 2:
            rows.append(SkippedComparison((a, b), "each experiment needs at least two conversations"))
            continue
        for metric in METRICS:
            xa = [getattr(r, metric) for r in by_exp[a]]
            xb = [getattr(r, metric) for r in by_exp[b]]
            if np.ptp(xa) == 0 and np.ptp(xb) == 0:
                # Welch's t divides by a zero standard error and Cohen's d by a zero pooled SD: no
                # verdict at all, only the reason (a difference of constants is not evidence).
                rows.append(
                    ExperimentComparison(
                        (a, b), metric, float(np.mean(xa)), float(np.mean(xb)), None, None, None, [], None, None, None, ZERO_VARIANCE
                    )
                )
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UndefinedMetricWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                t = welch_ttest(xa, xb)
                d = cohens_d(xa, xb)
            rows.append(
                ExperimentComparison(
                    experiments=(a, b),
                    metric=metric,
                    mean_a=float(np.mean(xa)),
                    mean_b=float(np.mean(xb)),
                    welch_t=_finite(t.statistic),
                    df=_finite(t.df),
                    p_value=_finite(t.pvalue),
                    notes=list(t.warnings),
                    cohens_d=_finite(d),
                    cohens_d_abs=_finite(abs(d)),
                    significant_at_0_05=bool(t.pvalue < 0.05),
                    undefined=None,
                )
            )
    return rows


ZERO_VARIANCE = "zero variance: every conversation of both experiments has the same value, so Welch's t and Cohen's d are undefined"


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def evaluate_simulation(path: Path, out: Path, judge: JudgeOptions | None) -> SimulationResult:
    convs = load_conversations(path)
    judged: dict[tuple[str, int, str], str] = {}
    judge_summary, exit_code = None, 0
    records = [r for _, conv in convs for r in judge_inputs(conv)]
    if judge is not None and records:
        result = judge_records(records, list(RUBRIC_OF.values()), out, judge, "simulation")
        exit_code = result.outcome.exit_code
        judge_summary = result.summary()
        attr_of = {rubric: attr for attr, rubric in RUBRIC_OF.items()}
        for j in result.judgments:
            if j["status"] == "scored" and j.get("label") is not None:
                conv_id, _, index = j["transcript_id"].rpartition("::")
                judged.setdefault((conv_id, int(index), attr_of[j["rubric"]]), j["label"])
    results = [score_conversation(conv, judged) for _, conv in convs]
    experiments: dict[int, Experiment] = {}
    for exp in sorted({r.experiment for r in results}):
        rows = [r for r in results if r.experiment == exp]
        means = {m: float(np.mean([getattr(r, m) for r in rows])) for m in METRICS}
        cis = {m: mean_interval([getattr(r, m) for r in rows]) if len(rows) >= 2 else None for m in METRICS}
        experiments[exp] = Experiment(len(rows), means, cis, crrs_interpretation(means["CRRS"]))
    out.mkdir(parents=True, exist_ok=True)
    summary = SimulationResult(
        input=str(path),
        judged=judge is not None,
        conversations=results,
        experiments=experiments,
        comparisons=compare_experiments(results),
        judge=judge_summary,
        exit_code=exit_code,
        unjudged_messages=len(records) if judge is None else 0,
    )
    write_json(out / "simulation.json", summary.as_dict())
    return summary


def _clean(value: Any) -> Any:
    """NaN/inf → None so the JSON stays strict (an interval of identical values can be degenerate)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
