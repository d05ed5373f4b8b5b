"""``harness infer pairwise.json``: win rates of ``harness pairwise`` corrected with human preference labels.

Judges of known behaviour (tests/scripted_judges.py): ``honest`` names the better answer,
``primacy`` prefers whichever is shown first within a margin, so its verdicts flip with the order
(inconsistent, counted as ties). The oracle is ppi_py on arrays built from pairwise.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.stats.ppi import active_mean
from tests.e2e_support import KEY, KEY_ENV, judge, write_config, write_jsonl
from tests.scripted_judges import serving

pytestmark = pytest.mark.timeout(180)
N = 80


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("pairwise")
    rng = np.random.default_rng(4)
    qa, qb = (rng.integers(1, 10, N) / 10).round(1), (rng.integers(1, 10, N) / 10).round(1)
    ids = [f"p{i:02d}" for i in range(N)]
    a = write_jsonl(tmp / "a.jsonl", [{"id": t, "query": f"Q {t}?", "response": f"A says. quality={q}"} for t, q in zip(ids, qa, strict=True)])
    b = write_jsonl(tmp / "b.jsonl", [{"id": t, "query": f"Q {t}?", "response": f"B says. quality={q}"} for t, q in zip(ids, qb, strict=True)])
    truth = {t: "b" if y > x else "a" if x > y else "tie" for t, x, y in zip(ids, qa, qb, strict=True)}
    with serving() as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        assert server.base_url
        config = write_config(tmp / "harness.toml", [judge(m, server.base_url, model=m) for m in ("honest", "primacy")])
        done = CliRunner().invoke(app, ["pairwise", str(a), str(b), "--out", str(tmp / "out"), "--config", str(config), "--no-cache", "--json"])
        assert done.exit_code == 0, done.output
    yield {"tmp": tmp, "pairwise": tmp / "out" / "pairwise.json", "ids": ids, "truth": truth}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _predictions(pairwise: Path, judge_name: str, ids: list[str]) -> np.ndarray:
    verdicts = json.loads(pairwise.read_text())["judges"][judge_name]["verdicts"]
    return np.array([1.0 if verdicts[t] == "b" else 0.0 for t in ids])


def test_uniform_labels_correct_the_b_win_rate(judged: dict[str, Any]) -> None:
    import ppi_py

    pairwise, ids, truth = judged["pairwise"], judged["ids"], judged["truth"]
    out = judged["tmp"] / "uniform"
    done = invoke("labels", "sample", str(pairwise), "--n", "40", "--seed", "2", "--out", str(out))
    assert done.exit_code == 0, done.output
    design = json.loads((out / "design.json").read_text())
    drawn = [r["transcript_id"] for r in design["eligible"] if r["drawn"]]
    assert len(drawn) == 40 and {r["transcript_id"] for r in map(json.loads, (out / "to_label.jsonl").read_text().splitlines())} == set(drawn)
    labels = write_jsonl(out / "prefs.jsonl", [{"transcript_id": t, "rubric": "pairwise", "label": truth[t].upper()} for t in drawn])
    done = invoke("infer", str(pairwise), "--labels", str(labels), "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    y_all = np.array([1.0 if truth[t] == "b" else 0.0 for t in ids])
    mask = np.isin(ids, drawn)
    for name in ("honest", "primacy"):
        entry = next(j for j in result["judges"] if j["judge"] == name)
        row = next(e for e in entry["estimands"] if e["estimand"] == "b_wins")
        yhat = _predictions(pairwise, name, ids)
        low, high = ppi_py.ppi_mean_ci(y_all[mask], yhat[mask], yhat[~mask], alpha=0.05)
        assert row["corrected"]["ci"] == pytest.approx([low[0], high[0]], abs=1e-9) and row["valid"] is True
        assert row["judge_only"]["mean"] == pytest.approx(yhat.mean())
    # The honest judge predicts the human verdicts exactly: λ near its ceiling 1/(1 + n/N) = 1/2 (the
    # 40 unlabelled pairs then weigh as much as the 40 labelled ones), and more effective labels.
    honest = next(e for e in result["judges"][0]["estimands"] if e["estimand"] == "b_wins")
    primacy = next(e for e in result["judges"][1]["estimands"] if e["estimand"] == "b_wins")
    assert honest["lambda"] > 0.45 and honest["effective_labels"] > primacy["effective_labels"]
    text = invoke("infer", str(pairwise), "--labels", str(labels))
    assert text.exit_code == 0 and "honest b_wins: corrected" in text.output and "net_b_minus_a" in text.output


def test_active_pairs_favour_inconsistent_verdicts_and_bad_labels_are_one_line(judged: dict[str, Any]) -> None:
    pairwise, ids, truth = judged["pairwise"], judged["ids"], judged["truth"]
    out = judged["tmp"] / "active"
    done = invoke("labels", "sample", str(pairwise), "--n", "40", "--seed", "3", "--strategy", "active", "--judge", "primacy", "--out", str(out))
    assert done.exit_code == 0, done.output
    design = json.loads((out / "design.json").read_text())
    verdicts = json.loads(pairwise.read_text())["judges"]["primacy"]["verdicts"]
    pi = {r["transcript_id"]: r["pi"] for r in design["eligible"]}
    flipped = [t for t in ids if verdicts[t] == "inconsistent"]
    steady = [t for t in ids if verdicts[t] != "inconsistent"]
    assert flipped and steady and min(pi[t] for t in flipped) > max(pi[t] for t in steady)
    drawn = [r["transcript_id"] for r in design["eligible"] if r["drawn"]]
    labels = write_jsonl(out / "prefs.jsonl", [{"transcript_id": t, "rubric": "pairwise", "label": truth[t]} for t in drawn])
    result = json.loads(invoke("infer", str(pairwise), "--labels", str(labels), "--json").stdout)
    row = next(e for e in result["judges"][1]["estimands"] if e["estimand"] == "net_b_minus_a")
    value = {"b": 1.0, "a": -1.0, "tie": 0.0}
    yhat = np.array([value.get(verdicts[t], 0.0) for t in ids])
    y = np.array([value[truth[t]] for t in ids])
    expected = active_mean(y, yhat, np.array([pi[t] for t in ids]), np.isin(ids, drawn))
    assert row["corrected"]["mean"] == pytest.approx(expected.estimate, abs=1e-12)
    bad = write_jsonl(out / "bad.jsonl", [{"transcript_id": "p01", "rubric": "pairwise", "label": "maybe"}])
    done = invoke("infer", str(pairwise), "--labels", str(bad))
    assert done.exit_code == 2 and f"{bad}:1: label:" in done.output


def test_preferences_for_pairs_not_in_the_file_are_said_and_none_matching_is_refused(judged: dict[str, Any], tmp_path: Path) -> None:
    pairwise, ids, truth = judged["pairwise"], judged["ids"], judged["truth"]
    strangers = [{"transcript_id": f"x{i:02d}", "rubric": "pairwise", "label": "a"} for i in range(30)]
    some = write_jsonl(tmp_path / "some.jsonl", [*({"transcript_id": t, "rubric": "pairwise", "label": truth[t]} for t in ids[:40]), *strangers])
    done = invoke("infer", str(pairwise), "--labels", str(some), "--json", "--no-design")
    assert done.exit_code == 0, done.output
    assert f"30 of the 70 labels in {some} name pairs that are not in {pairwise}: not used" in json.loads(done.stdout)["notes"]
    none = write_jsonl(tmp_path / "none.jsonl", strangers)
    done = invoke("infer", str(pairwise), "--labels", str(none), "--no-design")
    why = f"none of the 30 labels in {none} names a pair of {pairwise}: 0 labels used"
    assert done.exit_code == 2
    assert f"honest b_wins: refused: {why}" in done.stdout
    assert f"error: nothing estimated: every metric was refused (honest b_wins: {why}" in " ".join(done.stderr.split())
