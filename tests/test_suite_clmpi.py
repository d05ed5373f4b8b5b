"""`harness clmpi` (seed 001): the worked example with the errata, EFF's edge cases, weights,
graceful degradation, judged components against a real local judge server, and offline replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError, UserInputError
from harness.planning import JudgeOptions
from harness.suites.clmpi import (
    DEFAULT_WEIGHTS,
    accuracy,
    clmpi,
    clmpi_100,
    eff_norm,
    eff_raw,
    evaluate_clmpi,
    exact_match,
    interpretation,
    load_weights,
    quality_norm,
)
from tests.e2e_support import serve, write_jsonl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# --- the worked example (seed 001), its arithmetic slips corrected where each formula is used --------------------------------


def test_worked_example_with_the_1e9() -> None:
    effs = eff_norm([0.15, 0.10])
    assert effs[0] == pytest.approx(0.99999998, abs=1e-10)
    assert effs[0] < 1.0
    assert effs[1] == 0.0
    a = {
        "ACC": accuracy([True] * 8 + [False] * 2),
        "CON": quality_norm([4.0]),
        "COH": quality_norm([3.5]),
        "FLU": quality_norm([4.2]),
        "EFF": float(effs[0]),
    }
    b = {"ACC": 0.6, "CON": quality_norm([3.0]), "COH": quality_norm([2.8]), "FLU": quality_norm([3.5]), "EFF": float(effs[1])}
    assert a["ACC"] == 0.8 and a["FLU"] == pytest.approx(0.84)
    score_a, score_b = clmpi(DEFAULT_WEIGHTS, a), clmpi(DEFAULT_WEIGHTS, b)
    assert score_a == pytest.approx(0.8179999970, abs=1e-9)
    assert score_a < 0.818
    assert round(score_a, 3) == 0.818
    assert score_b == pytest.approx(0.522)
    assert round(clmpi_100(score_a), 1) == 81.8 and round(clmpi_100(score_b), 1) == 52.2
    assert interpretation(score_a) == "Excellent"
    assert interpretation(score_b) == "Fair"


def test_eff_all_equal_gives_zero_and_raw_formula() -> None:
    assert eff_norm([0.2, 0.2, 0.2]).tolist() == [0.0, 0.0, 0.0]
    assert eff_norm([0.3]).tolist() == [0.0]
    assert eff_norm([]).size == 0
    assert eff_raw(0.5, 900) == pytest.approx(1 / 9.5)


def test_bands_and_empty_components() -> None:
    assert [interpretation(x) for x in (1.0, 0.8, 0.79, 0.6, 0.4, 0.2, 0.19, 0.0)] == [
        "Excellent",
        "Excellent",
        "Good",
        "Good",
        "Fair",
        "Poor",
        "Very Poor",
        "Very Poor",
    ]
    assert accuracy([]) is None
    assert quality_norm([]) is None


def test_normalised_exact_match() -> None:
    assert exact_match("The capital is Paris.", ["the capital is paris"])
    assert exact_match("  Carbon   dioxide! ", ["carbon dioxide"])
    assert exact_match("Mars", ["Red planet", "mars"])
    assert not exact_match("Eight", ["8"])


@settings(max_examples=80, deadline=None)
@given(
    scores=st.lists(st.floats(0, 1), min_size=5, max_size=5),
    raw=st.lists(st.floats(1e-3, 50), min_size=1, max_size=8),
    weights=st.lists(st.floats(0, 1), min_size=5, max_size=5).filter(lambda w: sum(w) > 1e-3),
)
def test_ranges(scores: list[float], raw: list[float], weights: list[float]) -> None:
    norm = eff_norm(raw)
    assert np.all(norm >= 0) and np.all(norm < 1)
    total = sum(weights)
    w = {c: x / total for c, x in zip(DEFAULT_WEIGHTS, weights, strict=True)}
    value = clmpi(w, dict(zip(DEFAULT_WEIGHTS, scores, strict=True)))
    assert -1e-12 <= value <= 1 + 1e-12
    assert -1e-10 <= clmpi_100(value) <= 100 + 1e-10


# --- weights -------------------------------------------------------------------------------------


def test_weights_files(tmp_path: Path) -> None:
    good = tmp_path / "w.yaml"
    good.write_text("weights:\n  ACC: 0.4\n  CON: 0.1\n  COH: 0.2\n  FLU: 0.2\n  EFF: 0.1\n", encoding="utf-8")
    assert load_weights(good)["ACC"] == 0.4
    assert load_weights(None) == DEFAULT_WEIGHTS
    bad = tmp_path / "w.toml"
    bad.write_text("[weights]\nACC = 0.5\nCON = 0.2\nCOH = 0.2\nFLU = 0.2\nEFF = 0.15\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="weights must sum to 1, they sum to 1.25"):
        load_weights(bad)
    bad.write_text("[weights]\nACC = 1.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="CON is missing"):
        load_weights(bad)
    bad.write_text("[weights]\nACC = 0.25\nCON = 0.2\nCOH = 0.2\nFLU = 0.2\nEFF = 0.15\nSPEED = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="weights.SPEED"):
        load_weights(bad)


# --- no judge ------------------------------------------------------------------------------------


def _rows() -> list[dict[str, Any]]:
    rows = []
    for model, lat, mem, answers in (("a", 1.0, 0.0, ["Paris", "8"]), ("b", 2.0, 0.0, ["Lyon", "8"])):
        rows.append(
            {
                "model": model,
                "item_id": "q1",
                "kind": "qa",
                "prompt": "Capital of France? [[coh]]",
                "response": answers[0],
                "reference": "Paris",
                "latency_s": lat,
                "memory_mb": mem,
            }
        )
        rows.append(
            {
                "model": model,
                "item_id": "q2",
                "kind": "qa",
                "prompt": "Spider legs? [[coh]]",
                "response": answers[1],
                "reference": ["8", "eight"],
                "latency_s": lat,
                "memory_mb": mem,
            }
        )
        rows.append(
            {
                "model": model,
                "item_id": "mt",
                "kind": "multi_turn",
                "messages": [
                    {"role": "user", "content": "My name is Ana."},
                    {"role": "assistant", "content": "Hi Ana!"},
                    {"role": "user", "content": "What is my name?"},
                ],
                "response": "Ana",
                "latency_s": lat,
                "memory_mb": mem,
            }
        )
    rows.append({"model": "b", "item_id": "q3", "kind": "open", "prompt": "x", "response": None, "error": "timeout"})
    return rows


def test_no_judge_runs_without_any_judge(tmp_path: Path) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", _rows())
    result = evaluate_clmpi(runs, tmp_path / "out", None).as_dict()
    by_model = {r["model"]: r for r in result["ranking"]}
    assert by_model["a"]["components"]["ACC"] == 1.0
    assert by_model["b"]["components"]["ACC"] == 0.5
    assert by_model["a"]["components"]["EFF"] == pytest.approx(1.0, abs=1e-8)
    assert by_model["b"]["components"]["EFF"] == 0.0
    assert by_model["b"]["counts"]["failed_items"] == 1
    assert by_model["a"]["missing_components"] == ["CON", "COH", "FLU"]
    assert sum(by_model["a"]["weights_used"].values()) == pytest.approx(1.0)
    assert by_model["a"]["clmpi"] == pytest.approx(0.25 / 0.4 * 1.0 + 0.15 / 0.4 * (1 - 1e-9 / (0.5 + 1e-9)))
    assert result["hardware"]["cpu_count"] and result["hardware"]["python"]
    assert not (tmp_path / "out" / "judgments").exists()
    assert (tmp_path / "out" / "ranking.csv").read_text(encoding="utf-8").startswith("rank,model,ACC")


def test_model_with_no_answered_item_is_exit_2(tmp_path: Path) -> None:
    rows = _rows() + [{"model": "dead", "item_id": "q1", "prompt": "x", "error": "crashed"}]
    runs = write_jsonl(tmp_path / "runs.jsonl", rows)
    with pytest.raises(UserInputError, match=r"runs.jsonl:8: model 'dead' has no answered item"):
        evaluate_clmpi(runs, tmp_path / "out", None)
    result = CliRunner().invoke(app, ["clmpi", str(runs), "--no-judge", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "model 'dead' has no answered item" in result.output


def test_bad_row_names_line(tmp_path: Path) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", [{"model": "a", "item_id": 1, "response": "x"}])
    with pytest.raises(UserInputError, match=r"runs.jsonl:1: record: .*exactly one of prompt and messages"):
        evaluate_clmpi(runs, tmp_path / "out", None)


# --- judged, against a real local server, then replayed offline ----------------------------------


def _reply(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    if "UNDERSTANDS THE CONVERSATION" in text:
        return '{"score": 5}'
    if "COHERENCE" in text:
        return '{"score": 4}'
    if "FLUENCY" in text:
        return '{"score": 3}' if "Lyon" in text else '{"score": 4.5}'
    if "REFERENCE ANSWER" in text:
        return '{"score": 1}'
    return "no idea"


def test_judged_components_and_offline_replay(tmp_path: Path) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", _rows())
    cache = tmp_path / "cache.sqlite"
    with serve(reply=_reply) as server:
        judge = JudgeOptions(model="judge-model", base_url=server.base_url, cache=cache)
        result = evaluate_clmpi(runs, tmp_path / "out", judge, judge_accuracy=True).as_dict()
        sent = server.count()
    # coherence, fluency on 6 answered items, correctness on the 4 with references, CON on the 2
    # multi-turn ones; identical prompts (both models answer q2 and mt alike) are sent once.
    assert sent == 4 + 4 + 3 + 1
    by_model = {r["model"]: r for r in result["ranking"]}
    a, b = by_model["a"], by_model["b"]
    assert a["components"]["CON"] == 1.0 and a["counts"]["quality_items"]["CON"] == 1
    assert a["components"]["COH"] == pytest.approx(0.8)
    assert a["components"]["FLU"] == pytest.approx(0.9)
    assert b["components"]["FLU"] == pytest.approx((3 + 4.5 + 4.5) / 3 / 5)
    assert b["components"]["ACC"] == 1.0  # the judge says every answer is correct
    assert a["missing_components"] == []
    expected = 0.25 * 1 + 0.2 * 1 + 0.2 * 0.8 + 0.2 * 0.9 + 0.15 * float(eff_norm([1.0, 0.5])[0])
    assert a["clmpi"] == pytest.approx(expected)
    inputs = [json.loads(x) for x in (tmp_path / "out" / "judge_inputs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["id"] for r in inputs} == {"a::q1", "a::q2", "a::mt", "b::q1", "b::q2", "b::mt"}
    assert (tmp_path / "out" / "judgments" / "summary.json").exists()

    # The server is gone: the same judge, offline, replays every judgment from the cache.
    offline = JudgeOptions(model="judge-model", base_url=judge.base_url, cache=cache, offline=True)
    replay = evaluate_clmpi(runs, tmp_path / "replay", offline, judge_accuracy=True).as_dict()
    assert replay["exit_code"] == 0
    assert [r["clmpi"] for r in replay["ranking"]] == [r["clmpi"] for r in result["ranking"]]

    # The CLI against the cache, offline: same ranking, exit 0.
    cli = CliRunner().invoke(
        app,
        [
            "clmpi",
            str(runs),
            "--out",
            str(tmp_path / "cli"),
            "--cache",
            str(cache),
            "--model",
            "judge-model",
            "--base-url",
            str(judge.base_url),
            "--offline",
            "--judge-accuracy",
        ],
    )
    assert cli.exit_code == 0, cli.output
    written = json.loads((tmp_path / "cli" / "clmpi.json").read_text(encoding="utf-8"))
    assert [r["model"] for r in written["ranking"]] == [r["model"] for r in result["ranking"]]


def test_example_file_runs_without_judge(tmp_path: Path) -> None:
    result = evaluate_clmpi(EXAMPLES / "clmpi_runs.jsonl", tmp_path, None)
    assert len(result.ranking) == 3
    assert all(0 <= r.clmpi <= 1 for r in result.ranking)
    assert [r.rank for r in result.ranking] == [1, 2, 3]


def test_a_missing_component_is_never_an_advantage_in_the_ranking(tmp_path: Path) -> None:
    """Model b has no item with a reference (no ACC) and is faster: scored on EFF alone it would be
    1.0 and rank first; it ranks after model a, which has the component it lacks."""
    from harness.suites.clmpi import evaluate_clmpi, load_weights

    rows = [
        {"model": "a", "item_id": "q1", "kind": "qa", "prompt": "2+2?", "response": "5", "reference": "4", "latency_s": 2.0, "memory_mb": 100},
        {"model": "a", "item_id": "q2", "kind": "qa", "prompt": "3+3?", "response": "6", "reference": "6", "latency_s": 2.0, "memory_mb": 100},
        {"model": "b", "item_id": "q1", "kind": "open", "prompt": "hi", "response": "hello", "latency_s": 0.1, "memory_mb": 10},
    ]
    runs = write_jsonl(tmp_path / "runs.jsonl", rows)
    result = evaluate_clmpi(runs, tmp_path / "out", None, load_weights(None), False).as_dict()
    by_model = {r["model"]: r for r in result["ranking"]}
    assert by_model["b"]["clmpi"] > by_model["a"]["clmpi"]  # its rescaled score alone would win
    assert [r["model"] for r in result["ranking"]] == ["a", "b"]
    assert by_model["b"]["missing_components"][0] == "ACC" and by_model["b"]["components_missing_in_run"] == 1


def test_infinite_latency_is_refused_at_once_naming_file_line_and_field(tmp_path: Path) -> None:
    # issue 23: "latency_s": Infinity ran, then stopped at writing (exit 5)
    runs = write_jsonl(tmp_path / "runs.jsonl", _rows())
    lines = runs.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace('"latency_s": 2.0', '"latency_s": Infinity')
    assert "Infinity" in lines[3]
    runs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["clmpi", str(runs), "--no-judge", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "runs.jsonl:4: latency_s: Infinity is not a finite number" in result.output
    assert not out.exists()


def test_infinite_weight_is_refused(tmp_path: Path) -> None:
    weights = tmp_path / "w.toml"
    weights.write_text("[weights]\nACC = inf\nCON = 0.2\nCOH = 0.2\nFLU = 0.2\nEFF = 0.15\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"w.toml: weights.ACC: .*finite"):
        load_weights(weights)
