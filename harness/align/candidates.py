"""The three candidate rubrics ``harness align`` tries, each built from the fit set alone.

- **few-shot**: the rubric with labelled examples from the fit set put before the material to
  judge: balanced by label (one of each class, or of each bin of the scale, in turn), the judge's worst
  disagreements first, and never a near-duplicate of a select or test transcript (normalised-text
  word 3-shingles with a Jaccard similarity of ``NEAR_DUPLICATE`` or more: Broder 1997, "On the
  resemblance and containment of documents").
- **rewrite**: the rubric with its criteria rewritten by a judge model from the fit set's
  disagreements. The request is one transcript judged with ``prompts/align/align_rewrite.md``
  through the ordinary run (so it is cached and replays offline); its reply's
  ``<rubric>…</rubric>`` is the new template, kept only when it is a valid rubric with the same
  placeholders.
- **recalibration**: the rubric unchanged but for a ``calibration`` map of the judge's score onto
  the human scale, fitted by isotonic regression (`harness.stats.isotonic`) on the fit set.

Each candidate is a `Rubric` with its own version (`harness.align.provenance.aligned_version`),
so a judgment made with it has its own cache key. Transcript text put into a template has every
``{`` followed by a zero-width space, so no text can become a placeholder.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import RubricError
from ..rubrics.rubric import Rubric, parse_rubric, rubric_text
from ..rubrics.tags import tag_for
from ..stats.isotonic import isotonic_regression
from ..transcripts.models import Resolved
from .measure import Scale
from .provenance import aligned_version

__all__ = [
    "NEAR_DUPLICATE",
    "Example",
    "diff_text",
    "few_shot_examples",
    "few_shot_rubric",
    "jaccard",
    "recalibrated_rubric",
    "rewrite_record",
    "rewritten_rubric",
    "shingles",
]

#: Jaccard similarity of word 3-shingles at or above which two transcripts are near-duplicates
NEAR_DUPLICATE = 0.5
SHINGLE_WORDS = 3
#: characters of each input shown in an example or a rewrite case (the rest is cut)
EXAMPLE_CHARS = 1500
CASE_CHARS = 800
#: disagreements shown to the model that rewrites the criteria, and the least gap (in scale
#: widths) between a numeric label and the judge's score that counts as one
REWRITE_CASES = 8
REWRITE_MIN_GAP = 0.1
_PLACEHOLDER = re.compile(r"\{\{\s*[a-z_]+\s*\}\}")
_REPLY = re.compile(r"<rubric>[ \t]*\r?\n?(.*?)\r?\n?[ \t]*</rubric>", re.DOTALL)
_INPUT_TITLES = {"query": "Query", "response": "Response", "contexts": "Contexts", "reference": "Reference"}


@dataclass(frozen=True)
class Example:
    """A labelled fit transcript: its inputs, the human label, the judge's score (None: unscored)
    and the label's kind that examples are balanced over (its class, or its bin on the scale)."""

    transcript_id: str
    transcript: Resolved
    label: float | str
    score: float | None
    stratum: int


def shingles(text: str, k: int = SHINGLE_WORDS) -> frozenset[str]:
    """The word k-shingles of ``text`` lower-cased with every run of non-alphanumerics as one
    space; a text of fewer than k words is one shingle (none when it has no words)."""
    words = re.findall(r"[0-9a-z]+", text.casefold())
    if len(words) < k:
        return frozenset({" ".join(words)}) if words else frozenset()
    return frozenset(" ".join(words[i : i + k]) for i in range(len(words) - k + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are the same text (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def input_text(transcript: Resolved, inputs: Iterable[str]) -> str:
    """The rubric's inputs of a transcript as one text (what near-duplicates are measured on)."""
    parts: list[str] = []
    for name in inputs:
        value = getattr(transcript, name)
        if isinstance(value, str):
            parts.append(value)
        elif value:
            parts.extend(value)
    return "\n".join(parts)


def disagreement(scale: Scale, label: float | str, score: float | None) -> float:
    """How far the judge's score is from the label, in scale widths; a pass/fail disagreement
    counts 1 plus the score's distance from the threshold. -1 for an unscored judgment (it tells
    nothing of the judge's leaning: after every scored one)."""
    if score is None:
        return -1.0
    lo, hi = scale.metric.scale
    width = hi - lo
    if isinstance(label, str):
        said = "pass" if (score <= scale.threshold if scale.metric.direction == "lower" else score >= scale.threshold) else "fail"
        return 1.0 + abs(score - scale.threshold) / width if said != label else 0.0
    return abs(score - float(label)) / width


def few_shot_examples(
    fit: Sequence[Example], scale: Scale, shots: int, avoid: Sequence[frozenset[str]], inputs: Sequence[str], threshold: float = NEAR_DUPLICATE
) -> tuple[list[Example], int]:
    """Up to ``shots`` fit examples, one of each label kind (``Example.stratum``) in turn, each kind's in order of
    `disagreement` (largest first; ties by transcript id), skipping near-duplicates of ``avoid``
    (the shingles of the select and test transcripts). Returns the examples and how many
    near-duplicates were skipped."""
    queues: dict[int, list[Example]] = {}
    for example in sorted(fit, key=lambda e: (-disagreement(scale, e.label, e.score), e.transcript_id)):
        queues.setdefault(example.stratum, []).append(example)
    chosen: list[Example] = []
    skipped = 0
    order = sorted(queues)
    while len(chosen) < shots and any(queues[s] for s in order):
        for stratum in order:
            while queues[stratum] and len(chosen) < shots:
                candidate = queues[stratum].pop(0)
                own = shingles(input_text(candidate.transcript, inputs))
                if any(jaccard(own, other) >= threshold for other in avoid):
                    skipped += 1
                    continue
                chosen.append(candidate)
                break
    return chosen, skipped


def _inert(text: str, limit: int) -> str:
    """Transcript text as it may stand in a template: cut to ``limit`` characters, and no ``{``
    that could start a placeholder (a zero-width space after each)."""
    cut = text if len(text) <= limit else text[:limit] + " [...]"
    return cut.replace("{", "{\u200b")


def _inputs_text(transcript: Resolved, inputs: Sequence[str], limit: int) -> str:
    lines = []
    for name in inputs:
        value = getattr(transcript, name)
        if isinstance(value, str):
            lines.append(f"{_INPUT_TITLES[name]}:\n{_inert(value, limit)}")
        elif value:
            numbered = "\n".join(f"[{i}] {_inert(text, limit)}" for i, text in enumerate(value, start=1))
            lines.append(f"{_INPUT_TITLES[name]}:\n{numbered}")
    return "\n".join(lines)


def _human_says(scale: Scale, label: float | str) -> str:
    if isinstance(label, str):
        return f"People's verdict: {label} ({scale.verdict_text()})"
    return f"People's score: {float(label):g}"


def few_shot_rubric(rubric: Rubric, examples: Sequence[Example], scale: Scale) -> Rubric:
    """``rubric`` with ``examples`` placed before the paragraph of its first placeholder (after
    its criteria, before the material to judge), under a new version."""
    blocks = []
    for index, example in enumerate(examples, start=1):
        body = _inputs_text(example.transcript, rubric.inputs, EXAMPLE_CHARS) + "\n" + _human_says(scale, example.label)
        tag = tag_for("example", body)
        blocks.append(f'<{tag} n="{index}">\n{body}\n</{tag}>')
    section = (
        "EXAMPLES judged by people (what they decided is the standard to follow; the material to judge comes after them):\n\n"
        + "\n\n".join(blocks)
        + "\n\n"
    )
    template = rubric.template
    first = _PLACEHOLDER.search(template)
    head = template[: first.start()] if first is not None else ""
    at = head.rfind("\n\n") + 2 if "\n\n" in head else 0
    candidate = replace(rubric, template=template[:at] + section + template[at:])
    return _reparsed(replace(candidate, version=aligned_version(rubric.version, candidate)))


def rewrite_cases(fit: Sequence[Example], scale: Scale, avoid: Sequence[frozenset[str]], inputs: Sequence[str]) -> list[Example]:
    """The fit set's disagreements shown to the rewriting model: the largest first, at most
    ``REWRITE_CASES``, no near-duplicate of a select or test transcript."""
    scored = [
        e for e in fit if e.score is not None and disagreement(scale, e.label, e.score) > (0.0 if isinstance(e.label, str) else REWRITE_MIN_GAP)
    ]
    ranked = sorted(scored, key=lambda e: (-disagreement(scale, e.label, e.score), e.transcript_id))
    chosen = []
    for example in ranked:
        own = shingles(input_text(example.transcript, inputs))
        if not any(jaccard(own, other) >= NEAR_DUPLICATE for other in avoid):
            chosen.append(example)
        if len(chosen) == REWRITE_CASES:
            break
    return chosen


def rewrite_record(rubric: Rubric, cases: Sequence[Example], scale: Scale) -> dict[str, str]:
    """The transcript judged with ``align_rewrite``: the rubric (its scale and template) as the
    query, the disagreements as the response."""
    lo, hi = scale.metric.scale
    better = "lower" if scale.metric.direction == "lower" else "higher"
    query = f"(scale {lo:g} to {hi:g}, {better} is better)\n{rubric.template}"
    shown = []
    for index, case in enumerate(cases, start=1):
        assert case.score is not None
        head = f"Case {index}: the judge scored {case.score:g}; {_human_says(scale, case.label)}."
        shown.append(head + "\n" + _inputs_text(case.transcript, rubric.inputs, CASE_CHARS))
    return {"id": f"align-rewrite-{rubric.name}", "query": query, "response": "\n\n".join(shown)}


def rewritten_rubric(rubric: Rubric, reply: str | None) -> Rubric | str:
    """The rubric whose template is the reply's ``<rubric>`` block, under a new version; or, when
    the reply gives no usable rubric, why not (one line)."""
    found = _REPLY.search(reply or "")
    if found is None:
        return "the reply holds no <rubric>...</rubric> block"
    template = found.group(1).strip("\n") + "\n"
    if template.strip() == rubric.template.strip():
        return "the reply gives the rubric unchanged"
    try:
        candidate = _reparsed(replace(rubric, template=template))
    except RubricError as exc:
        return f"the rewritten rubric is not valid: {str(exc).split(': ', 1)[-1]}"
    return _reparsed(replace(candidate, version=aligned_version(rubric.version, candidate)))


def recalibrated_rubric(rubric: Rubric, scores: np.ndarray, human: np.ndarray) -> Rubric | str:
    """The rubric with the isotonic map of ``scores`` onto ``human`` (the fit set's pairs) as its
    calibration, under a new version; or why not (one line)."""
    if scores.size < 2 or np.ptp(scores) == 0:
        return "the judge gave the fit set fewer than two distinct scores: nothing to map"
    fit = isotonic_regression(scores, human)
    knots = (tuple(round(x, 12) for x in fit.x), tuple(round(y, 12) for y in fit.y))
    candidate = replace(rubric, calibration=knots)
    return _reparsed(replace(candidate, version=aligned_version(rubric.version, candidate)))


def _reparsed(rubric: Rubric) -> Rubric:
    """``rubric`` as its file reads back (raises RubricError when the file would not load)."""
    return parse_rubric(rubric_text(rubric), rubric.source)


def diff_text(before: Rubric, after: Rubric, name: str) -> str:
    """A unified diff of two rubric files."""
    old, new = rubric_text(before).splitlines(keepends=True), rubric_text(after).splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, f"{name}.md (version {before.version})", f"{name}.md (version {after.version})"))
