"""The run report: ``build_report`` writes RUN_DIR/report.html; ``explain`` prints one transcript.

- ``run``: opening a run directory, and finding the transcripts' text in its input file;
- ``breakdown``: a transcript's composites as arithmetic, checked against results.jsonl;
- ``aggregate``: histograms and judge health, the aggregates summary.json does not hold;
- ``builder``: the page (template.html, report.css, report.js, vendor/ Chart.js, the data);
- ``explain``: the same breakdown as terminal text.
"""

from .builder import ReportResult, build_report
from .explain import explain
from .run import RunView, open_run

__all__ = ["ReportResult", "RunView", "build_report", "explain", "open_run"]
