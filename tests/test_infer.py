"""``harness labels sample`` and ``harness infer`` end to end, on real runs against a scripted judge.

The oracle is ppi_py fed with arrays read straight from judgments.jsonl and the design file, so
the test checks the whole path: which transcripts count as labelled and unlabelled, how unscored
and failed judgments enter, and the numbers.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.labels.design import Design, DesignRow, inclusion_probabilities, read_design
from harness.stats.ppi import active_mean
from tests.analysis_support import CANNOT, ScriptedJudges, make_run, record, scores
from tests.e2e_support import assert_golden, read_jsonl, write_jsonl
from tests.test_report import Opened, browser  # noqa: F401 - the Chromium fixture and page helper of the report tests

pytestmark = pytest.mark.timeout(120)
N = 120


def _runs(tmp: Path, scripted: ScriptedJudges, name: str, shift: float) -> tuple[Path, dict[str, float]]:
    """A lenient judge (human + 0.2 + noise, clipped); t000 unscored, t001 failed (a 400)."""
    rng = np.random.default_rng(7 if shift == 0 else 8)
    ids = [f"t{i:03d}" for i in range(N)]
    human = {t: float(np.clip(np.round(rng.uniform(0.1, 0.8) + shift, 2), 0, 1)) for t in ids}
    replies: dict[tuple[str, str, str], float | str] = {
        (t, "relevance", "mini"): float(np.clip(np.round(human[t] + 0.2 + rng.normal(0, 0.08), 2), 0, 1)) for t in ids
    }
    replies[("t000", "relevance", "mini")] = CANNOT
    records = [record(t, fail_query=t == "t001") for t in ids]
    return make_run(tmp, name, scripted, records, replies, rubrics=("relevance",)), human


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedJudges) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("infer")
    a, human_a = _runs(tmp, scripted, "a", 0.0)
    b, human_b = _runs(tmp, scripted, "b", 0.15)
    return {"tmp": tmp, "a": a, "b": b, "human_a": human_a, "human_b": human_b}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _labels(path: Path, human: dict[str, float], ids: list[str]) -> Path:
    return write_jsonl(path, [{"transcript_id": t, "rubric": "relevance", "label": human[t]} for t in ids]) or path


def _drawn(design: dict[str, Any]) -> list[str]:
    return [row["transcript_id"] for row in design["eligible"] if row["drawn"]]


def _judge_predictions(run: Path) -> tuple[list[str], np.ndarray]:
    """All transcripts in order; the judge's scores with its scored mean in place of the unscored and failed."""
    ids = [r["transcript_id"] for r in read_jsonl(run / "results.jsonl")]
    scored = scores(run, "relevance", "mini")
    fill = float(np.mean(list(scored.values())))
    return ids, np.array([scored.get(t, fill) for t in ids])


def test_uniform_design_to_corrected_mean(runs: dict[str, Any]) -> None:
    import ppi_py

    run, out = runs["a"], runs["tmp"] / "uniform"
    done = invoke("labels", "sample", str(run), "--n", "60", "--seed", "3", "--out", str(out))
    assert done.exit_code == 0, done.output
    design = json.loads((out / "design.json").read_text())
    assert design["strategy"] == "uniform" and design["eligible_count"] == N and len(_drawn(design)) == 60
    assert {row["pi"] for row in design["eligible"]} == {0.5}
    # The labeller sees the transcripts, never the judge's scores.
    to_label = read_jsonl(out / "to_label.jsonl")
    assert sorted(r["transcript_id"] for r in to_label) == sorted(_drawn(design))
    assert all("score" not in json.dumps(r) and r["query"].startswith(f"id={r['transcript_id']}") for r in to_label)
    rows = list(csv.DictReader((out / "to_label.csv").read_text(encoding="utf-8-sig").splitlines()))
    assert len(rows) == 60 and all(r["label"] == "" and r["rubric"] == "relevance" for r in rows)
    # The filled CSV comes back as the labels JSONL harness agreement reads.
    for r in rows[:-1]:
        r["label"] = str(runs["human_a"][r["transcript_id"]])
    with (out / "filled.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    done = invoke("labels", "collect", str(out / "filled.csv"), "--out", str(out / "labels.jsonl"))
    assert done.exit_code == 0 and "1 rows left blank" in done.output
    done = invoke("infer", str(run), "--labels", str(out / "labels.jsonl"), "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result == json.loads((run / "inference.json").read_text())
    (section,) = result["metrics"]
    (entry,) = section["judges"]
    labelled = [r["transcript_id"] for r in rows[:-1]]
    ids, yhat = _judge_predictions(run)
    mask = np.isin(ids, labelled)
    y = np.array([runs["human_a"][t] for t in np.array(ids)[mask]])
    low, high = ppi_py.ppi_mean_ci(y, yhat[mask], yhat[~mask], alpha=0.05)
    assert entry["corrected"]["ci"] == pytest.approx([low[0], high[0]], abs=1e-9)
    assert entry["corrected"]["mean"] == pytest.approx(ppi_py.ppi_mean_pointestimate(y, yhat[mask], yhat[~mask])[0], abs=1e-9)
    h_low, h_high = ppi_py.ppi_mean_ci(y, yhat[mask], yhat[~mask], alpha=0.05, lam=0)
    assert entry["human_only"]["ci"] == pytest.approx([h_low[0], h_high[0]], abs=1e-9)
    ratio = (h_high[0] - h_low[0]) / (high[0] - low[0])
    assert entry["effective_labels"] == pytest.approx(59 * ratio**2)
    assert entry["n"] == 59 and entry["counts"]["N"] == N and entry["valid"] is True
    assert entry["counts"]["drawn_unlabelled"] == 1 and any("missing at random" in n for n in entry["notes"])
    # The lenient judge's own mean is far above the human one; the correction brings it back.
    truth = float(np.mean(list(runs["human_a"].values())))
    assert entry["judge_only"]["ci"][0] > truth + 0.1
    assert entry["corrected"]["ci"][0] <= truth <= entry["corrected"]["ci"][1]
    # The unscored and failed transcripts are said, with how they are handled.
    assert entry["counts"]["unscored"] == {"no_score_found": 1} and sum(entry["counts"]["failed"].values()) == 1
    assert any("2 of 120 transcripts have no score" in n and "stays valid" in n for n in entry["notes"])
    text = invoke("infer", str(run), "--labels", str(out / "labels.jsonl"), "--no-save")
    assert text.exit_code == 0 and "PPI" not in text.output and "relevance" in text.output and "missing at random" in text.output


def test_labels_without_a_design_are_flagged_and_too_few_refused(runs: dict[str, Any]) -> None:
    tmp, run = runs["tmp"], runs["a"]
    some = [f"t{i:03d}" for i in range(2, 42)]  # the first 40: a convenience sample
    labels = _labels(tmp / "convenience.jsonl", runs["human_a"], some)
    result = json.loads(invoke("infer", str(run), "--labels", str(labels), "--json", "--no-save", "--no-design").stdout)
    (entry,) = result["metrics"][0]["judges"]
    assert entry["valid"] is False and "corrected" in entry
    assert any("labels are not a random sample: the interval is not valid" in n for n in entry["notes"] + result["notes"])
    shown = invoke("infer", str(run), "--labels", str(labels), "--no-save", "--no-design")
    assert "labels are not a random sample: the interval is not valid" in shown.output and " NO " in shown.output
    few = _labels(tmp / "few.jsonl", runs["human_a"], some[:12])
    result = json.loads(invoke("infer", str(run), "--labels", str(few), "--json", "--no-save", "--no-design").stdout)
    (entry,) = result["metrics"][0]["judges"]
    assert "corrected" not in entry and entry["refused"].startswith("12 labels used: fewer than 20")


def test_labels_for_transcripts_not_in_the_run_are_said_and_none_matching_is_refused_with_exit_2(runs: dict[str, Any]) -> None:
    tmp, run, human = runs["tmp"], runs["a"], runs["human_a"]
    strangers = [{"transcript_id": f"x{i:03d}", "rubric": "relevance", "label": 0.5} for i in range(40)]
    # 100 labels of the run's transcripts and 30 of transcripts it does not hold: a note, not only a count.
    some = write_jsonl(
        tmp / "some_strangers.jsonl",
        [*({"transcript_id": t, "rubric": "relevance", "label": human[t]} for t in sorted(human)[:100]), *strangers[:30]],
    )
    done = invoke("infer", str(run), "--labels", str(some), "--json", "--no-save", "--no-design")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    (entry,) = result["metrics"][0]["judges"]
    assert entry["n"] == 100 and entry["counts"]["labels_not_in_run"] == 30
    note = f"30 of the 130 relevance labels in {some} are for transcripts not in the run {run}: not used"
    assert note in result["notes"]
    shown = invoke("infer", str(run), "--labels", str(some), "--no-save", "--no-design")
    assert shown.exit_code == 0 and f"note: {note}" in " ".join(shown.output.split())
    # 40 labels, none of a transcript of the run: the refusal says so, names the file, and infer exits 2.
    none = write_jsonl(tmp / "strangers.jsonl", strangers)
    done = invoke("infer", str(run), "--labels", str(none), "--json", "--no-save", "--no-design")
    assert done.exit_code == 2
    (entry,) = json.loads(done.stdout)["metrics"][0]["judges"]
    why = f"none of the 40 relevance labels in {none} is for a transcript of the run {run}: 0 labels used"
    assert entry["refused"].startswith(why) and "corrected" not in entry
    assert f"error: nothing estimated: every metric was refused (relevance / mini: {why}" in " ".join(done.stderr.split())
    # The same with two runs: the run whose labels match nothing is named.
    ok = _labels(tmp / "b_some.jsonl", runs["human_b"], sorted(runs["human_b"])[:60])
    done = invoke("infer", str(run), str(runs["b"]), "--labels", str(none), "--labels", str(ok), "--json", "--no-design")
    assert done.exit_code == 2
    (row,) = json.loads(done.stdout)["comparisons"]
    assert row["refused"].startswith(f"run A: {why}") and row["verdict"].startswith("not estimated on relevance")


def test_refusals_read_well_at_80_columns(runs: dict[str, Any]) -> None:
    # A refusal is a sentence under the table, never a cell that wraps to its column's width.
    tmp, run = runs["tmp"], runs["a"]
    few = _labels(tmp / "few80.jsonl", runs["human_a"], sorted(runs["human_a"])[2:14])
    done = CliRunner().invoke(app, ["infer", str(run), "--labels", str(few), "--no-save", "--no-design"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert done.exit_code == 2
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines if not line.startswith(("  relevance / mini:", "note:"))) <= 80  # sentences wrap as text
    refusal = "  relevance / mini: refused: 12 labels used: fewer than 20, too few for the normal interval to be trusted"
    assert refusal in lines
    assert not any("fewer" in line for line in lines if line != refusal)  # not also inside a cell


def test_the_infer_json_fields_are_in_the_reference(runs: dict[str, Any], tmp_path: Path) -> None:
    run, human = runs["a"], runs["human_a"]
    done = invoke("labels", "sample", str(run), "--n", "60", "--seed", "2", "--out", str(tmp_path))
    assert done.exit_code == 0, done.output
    design = json.loads((tmp_path / "design.json").read_text())
    labels = _labels(tmp_path / "labels.jsonl", human, _drawn(design)[:-1])
    single = json.loads(invoke("infer", str(run), "--labels", str(labels), "--json", "--no-save").stdout)
    few = _labels(tmp_path / "few.jsonl", human, _drawn(design)[:5])
    refused = json.loads(invoke("infer", str(run), "--labels", str(few), "--json", "--no-save").stdout)
    ids = sorted(human)[::2]
    la, lb = _labels(tmp_path / "la.jsonl", human, ids), _labels(tmp_path / "lb.jsonl", runs["human_b"], ids)
    pair = json.loads(invoke("infer", str(run), str(runs["b"]), "--labels", str(la), "--labels", str(lb), "--json", "--no-design").stdout)
    fields: set[str] = set(single) | set(pair)
    for entry in [*single["metrics"][0]["judges"], *refused["metrics"][0]["judges"], *pair["comparisons"]]:
        fields |= set(entry) | {f"counts.{k}" for k in entry["counts"]}
    fields |= set(single["metrics"][0]) | set(single["design"])
    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "outputs.md").read_text(encoding="utf-8")
    section = page[page.index("## `harness infer --json`") :]
    assert {"corrected", "human_only", "judge_only", "refused", "notes", "counts.labels_not_in_run", "counts.drawn_unlabelled"} <= fields
    assert sorted(f for f in fields if f"`{f}`" not in section) == []


def test_a_judge_that_adds_nothing_is_said_to(runs: dict[str, Any], scripted: ScriptedJudges) -> None:
    tmp = runs["tmp"]
    ids = [f"z{i:02d}" for i in range(60)]
    rng = np.random.default_rng(1)
    judged = np.round(rng.uniform(0.2, 0.8, 60), 2)
    replies: dict[tuple[str, str, str], float | str] = {(t, "relevance", "mini"): float(judged[i]) for i, t in enumerate(ids)}
    run = make_run(tmp, "flat", scripted, [record(t) for t in ids], replies, rubrics=("relevance",))
    # The human labels run against the judge: its λ is clipped to 0.
    human = np.clip(1 - judged + rng.normal(0, 0.05, 60), 0, 1)
    labels = write_jsonl(tmp / "flat.jsonl", [{"transcript_id": t, "rubric": "relevance", "label": float(human[i])} for i, t in enumerate(ids[:30])])
    result = json.loads(invoke("infer", str(run), "--labels", str(labels), "--json", "--no-save", "--no-design").stdout)
    (entry,) = result["metrics"][0]["judges"]
    assert entry["lambda"] < 0.05 and any("the judge adds nothing" in n for n in entry["notes"])


def test_active_design_uses_the_ipw_estimator(runs: dict[str, Any]) -> None:
    tmp, run, human = runs["tmp"], runs["a"], runs["human_a"]
    prior = _labels(tmp / "prior.jsonl", human, [f"t{i:03d}" for i in range(100, 120)])
    out = tmp / "active"
    done = invoke(
        "labels",
        "sample",
        str(run),
        "--n",
        "50",
        "--seed",
        "5",
        "--strategy",
        "active",
        "--uncertainty",
        "error-model",
        "--labels",
        str(prior),
        "--out",
        str(out),
    )
    assert done.exit_code == 0, done.output
    design = json.loads((out / "design.json").read_text())
    pi = np.array([row["pi"] for row in design["eligible"]])
    assert design["uncertainty"] == "error-model" and pi.sum() == pytest.approx(50) and pi.min() >= 0.2 * 50 / N
    assert pi[0] == pi.max()  # t000, unscored, gets the largest uncertainty
    drawn = _drawn(design)
    labels = _labels(out / "labels.jsonl", human, drawn)
    result = json.loads(invoke("infer", str(run), "--labels", str(labels), "--json", "--no-save").stdout)
    (entry,) = result["metrics"][0]["judges"]
    assert entry["estimator"].startswith("active inference") and entry["valid"] is True
    ids, yhat = _judge_predictions(run)
    mask = np.isin(ids, drawn)
    expected = active_mean(np.array([human[t] for t in ids]), yhat, pi, mask)
    assert entry["corrected"]["mean"] == pytest.approx(expected.estimate, abs=1e-12)
    assert entry["corrected"]["ci"] == pytest.approx(list(expected.ci), abs=1e-12)


def test_labels_sample_says_which_prior_labels_are_not_for_the_run(runs: dict[str, Any], tmp_path: Path) -> None:
    run, human = runs["a"], runs["human_a"]
    strangers = [{"transcript_id": f"x{i:03d}", "rubric": "relevance", "label": 0.5} for i in range(5)]
    prior = write_jsonl(
        tmp_path / "prior.jsonl", [*({"transcript_id": t, "rubric": "relevance", "label": human[t]} for t in sorted(human)[100:]), *strangers]
    )
    args = ["labels", "sample", str(run), "--n", "50", "--strategy", "active", "--uncertainty", "error-model", "--out", str(tmp_path / "d")]
    done = invoke(*args, "--labels", str(prior))
    assert done.exit_code == 0, done.output
    note = f"5 of the 25 labels in {prior} are for transcripts not in the run {run}: not used to fit the judge's error"
    assert json.loads((tmp_path / "d" / "design.json").read_text())["notes"] == [note] and f"note: {note}" in " ".join(done.output.split())
    none = write_jsonl(tmp_path / "none.jsonl", strangers)
    done = invoke(*args, "--labels", str(none))
    assert done.exit_code == 2
    assert f"error: --labels: none of the 5 labels in {none} is for a transcript of the run {run}" in " ".join(done.output.split())


def test_paired_comparison_and_bad_input(runs: dict[str, Any]) -> None:
    import ppi_py

    tmp = runs["tmp"]
    ids = [f"t{i:03d}" for i in range(0, N, 2)]
    la, lb = _labels(tmp / "la.jsonl", runs["human_a"], ids), _labels(tmp / "lb.jsonl", runs["human_b"], ids)
    done = invoke("infer", str(runs["a"]), str(runs["b"]), "--labels", str(la), "--labels", str(lb), "--json", "--no-design")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    (row,) = result["comparisons"]
    y = np.array([runs["human_b"][t] - runs["human_a"][t] for t in ids])
    ids_a, yhat_a = _judge_predictions(runs["a"])
    _, yhat_b = _judge_predictions(runs["b"])
    d = yhat_b - yhat_a
    mask = np.isin(ids_a, ids)
    low, high = ppi_py.ppi_mean_ci(y, d[mask], d[~mask], alpha=0.05)
    assert row["corrected"]["ci"] == pytest.approx([low[0], high[0]], abs=1e-9)
    assert result["verdicts"][0].startswith("B is better than A on relevance") and "not valid" in result["verdicts"][0]
    bad = write_jsonl(tmp / "bad.jsonl", [{"transcript_id": "t002", "rubric": "relevance", "label": 7}])
    done = invoke("infer", str(runs["a"]), "--labels", str(bad))
    assert done.exit_code == 2 and f"{bad}:1: label:" in done.output and "Traceback" not in done.output
    # On line 100 the place reads ":100:", never rich's emoji for it.
    rows = [{"transcript_id": t, "rubric": "relevance", "label": runs["human_a"][t]} for t in sorted(runs["human_a"])[:99]]
    bad = write_jsonl(tmp / "bad100.jsonl", [*rows, {"transcript_id": "t110", "rubric": "relevance", "label": 7}])
    done = invoke("infer", str(runs["a"]), "--labels", str(bad))
    assert done.exit_code == 2 and f"{bad}:100: label: 7 is outside" in done.output and "\N{HUNDRED POINTS SYMBOL}" not in done.output


def test_report_shows_the_inference_section(runs: dict[str, Any], tmp_path: Path) -> None:
    """harness infer writes inference.json; harness report puts it in the page's data and section."""
    run = runs["b"]
    ids = [f"t{i:03d}" for i in range(1, N, 3)]
    labels = _labels(tmp_path / "lb.jsonl", runs["human_b"], ids)
    assert invoke("infer", str(run), "--labels", str(labels), "--no-design").exit_code == 0
    saved = json.loads((run / "inference.json").read_text())
    done = invoke("report", str(run))
    assert done.exit_code == 0, done.output
    page = (run / "report.html").read_text()
    assert 'id="inference-cards"' in page and 'href="#inference"' in page
    blob = page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(blob.replace("\\u003c", "<"))
    assert data["inference"] == saved
    # A file older than the judgments is said to be.
    os.utime(run / "inference.json", (1, 1))
    assert invoke("report", str(run)).exit_code == 0
    assert "older than the run's judgments" in (run / "report.html").read_text()
    (run / "inference.json").write_text("{}")
    done = invoke("report", str(run))
    assert done.exit_code == 2 and "inference.json: metrics: not an inference.json" in done.output
    (run / "inference.json").unlink()


def test_forest_plot_in_chromium(runs: dict[str, Any], browser: Any, tmp_path: Path) -> None:  # noqa: F811 - the imported fixture
    """The section draws one forest chart per labelled rubric: three intervals per judge, on one axis."""
    run = runs["a"]
    ids = [f"t{i:03d}" for i in range(0, N, 3)]
    labels = _labels(tmp_path / "la.jsonl", runs["human_a"], ids)
    assert invoke("infer", str(run), "--labels", str(labels), "--no-design").exit_code == 0
    assert invoke("report", str(run)).exit_code == 0
    opened = Opened(browser, run / "report.html")
    try:
        assert opened.problems == [] and opened.requests == []
        forest = [c for c in opened.charts() if c["type"] == "bar" and c["values"] == 3]
        section = opened.page.text_content("#inference-cards") or ""
        assert "relevance (numeric labels)" in section and "effective labels" in section and "labels are not a random sample" in section
        boxes = opened.page.evaluate("""() => Array.from(document.querySelectorAll('#inference-cards canvas')).map(c => {
            const ch = Chart.getChart(c);
            return {axis: ch.options.indexAxis, sets: ch.data.datasets.map(d => [d.label, d.data[0]])};
        })""")
        assert len(boxes) == 1 and boxes[0]["axis"] == "y"
        saved = json.loads((run / "inference.json").read_text())["metrics"][0]["judges"][0]
        expected = [["judge-only", saved["judge_only"]["ci"]], ["corrected", saved["corrected"]["ci"]], ["human-only", saved["human_only"]["ci"]]]
        assert boxes[0]["sets"] == expected
        assert forest and forest[0]["painted"] > 1000
    finally:
        opened.close()
        (run / "inference.json").unlink()


def test_a_composite_is_estimated_from_its_rubrics_labels(runs: dict[str, Any], scripted: ScriptedJudges) -> None:
    """answer_correctness = 0.7·relevance + 0.3·faithfulness: labelled through its rubrics' labels."""
    import ppi_py

    tmp = runs["tmp"]
    rng = np.random.default_rng(3)
    ids = [f"c{i:02d}" for i in range(50)]
    rel, faith = rng.uniform(0, 1, 50).round(2), rng.uniform(0, 1, 50).round(2)
    replies: dict[tuple[str, str, str], float | str] = {}
    for i, t in enumerate(ids):
        replies[(t, "relevance", "mini")] = float(np.clip(rel[i] + 0.1, 0, 1).round(2))
        replies[(t, "faithfulness", "mini")] = float(np.clip(faith[i] - 0.1, 0, 1).round(2))
    run = make_run(tmp, "composite", scripted, [record(t) for t in ids], replies, rubrics=("relevance", "faithfulness"))
    given = ids[:30]
    rows = [{"transcript_id": t, "rubric": "relevance", "label": float(rel[i])} for i, t in enumerate(given)]
    rows += [{"transcript_id": t, "rubric": "faithfulness", "label": float(faith[i])} for i, t in enumerate(given)]
    labels = write_jsonl(tmp / "composite.jsonl", rows)
    result = json.loads(invoke("infer", str(run), "--labels", str(labels), "--json", "--no-save", "--no-design").stdout)
    section = next(s for s in result["metrics"] if s["name"] == "answer_correctness")
    assert section["labels_from_rubrics"] is True
    (entry,) = section["judges"]
    composite = {r["transcript_id"]: r["composites"]["mini"]["answer_correctness"] for r in read_jsonl(run / "results.jsonl")}
    yhat = np.array([composite[t] for t in ids])
    y = 0.7 * rel[:30] + 0.3 * faith[:30]
    low, high = ppi_py.ppi_mean_ci(y, yhat[:30], yhat[30:], alpha=0.05)
    assert entry["corrected"]["ci"] == pytest.approx([low[0], high[0]], abs=1e-9)


def test_active_from_sample_spread_and_bad_designs(runs: dict[str, Any], tmp_path: Path) -> None:
    """--uncertainty spread reads each judgment's spread; an unscored one gets the largest; π follows
    `inclusion_probabilities` exactly. A run without any uncertainty, or a broken design, is one line."""
    run = tmp_path / "spread"
    shutil.copytree(runs["a"], run)
    rows = read_jsonl(run / "judgments.jsonl")
    spread = {r["transcript_id"]: round(0.01 * (i % 7), 2) for i, r in enumerate(rows) if r["status"] == "scored"}
    for r in rows:
        r["spread"] = spread.get(r["transcript_id"])
    write_jsonl(run / "judgments.jsonl", rows)
    done = invoke("labels", "sample", str(run), "--n", "30", "--strategy", "active", "--uncertainty", "spread", "--floor", "0.3")
    assert done.exit_code == 0, done.output
    design = json.loads((run / "labels" / "design.json").read_text())
    ids = [r["transcript_id"] for r in read_jsonl(run / "results.jsonl")]
    u = np.array([spread.get(t, max(spread.values())) for t in ids])  # relevance is on 0..1: u / width = u
    assert [r["uncertainty"] for r in design["eligible"]] == pytest.approx(list(u))
    assert [r["pi"] for r in design["eligible"]] == pytest.approx(list(inclusion_probabilities(u, 30, 0.3)), abs=1e-12)
    done = invoke("labels", "sample", str(runs["a"]), "--n", "30", "--strategy", "active", "--out", str(tmp_path / "x"))
    assert done.exit_code == 2 and "active sampling needs the judge's uncertainty" in done.output and "Traceback" not in done.output
    done = invoke("labels", "sample", str(runs["a"]), "--n", "500", "--out", str(tmp_path / "x"))
    assert done.exit_code == 2 and "--n: 500 must be between 1 and the run's 120 transcripts" in done.output
    labels = _labels(tmp_path / "l.jsonl", runs["human_a"], ids[:30])
    (tmp_path / "design.json").write_text(
        json.dumps({"format": "harness-label-design/1", "strategy": "uniform", "eligible": [{"transcript_id": "t000", "pi": 0}]})
    )
    done = invoke("infer", str(runs["a"]), "--labels", str(labels), "--no-save")
    assert done.exit_code == 2 and f"{tmp_path / 'design.json'}: eligible[0]: expected transcript_id and pi in (0, 1]" in done.output


def test_pass_fail_labels_estimate_the_pass_rate(runs: dict[str, Any], tmp_path: Path) -> None:
    """Pass/fail labels: Y = 1 for pass, the judge's prediction its own pass at the threshold (0.6 here)."""
    import ppi_py

    run, human = runs["a"], runs["human_a"]
    ids, _ = _judge_predictions(run)
    given = ids[::2]
    rows = [{"transcript_id": t, "rubric": "relevance", "label": "pass" if human[t] >= 0.6 else "fail"} for t in given]
    labels = write_jsonl(tmp_path / "pf.jsonl", rows)
    result = json.loads(invoke("infer", str(run), "--labels", str(labels), "--threshold", "0.6", "--json", "--no-save", "--no-design").stdout)
    (section,) = result["metrics"]
    (entry,) = section["judges"]
    assert section["label_kind"] == "pass_fail"
    scored = scores(run, "relevance", "mini")
    judged = np.array([1.0 if scored[t] >= 0.6 else 0.0 for t in ids if t in scored])
    yhat = np.array([(1.0 if scored[t] >= 0.6 else 0.0) if t in scored else judged.mean() for t in ids])
    mask = np.isin(ids, given)
    y = np.array([1.0 if human[t] >= 0.6 else 0.0 for t in np.array(ids)[mask]])
    low, high = ppi_py.ppi_mean_ci(y, yhat[mask], yhat[~mask], alpha=0.05)
    assert entry["corrected"]["ci"] == pytest.approx([low[0], high[0]], abs=1e-9)
    assert entry["judge_only"]["mean"] == pytest.approx(judged.mean())


@pytest.mark.parametrize("source", [{"run": "runs/a"}, {"pairwise": "p/pairwise.json"}])
def test_a_design_is_written_and_read_back_through_one_type(tmp_path: Path, source: dict[str, str]) -> None:
    rows = [DesignRow(transcript_id="t1", pi=0.5, drawn=True, uncertainty=0.2), DesignRow(transcript_id="t2", pi=1.0)]
    made = Design(**source, strategy="active", sampling="Poisson", seed=3, n=1, drawn_count=1, eligible_count=2, floor=0.2, eligible=rows)
    made.write(tmp_path)
    read = read_design(tmp_path / "design.json")
    assert read.path == tmp_path / "design.json" and read.pi == {"t1": 0.5, "t2": 1.0} and read.drawn == {"t1"}
    (tmp_path / "again").mkdir()
    read.write(tmp_path / "again")
    assert (tmp_path / "again" / "design.json").read_bytes() == (tmp_path / "design.json").read_bytes()
    written = json.loads((tmp_path / "design.json").read_text())
    assert list(written)[:2] == ["format", *source] and "uncertainty" not in written["eligible"][1]


GOLDEN = Path(__file__).resolve().parent / "fixtures" / "infer_json"


def _infer_json_cases(runs: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    """``harness infer --json`` on each shape its result takes (design, refusals, pairs, active, pass/fail),
    with the temporary directories replaced by ``<tmp>`` and ``<out>``."""
    run, other, human = runs["a"], runs["b"], runs["human_a"]
    cases: dict[str, list[str]] = {}
    assert invoke("labels", "sample", str(run), "--n", "60", "--seed", "2", "--out", str(tmp_path / "u")).exit_code == 0
    drawn = _drawn(json.loads((tmp_path / "u" / "design.json").read_text()))
    labels = _labels(tmp_path / "u" / "labels.jsonl", human, drawn[:-1])
    cases["uniform"] = [str(run), "--labels", str(labels), "--design", str(tmp_path / "u" / "design.json")]
    few = _labels(tmp_path / "u" / "few.jsonl", human, drawn[:5])
    cases["too_few"] = [str(run), "--labels", str(few), "--design", str(tmp_path / "u" / "design.json")]
    strangers = [{"transcript_id": f"x{i:03d}", "rubric": "relevance", "label": 0.5} for i in range(30)]
    some = write_jsonl(
        tmp_path / "some.jsonl", [*({"transcript_id": t, "rubric": "relevance", "label": human[t]} for t in sorted(human)[:100]), *strangers]
    )
    cases["strangers"] = [str(run), "--labels", str(some), "--no-design"]
    none = write_jsonl(tmp_path / "none.jsonl", strangers)
    cases["none_matching"] = [str(run), "--labels", str(none), "--no-design"]
    ids = sorted(human)[::2]
    la, lb = _labels(tmp_path / "la.jsonl", human, ids), _labels(tmp_path / "lb.jsonl", runs["human_b"], ids)
    cases["pair"] = [str(run), str(other), "--labels", str(la), "--labels", str(lb), "--no-design"]
    cases["pair_none_matching"] = [str(run), str(other), "--labels", str(none), "--labels", str(lb), "--no-design"]
    prior = _labels(tmp_path / "prior.jsonl", human, [f"t{i:03d}" for i in range(100, 120)])
    active = ["--strategy", "active", "--uncertainty", "error-model", "--labels", str(prior)]
    assert invoke("labels", "sample", str(run), "--n", "50", "--seed", "5", *active, "--out", str(tmp_path / "a")).exit_code == 0
    labels = _labels(tmp_path / "a" / "labels.jsonl", human, _drawn(json.loads((tmp_path / "a" / "design.json").read_text())))
    cases["active"] = [str(run), "--labels", str(labels), "--design", str(tmp_path / "a" / "design.json")]
    rows = [{"transcript_id": t, "rubric": "relevance", "label": "pass" if human[t] >= 0.6 else "fail"} for t in sorted(human)[::2]]
    cases["pass_fail"] = [
        str(run),
        "--labels",
        str(write_jsonl(tmp_path / "pf.jsonl", rows) or tmp_path / "pf.jsonl"),
        "--threshold",
        "0.6",
        "--no-design",
    ]
    out = {}
    for name, args in cases.items():
        done = invoke("infer", *args, "--json", "--no-save")
        assert done.exit_code in (0, 2), done.output
        out[name] = done.stdout.replace(str(tmp_path), "<out>").replace(str(runs["tmp"]), "<tmp>")
    return out


def test_the_infer_json_is_unchanged_byte_for_byte(runs: dict[str, Any], tmp_path: Path) -> None:
    # The typed result (labels/schema.py InferResult) prints what the dicts it replaced printed: the
    # files were written by the dict version (HARNESS_WRITE_GOLDEN=1 writes them again).
    assert_golden({f"{name}.json": text for name, text in _infer_json_cases(runs, tmp_path).items()}, GOLDEN)
