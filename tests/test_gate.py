"""``harness gate``: its decisions and figures on real runs, its reports, and its refusals.

Three runs of the same 40 transcripts (10 tasks run 4 times each; each calls one tool and has a
reference trajectory) are made by the real harness against a scripted judge server with two judges
(tests/analysis_support.py): BASE, NOISE (BASE's scores plus small noise, the agent unchanged) and
REGRESSED (relevance 0.15 lower, a third of the transcripts calling the wrong tool). Every figure
the gate prints is checked against SciPy (``stats.t.interval``, ``ttest_rel``) and statsmodels
(``multipletests(method="holm")``) on the values read straight from judgments.jsonl and
results.jsonl; the JUnit XML is read back by xml.etree and by junitparser.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import UserInputError
from harness.gate import GateSpec, run_gate
from harness.gate.reports import junit_xml, markdown
from tests.analysis_support import CANNOT, ScriptedJudges, composite_scores, make_run, record, scores
from tests.e2e_support import read_jsonl

JUDGES = ("mini", "big")
RUBRICS = ("relevance", "faithfulness", "hallucination")
TASKS = [f"k{t}" for t in range(10)]
IDS = [f"{task}-{i}" for task in TASKS for i in range(4)]


def _record(tid: str, tool: str) -> dict[str, Any]:
    return {
        **record(tid),
        "task": tid.split("-")[0],
        "steps": [{"name": tool, "arguments": {"q": tid}}],
        "reference_trajectory": [{"name": "lookup", "arguments": {"q": tid}}],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("gate")
    rng = np.random.default_rng(38)
    base = {
        "relevance": rng.uniform(0.55, 0.95, len(IDS)),
        "faithfulness": rng.uniform(0.5, 1.0, len(IDS)),
        "hallucination": rng.uniform(0.0, 0.3, len(IDS)),
    }

    def table(shift: dict[str, float], noise: float) -> dict[tuple[str, str, str], float | str]:
        out: dict[tuple[str, str, str], float | str] = {}
        for judge in JUDGES:
            for rubric, values in base.items():
                for i, tid in enumerate(IDS):
                    v = values[i] + shift.get(rubric, 0.0) + (0.03 if judge == "big" else 0.0) + rng.normal(0, noise)
                    out[(tid, rubric, judge)] = float(np.clip(np.round(v, 2), 0, 1))
        return out

    server = ScriptedJudges()
    server.start()
    try:
        base_table = table({}, 0.0)
        base_table[("k0-0", "relevance", "mini")] = CANNOT  # unscored: left out and counted
        made = {
            "BASE": make_run(tmp, "BASE", server, [_record(t, "lookup") for t in IDS], base_table, judges=JUDGES, rubrics=RUBRICS),
            "NOISE": make_run(tmp, "NOISE", server, [_record(t, "lookup") for t in IDS], table({}, 0.02), judges=JUDGES, rubrics=RUBRICS),
            "REGRESSED": make_run(
                tmp,
                "REGRESSED",
                server,
                [_record(t, "search" if i % 3 == 0 else "lookup") for i, t in enumerate(IDS)],
                table({"relevance": -0.15}, 0.02),
                judges=JUDGES,
                rubrics=RUBRICS,
            ),
        }
    finally:
        server.stop()
    yield {**made, "tmp": tmp}


def gate(*args: Any, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["gate", *map(str, args)], env=env, terminal_width=200)


def gate_json(*args: Any, code: int) -> dict[str, Any]:
    result = gate(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def values(run: Path, metric: str, judge: str) -> dict[str, float]:
    """Transcript id -> value, read straight from the run's files."""
    if metric == "answer_correctness":
        return composite_scores(run, metric, judge)
    if metric == "trajectory_match":
        return {r["transcript_id"]: float(r["agent"][metric]) for r in read_jsonl(run / "results.jsonl")}
    return scores(run, metric, judge)


def t_interval(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    from scipy import stats as sp

    if np.ptp(x) == 0:
        return float(x[0]), float(x[0])
    low, high = sp.t.interval(confidence, x.size - 1, loc=x.mean(), scale=sp.sem(x))
    return float(low), float(high)


def test_bars_on_rubrics_composites_and_agent_metrics(runs: dict[str, Path]) -> None:
    out = gate_json(
        runs["BASE"],
        "--min",
        "relevance=0.6",
        "--min",
        "answer_correctness=0.99",
        "--max",
        "hallucination=0.25",
        "--min",
        "trajectory_match=0.9",
        code=6,
    )
    assert out["baseline"] is None and out["alpha"] == 0.05
    seen = []
    for check in out["checks"]:
        metric, judge = check["metric"], check["judge"]
        seen.append((check["check"], metric, judge))
        v = values(runs["BASE"], metric, judge or "mini")
        x = np.array(list(v.values()))
        low, high = t_interval(x)
        assert check["n"] == x.size
        assert check["estimate"] == pytest.approx(x.mean(), abs=1e-12)
        assert check["ci"] == pytest.approx([low, high], abs=1e-12)
        want = low >= check["bound"] if check["check"] == "min" else high <= check["bound"]
        assert check["passed"] is want
        bound = f"lower bound {low:.3f}" if check["check"] == "min" else f"upper bound {high:.3f}"
        assert f"mean {x.mean():.3f}, 95% CI [{low:.3f}, {high:.3f}] over {x.size} transcripts; {bound}" in check["message"]
    # one check per judge for rubrics and composites; the agent metric is the run's own, once
    assert seen == [
        ("min", "relevance", "mini"),
        ("min", "relevance", "big"),
        ("min", "answer_correctness", "mini"),
        ("min", "answer_correctness", "big"),
        ("min", "trajectory_match", None),
        ("max", "hallucination", "mini"),
        ("max", "hallucination", "big"),
    ]
    by = {(c["metric"], c["judge"]): c for c in out["checks"]}
    assert by[("relevance", "mini")]["n"] == 39 and by[("relevance", "mini")]["notes"] == ["1 left out (unscored: no_score_found 1)"]
    assert by[("relevance", "mini")]["passed"] and not by[("answer_correctness", "mini")]["passed"]
    assert by[("trajectory_match", None)]["ci"] == [1.0, 1.0] and by[("trajectory_match", None)]["passed"]
    assert out["passed"] is False and out["failed"] == 2


def test_noise_passes_and_a_regression_fails_against_the_baseline(runs: dict[str, Path]) -> None:
    from scipy import stats as sp
    from statsmodels.stats.multitest import multipletests

    checks = [
        "--no-regression",
        "relevance",
        "--no-regression",
        "faithfulness",
        "--no-regression",
        "hallucination",
        "--max-drop",
        "answer_correctness=0.05",
    ]
    noise = gate_json(runs["NOISE"], "--baseline", runs["BASE"], "--judge", "mini", *checks, code=0)
    regressed = gate_json(runs["REGRESSED"], "--baseline", runs["BASE"], "--judge", "mini", *checks, "--max-drop", "trajectory_match=0.1", code=6)
    for out, run in ((noise, runs["NOISE"]), (regressed, runs["REGRESSED"])):
        tested = [c for c in out["checks"] if c["check"] == "no_regression"]
        raw = []
        for check in out["checks"]:
            sa, sb = values(run, check["metric"], "mini"), values(runs["BASE"], check["metric"], "mini")
            ids = [t for t in sa if t in sb]
            x, y = np.array([sa[t] for t in ids]), np.array([sb[t] for t in ids])
            assert check["n"] == len(ids)
            assert check["estimate"] == pytest.approx((x - y).mean(), abs=1e-12)
            assert check["ci"] == pytest.approx(t_interval(x - y), abs=1e-12)
            if np.ptp(x - y) > 0:
                assert check["pvalue"] == pytest.approx(sp.ttest_rel(x, y).pvalue, rel=1e-9, abs=1e-300)
            if check["check"] == "no_regression":
                raw.append(check["pvalue"])
            else:
                low, high = check["ci"]
                assert check["passed"] is (low >= -check["bound"])
        holm = multipletests(raw, method="holm")[1]
        for check, adjusted in zip(tested, holm):
            assert check["pvalue_holm"] == pytest.approx(adjusted, rel=1e-9, abs=1e-300)
            lower = check["direction"] == "lower"
            worse = check["estimate"] > 0 if lower else check["estimate"] < 0
            assert check["passed"] is not (worse and adjusted < 0.05)
    assert all(c["passed"] for c in noise["checks"])
    failed = {c["metric"] for c in regressed["checks"] if not c["passed"]}
    assert failed == {"relevance", "answer_correctness", "trajectory_match"}
    rel = next(c for c in regressed["checks"] if c["metric"] == "relevance")
    assert "significantly worse (Holm-adjusted p=" in rel["message"] and rel["estimate"] == pytest.approx(-0.15, abs=0.02)
    # unscored in the baseline: left out of the pairs, counted
    assert rel["n"] == 39 and rel["notes"] == ["1 left out (baseline unscored: no_score_found 1)"]


def test_passk_over_tasks(runs: dict[str, Path]) -> None:
    """pass^2 of trajectory_match >= 1: BASE matches everywhere (pass^2 = 1 on every task); in
    REGRESSED transcript i of the 40 misses when i % 3 == 0, so task t has c of its 4 runs."""
    from scipy import stats as sp

    out = gate_json(runs["REGRESSED"], "--success", "trajectory_match>=1", "--min", "pass^2=0.3", "--min", "pass@2=0.8", code=6)
    want_hat, want_at = [], []
    for t in range(10):
        c = sum(1 for i in range(4) if (4 * t + i) % 3 != 0)
        want_hat.append(math.comb(c, 2) / math.comb(4, 2))
        want_at.append(1 - math.comb(4 - c, 2) / math.comb(4, 2))
    for check, want in zip(out["checks"], (want_hat, want_at)):
        x = np.array(want)
        assert check["unit"] == "tasks" and check["n"] == 10 and check["judge"] is None
        assert check["estimate"] == pytest.approx(x.mean(), abs=1e-12)
        assert check["ci"] == pytest.approx(t_interval(x), abs=1e-12)
        assert check["passed"] is (check["ci"][0] >= check["bound"])
    assert [c["passed"] for c in out["checks"]] == [False, True]
    assert "over 10 tasks" in out["checks"][0]["message"]
    # against the baseline, per task, paired; the success of a judged rubric, by one judge
    diff = gate_json(runs["REGRESSED"], "--baseline", runs["BASE"], "--success", "trajectory_match>=1", "--no-regression", "pass^2", code=6)
    (check,) = diff["checks"]
    d = np.array(want_hat) - 1.0
    assert check["estimate"] == pytest.approx(d.mean(), abs=1e-12)
    assert check["pvalue"] == pytest.approx(sp.ttest_rel(np.array(want_hat), np.ones(10)).pvalue, rel=1e-9)
    judged = gate_json(runs["BASE"], "--success", "relevance>=0.5", "--judge", "big", "--min", "pass^4=0.9", code=0)
    assert judged["checks"][0]["judge"] == "big" and judged["checks"][0]["estimate"] == 1.0


def test_reports_junit_markdown_and_the_github_step_summary(runs: dict[str, Path]) -> None:
    import junitparser

    tmp = runs["tmp"]
    step = tmp / "step_summary.md"
    step.write_text("earlier step\n", encoding="utf-8")
    junit, summary = tmp / "reports" / "gate.xml", tmp / "reports" / "gate.md"
    result = gate(
        runs["REGRESSED"],
        "--baseline",
        runs["BASE"],
        "--judge",
        "mini",
        "--min",
        "relevance=0.5",
        "--no-regression",
        "relevance",
        "--max-drop",
        "faithfulness=0.1",
        "--junit",
        junit,
        "--summary",
        summary,
        env={"GITHUB_STEP_SUMMARY": str(step)},
    )
    assert result.exit_code == 6, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("pass  relevance (judge mini) >= 0.5: mean ")
    assert "      note: 1 left out (baseline unscored: no_score_found 1)" in lines
    assert any(line.startswith("FAIL  relevance (judge mini) not worse than the baseline: difference -0.1") for line in lines)
    assert lines[-1] == "gate FAILED (1 of 3 checks)"
    assert f"wrote {junit}" in result.stderr and f"wrote {step}" in result.stderr

    # JUnit XML: the structure CI systems read, by ElementTree ...
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "1" and root.get("errors") == "0"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == ["harness.gate.min", "harness.gate.max_drop", "harness.gate.no_regression"]
    assert [c.get("name") for c in cases] == [
        "relevance (judge mini) >= 0.5",
        "faithfulness (judge mini) drops at most 0.1 from the baseline",
        "relevance (judge mini) not worse than the baseline",
    ]
    failures = [c.find("failure") for c in cases]
    assert failures[0] is None and failures[1] is None and failures[2] is not None
    assert "significantly worse" in failures[2].get("message") and "Holm-adjusted p=" in failures[2].get("message")
    assert all("95% CI [" in (c.findtext("system-out") or "") for c in cases)
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"run": str(runs["REGRESSED"]), "baseline": str(runs["BASE"]), "alpha": "0.05"}
    # ... and by junitparser, an independent reader
    xml = junitparser.JUnitXml.fromfile(str(junit))
    parsed = list(xml)[0]
    assert (parsed.tests, parsed.failures, parsed.errors, parsed.skipped) == (3, 1, 0, 0)
    outcomes = {case.name: [type(r).__name__ for r in case.result] for case in parsed}
    assert outcomes["relevance (judge mini) not worse than the baseline"] == ["Failure"]
    assert outcomes["relevance (judge mini) >= 0.5"] == []
    assert [case.system_out.startswith("mean ") or case.system_out.startswith("difference ") for case in parsed] == [True, True, True]
    # ... and valid against the JUnit schema Jenkins' xUnit plugin validates with (junit-10.xsd)
    assert_valid_junit(junit.read_text(encoding="utf-8"))

    # Markdown: written, and appended to the step summary after what was there
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### ❌ harness gate FAILED (1 of 3 checks)\n")
    assert "| ❌ **FAIL** | relevance (judge mini) not worse than the baseline | difference -0.1" in text
    assert text.count("\n| ") == 4  # the header and one row per check
    assert step.read_text(encoding="utf-8") == "earlier step\n" + text + "\n"


#: Jenkins xUnit's JUnit schema (origin in the file's first comment)
JUNIT_XSD = Path(__file__).parent / "fixtures" / "junit" / "junit-10.xsd"


def assert_valid_junit(document: str) -> None:
    import xmlschema

    xmlschema.XMLSchema10(JUNIT_XSD).validate(document.encode("utf-8"))


def test_the_junit_schema_refuses_what_it_should() -> None:
    """The schema check can fail: ``skipped`` on <testsuites> (what the gate once wrote) is refused."""
    import xmlschema

    bad = '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites tests="1" skipped="0"><testsuite tests="1"/></testsuites>\n'
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="skipped"):
        assert_valid_junit(bad)


def test_junit_of_a_passing_and_a_failing_gate_is_valid(runs: dict[str, Path]) -> None:
    passed = run_gate(runs["BASE"], {"min": ["relevance=0.5"], "judge": "mini"})
    failed = run_gate(runs["BASE"], {"min": ["relevance=0.99"], "judge": "mini"})
    assert passed.passed and not failed.passed
    for result in (passed, failed, type(passed)("runs/<a & b>|x", None, 0.05, failed.checks, ("a note",))):
        document = junit_xml(result, seconds=1.25, timestamp=0.0)
        assert_valid_junit(document)
        root = ET.fromstring(document.split("\n", 1)[1])
        assert root.get("skipped") is None and root.find("testsuite").get("skipped") == "0"


def test_the_reports_escape_what_they_quote(runs: dict[str, Path]) -> None:
    result = run_gate(runs["BASE"], {"min": ["relevance=0.5"], "judge": "mini"})
    assert result.passed
    odd = type(result)("runs/<a & b>|x", None, 0.05, result.checks, ("a note with | and <tags>",))
    root = ET.fromstring(junit_xml(odd).split("\n", 1)[1])
    assert root.find("testsuite").get("name") == "harness gate runs/<a & b>|x"
    assert root.find("testsuite").findtext("system-out") == "a note with | and <tags>"
    md = markdown(odd)
    assert "`runs/<a & b>|x`" in md and "- a note with \\| and <tags>" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min", "relevance"], "--min relevance: expected NAME=NUMBER"),
        (["--min", "relevance=high"], "--min relevance=high: 'high' is not a number"),
        (["--min", "relevance=nan"], "--min relevance=nan: 'nan' is not a finite number"),
        (
            ["--min", "hallucination=0.2"],
            "--min hallucination=0.2: lower is better for hallucination; bound it from above with --max hallucination=X",
        ),
        (["--max", "relevance=0.9"], "--max relevance=0.9: higher is better for relevance; bound it from below with --min relevance=X"),
        (["--min", "relevance=1.5"], "--min relevance=1.5: outside the relevance scale [0, 1]"),
        (["--min", "helpfulness=0.5"], "--min helpfulness=0.5: 'helpfulness' is not a rubric, composite or agent metric of the run"),
        (["--min", "steps=2"], "--min steps=2: steps is a count, not on a scale; gate on it through pass^k: --success 'steps<=0'"),
        (["--no-regression", "relevance"], "--no-regression: compares with a baseline run; give it with --baseline RUN"),
        (["--max-drop", "relevance=0"], "--max-drop relevance=0: the margin must be above 0 (use --no-regression relevance"),
        (["--min", "pass^3=0.5"], "pass^3: say when a run of a task succeeds with --success, e.g. --success 'relevance>=0.7'"),
        (["--success", "relevance>0.7", "--min", "pass^3=0.5"], "--success relevance>0.7: expected NAME>=NUMBER or NAME<=NUMBER"),
        (["--success", "relevance>=0.7", "--min", "pass^9=0.5"], "--success relevance>=0.7: --k 9: more than every task's decided runs"),
        (["--min", "relevance=0.5", "--min", "relevance=0.6"], "--min relevance: given twice"),
        (["--min", "relevance=0.5", "--judge", "huge"], "--judge huge: not a judge of the run"),
        (["--min", "relevance=0.5", "--alpha", "1.5"], "--alpha 1.5: Input should be less than 1"),
        ([], "no check: give --min, --max, --no-regression or --max-drop"),
    ],
)
def test_mistakes_are_one_line_naming_the_option(runs: dict[str, Path], args: list[str], message: str) -> None:
    result = gate(runs["BASE"], *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_python_api_takes_a_dict_and_says_what_the_command_says(runs: dict[str, Path]) -> None:
    spec = {"min": ["relevance=0.6"], "no_regression": ["relevance"], "judge": "big"}
    result = run_gate(runs["REGRESSED"], spec, runs["BASE"])
    cli = gate_json(runs["REGRESSED"], "--baseline", runs["BASE"], "--min", "relevance=0.6", "--no-regression", "relevance", "--judge", "big", code=6)
    assert result.as_dict() == cli
    assert GateSpec.validated(spec) == GateSpec.from_options(min=["relevance=0.6"], no_regression=["relevance"], judge="big")
    with pytest.raises(UserInputError, match=r"^--max-drop relevance=-1: the margin must be above 0"):
        run_gate(runs["BASE"], {"max_drop": [{"metric": "relevance", "value": -1}]}, runs["BASE"])


def test_every_json_field_is_documented(runs: dict[str, Path]) -> None:
    out = gate_json(runs["REGRESSED"], "--baseline", runs["BASE"], "--min", "relevance=0.5", "--no-regression", "relevance", code=6)
    page = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "ci.md").read_text(encoding="utf-8")
    fields = set(out["checks"][0]) | {"passed", "failed", "alpha", "notes"}
    assert sorted(f for f in fields if f"`{f}`" not in page) == []


def test_decide_at_the_edges() -> None:
    """Too few values fail, saying why; values that do not vary are exact; a check that cannot be
    tested stays out of Holm's family."""
    from statsmodels.stats.multitest import multipletests

    from harness.gate import Check, CheckData, decide

    bar = Check("min", "relevance", None, "higher", 0.5)
    one, none = decide([CheckData(bar, np.array([0.9])), CheckData(bar, np.array([]))])
    assert not one.passed and one.message == "one value (0.900) over transcripts: no interval, so nothing shows the bar is met"
    assert not none.passed and none.estimate is None and none.n == 0
    flat = decide([CheckData(bar, np.full(5, 0.7))])[0]
    assert flat.passed and flat.ci == (0.7, 0.7)
    drop = Check("no_regression", "relevance", None, "higher", None)
    exact, lonely, noisy = decide(
        [
            CheckData(drop, np.full(4, 0.6), np.full(4, 0.7)),  # every transcript exactly 0.1 lower
            CheckData(drop, np.array([0.5]), np.array([0.6])),
            CheckData(drop, np.array([0.5, 0.7, 0.6]), np.array([0.6, 0.6, 0.6])),
        ]
    )
    assert not exact.passed and exact.pvalue == 0.0 and exact.ci == pytest.approx((-0.1, -0.1))
    assert not lonely.passed and lonely.pvalue_holm is None and "one unit scored in both runs" in lonely.message
    assert noisy.passed and noisy.pvalue_holm == pytest.approx(multipletests([0.0, noisy.pvalue], method="holm")[1][1])
    lower = Check("max_drop", "hallucination", None, "lower", 0.05)
    (res,) = decide([CheckData(lower, np.array([0.2, 0.3, 0.25, 0.2]), np.array([0.2, 0.2, 0.2, 0.2]))])
    assert not res.passed and "upper bound" in res.message and res.ci is not None and res.ci[1] > 0.05
