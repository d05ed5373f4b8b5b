"""``harness pairwise`` and ``harness probe`` against scripted judges whose biases are known.

The judges (tests/scripted_judges.py) answer by rule: ``honest`` names the better answer and
scores the true quality; ``primacy`` prefers whatever is shown first; ``verbose`` rewards padding;
``noisy`` adds unbiased noise. So the expected position-bias rate and probe shifts are known
exactly, and the intervals are checked against statsmodels (Wilson) and SciPy (t, paired t-test).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.exit_codes import EXIT_USER_ERROR
from tests.e2e_support import chat_requests, judge, write_config, write_jsonl
from tests.scripted_judges import PRIMACY_BONUS, PRIMACY_MARGIN, VERBOSITY_BONUS, ScriptedJudgeServer

N = 40


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "220"})


def check_wilson(section: dict[str, Any], count: int, n: int) -> None:
    from statsmodels.stats.proportion import proportion_confint

    assert section["count"] == count
    assert section["rate"] == pytest.approx(count / n, abs=1e-12)
    low, high = proportion_confint(count, n, alpha=0.05, method="wilson")
    assert section["ci"] == pytest.approx([low, high], abs=1e-9)


@pytest.mark.timeout(180)
def test_pairwise_finds_the_honest_verdicts_and_the_primacy_judges_position_bias(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    assert scripted_server.base_url
    rng = np.random.default_rng(5)
    qa = [round(float(v), 1) for v in rng.integers(1, 10, N) / 10]
    qb = [round(float(v), 1) for v in rng.integers(1, 10, N) / 10]
    ids = [f"p{i:02d}" for i in range(N)]
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": t, "query": f"Q {t}?", "response": f"A says. quality={q}"} for t, q in zip(ids, qa, strict=True)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": t, "query": f"Q {t}?", "response": f"B says. quality={q}"} for t, q in zip(ids, qb, strict=True)])
    config = write_config(tmp_path / "harness.toml", [judge(m, scripted_server.base_url, model=m) for m in ("honest", "primacy")])
    before = len(chat_requests(scripted_server))
    result = invoke("pairwise", str(a), str(b), "--out", str(tmp_path / "out"), "--config", str(config), "--no-cache", "--json")
    assert result.exit_code == 0, result.output
    assert len(chat_requests(scripted_server)) - before == N * 2 * 2  # both orders, two judges
    data = json.loads(result.stdout)
    assert data == json.loads((tmp_path / "out" / "pairwise.json").read_text())

    b_better = sum(y > x for x, y in zip(qa, qb, strict=True))
    a_better = sum(x > y for x, y in zip(qa, qb, strict=True))
    honest = data["judges"]["honest"]
    assert honest["judged_in_both_orders"] == N
    check_wilson(honest["b_wins"], b_better, N)
    check_wilson(honest["a_wins"], a_better, N)
    check_wilson(honest["ties"], N - a_better - b_better, N)
    check_wilson(honest["position_bias"], 0, N)  # an honest judge never flips

    primacy = data["judges"]["primacy"]
    flips = sum(abs(x - y) <= PRIMACY_MARGIN + 1e-9 for x, y in zip(qa, qb, strict=True))
    assert 0 < flips < N
    check_wilson(primacy["position_bias"], flips, N)
    assert primacy["position_bias"]["to_first_shown"] == flips  # every flip went to the answer shown first
    check_wilson(primacy["b_wins"], sum(y - x > PRIMACY_MARGIN + 1e-9 for x, y in zip(qa, qb, strict=True)), N)
    check_wilson(primacy["ties"], flips, N)  # an inconsistent pair is no win for either

    table = invoke("pairwise", str(a), str(b), "--out", str(tmp_path / "out2"), "--config", str(config), "--no-cache")
    assert table.exit_code == 0 and "position bias" in table.stdout and "primacy" in table.stdout


def test_pairwise_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = write_jsonl(tmp_path / "pairs.jsonl", [{"id": "x", "query": "q", "response_a": "a"}])
    result = invoke("pairwise", str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.strip() == f"error: {bad}:1: response_b: must be a non-empty string"


def probe_data(tmp_path: Path) -> tuple[Path, list[float]]:
    rng = np.random.default_rng(9)
    qualities = [round(float(v), 2) for v in rng.uniform(0.1, 0.7, N)]
    rows = [
        {
            "id": f"t{i:02d}",
            "query": f"Question {i}?",
            "response": f"Answer {i}. quality={q}",
            "contexts": [f"GOLD fact {i}.", f"Unrelated note {i}."],
        }
        for i, q in enumerate(qualities)
    ]
    return write_jsonl(tmp_path / "t.jsonl", rows), qualities


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("kind", "rubric", "biased", "bias"),
    [("verbosity", "relevance", "verbose", VERBOSITY_BONUS), ("position", "faithfulness", "primacy", -PRIMACY_BONUS)],
)
def test_probe_catches_the_biased_judge_and_passes_the_honest_and_the_noisy(
    scripted_server: ScriptedJudgeServer, tmp_path: Path, kind: str, rubric: str, biased: str, bias: float
) -> None:
    from scipy import stats as sp

    assert scripted_server.base_url
    data, _ = probe_data(tmp_path)
    judges = [judge(m, scripted_server.base_url, model=m, seed=4) for m in ("honest", "noisy", biased)]
    config = write_config(tmp_path / "harness.toml", judges)
    out = tmp_path / "out"
    # the same probe twice: once as JSON, once as the table
    probe_args = ("probe", kind, str(data), "--rubric", rubric, "--sample", "30", "--seed", "2", "--config", str(config), "--no-cache")
    result = invoke(*probe_args, "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["eligible"] == N and found["sampled"] == 30
    expected_ids = sorted(random.Random(2).sample(range(N), 30))
    inputs = [json.loads(line)["id"] for line in (out / "judge_inputs.jsonl").read_text().splitlines()]
    assert inputs == [f"t{i:02d}::{side}" for i in expected_ids for side in ("orig", "probe")]
    shifts = {s["judge"]: s for s in found["shifts"]}
    assert set(shifts) == {"honest", "noisy", biased}

    caught = shifts[biased]
    assert caught["n"] == 30 and caught["moved"] is True
    assert caught["shift"] == pytest.approx(bias, abs=1e-9)  # the scripted bias, found exactly
    assert caught["ci"] == pytest.approx([bias, bias], abs=1e-9) and caught["changed"] == 30

    honest = shifts["honest"]
    assert honest["shift"] == 0.0 and honest["moved"] is False and honest["changed"] == 0

    noisy = shifts["noisy"]
    rows = [json.loads(line) for line in (out / "judgments" / "judgments.jsonl").read_text().splitlines()]
    got = {r["transcript_id"]: r["score"] for r in rows if r["judge"] == "noisy"}
    orig = np.array([got[f"t{i:02d}::orig"] for i in expected_ids])
    probe = np.array([got[f"t{i:02d}::probe"] for i in expected_ids])
    diffs = probe - orig
    low, high = sp.t.interval(0.95, diffs.size - 1, loc=diffs.mean(), scale=sp.sem(diffs))
    assert noisy["shift"] == pytest.approx(diffs.mean(), abs=1e-12)
    assert noisy["ci"] == pytest.approx([low, high], abs=1e-9)
    assert noisy["pvalue"] == pytest.approx(sp.ttest_rel(probe, orig).pvalue, abs=1e-9)
    assert noisy["changed"] == 30 and noisy["moved"] is False  # noisy, but not moved by the perturbation

    table = invoke(*probe_args, "--out", str(tmp_path / "o2"))
    assert table.exit_code == 0 and "YES" in table.stdout


def test_probe_bad_input_is_one_line(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "query": "q", "response": "r", "contexts": ["only one"]}])
    result = invoke("probe", "position", str(data), "--out", str(tmp_path / "o"))
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.strip() == f"error: {data}: no transcript has two or more contexts to perturb for the position probe"
    result = invoke("probe", "tone", str(data), "--out", str(tmp_path / "o"))
    assert result.exit_code == EXIT_USER_ERROR and "'tone' is not one of 'verbosity', 'position'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
