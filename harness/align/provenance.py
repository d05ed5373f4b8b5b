"""An aligned rubric's provenance, and the one thing it forbids: correcting the aligned judge with
the labels that made it.

An aligned rubric keeps its name (so labels of that rubric still apply to it) and gets a version
``<base version>-aligned-<8 hex digits of its content>``: a new cache key, so no judgment made
with another rubric is ever reused for it. Beside its file ``NAME.md``, ``NAME.align.json``
records where it came from: the labels file and its sha256, the seed, the split (its sizes and
every fit, select and test transcript id) and the figures measured on the test set.

PPI++'s interval (``harness infer``) is valid only when the labelled transcripts are independent of
the predictor. The fit labels built the aligned judge and the select labels chose it, so on those
transcripts its errors are smaller than anywhere else; counted as labels they would shrink the
correction and the interval would miss. `fitted_transcripts` tells ``harness infer`` which
transcripts those are, for every metric of a run judged with an aligned rubric: infer leaves
them out of the labelled sample *and* of the population, so what remains (the test labels, any
fresh labels, every unlabelled transcript) is again a random sample of what it estimates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..rubrics.rubric import Rubric, rubric_text

__all__ = ["ALIGN_FORMAT", "Provenance", "aligned_version", "fitted_transcripts", "is_aligned", "read_provenance", "sidecar_of"]

ALIGN_FORMAT = "harness-align/1"
_SUFFIX = re.compile(r"-aligned-[0-9a-f]{8}$")


def aligned_version(base_version: str, rubric: Rubric) -> str:
    """``<base>-aligned-<hash>``: the hash covers the rubric file but for its version and
    description, so two different candidates never share a version (nor a cache key)."""
    base = _SUFFIX.sub("", base_version)
    digest = hashlib.sha256(rubric_text(replace(rubric, version="", description="")).encode()).hexdigest()
    return f"{base}-aligned-{digest[:8]}"


def is_aligned(version: str) -> bool:
    """Whether a rubric version is one ``harness align`` wrote."""
    return _SUFFIX.search(version) is not None


def sidecar_of(rubric_file: Path) -> Path:
    """``NAME.align.json`` beside ``NAME.md``."""
    return rubric_file.with_name(f"{rubric_file.stem}.align.json")


@dataclass(frozen=True)
class Provenance:
    """What ``NAME.align.json`` records that a later command needs."""

    path: Path
    rubric: str
    version: str
    labels_sha256: str
    #: the transcripts whose labels fitted or chose the rubric
    fitted: frozenset[str]
    test: tuple[str, ...]


def _ids(path: Path, data: Mapping[str, Any], name: str) -> list[str]:
    value = data.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserInputError(f"{path}: {name}: expected a list of transcript ids")
    return value


def read_provenance(path: Path) -> Provenance:
    """Read ``NAME.align.json``; a file that is not one is a one-line error naming it and the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserInputError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != ALIGN_FORMAT:
        raise UserInputError(f"{path}: format: not a provenance file of harness align ({ALIGN_FORMAT})")
    for name in ("rubric", "version", "labels_sha256"):
        if not isinstance(data.get(name), str):
            raise UserInputError(f"{path}: {name}: missing or not text")
    fitted = frozenset(_ids(path, data, "fit_ids")) | frozenset(_ids(path, data, "select_ids"))
    return Provenance(path, data["rubric"], data["version"], data["labels_sha256"], fitted, tuple(_ids(path, data, "test_ids")))


def _find(name: str, version: str, prompts: Sequence[str | Path]) -> Provenance | None:
    for folder in reversed([Path(p) for p in prompts]):  # a later directory wins, as for rubrics
        path = folder / f"{name}.align.json"
        if path.is_file():
            found = read_provenance(path)
            if found.rubric == name and found.version == version:
                return found
    return None


def fitted_transcripts(
    summary_path: Path, rubric_versions: Mapping[str, str], composite_weights: Mapping[str, Iterable[str]], prompts: Sequence[str | Path]
) -> dict[str, Provenance]:
    """Metric name -> the provenance of the aligned rubric it was judged with (a composite takes
    those of the aligned rubrics it weighs; the first of them when there are several, all their
    fitted transcripts joined). A run judged with an aligned rubric whose provenance is not in
    ``prompts`` is refused in one line: without it, the labels that made the judge cannot be told."""
    found: dict[str, Provenance] = {}
    for name, version in rubric_versions.items():
        if not is_aligned(str(version)):
            continue
        provenance = _find(name, str(version), prompts)
        if provenance is None:
            raise UserInputError(
                f"{summary_path}: rubric_versions.{name}: {version} is a rubric aligned by harness align, and its provenance "
                f"({name}.align.json, written beside the rubric) is in no --prompts directory: pass --prompts with the folder "
                "harness align wrote, so that the labels that fitted or chose this judge are not used to correct it"
            )
        found[name] = provenance
    for composite, weights in composite_weights.items():
        parts = [found[r] for r in weights if r in found]
        if parts:
            found[composite] = replace(parts[0], fitted=frozenset().union(*(p.fitted for p in parts)))
    return found
