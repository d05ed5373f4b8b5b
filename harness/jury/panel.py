"""A run's juries, checked before anything is sent: each jury's members, method and human labels.

``prepare`` turns the config's ``[[juries]]`` into :class:`Panel` s for the rubrics of a run: the
labels file is read and checked as ``harness agreement`` reads one (every problem is one line
naming the file, line and field), and a jury that cannot judge a rubric (a mean of labels, weights
with no labels for it) is refused in one line naming the jury and the rubric. summary.json
records each panel (``Panel.record``) so that ``harness merge`` can judge the merged run's juries
again (``Panel.recorded``): a labels file that changed since is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import JudgeConfig, JuryConfig
from ..errors import ConfigError, UserInputError
from .classes import Classes

__all__ = ["HumanLabels", "Panel", "prepare"]

#: methods that average scores: they cannot judge a label rubric
SCORE_METHODS = ("mean", "median")


@dataclass(frozen=True, slots=True)
class HumanLabels:
    """A labels file as a jury uses it: per rubric, transcript id -> a number on the rubric's
    scale or "pass"/"fail"; with the file's SHA-256 (its provenance, recorded in summary.json)."""

    path: Path
    sha256: str
    by_rubric: Mapping[str, Mapping[str, float | str]]

    def of(self, rubric: str) -> Mapping[str, float | str]:
        return self.by_rubric.get(rubric, {})


@dataclass(frozen=True, slots=True)
class Panel:
    """One jury of a run: its members (names and models, in the config's order) and how it decides."""

    name: str
    members: tuple[str, ...]
    models: tuple[str, ...]
    method: str
    sequential: bool = False
    anchored: bool = False
    labels: HumanLabels | None = field(default=None, compare=False)

    @property
    def uses_labels(self) -> bool:
        """The labels decide verdicts (weights, anchors), not only the report."""
        return self.labels is not None and (self.method == "weighted" or self.anchored)

    def describe(self) -> str:
        """``majority of a, b, c`` (``, sequential``): the jury as the run's judge models name it."""
        return f"{self.method} of {', '.join(self.members)}" + (", sequential" if self.sequential else "") + (", anchored" if self.anchored else "")

    def record(self) -> dict[str, Any]:
        """What summary.json records of the panel (``judge_models``), enough to judge again."""
        return {
            "members": list(self.members),
            "member_models": list(self.models),
            "method": self.method,
            "sequential": self.sequential,
            "anchored": self.anchored,
            "labels": None if self.labels is None else {"path": str(self.labels.path.resolve()), "sha256": self.labels.sha256},
        }

    @classmethod
    def recorded(cls, name: str, record: Mapping[str, Any], classes: Sequence[Classes], where: str) -> Panel:
        """The panel summary.json recorded; its labels file read again and checked unchanged."""
        labels = None
        source = record.get("labels")
        if source is not None:
            path = Path(source["path"])
            labels = read_human_labels(path, classes, where=f"jury {name!r}", others=_Anything())
            if labels.sha256 != source["sha256"]:
                raise UserInputError(f"{where}: jury {name!r}: its labels file {path} changed since the run; judge the run again")
        return cls(
            name,
            tuple(record["members"]),
            tuple(record.get("member_models") or record["members"]),
            record["method"],
            bool(record.get("sequential")),
            bool(record.get("anchored")),
            labels,
        )


class _Anything:
    """Every rubric: a recorded labels file, checked when the run read it, is read for its run's rubrics."""

    def __contains__(self, item: object) -> bool:
        return True


def read_human_labels(path: Path, classes: Sequence[Classes], where: str, others: Container[str] = ()) -> HumanLabels:
    """A labels file read and checked against the run's rubrics (``analysis.io.parse_labels``);
    rows of ``others`` (rubrics this run does not judge) are passed over."""
    from ..analysis.io import Metric, parse_labels

    metrics = {c.rubric: Metric(c.rubric, "rubric", (c.lo, c.hi), c.direction, labels=c.labels) for c in classes}
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such labels file ({where})") from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the labels ({where}): {exc.strerror or exc}") from None
    labels = parse_labels(path, metrics, f"this run ({where})", others)
    labels.refuse_categorical(
        "a jury", "weighs or anchors its judges by their scores; a categorical rubric's jury takes the majority label, without labels"
    )
    by_rubric = {name: {label.transcript_id: label.value for label in rows} for name, rows in labels.by_metric.items()}
    return HumanLabels(path, hashlib.sha256(data).hexdigest(), by_rubric)


def prepare(
    juries: Sequence[JuryConfig], judges: Sequence[JudgeConfig], rubrics: Sequence[Any], source: str, others: Container[str] = ()
) -> list[Panel]:
    """The panels of a run judging ``rubrics`` (``Rubric`` s), checked; ``source`` names the config;
    labels of ``others`` (known rubrics the run does not judge) are passed over."""
    if not juries:
        return []
    models = {j.name: j.model for j in judges}
    classes = [Classes.of(r) for r in rubrics]
    read: dict[Path, HumanLabels] = {}
    panels = []
    for index, jury in enumerate(juries):
        where = f"{source}: juries[{index}]"
        labels = None
        if jury.labels is not None:
            if jury.labels not in read:
                read[jury.labels] = read_human_labels(jury.labels, classes, where=f"jury {jury.name!r}", others=others)
            labels = read[jury.labels]
        for rubric in classes:
            if not rubric.numeric and jury.method in SCORE_METHODS:
                raise ConfigError(
                    f"{where}.method: jury {jury.name!r} takes the {jury.method} of scores; rubric {rubric.rubric!r} gives labels (use majority or dawid_skene)"
                )
            needs_labels = jury.method == "weighted" or jury.anchored
            if needs_labels and not rubric.numeric:
                raise ConfigError(
                    f"{where}.method: jury {jury.name!r} learns from human labels, which are read for scored rubrics only; "
                    f"rubric {rubric.rubric!r} gives labels (use majority or dawid_skene)"
                )
            if needs_labels and (labels is None or not labels.of(rubric.rubric)):
                what = "its weights are measured on them" if jury.method == "weighted" else "it is anchored on them"
                held = f"{jury.labels} has none" if jury.labels is not None else "no labels file is given (labels = ..., or --jury-labels)"
                raise ConfigError(
                    f"{where}.labels: jury {jury.name!r} needs human labels of rubric {rubric.rubric!r} ({what}): {held} "
                    "(label it, or choose the labelled rubrics with --rubric)"
                )
        panels.append(
            Panel(jury.name, tuple(jury.members), tuple(models[m] for m in jury.members), jury.method, jury.sequential, jury.anchored, labels)
        )
    return panels
