"""How well the scan finds attacks, and how rarely it flags benign text (docs/guide/injection.md).

- **Recall**: each attack of the corpus is put into a benign host transcript (``HOST``, which the
  scan does not flag) with :func:`corpus.insert`; it is found when the attacked transcript is
  flagged. Per family and split, with Wilson 95 % intervals.
- **False positives**: the share of benign transcripts flagged (the repository's examples, the
  trace fixtures imported through the loader) and of benign paragraphs flagged (prose read as a
  context: the seed documents, the standard library's docstrings).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..stats.intervals import wilson_interval
from ..transcripts.models import Transcript
from .corpus import Corpus, insert
from .detect import Finding, scan_text, scan_transcript

#: A benign transcript with every field an attack can go into.
HOST: dict[str, Any] = {
    "id": "host",
    "query": "What is the refund window for annual plans?",
    "response": "Annual plans can be refunded in full within 30 days of purchase.",
    "contexts": ["Refunds: annual plans are refundable in full within 30 days of purchase; monthly plans are not refundable."],
    "steps": [
        {"name": "search_policies", "arguments": {"query": "annual plan refund"}, "result": "Refund policy, section 2: annual plans, 30 days."},
        {"name": "get_plan", "arguments": {"plan": "annual"}, "result": "Plan: annual, price 120 USD."},
    ],
}


@dataclass(slots=True)
class Rate:
    """``found`` of ``n``, with a Wilson 95 % interval (None for n = 0)."""

    found: int = 0
    n: int = 0

    @property
    def rate(self) -> float | None:
        return self.found / self.n if self.n else None

    @property
    def ci(self) -> tuple[float, float] | None:
        return wilson_interval(self.found, self.n) if self.n else None

    def as_dict(self) -> dict[str, Any]:
        ci = self.ci
        return {"found": self.found, "n": self.n, "rate": self.rate, "ci": None if ci is None else [float(ci[0]), float(ci[1])]}


@dataclass(slots=True)
class DetectionFigures:
    #: (family, split) -> attacks found
    recall: dict[tuple[str, str], Rate] = field(default_factory=dict)
    #: the attacks not found, by id
    missed: list[str] = field(default_factory=list)
    #: benign source -> transcripts or paragraphs flagged
    false_positives: dict[str, Rate] = field(default_factory=dict)
    #: what the benign flags were (source, where, kind, excerpt), for the docs
    benign_flags: list[tuple[str, str, str, str]] = field(default_factory=list)

    def overall(self, split: str) -> Rate:
        total = Rate()
        for (_, s), rate in self.recall.items():
            if s == split:
                total.found += rate.found
                total.n += rate.n
        return total


def recall(corpus: Corpus, host: Mapping[str, Any] = HOST) -> tuple[dict[tuple[str, str], Rate], list[str]]:
    """Per (family, split): how many of the corpus's attacks, put into ``host``, are found."""
    assert not scan_transcript(Transcript.model_validate(host)), "the host transcript must be clean"
    rates: dict[tuple[str, str], Rate] = {}
    missed = []
    for attack in corpus.attacks:
        attacked = insert(dict(host), attack)
        assert attacked is not None, attack.id
        rate = rates.setdefault((attack.family, attack.split), Rate())
        rate.n += 1
        if scan_transcript(Transcript.model_validate(attacked)):
            rate.found += 1
        else:
            missed.append(attack.id)
    return rates, missed


def flagged_transcripts(source: str, transcripts: Iterable[Transcript], figures: DetectionFigures) -> None:
    rate = figures.false_positives.setdefault(source, Rate())
    for transcript in transcripts:
        rate.n += 1
        found: list[Finding] = scan_transcript(transcript)
        if found:
            rate.found += 1
            figures.benign_flags += [(source, f.where(), f.kind, f.excerpt) for f in found]


def flagged_paragraphs(source: str, texts: Iterable[str], figures: DetectionFigures) -> None:
    """Each text split into paragraphs, each scanned as a context (not a whole field)."""
    rate = figures.false_positives.setdefault(source, Rate())
    for index, text in enumerate(texts):
        for para in re.split(r"\n\s*\n", text):
            if para.strip():
                rate.n += 1
                hits = list(scan_text(para, whole=False))
                if hits:
                    rate.found += 1
                    figures.benign_flags += [(source, f"text {index}", kind, excerpt) for kind, _, excerpt in hits]
