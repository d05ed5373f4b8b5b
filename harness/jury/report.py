"""What summary.json says about a jury: how its members agree with the humans and with each other,
and which of them may favour the agent they judge.

Per rubric:

- ``alpha``: Krippendorff's alpha of the members (``stats.krippendorff``): interval on the scores
  and ordinal on their bins for a numeric rubric, nominal for a label rubric; ``alpha_without``:
  the panel's alpha without each member (a member whose absence raises it disagrees with the rest);
- ``pairs``: Cohen's kappa of every two members on the transcripts both scored, quadratic-weighted
  on the bins for a numeric rubric (``stats.agreement``);
- ``humans`` (with labels): each member's, and the jury's, agreement with the human labels as
  ``harness agreement`` measures it (``analysis.label_agreement``). A jury that learned from
  those labels (weights, anchors) is marked ``in_sample``: its figure is not a fair test of it.

``self_preference`` lists the members of the same lineage as the agent whose answers they judge
(``providers.same_lineage``; the agent's model from the transcript's ``metadata.agent_model``
or ``metadata.model``), with the number of such transcripts.

Each section is a typed value whose ``as_json()`` is what summary.json holds, byte for byte as
the dicts it replaced (``tests/test_jury_run.py`` pins the bytes): fields a section does not hold
are left unset and out. Two sections are keyed by member name beside fixed fields
(``alpha_without``, ``humans``); their members are the model's typed extras.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import ConfigDict

from ..analysis.agreement_schema import Correlation, PassFailAgreement, WeightedKappa
from ..metrics.schema import SelfPreferenceFlag
from ..providers import same_lineage
from ..schema import Part as _Part
from ..stats.agreement import KappaWeights, kappa_from_matrix
from ..stats.confusion import confusion_matrix
from ..stats.krippendorff import krippendorff_alpha
from .classes import Classes
from .panel import Panel

__all__ = [
    "AlphaSection",
    "AlphaWithout",
    "HumanAgreement",
    "HumanEntry",
    "MemberAlpha",
    "PairKappa",
    "alpha_section",
    "human_agreement",
    "pair_kappas",
    "self_preference",
]

#: bootstrap resamples of the agreement with humans (fewer than ``harness agreement``'s 2,000: a
#: run's summary is written at the end of every run)
RESAMPLES = 1000


class MemberAlpha(_Part):
    """Krippendorff's alpha at one level of measurement; ``note`` only when it is undefined."""

    value: float | None
    pairable_values: int
    note: str | None = None


class AlphaWithout(_Part):
    """The panel's alpha without each member, at ``level``: one extra field per member."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, float | None]

    level: str


class AlphaSection(_Part):
    """The members' alpha: interval and ordinal (a numeric rubric) or nominal (a label rubric)."""

    interval: MemberAlpha | None = None
    ordinal: MemberAlpha | None = None
    nominal: MemberAlpha | None = None
    alpha_without: AlphaWithout | None = None


class PairKappa(_Part):
    """Cohen's kappa of two members on the transcripts both scored; ``note`` only when undefined."""

    members: list[str]
    n: int
    weights: KappaWeights
    kappa: float | None
    note: str | None = None


class HumanEntry(_Part):
    """One member's (or the jury's) agreement with the labels, `harness.analysis.label_agreement`'s
    sections: ``pass_fail`` alone for pass/fail labels; none but ``n`` without pairs."""

    n: int
    in_sample: bool | None = None
    spearman: Correlation | None = None
    mae: float | None = None
    weighted_kappa: WeightedKappa | None = None
    pass_fail: PassFailAgreement | None = None


class HumanAgreement(_Part):
    """The labels in the run, the threshold, and one extra field per member (and the jury)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, HumanEntry]

    labels_in_run: int
    threshold: float


def _alpha(ratings: np.ndarray, level: Any) -> MemberAlpha:
    found = krippendorff_alpha(ratings, level)
    if found.problem:
        return MemberAlpha(value=found.value, pairable_values=found.pairable, note=found.problem)
    return MemberAlpha(value=found.value, pairable_values=found.pairable)


def alpha_section(votes: np.ndarray, classes: Classes, members: Sequence[str]) -> AlphaSection:
    """Krippendorff's alpha of the members' votes (transcripts x members), and without each member."""
    levels: list[tuple[str, np.ndarray]]
    if classes.numeric:
        codes = classes.codes(votes).astype(np.float64)
        levels = [("interval", votes), ("ordinal", np.where(codes >= 0, codes, np.nan))]
    else:
        levels = [("nominal", votes)]
    fields: dict[str, Any] = {level: _alpha(data.T, level) for level, data in levels}
    level, data = levels[-1]
    if len(members) > 2:
        without = {m: krippendorff_alpha(np.delete(data, i, axis=1).T, level).value for i, m in enumerate(members)}  # type: ignore[arg-type]
        fields["alpha_without"] = AlphaWithout.model_validate({"level": level, **without})
    return AlphaSection(**fields)


def pair_kappas(votes: np.ndarray, classes: Classes, members: Sequence[str]) -> list[PairKappa]:
    """Cohen's kappa of every two members (quadratic-weighted on the bins of a numeric rubric)."""
    codes = classes.codes(votes)
    weights: KappaWeights = "quadratic" if classes.numeric else None
    pairs = []
    for (i, a), (j, b) in itertools.combinations(enumerate(members), 2):
        both = (codes[:, i] >= 0) & (codes[:, j] >= 0)
        pair = PairKappa(members=[a, b], n=int(both.sum()), weights=weights, kappa=None)
        if both.any():
            matrix = confusion_matrix(codes[both, i], codes[both, j], labels=range(classes.count))
            value, problem = kappa_from_matrix(matrix, weights)
            if problem:
                pair = PairKappa(members=[a, b], n=pair.n, weights=weights, kappa=None, note=problem.replace("; reported as 0.0", ""))
            else:
                pair = PairKappa(members=[a, b], n=pair.n, weights=weights, kappa=value)
        pairs.append(pair)
    return pairs


def human_agreement(
    labels: Mapping[str, float | str], ids: Sequence[str], columns: Mapping[str, np.ndarray], classes: Classes, in_sample: Sequence[str] = ()
) -> HumanAgreement:
    """Each column's (a member's or the jury's scores, by transcript) agreement with the labels of
    the transcripts it scored, as ``harness agreement`` gives it."""
    from ..analysis.io import Metric
    from ..analysis.label_agreement import numeric_agreement, pass_fail_agreement
    from ..analysis.scales import pass_fail_labels, threshold_for

    metric = Metric(classes.rubric, "rubric", (classes.lo, classes.hi), classes.direction)
    threshold = threshold_for(metric, {})
    position = {t: i for i, t in enumerate(ids)}
    labelled = [(position[t], value) for t, value in labels.items() if t in position]
    entries: dict[str, HumanEntry] = {}
    for name, scores in columns.items():
        pairs = [(value, float(scores[i])) for i, value in labelled if not np.isnan(scores[i])]
        ref = [p[0] for p in pairs]
        judged = np.array([p[1] for p in pairs], dtype=np.float64)
        fields: dict[str, Any] = {"n": len(pairs), **({"in_sample": True} if name in in_sample else {})}
        if pairs and isinstance(ref[0], str):
            fields["pass_fail"] = pass_fail_agreement([str(r) for r in ref], pass_fail_labels(judged, metric, threshold), RESAMPLES)
        elif pairs:
            section = numeric_agreement(np.asarray(ref, dtype=np.float64), judged, metric, threshold, RESAMPLES)
            fields.update(spearman=section.spearman, mae=section.mae, weighted_kappa=section.weighted_kappa, pass_fail=section.pass_fail)
        entries[name] = HumanEntry(**fields)
    return HumanAgreement.model_validate({"labels_in_run": len(labelled), "threshold": threshold, **entries})


def self_preference(panel: Panel, agents: Counter[str | None]) -> list[SelfPreferenceFlag]:
    """The members of the lineage of the agents judged, and on how many transcripts."""
    flags = []
    for member, model in zip(panel.members, panel.models, strict=True):
        shared = [
            (agent, n, line) for agent, n in sorted(agents.items(), key=lambda kv: str(kv[0])) if agent and (line := same_lineage(model, agent))
        ]
        if shared:
            flags.append(
                SelfPreferenceFlag(
                    member=member,
                    model=model,
                    lineage=shared[0][2].name,
                    agent_models=[agent for agent, _, _ in shared],
                    transcripts=sum(n for _, n, _ in shared),
                )
            )
    return flags
