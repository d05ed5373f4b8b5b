"""The human labels split into fit, select and a sealed test set: seeded, grouped, stratified.

- **Grouped.** Transcripts of one task or one conversation are not independent: a judge that saw
  one of them as an example has all but seen the others. Each labelled transcript's group is its
  ``task`` when it has one, else its metadata's conversation id (the first of
  ``CONVERSATION_KEYS`` present), else the transcript alone. A group goes whole to one part.
- **Stratified by label.** Pass/fail labels are stratified by class. Numeric labels by the value's
  bin on the rubric's scale (`harness.analysis.scales.Bins`). A group's stratum is the one most
  of its labels are in (a group split evenly goes where fewer labels are so far); for numeric
  labels, adjacent bins are then merged, lowest first, until each range holds ``needed`` labels
  counted by group (the bins after the last full range join it).
- **Seeded.** Within each stratum the groups are put in a random order drawn from the seed; each
  in turn goes to test while that brings test closer to its share of the stratum's labels, else
  to select on the same rule, else to fit.

Too few labels are refused before anything is judged, in one line that says how many each
stratum needs: ``MIN_PER_PART`` labels of each stratum in each part, so ``needed`` =
ceil(MIN_PER_PART / the smallest share).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..analysis.io import Metric
from ..analysis.scales import FAIL, PASS, bins_for
from ..errors import UserInputError
from ..transcripts.models import Transcript

__all__ = ["CONVERSATION_KEYS", "MIN_PER_PART", "PARTS", "Item", "Split", "group_of", "needed_per_stratum", "split_labels", "strata"]

#: metadata keys read as a conversation id, in this order
CONVERSATION_KEYS = ("conversation_id", "conversation", "session_id", "thread_id")
#: labels of each stratum each part must hold at least
MIN_PER_PART = 5
PARTS = ("fit", "select", "test")
Part = Literal["fit", "select", "test"]


@dataclass(frozen=True)
class Item:
    """One labelled transcript: its group, its stratum, and the label (a number, or "pass"/"fail")."""

    transcript_id: str
    group: str
    stratum: int
    label: float | str


@dataclass(frozen=True)
class Split:
    """Which labelled transcripts fit, which select, which are the sealed test."""

    seed: int
    shares: tuple[float, float, float]
    #: each stratum's name ("pass", "fail", or a range of label values "0.0-0.3")
    strata: tuple[str, ...]
    parts: Mapping[str, tuple[str, ...]]
    #: part -> stratum name -> labels
    counts: Mapping[str, Mapping[str, int]]
    #: part -> groups
    groups: Mapping[str, int]
    #: how the groups were formed: "task", "conversation" or "transcript" -> groups of that kind
    grouped_by: Mapping[str, int] = field(default_factory=dict)

    @property
    def fit(self) -> tuple[str, ...]:
        return self.parts["fit"]

    @property
    def select(self) -> tuple[str, ...]:
        return self.parts["select"]

    @property
    def test(self) -> tuple[str, ...]:
        return self.parts["test"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shares": dict(zip(PARTS, self.shares, strict=True)),
            "strata": list(self.strata),
            "sizes": {p: len(self.parts[p]) for p in PARTS},
            "counts": {p: dict(self.counts[p]) for p in PARTS},
            "groups": dict(self.groups),
            "grouped_by": dict(self.grouped_by),
            "ids": {p: list(self.parts[p]) for p in PARTS},
        }


def group_of(transcript: Transcript) -> str:
    """The group a transcript belongs to: ``task:T``, ``conversation:C`` or ``transcript:ID``."""
    if transcript.task:
        return f"task:{transcript.task}"
    metadata = transcript.metadata or {}
    for key in CONVERSATION_KEYS:
        value = metadata.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return f"conversation:{value}"
    return f"transcript:{transcript.id}"


def needed_per_stratum(shares: Sequence[float]) -> int:
    """Labels a stratum needs so that each part can hold ``MIN_PER_PART`` of them."""
    return math.ceil(MIN_PER_PART / min(shares) - 1e-9)


def _shares_text(shares: Sequence[float]) -> str:
    return "/".join(f"{s:g}" for s in shares)


def _group_codes(own: Mapping[str, int], groups: Mapping[str, str]) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each group's members, and its code: the one most of its labels have; a group split evenly
    takes, of its leading codes, the one with fewer labels so far (so mixed tasks do not all fall
    on one side)."""
    members: dict[str, list[str]] = {}
    for t in own:
        members.setdefault(groups[t], []).append(t)
    code_of: dict[str, int] = {}
    labels_in: Counter[int] = Counter()
    tied: list[tuple[str, list[int]]] = []
    for group in sorted(members):
        tally = Counter(own[t] for t in members[group])
        top = max(tally.values())
        leaders = sorted(c for c, n in tally.items() if n == top)
        if len(leaders) > 1:
            tied.append((group, leaders))
            continue
        code_of[group] = leaders[0]
        labels_in[leaders[0]] += len(members[group])
    for group, leaders in tied:
        code_of[group] = min(leaders, key=lambda c: (labels_in[c], c))
        labels_in[code_of[group]] += len(members[group])
    return members, code_of


def _ranges(per_bin: Sequence[int], needed: int, values: Sequence[float]) -> tuple[list[int], tuple[str, ...]]:
    """Adjacent bins merged, lowest first, into ranges of at least ``needed`` labels (the bins
    after the last full range join it): each bin's range, and the ranges' names."""
    range_of: list[int] = []
    edges: list[tuple[int, int]] = []
    filled, start = 0, 0
    for index, count in enumerate(per_bin):
        filled += count
        range_of.append(len(edges))
        if filled >= needed:
            edges.append((start, index))
            filled, start = 0, index + 1
    if not edges:
        return [0] * len(per_bin), ()
    range_of = [min(r, len(edges) - 1) for r in range_of]
    edges[-1] = (edges[-1][0], len(per_bin) - 1)
    return range_of, tuple(f"{values[a]:g}" if a == b else f"{values[a]:g}-{values[b]:g}" for a, b in edges)


def strata(
    labels: Mapping[str, float | str], groups: Mapping[str, str], kind: str, metric: Metric, shares: Sequence[float], where: str
) -> tuple[dict[str, int], tuple[str, ...]]:
    """Each labelled transcript's stratum (that of its group) and the strata's names; refuses, in one
    line naming ``where`` (the labels file and rubric), labels too few for every stratum to have
    ``needed_per_stratum`` labels, or at least one group for each part."""
    needed = needed_per_stratum(shares)
    ids = list(labels)
    tail = f"{MIN_PER_PART} of each in each of fit, select and test, at shares {_shares_text(shares)}"
    if kind == "pass_fail":
        names: tuple[str, ...] = (PASS, FAIL)
        own = {t: names.index(str(labels[t])) for t in ids}
    else:
        bins = bins_for(metric)
        codes = bins.codes(np.array([float(labels[t]) for t in ids], dtype=np.float64)) if ids else np.array([], dtype=np.int64)
        own = dict(zip(ids, codes.tolist(), strict=True))
    members, code_of = _group_codes(own, groups)
    if kind == "pass_fail":
        stratum_of_group = code_of
    else:
        per_bin = [0] * bins.count
        for group, code in code_of.items():
            per_bin[code] += len(members[group])
        range_of, names = _ranges(per_bin, needed, bins.values())
        if len(names) < 2:
            raise UserInputError(
                f"{where}: {len(ids)} labels: alignment needs at least {needed} labels in each of at least 2 ranges of the label's value "
                f"({tail}), counting each group (task or conversation) at the value most of its labels have; "
                + (f"{2 * needed - len(ids)} more" if len(ids) < 2 * needed else "here one range holds nearly all of them")
            )
        stratum_of_group = {group: range_of[code] for group, code in code_of.items()}
    stratum_of = {t: stratum_of_group[groups[t]] for t in ids}
    labels_in = Counter(stratum_of.values())
    short = [(names[s], labels_in.get(s, 0)) for s in range(len(names)) if labels_in.get(s, 0) < needed]
    if short:  # pass/fail only: numeric ranges are made full
        have = ", ".join(f"{labels_in.get(s, 0)} {names[s]}" for s in range(len(names)))
        own_counts = Counter(own.values())
        if any(own_counts.get(s, 0) != labels_in.get(s, 0) for s in range(len(names))):
            have += ", counting each group (task or conversation) as the class most of its labels have; one by one "
            have += ", ".join(f"{own_counts.get(s, 0)} {names[s]}" for s in range(len(names)))
        more = ", ".join(f"{needed - n} more {name}" for name, n in short)
        raise UserInputError(f"{where}: {len(ids)} labels ({have}): alignment needs at least {needed} labels of each class ({tail}); {more}")
    groups_in = Counter(stratum_of_group.values())
    few = [s for s in range(len(names)) if groups_in.get(s, 0) < len(PARTS)]
    if few:
        raise UserInputError(
            f"{where}: the {names[few[0]]} labels fall in {groups_in.get(few[0], 0)} group(s) (one task or conversation each): "
            f"the split needs at least {len(PARTS)} groups of each stratum, one for each of fit, select and test"
        )
    return stratum_of, names


def split_labels(items: Sequence[Item], strata_names: Sequence[str], shares: tuple[float, float, float], seed: int, where: str = "labels") -> Split:
    """Split ``items`` into fit, select and test (module docstring). ``shares`` are (fit, select,
    test) and sum to 1. Refuses a split that leaves a part without labels of some stratum (groups
    too large for the shares) in one line."""
    rng = np.random.default_rng(seed)
    by_group: dict[str, list[Item]] = {}
    for item in items:
        by_group.setdefault(item.group, []).append(item)
    parts: dict[str, list[str]] = {p: [] for p in PARTS}
    counts: dict[str, dict[str, int]] = {p: {} for p in PARTS}
    group_counts: Counter[str] = Counter()
    for stratum, name in enumerate(strata_names):
        names = sorted(g for g, members in by_group.items() if members[0].stratum == stratum)
        order = [names[i] for i in rng.permutation(len(names))]
        total = sum(len(by_group[g]) for g in order)
        targets = {"test": shares[2] * total, "select": shares[1] * total}
        taken = {p: 0 for p in PARTS}
        for group in order:
            size = len(by_group[group])
            # a part takes a group while that brings it closer to its share (and always its first)
            part = next((p for p in ("test", "select") if taken[p] == 0 or taken[p] + size / 2 <= targets[p]), "fit")
            taken[part] += size
            group_counts[part] += 1
            parts[part].extend(i.transcript_id for i in by_group[group])
        for p in PARTS:
            counts[p][name] = taken[p]
        empty = [p for p in PARTS if taken[p] == 0]
        if empty:
            raise UserInputError(
                f"{where}: the {name} labels' groups are too large to give {empty[0]} any at shares {_shares_text(shares)}: "
                "more groups (tasks or conversations) are needed"
            )
    kinds = Counter(g.split(":", 1)[0] for g in by_group)
    return Split(
        seed=seed,
        shares=shares,
        strata=tuple(strata_names),
        parts={p: tuple(v) for p, v in parts.items()},
        counts=counts,
        groups=dict(group_counts),
        grouped_by=dict(kinds),
    )
