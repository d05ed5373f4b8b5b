"""The run report: ``build_report`` writes RUN_DIR/report.html; ``explain`` prints one transcript.

- ``run``: opening a run directory, and finding the transcripts' text in its input file;
- ``breakdown``: a transcript's composites as arithmetic, checked against results.jsonl;
- ``aggregate``: histograms and judge health, the aggregates summary.json does not hold;
- ``builder``: the page (template.html, report.css, report.js, vendor/ Chart.js, the data);
- ``explaining``: the same breakdown as terminal text (``explain``).

The names are imported when first asked for: the viewer reads ``run`` and ``chat`` at start-up,
and the builder (numpy, the planning package) only when a page is built. No submodule shares a
name with a function the package exports (the module ``explaining`` holds ``explain``), so an
imported submodule never shadows one of these names.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .builder import ReportResult, build_report
    from .explaining import explain
    from .run import RunView, open_run

#: where each exported name lives
_WHERE = {"ReportResult": "builder", "build_report": "builder", "explain": "explaining", "RunView": "run", "open_run": "run"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ReportResult", "RunView", "build_report", "explain", "open_run"]
