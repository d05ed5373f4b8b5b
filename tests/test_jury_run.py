"""A jury in a run, and everything keyed by judge working on it unchanged, against a scripted
judge server on 127.0.0.1 whose every reply the test chose (``tests/analysis_support.py``).

Three judges of three lineages (gpt-4o-mini, claude-haiku-4-5, llama-3.1-8b) judge 40 transcripts
that a gpt-4o agent answered; a jury of them is one more judge. The oracles are computed here from
the rows the run wrote: the verdicts by hand, the alpha by the ``krippendorff`` package, the
agreement with humans by ``harness agreement`` on the same run.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.analysis.compare import compare_report
from harness.analysis.label_agreement import agreement_report
from harness.cli import app
from harness.labels.infer import infer_report
from harness.planning import RunOptions
from harness.report import build_report
from harness.report.explaining import explain
from harness.workflows.cascade import CascadeOptions, calibrate, run_cascade
from harness.workflows.race import RaceOptions, race
from tests.analysis_support import ScriptedJudges, record
from tests.e2e_support import assert_golden, judge, read_jsonl, run_and_show, write_jsonl

pytestmark = pytest.mark.timeout(240)

N = 40
MODELS = {"a": "gpt-4o-mini", "b": "claude-haiku-4-5", "c": "llama-3.1-8b"}
RUBRICS = ("relevance", "faithfulness")
PRICES = {"a": 0.15, "b": 1.0, "c": 0.05}


def truth(i: int) -> float:
    return round((i * 7 % 11) / 10, 1)


def table(shift: float = 0.0) -> dict[tuple[str, str, str], float]:
    """Per (transcript, rubric, model): a agrees with the truth, b is one step off on every third
    transcript, c is lenient (+0.3) on every other one."""
    out = {}
    for i in range(N):
        q = min(1.0, truth(i) + shift)
        for rubric in RUBRICS:
            out[(f"t{i:02d}", rubric, MODELS["a"])] = q
            out[(f"t{i:02d}", rubric, MODELS["b"])] = round(min(1.0, q + 0.1), 1) if i % 3 == 0 else q
            out[(f"t{i:02d}", rubric, MODELS["c"])] = round(min(1.0, q + 0.3), 1) if i % 2 == 0 else q
    return out


def transcripts(path: Path) -> Path:
    rows = [record(f"t{i:02d}") | {"metadata": {"model": "gpt-4o"}} for i in range(N)]
    return write_jsonl(path, rows)


def labels(path: Path, rubrics: tuple[str, ...] = RUBRICS, every: int = 2) -> Path:
    return write_jsonl(path, [{"transcript_id": f"t{i:02d}", "rubric": r, "label": truth(i)} for i in range(0, N, every) for r in rubrics])


def config(path: Path, url: str, jury: dict[str, Any] | None = None, extra_judges: list[dict[str, Any]] = (), **top: Any) -> Path:  # type: ignore[assignment]
    lines = [f"{k} = {json.dumps(v)}" for k, v in top.items()]
    for name, model in MODELS.items():
        table_ = judge(name, url, model=model, max_attempts=1, input_price_per_1m=PRICES[name], output_price_per_1m=PRICES[name])
        lines += ["", "[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in table_.items()]
    for extra in extra_judges:
        lines += ["", "[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    if jury is not None:
        lines += ["", "[[juries]]", 'name = "panel"', 'members = ["a", "b", "c"]'] + [f"{k} = {json.dumps(v)}" for k, v in jury.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(tmp: Path, name: str, scripted: ScriptedJudges, jury: dict[str, Any], shift: float = 0.0, **options: Any) -> tuple[Path, str]:
    scripted.table = table(shift)
    folder = tmp / f"{name}-input"
    folder.mkdir(parents=True, exist_ok=True)
    data = transcripts(folder / "t.jsonl")
    labels(folder / "labels.jsonl")
    cfg = config(folder / "harness.toml", scripted.base_url or "", jury, rubrics=list(RUBRICS))
    console = Console(file=io.StringIO(), width=200)
    opts = RunOptions(input=data, out=tmp / name, config=cfg, no_cache=True, progress=False, **options)
    outcome = asyncio.run(run_and_show(opts, console))
    assert outcome.exit_code == 0, outcome.message
    return tmp / name, console.file.getvalue()  # type: ignore[attr-defined]


def rows_of(run_dir: Path, judge_name: str | None = None) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(run_dir / "judgments.jsonl") if judge_name is None or r["judge"] == judge_name]


def _bin(score: float) -> int:
    return int(np.floor(score * 10 + 0.5 + 1e-9))


def test_the_jury_is_a_judge_of_the_run(tmp_path: Path, scripted: ScriptedJudges) -> None:
    out, shown = run(tmp_path, "run", scripted, {"method": "majority", "labels": "labels.jsonl"})
    rows = rows_of(out)
    by = {(r["transcript_id"], r["rubric"], r["judge"]): r for r in rows}
    assert len(rows) == N * len(RUBRICS) * 4
    for i in range(N):
        for rubric in RUBRICS:
            tid = f"t{i:02d}"
            votes = [by[(tid, rubric, m)]["score"] for m in MODELS]
            bins = Counter(_bin(v) for v in votes)
            top = max(bins.values())
            expected = min(b for b, n in bins.items() if n == top) / 10  # a tie goes to the lower bin
            jury = by[(tid, rubric, "panel")]
            assert jury["status"] == "scored" and jury["score"] == pytest.approx(expected)
            assert jury["jury"]["votes"] == dict(zip(MODELS, votes, strict=True))
            assert jury["jury"]["confidence"] == pytest.approx(top / 3)
            assert jury["cost_usd"] == pytest.approx(sum(by[(tid, rubric, m)]["cost_usd"] for m in MODELS))
            assert jury["cache_key"] is None and jury["latency_ms"] is None
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    # one more judge in every judge-keyed section, but its calls and cost are its members', once
    assert (
        "panel" in summary["judge_models"] and "panel" in summary["rubrics"]["relevance"] and "panel" in summary["composites"]["answer_correctness"]
    )
    assert "panel" not in summary["judges"]
    assert summary["judgments"] == {"scored": N * len(RUBRICS) * 3}
    assert summary["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows if r["judge"] != "panel"))
    jury_scores = [r["score"] for r in rows if r["judge"] == "panel" and r["rubric"] == "relevance"]
    assert summary["rubrics"]["relevance"]["panel"]["mean"] == pytest.approx(np.mean(jury_scores))
    results = read_jsonl(out / "results.jsonl")
    assert results[0]["scores"]["panel"]["relevance"] == by[("t00", "relevance", "panel")]["score"]
    assert results[0]["composites"]["panel"]["answer_correctness"] == pytest.approx(
        0.7 * by[("t00", "relevance", "panel")]["score"] + 0.3 * by[("t00", "faithfulness", "panel")]["score"]
    )

    section = summary["juries"]["panel"]["rubrics"]["relevance"]
    import krippendorff

    votes = np.array([[by[(f"t{i:02d}", "relevance", m)]["score"] for i in range(N)] for m in MODELS])
    assert section["interval"]["value"] == pytest.approx(krippendorff.alpha(reliability_data=votes, level_of_measurement="interval"), abs=1e-9)
    # each member's agreement with the humans is harness agreement's, on the same run and labels
    agreed = agreement_report(out, tmp_path / "run-input" / "labels.jsonl", n_resamples=200)
    relevance = next(m for m in agreed.metrics if m.metric == "relevance")
    for entry in relevance.judges:
        mine = section["humans"][entry.judge]
        assert entry.weighted_kappa is not None and entry.spearman is not None
        assert mine["n"] == entry.n
        assert mine["mae"] == pytest.approx(entry.mae)
        assert mine["weighted_kappa"]["value"] == pytest.approx(entry.weighted_kappa.value)
        assert mine["spearman"]["value"] == pytest.approx(entry.spearman.value)
    # the gpt-4o-mini member shares the agent's lineage (gpt-4o) on every transcript; the others do not
    flags = summary["juries"]["panel"]["self_preference"]
    assert flags == [{"member": "a", "model": "gpt-4o-mini", "lineage": "OpenAI GPT", "agent_models": ["gpt-4o"], "transcripts": N}]
    assert "Juries" in shown and "member a (gpt-4o-mini) is of the OpenAI GPT lineage" in shown

    text = explain(out, "t00")
    assert f"judge panel: scored {by[('t00', 'relevance', 'panel')]['score']:g}" in text
    assert "jury majority of votes a " in text
    report = build_report(out)
    assert report.path.exists() and "panel" in report.path.read_text(encoding="utf-8")


def test_compare_infer_and_race_take_the_jury_as_a_judge(tmp_path: Path, scripted: ScriptedJudges) -> None:
    jury = {"method": "median", "labels": "labels.jsonl"}
    a, _ = run(tmp_path, "a", scripted, jury)
    b, _ = run(tmp_path, "b", scripted, jury, shift=0.2)
    comparison = compare_report(a, b, n_resamples=200)
    rows = [r for r in comparison.metrics if r.judge == "panel"]
    assert {r.metric for r in rows} == {"relevance", "faithfulness", "answer_correctness"}
    relevance = next(r for r in rows if r.metric == "relevance")
    assert relevance.paired is not None and relevance.paired.mean_difference > 0.1  # B answers were judged higher

    # the jury as PPI++'s predictor: it learned nothing from the labels, so infer corrects it
    inferred = infer_report([a], [tmp_path / "a-input" / "labels.jsonl"], no_design=True)
    relevance = next(m for m in inferred.metrics or [] if m.name == "relevance")
    panel = next(j for j in relevance.judges if j.judge == "panel")
    assert panel.corrected is not None and panel.refused is None

    # race: the jury is the config's one judge (its members are its parts)
    folder = tmp_path / "race"
    folder.mkdir()
    scripted.table = {**table(), **{(t, r, m): v for (t, r, m), v in table(0.2).items()}}
    cfg = config(folder / "harness.toml", scripted.base_url or "", jury | {"labels": str(tmp_path / "a-input" / "labels.jsonl")})
    result = asyncio.run(
        race(
            RaceOptions(
                a=tmp_path / "a-input" / "t.jsonl",
                b=tmp_path / "a-input" / "t.jsonl",
                out=folder / "out",
                metric="relevance",
                config=cfg,
                cache=folder / "c.sqlite",
            )
        )
    )
    assert result.judge == "panel" and result.pairs_judged > 0


def test_infer_refuses_a_jury_fitted_on_its_labels(tmp_path: Path, scripted: ScriptedJudges) -> None:
    out, _ = run(tmp_path, "w", scripted, {"method": "weighted", "labels": "labels.jsonl"})
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    section = summary["juries"]["panel"]["rubrics"]["relevance"]
    assert sorted(section["fitted_on"]) == [f"t{i:02d}" for i in range(0, N, 2)]
    assert section["humans"]["panel"]["in_sample"] is True
    weights = section["weighted"]["weights"]
    assert weights["a"] > weights["b"] > weights["c"]  # a is always right, b right two times in three, c one in two
    inferred = infer_report([out], [tmp_path / "w-input" / "labels.jsonl"], no_design=True)
    relevance = next(m for m in inferred.metrics or [] if m.name == "relevance")
    panel = next(j for j in relevance.judges if j.judge == "panel")
    assert "learned from 20 of these labels" in (panel.refused or "") and panel.corrected is None
    member = next(j for j in relevance.judges if j.judge == "a")
    assert member.corrected is not None  # its members are judges that learned nothing
    # labels the jury did not see are fine
    unseen = labels(tmp_path / "unseen.jsonl", every=1)
    rows = [r for r in read_jsonl(unseen) if int(r["transcript_id"][1:]) % 2 == 1]
    write_jsonl(unseen, rows)
    inferred = infer_report([out], [unseen], no_design=True)
    relevance = next(m for m in inferred.metrics or [] if m.name == "relevance")
    assert next(j for j in relevance.judges if j.judge == "panel").corrected is not None


def _cli(argv: list[str]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, argv, env={**os.environ, "COLUMNS": "400"})
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("jury", "expected"),
    [
        ({"members": ["a", "zz"]}, "juries[0].members: no judge named 'zz'"),
        ({"name": "a"}, "juries[0].name: 'a' is also a judge's name"),
        ({"method": "mean", "sequential": True}, "sequential: needs method majority or median"),
        ({"method": "majority", "anchored": True}, "anchored: only a dawid_skene jury is anchored on labels"),
        ({"method": "weighted"}, "needs human labels of rubric 'relevance' (its weights are measured on them): no labels file is given"),
        ({"method": "weighted", "labels": "only-relevance.jsonl"}, "needs human labels of rubric 'faithfulness'"),
        ({"members": ["a", "a"]}, "judge 'a' is named twice"),
        ({"labels": "bad.jsonl"}, "bad.jsonl:1: label: 'maybe' is not a label"),
        ({"method": "bayes"}, "juries[0].method"),
    ],
)
def test_a_bad_jury_is_refused_in_one_line_before_anything_is_sent(
    tmp_path: Path, scripted: ScriptedJudges, jury: dict[str, Any], expected: str
) -> None:
    labels(tmp_path / "only-relevance.jsonl", rubrics=("relevance",))
    write_jsonl(tmp_path / "bad.jsonl", [{"transcript_id": "t00", "rubric": "relevance", "label": "maybe"}])
    data = transcripts(tmp_path / "t.jsonl")
    fields = {"method": "majority"} | jury
    lines = [f"{k} = {json.dumps(v)}" for k, v in fields.items() if k not in ("name", "members")]
    cfg = config(tmp_path / "harness.toml", scripted.base_url or "", None, rubrics=list(RUBRICS))
    head = ["", "[[juries]]", f'name = "{jury.get("name", "panel")}"', f"members = {json.dumps(jury.get('members', ['a', 'b', 'c']))}"]
    cfg.write_text(cfg.read_text(encoding="utf-8") + "\n".join(head + lines) + "\n", encoding="utf-8")
    before = len(scripted.requests)
    code, output = _cli(
        ["run", str(data), "--config", str(cfg), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite"), "--no-progress"]
    )
    assert code == 2, output
    assert len(output) == 1 and expected in output[0], output
    assert len(scripted.requests) == before
    assert not (tmp_path / "out" / "judgments.jsonl").exists()


def test_jury_labels_option_needs_a_jury(tmp_path: Path, scripted: ScriptedJudges) -> None:
    data = transcripts(tmp_path / "t.jsonl")
    cfg = config(tmp_path / "harness.toml", scripted.base_url or "", None)
    code, output = _cli(
        [
            "run",
            str(data),
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--jury-labels",
            str(labels(tmp_path / "l.jsonl")),
        ]
    )
    assert code == 2 and len(output) == 1 and "the config has no [[juries]]" in output[0], output


def test_a_jury_is_a_stage_of_a_cascade(tmp_path: Path, scripted: ScriptedJudges) -> None:
    """Three cheap members agree on two transcripts in three (the jury is sure) and split on the
    rest; the strong judge (three samples, always agreeing) answers only those."""
    n = 150  # the strong stage must see enough of the jury's unsure transcripts to be certified
    scripted.table = {}
    rows = []
    for i in range(n):
        tid, q = f"t{i:03d}", (i % 10) / 10
        rows.append(record(tid))
        split = i % 3 == 0
        for model, offset in (("cheap-1", 0.0), ("cheap-2", 0.3 if split else 0.0), ("cheap-3", 0.6 if split else 0.0)):
            scripted.table[(tid, "relevance", model)] = round(min(1.0, q + offset), 1)
        scripted.table[(tid, "relevance", "strong")] = q
    write_jsonl(tmp_path / "t.jsonl", rows)
    lines = []
    for name, price, samples in (("cheap-1", 0.1, 1), ("cheap-2", 0.1, 1), ("cheap-3", 0.1, 1), ("strong", 5.0, 3)):
        fields = judge(
            name, scripted.base_url or "", model=name, input_price_per_1m=price, output_price_per_1m=price, samples=samples, max_attempts=1
        )
        lines += ["[[judges]]"] + [f"{k} = {json.dumps(v)}" for k, v in fields.items()] + [""]
    lines += ["[[juries]]", 'name = "panel"', 'members = ["cheap-1", "cheap-2", "cheap-3"]', ""]
    lines += ["[cascade]", 'stages = ["panel", "strong"]', "target_agreement = 0.9", "confidence = 0.9"]
    (tmp_path / "harness.toml").write_text("\n".join(lines) + "\n")
    options = CascadeOptions(
        input=tmp_path / "t.jsonl", out=tmp_path / "cal", config=tmp_path / "harness.toml", rubric="relevance", cache=tmp_path / "c.sqlite"
    )
    calibrated = asyncio.run(calibrate(options))
    panel = calibrated.stages[0]
    assert panel.judge == "panel" and panel.threshold == 1.0  # only a unanimous jury is trusted
    summary = asyncio.run(
        run_cascade(
            CascadeOptions(
                input=tmp_path / "t.jsonl", out=tmp_path / "run", config=tmp_path / "harness.toml", rubric="relevance", cache=tmp_path / "c.sqlite"
            ),
            tmp_path / "cal" / "cascade.json",
        )
    )
    answered = {s.judge: s.answered for s in summary.stages}
    assert answered == {"panel": 100, "strong": 50}
    answers = read_jsonl(tmp_path / "run" / "judgments.jsonl")
    assert {a["judge"] for a in answers if a["stage"] == 1} == {"panel"}
    assert all(a["jury"]["confidence"] == 1.0 for a in answers if a["stage"] == 1)


def test_the_sequential_jury_matches_the_whole_jury_on_every_transcript(tmp_path: Path, scripted: ScriptedJudges) -> None:
    """Cheapest first (c, then a, then b): on the transcripts where c and a agree, b is not asked."""
    whole, _ = run(tmp_path, "whole", scripted, {"method": "majority"})
    before = len(scripted.requests)
    seq, shown = run(tmp_path, "seq", scripted, {"method": "majority", "sequential": True})
    asked = len(scripted.requests) - before
    verdict = lambda rows: [(r["transcript_id"], r["rubric"], r["status"], r["score"]) for r in rows]  # noqa: E731
    assert verdict(rows_of(seq, "panel")) == verdict(rows_of(whole, "panel"))
    settled = [r for r in rows_of(seq) if r["reason"] == "jury_settled"]
    scores = table()  # where c and a give the same bin, b could not change the verdict
    agree = sum(1 for (t, r, m), v in scores.items() if m == MODELS["a"] and _bin(v) == _bin(scores[(t, r, MODELS["c"])]))
    assert {r["judge"] for r in settled} == {"b"} and len(settled) == agree
    assert asked == N * len(RUBRICS) * 3 - agree
    summary = json.loads((seq / "summary.json").read_text(encoding="utf-8"))
    assert summary["juries"]["panel"]["member_judgments"] == {"total": N * 2 * 3, "not_asked": agree, "asked": N * 2 * 3 - agree}
    assert f"{agree:,} of {N * 2 * 3:,}" in shown


def test_members_of_one_sequential_jury_sit_on_no_other(tmp_path: Path, scripted: ScriptedJudges) -> None:
    data = transcripts(tmp_path / "t.jsonl")
    cfg = config(tmp_path / "harness.toml", scripted.base_url or "", {"method": "majority", "sequential": True})
    cfg.write_text(cfg.read_text(encoding="utf-8") + '\n[[juries]]\nname = "other"\nmembers = ["a", "b"]\n', encoding="utf-8")
    code, output = _cli(["run", str(data), "--config", str(cfg), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite")])
    assert code == 2 and "sits on jury 'other' too" in output[0], output


@pytest.mark.parametrize("seed", range(3))
def test_dawid_skene_jury_in_a_run_matches_the_library(tmp_path: Path, scripted: ScriptedJudges, seed: int) -> None:
    """The run's Dawid–Skene verdicts are crowd-kit's on the members' binned votes (same start, same steps)."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    rng = random.Random(seed)
    out, _ = run(tmp_path, "ds", scripted, {"method": "dawid_skene"}, shift=rng.choice([0.0, 0.1]))
    by = {(r["transcript_id"], r["rubric"], r["judge"]): r for r in rows_of(out)}
    data = pd.DataFrame(
        [(f"t{i:02d}", m, _bin(by[(f"t{i:02d}", "relevance", m)]["score"])) for i in range(N) for m in MODELS], columns=["task", "worker", "label"]
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probas = DawidSkene(n_iter=1000, tol=1e-12).fit_predict_proba(data)
    for i in range(N):
        tid = f"t{i:02d}"
        row = probas.loc[tid]
        best = row.max()
        if (row >= best - 1e-6).sum() > 1:
            continue  # a tie: the jury's rule (the lower bin) decides, crowd-kit's column order would
        assert by[(tid, "relevance", "panel")]["score"] == pytest.approx(row.idxmax() / 10)


JURY_GOLDEN = Path(__file__).resolve().parent / "fixtures" / "jury_summary"


@pytest.mark.parametrize(
    ("name", "jury"),
    [
        ("majority_labels", {"method": "majority", "labels": "labels.jsonl"}),
        ("weighted_in_sample", {"method": "weighted", "labels": "labels.jsonl"}),
        ("median_no_labels", {"method": "median"}),
    ],
)
def test_the_jury_summary_is_unchanged_byte_for_byte(tmp_path: Path, scripted: ScriptedJudges, name: str, jury: dict[str, Any]) -> None:
    # summary.json's juries section (alpha, pair kappas, agreement with humans: jury/report.py) as
    # the dict version wrote it (HARNESS_WRITE_GOLDEN=1 writes it again): a typed one writes the same.
    out, _ = run(tmp_path, name, scripted, jury)
    found = json.dumps(json.loads((out / "summary.json").read_text(encoding="utf-8"))["juries"], indent=2).replace(str(tmp_path), "<tmp>") + "\n"
    assert_golden({f"{name}.json": found}, JURY_GOLDEN)
