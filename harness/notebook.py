"""``harness.evaluate``: the whole run from a notebook, with data in and a results object out.

The notebook path is the CLI's path: the data becomes a transcripts file in the run directory,
:func:`harness.run_evaluation` judges it with the same plan, cache and keys as ``harness run``, and
:class:`Results` reads back the files that run wrote. A notebook and the CLI therefore share
judgments, and a notebook's run directory is one that ``harness report`` or ``harness compare``
reads.

``evaluate`` works inside Jupyter's running event loop (it runs the evaluation on a thread of its
own there); ``aevaluate`` is the coroutine for code that is already async.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import JudgeConfig
from .errors import HarnessError, UserInputError
from .exit_codes import exit_code_for
from .planning import Judgment, RunOptions
from .rows import JudgmentRow, ResultRow, iter_judgment_rows, iter_result_rows, judgments_path, results_path
from .runner import run_evaluation

if TYPE_CHECKING:  # pragma: no cover - types only
    import pandas as pd

__all__ = ["EvaluationError", "Results", "aevaluate", "evaluate"]


class EvaluationError(HarnessError):
    """The run ended without results (bad input, bad config, a judge that cannot be made): the
    message is the line the CLI would print, ``exit_code`` the code it would exit with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(slots=True)
class Results:
    """What one evaluation wrote, read back: ``judgments`` (one typed row per transcript, rubric and
    judge, ``harness.rows.JudgmentRow``, as in judgments.jsonl), ``transcripts`` (one
    ``harness.rows.ResultRow`` per transcript, as in results.jsonl) and ``summary`` (summary.json)."""

    out: Path
    exit_code: int
    message: str
    summary: dict[str, Any]
    judgments: list[JudgmentRow] = field(repr=False)
    transcripts: list[ResultRow] = field(repr=False)

    def to_pandas(self, level: str = "judgment") -> pd.DataFrame:
        """A DataFrame with one row per judgment (``level="judgment"``) or per transcript
        (``level="transcript"``: a column per judge and rubric score, ``judge/rubric``, and per
        composite, plus the performance metrics)."""
        import pandas as pd

        if level == "judgment":
            return pd.DataFrame([j.as_dict() for j in self.judgments])
        if level != "transcript":
            raise ValueError(f"level must be 'judgment' or 'transcript', not {level!r}")
        rows = []
        for row in self.transcripts:
            flat: dict[str, Any] = {"transcript_id": row.transcript_id}
            for group in (row.scores, row.composites):
                for judge, values in group.items():
                    for name, value in values.items():
                        flat[f"{judge}/{name}"] = value
            for name, value in row.performance.as_dict().items():
                flat[name] = value
            rows.append(flat)
        return pd.DataFrame(rows)

    def report(self, path: str | Path | None = None) -> Report:
        """Write report.html (into the run directory unless ``path``) and return it; in Jupyter
        the returned object displays the page inline."""
        from .report import build_report

        result = build_report(self.out, out=path)
        return Report(result.path)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.message)}</pre><p>outputs in <code>{html.escape(str(self.out))}</code></p>"


@dataclass(frozen=True, slots=True)
class Report:
    """A written report.html: ``path``, and the page inline in Jupyter."""

    path: Path

    def _repr_html_(self) -> str:
        import html

        page = self.path.read_text(encoding="utf-8")
        # The page is a whole document with its own scripts and styles: an iframe keeps them apart
        # from the notebook's.
        return f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:640px;border:0"></iframe>'


def evaluate(data: Any, **options: Any) -> Results:
    """Judge ``data`` and return the :class:`Results`. See :func:`aevaluate` for the arguments.

    Inside a running event loop (Jupyter) the evaluation runs to completion on its own thread, so
    a notebook cell can call this directly."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aevaluate(data, **options))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(aevaluate(data, **options))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name="harness-evaluate")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: Results = box["value"]
    return result


async def aevaluate(
    data: Any,
    *,
    rubrics: Sequence[str] = (),
    judges: Sequence[JudgeConfig | Mapping[str, Any]] = (),
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    config: str | Path | None = None,
    prompts: Sequence[str | Path] = (),
    cache: str | Path | None = None,
    out: str | Path | None = None,
    offline: bool = False,
    refresh: bool = False,
    no_cache: bool = False,
    concurrency: int | None = None,
    limit: int | None = None,
    max_cost: float | None = None,
    progress: bool = True,
) -> Results:
    """Judge ``data``: a path to a transcripts or trace file, a list of transcript dicts or
    :class:`~harness.Transcript` objects, or a pandas DataFrame with one transcript per row.

    ``judges`` are ``[[judges]]`` entries (dicts or :class:`~harness.JudgeConfig`), added to those of
    ``config``; ``model``/``base_url``/``api_key_env`` make one ad-hoc judge as on the command line;
    with none of them the bundled local judge runs. ``cache`` is the CLI's (``cache/judgments.sqlite``
    by default), so the CLI and a notebook share judgments. ``out`` is the run directory (a new
    temporary directory when absent). Raises :class:`EvaluationError` when the run cannot start."""
    run_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="harness-run-"))
    try:
        source = _input_path(data, run_dir)
    except HarnessError as exc:
        raise EvaluationError(str(exc), exit_code_for(exc)) from None
    options = RunOptions(
        input=source,
        out=run_dir,
        config=Path(config) if config is not None else None,
        rubrics=list(rubrics),
        prompts=[Path(p) for p in prompts],
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        judges=[j if isinstance(j, JudgeConfig) else dict(j) for j in judges],
        concurrency=concurrency,
        cache=cache,
        refresh=refresh,
        no_cache=no_cache,
        offline=offline,
        limit=limit,
        max_cost=max_cost,
        progress=progress,
    )
    bar = _ProgressBar() if progress else None
    try:
        outcome = await run_evaluation(options, on_start=bar.start if bar else None, on_judgment=bar.advance if bar else None)
    except HarnessError as exc:
        raise EvaluationError(str(exc), exit_code_for(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    return _read_results(run_dir, outcome.exit_code, outcome.message, outcome.summary.as_json())


def _input_path(data: Any, run_dir: Path) -> Path:
    """The file the run reads: ``data`` itself when it is a path, else ``data`` written as
    run_dir/input.jsonl (kept, so the report can show the transcripts' text)."""
    if isinstance(data, str | Path):
        return Path(data)
    records = _records(data)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "input.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for index, record in enumerate(records):
            try:
                fh.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
            except (TypeError, ValueError) as exc:
                raise UserInputError(f"data: record {index}: cannot be written as JSON ({exc})") from None
    return path


def _records(data: Any) -> Iterable[dict[str, Any]]:
    if _is_dataframe(data):
        # Missing cells (NaN/None) are left out, so an absent field stays absent, never NaN.
        return ({k: v for k, v in row.items() if not _missing(v)} for row in data.to_dict(orient="records"))
    if isinstance(data, Mapping):
        raise UserInputError("data: expected a list of transcripts, a DataFrame or a path, not one dict (wrap it in a list)")
    if not isinstance(data, Iterable):
        raise UserInputError(f"data: expected a list of transcripts, a DataFrame or a path, not {type(data).__name__}")
    return (_record(item, index) for index, item in enumerate(data))


def _record(item: Any, index: int) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)  # a Transcript (pydantic)
    if callable(dump):
        return dict(dump(mode="json", exclude_none=True))
    raise UserInputError(f"data: record {index}: expected a dict or a Transcript, not {type(item).__name__}")


def _is_dataframe(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "to_dict")


def _missing(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, float) and math.isnan(value)


def _read_results(run_dir: Path, exit_code: int, message: str, summary: dict[str, Any]) -> Results:
    judgments, results = judgments_path(run_dir), results_path(run_dir)
    return Results(
        run_dir,
        exit_code,
        message,
        summary,
        list(iter_judgment_rows(judgments)) if judgments.exists() else [],
        list(iter_result_rows(results)) if results.exists() else [],
    )


class _ProgressBar:
    """tqdm's bar: a widget in Jupyter (``tqdm.auto``), the text bar in a terminal; nothing when
    tqdm is not installed."""

    def __init__(self) -> None:
        self._bar: Any = None

    def start(self, total: int) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, unit="judgment", desc="judging")

    def advance(self, judgment: Judgment) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
