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
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..providers import same_lineage
from ..stats.agreement import KappaWeights, kappa_from_matrix
from ..stats.confusion import confusion_matrix
from ..stats.krippendorff import krippendorff_alpha
from .classes import Classes
from .panel import Panel

__all__ = ["alpha_section", "human_agreement", "pair_kappas", "self_preference"]

#: bootstrap resamples of the agreement with humans (fewer than ``harness agreement``'s 2,000: a
#: run's summary is written at the end of every run)
RESAMPLES = 1000


def _alpha(ratings: np.ndarray, level: Any) -> dict[str, Any]:
    found = krippendorff_alpha(ratings, level)
    return {"value": found.value, "pairable_values": found.pairable, **({"note": found.problem} if found.problem else {})}


def alpha_section(votes: np.ndarray, classes: Classes, members: Sequence[str]) -> dict[str, Any]:
    """Krippendorff's alpha of the members' votes (transcripts x members), and without each member."""
    levels: list[tuple[str, np.ndarray]]
    if classes.numeric:
        codes = classes.codes(votes).astype(np.float64)
        levels = [("interval", votes), ("ordinal", np.where(codes >= 0, codes, np.nan))]
    else:
        levels = [("nominal", votes)]
    out: dict[str, Any] = {level: _alpha(data.T, level) for level, data in levels}
    level, data = levels[-1]
    if len(members) > 2:
        out["alpha_without"] = {
            "level": level,
            **{m: krippendorff_alpha(np.delete(data, i, axis=1).T, level).value for i, m in enumerate(members)},  # type: ignore[arg-type]
        }
    return out


def pair_kappas(votes: np.ndarray, classes: Classes, members: Sequence[str]) -> list[dict[str, Any]]:
    """Cohen's kappa of every two members (quadratic-weighted on the bins of a numeric rubric)."""
    codes = classes.codes(votes)
    weights: KappaWeights = "quadratic" if classes.numeric else None
    pairs = []
    for (i, a), (j, b) in itertools.combinations(enumerate(members), 2):
        both = (codes[:, i] >= 0) & (codes[:, j] >= 0)
        entry: dict[str, Any] = {"members": [a, b], "n": int(both.sum()), "weights": weights, "kappa": None}
        if both.any():
            matrix = confusion_matrix(codes[both, i], codes[both, j], labels=range(classes.count))
            value, problem = kappa_from_matrix(matrix, weights)
            entry["kappa"] = None if problem else value
            if problem:
                entry["note"] = problem.replace("; reported as 0.0", "")
        pairs.append(entry)
    return pairs


def human_agreement(
    labels: Mapping[str, float | str], ids: Sequence[str], columns: Mapping[str, np.ndarray], classes: Classes, in_sample: Sequence[str] = ()
) -> dict[str, Any]:
    """Each column's (a member's or the jury's scores, by transcript) agreement with the labels of
    the transcripts it scored, as ``harness agreement`` gives it."""
    from ..analysis.io import Metric
    from ..analysis.label_agreement import numeric_agreement, pass_fail_agreement
    from ..analysis.scales import pass_fail_labels, threshold_for

    metric = Metric(classes.rubric, "rubric", (classes.lo, classes.hi), classes.direction)
    threshold = threshold_for(metric, {})
    position = {t: i for i, t in enumerate(ids)}
    labelled = [(position[t], value) for t, value in labels.items() if t in position]
    out: dict[str, Any] = {"labels_in_run": len(labelled), "threshold": threshold}
    for name, scores in columns.items():
        pairs = [(value, float(scores[i])) for i, value in labelled if not np.isnan(scores[i])]
        ref = [p[0] for p in pairs]
        judged = np.array([p[1] for p in pairs], dtype=np.float64)
        entry: dict[str, Any] = {"n": len(pairs), **({"in_sample": True} if name in in_sample else {})}
        if pairs and isinstance(ref[0], str):
            found = pass_fail_agreement([str(r) for r in ref], pass_fail_labels(judged, metric, threshold), RESAMPLES)
            entry["pass_fail"] = found.as_json() if found else None
        elif pairs:
            section = numeric_agreement(np.asarray(ref, dtype=np.float64), judged, metric, threshold, RESAMPLES).as_json()
            entry.update({k: section[k] for k in ("spearman", "mae", "weighted_kappa", "pass_fail")})
        out[name] = entry
    return out


def self_preference(panel: Panel, agents: Counter[str | None]) -> list[dict[str, Any]]:
    """The members of the lineage of the agents judged, and on how many transcripts."""
    flags = []
    for member, model in zip(panel.members, panel.models, strict=True):
        shared = [
            (agent, n, line) for agent, n in sorted(agents.items(), key=lambda kv: str(kv[0])) if agent and (line := same_lineage(model, agent))
        ]
        if shared:
            flags.append(
                {
                    "member": member,
                    "model": model,
                    "lineage": shared[0][2].name,
                    "agent_models": [agent for agent, _, _ in shared],
                    "transcripts": sum(n for _, n, _ in shared),
                }
            )
    return flags
