"""The "Human labels" section of the report: RUN_DIR/inference.json, written by ``harness infer``.

The report only shows what ``harness infer`` computed (the estimates are made in one place,
`harness.labels.infer`); it reads the file back through the type it was written from
(`harness.labels.schema.InferResult`), and notes when the file is older than the run's judgments
(the estimates would then describe an earlier run).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import UserInputError
from ..labels.schema import InferResult
from ..rows import judgments_path
from ..validation import first_problem

__all__ = ["INFERENCE_NAME", "read_inference"]

INFERENCE_NAME = "inference.json"


def read_inference(run_dir: Path) -> tuple[InferResult | None, list[str]]:
    """inference.json's content (None when the run has none) and the notes to show with it."""
    path = run_dir / INFERENCE_NAME
    if not path.is_file():
        return None, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{path}: not valid JSON ({getattr(exc, 'msg', exc)}); rerun harness infer") from None
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), list) or "alpha" not in data:
        raise UserInputError(f"{path}: metrics: not an inference.json written by harness infer; rerun harness infer")
    try:
        result = InferResult.model_validate(data)
    except ValidationError as exc:
        problem = first_problem(exc, whole="document")
        raise UserInputError(f"{path}: {problem}: not an inference.json written by harness infer; rerun harness infer") from None
    notes = []
    judgments = judgments_path(run_dir)
    if judgments.is_file() and judgments.stat().st_mtime > path.stat().st_mtime:
        notes.append(f"{path} is older than the run's judgments: the human-label estimates may describe an earlier run; rerun harness infer")
    return result, notes
