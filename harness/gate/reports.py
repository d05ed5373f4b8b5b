"""A gate's outcome as CI systems read it: JUnit XML, Markdown, and the terminal's lines.

JUnit XML: one ``<testsuite>`` with one ``<testcase>`` per check (``classname`` ``harness.gate.KIND``,
``name`` the check), a ``<failure>`` whose ``message`` holds the figures for each failed check,
and the figures in ``<system-out>`` for every check, passed ones too. GitHub's, GitLab's and
Jenkins' test reports read this shape. Markdown: a heading with the outcome, one table row per
check, the notes; GitHub Actions shows it on the run's page when it is appended to the file named
by ``$GITHUB_STEP_SUMMARY``. A run or baseline that is not complete (``gate/complete.py``) comes
first in each: a test case ``harness.gate.complete``, a table row, a line; a complete one adds nothing.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from ..errors import OutputError
from .decide import CheckResult, GateResult

__all__ = ["junit_xml", "markdown", "terminal_lines", "write_reports"]


def _details(check: CheckResult) -> str:
    return "\n".join([check.message, *check.notes])


def junit_xml(result: GateResult, seconds: float = 0.0, timestamp: float | None = None) -> str:
    """The JUnit XML document (UTF-8 text, with its declaration). An incomplete run or baseline is a
    test case of its own (``harness.gate.complete``), first: failed, or passed when accepted."""
    shown = result.incomplete
    tests, failures = len(result.checks) + len(shown), len(result.failed) + sum(1 for c in shown if not c.passed)
    counts = {"tests": str(tests), "failures": str(failures), "errors": "0"}
    # ``skipped`` is an attribute of <testsuite> only: the JUnit schema CI systems validate
    # against (Jenkins xUnit's junit-10.xsd, tests/fixtures/junit/) allows none on <testsuites>.
    suites = ET.Element("testsuites", {"name": "harness gate", **counts, "time": f"{seconds:.3f}"})
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(timestamp if timestamp is not None else time.time()))
    suite = ET.SubElement(
        suites, "testsuite", {"name": f"harness gate {result.run}", **counts, "skipped": "0", "time": f"{seconds:.3f}", "timestamp": when}
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("run", result.run), ("baseline", result.baseline or ""), ("alpha", f"{result.alpha:g}")):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    for whole in shown:
        case = ET.SubElement(suite, "testcase", {"classname": "harness.gate.complete", "name": whole.label, "time": "0"})
        if not whole.passed:
            ET.SubElement(case, "failure", {"message": whole.message, "type": "complete"}).text = whole.message
        ET.SubElement(case, "system-out").text = whole.message
    for check in result.checks:
        case = ET.SubElement(suite, "testcase", {"classname": f"harness.gate.{check.check.kind}", "name": check.check.label, "time": "0"})
        if not check.passed:
            failure = ET.SubElement(case, "failure", {"message": check.message, "type": check.check.kind})
            failure.text = _details(check)
        ET.SubElement(case, "system-out").text = _details(check)
    if result.notes:
        ET.SubElement(suite, "system-out").text = "\n".join(result.notes)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _outcome(result: GateResult) -> str:
    n = len(result.checks)
    checks = f"{n} check{'s' if n != 1 else ''}"
    refused = [c.role for c in result.completeness if not c.passed]
    accepted = [c for c in result.completeness if c.accepted]
    if result.passed:
        if accepted:
            who = " and ".join(c.role for c in accepted)
            return f"passed ({checks}; incomplete {who} accepted by --allow-incomplete {accepted[0].allowed:g})"
        return f"passed ({checks})"
    if refused:
        who = " and ".join(refused)
        if result.failed:
            return f"FAILED (incomplete {who}, and {len(result.failed)} of {checks} failed)"
        return f"FAILED (incomplete {who}; " + (f"the {checks} on what was judged passed)" if n else "nothing checked)")
    return f"FAILED ({len(result.failed)} of {checks})"


def _mark(passed: bool) -> str:
    return "✅ pass" if passed else "❌ **FAIL**"


def markdown(result: GateResult) -> str:
    """The summary as GitHub-flavoured Markdown."""
    mark = "✅" if result.passed else "❌"
    against = f" against the baseline `{result.baseline}`" if result.baseline else ""
    lines = [
        f"### {mark} harness gate {_outcome(result)}",
        "",
        f"Run `{result.run}`{against}: {result.confidence:.0%} intervals (Student t), Holm's correction over the no-regression checks.",
        "",
        "| | check | figures |",
        "|---|---|---|",
    ]
    for whole in result.incomplete:
        lines.append(f"| {_mark(whole.passed)} | {_cell(whole.label)} | {_cell(whole.message)} |")
    for c in result.checks:
        figures = "<br>".join(_cell(t) for t in (c.message, *c.notes))
        lines.append(f"| {_mark(c.passed)} | {_cell(c.check.label)} | {figures} |")
    if result.notes:
        lines += ["", "Notes:", ""] + [f"- {_cell(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def terminal_lines(result: GateResult) -> list[str]:
    """One line per check (its figures, then its notes indented), the notes, then the outcome."""
    lines = [f"{'pass' if whole.passed else 'FAIL'}  {whole.label}: {whole.message}" for whole in result.incomplete]
    for c in result.checks:
        lines.append(f"{'pass' if c.passed else 'FAIL'}  {c.check.label}: {c.message}")
        lines += [f"      note: {n}" for n in c.notes]
    lines += [f"note: {n}" for n in result.notes]
    lines.append(f"gate {_outcome(result)}")
    return lines


def _write(path: Path, text: str, append: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc})") from exc


def write_reports(
    result: GateResult,
    *,
    junit: Path | None = None,
    summary: Path | None = None,
    step_summary: Path | None = None,
    seconds: float = 0.0,
) -> list[Path]:
    """Write the JUnit XML to ``junit`` and the Markdown to ``summary``, and append the Markdown to
    ``step_summary`` (``$GITHUB_STEP_SUMMARY``); returns the paths written."""
    written: list[Path] = []
    text = markdown(result)
    for path, content, append in _targets(junit, summary, step_summary, result, text, seconds):
        _write(path, content, append)
        written.append(path)
    return written


def _targets(
    junit: Path | None, summary: Path | None, step_summary: Path | None, result: GateResult, text: str, seconds: float
) -> Iterable[tuple[Path, str, bool]]:
    if junit is not None:
        yield junit, junit_xml(result, seconds), False
    if summary is not None:
        yield summary, text, False
    if step_summary is not None:
        yield step_summary, text + "\n", True
