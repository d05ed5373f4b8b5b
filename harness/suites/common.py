"""What the suites share: reading their input files, the judged step, and the hardware record.

The judged step is the one way a suite calls a judge: write transcript records to
``OUT/judge_inputs.jsonl``, run :func:`harness.runner.run_evaluation` on them into
``OUT/judgments/`` and read the judgments back. So the cache, ``--offline`` replay, cost accounting
and ``harness estimate OUT/judge_inputs.jsonl`` work for suites exactly as for ``harness run``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import UserInputError
from ..jsonlines import iter_json_objects, line_error
from ..outputs.files import atomic_write_text, dumps
from ..planning import JudgeOptions, RunOptions
from ..rows import iter_judgment_rows, judgments_path
from ..rubrics.rubric import builtin_prompts_dir
from ..runner.session import RunOutcome, run_evaluation
from ..validation import first_problem


def suite_prompts_dir(suite: str) -> Path:
    """``prompts/<suite>/``: the suite's rubrics, kept out of ``prompts/`` so ``harness run``'s
    default rubric set is unchanged."""
    return builtin_prompts_dir() / suite


def read_jsonl_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a bad line, or a number that is not finite
    (JSON's ``Infinity``/``NaN`` extension), is a one-line error naming the file, line and field."""
    rows = list(iter_json_objects(path))
    if not rows:
        raise UserInputError(f"{path}: no records")
    for line, row in rows:
        where = _first_non_finite(row)
        if where is not None:
            raise line_error(path, line, where[0], f"{where[1]} is not a finite number")
    return rows


class _Constant(str):
    """JSON's ``Infinity``, ``-Infinity`` or ``NaN`` as parsed, so its place can be found."""


_CONSTANT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _first_non_finite(value: Any, path: str = "") -> tuple[str, str] | None:
    """(dotted field path, shown value) of the first non-finite number in document order, or None."""
    if isinstance(value, _Constant) or (isinstance(value, float) and not math.isfinite(value)):
        return path or "<value>", str(value) if isinstance(value, _Constant) else json.dumps(value)
    if isinstance(value, dict):
        items: Iterable[tuple[str, Any]] = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub, item in items:
        found = _first_non_finite(item, sub)
        if found is not None:
            return found
    return None


def read_json(path: Path) -> Any:
    """One JSON document. JSON's ``Infinity``/``NaN`` extension is refused at once, naming the file,
    line and field: a price or latency of Infinity would otherwise only fail when the results are written."""
    try:
        text = path.read_text(encoding="utf-8-sig")
        value = json.loads(text, parse_constant=_Constant)
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{path}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    except RecursionError:
        raise UserInputError(f"{path}: not valid JSON (nested too deeply)") from None
    except IsADirectoryError:
        raise UserInputError(f"{path}: is a directory, not a file") from None
    found = _first_non_finite(value)
    if found is not None:
        # Dicts keep document order, so the first constant found is the first one in the text.
        first = next(m for m in _CONSTANT_OR_STRING.finditer(text) if m.group(1))
        raise line_error(path, text.count("\n", 0, first.start()) + 1, found[0], f"{found[1]} is not a finite number")
    return value


def pydantic_problem(exc: ValidationError) -> str:
    """``field: problem`` from a pydantic ValidationError's first error."""
    return str(first_problem(exc))


def write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, dumps(value, indent=2) + "\n")


def hardware_record() -> dict[str, Any]:
    """The machine that computed the result (seed 001, Implementation notes 2: hardware logging)."""
    memory_mb: float | None = None
    try:
        memory_mb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20, 1)
    except (ValueError, OSError, AttributeError):
        pass  # not every platform exposes physical memory through sysconf
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "memory_mb": memory_mb,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
    }


@dataclass(frozen=True, slots=True)
class JudgeRun:
    """How a suite's judged step ended: its exit code and closing message."""

    exit_code: int
    message: str


@dataclass(slots=True)
class Judged:
    """The judged step's outcome: every judgment row, and the run's own outcome."""

    judgments: list[dict[str, Any]]
    outcome: RunOutcome

    @property
    def run(self) -> JudgeRun:
        return JudgeRun(self.outcome.exit_code, self.outcome.message)

    def summary(self) -> dict[str, Any]:
        """The judged step as a suite's results report it: exit code, message, judgment counts and cost."""
        return {
            "exit_code": self.outcome.exit_code,
            "message": self.outcome.message,
            "judgments": self.outcome.summary.judgments,
            "cost_usd": self.outcome.summary.cost_usd,
        }


def judge_records(
    records: Iterable[Mapping[str, Any]],
    rubrics: list[str],
    out: Path,
    judge: JudgeOptions,
    suite: str,
) -> Judged:
    """Write ``records`` to ``out/judge_inputs.jsonl`` and judge them with ``rubrics`` into
    ``out/judgments/``. The rubrics are looked up in ``prompts/<suite>/`` then ``judge.prompts``."""
    import asyncio

    out.mkdir(parents=True, exist_ok=True)
    path = out / "judge_inputs.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(dumps(record) + "\n")
    suite_prompts = [suite_prompts_dir(suite)] if suite_prompts_dir(suite).is_dir() else []
    options = RunOptions.from_judge(
        judge, input=path, out=out / "judgments", rubrics=rubrics, prompts=[*suite_prompts, *judge.prompts], progress=False
    )
    outcome = asyncio.run(run_evaluation(options))
    rows = [row.as_dict() for row in iter_judgment_rows(judgments_path(out / "judgments"))]
    return Judged(rows, outcome)
