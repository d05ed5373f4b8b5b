"""`harness clustering` (seed 000): the document's worked examples (its arithmetic slips corrected where each formula is used),
the matching rules, score ranges, bad input, and what the command writes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import UserInputError
from harness.suites.clustering import (
    ModelOutput,
    best_match,
    cluster_count_score,
    coverage_percentage,
    deviation_score,
    evaluate_clustering,
    evaluate_model,
    final_score,
    improved_model_score,
    message_count_deviation_percent,
    model_deviation_score,
    overlap_percentage,
    precision_percent,
    recall_percent,
    token_cost,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# --- the document's worked examples --------------------------------------------------------------


def test_formula_examples() -> None:
    assert message_count_deviation_percent(44, 44) == 0.0
    assert coverage_percentage(44, 44) == 100.0
    assert precision_percent(47, 60) == pytest.approx(78.3333, abs=1e-4)
    assert recall_percent(44, 44) == 100.0
    # Final Score (simple version): (100×0.4) + (100×0.3) + (78.33×0.3) = 93.5
    assert final_score(100, 100, 78.33) == pytest.approx(93.499)
    assert round(float(final_score(100, 100, precision_percent(47, 60))), 2) == 93.5
    # Example 1: perfect match
    assert final_score(deviation_score(0.0), 100, 100) == 100.0


def test_fitfusion_example_is_82_44_not_82_0() -> None:
    dev = message_count_deviation_percent(60, 47)
    assert dev == pytest.approx(27.66, abs=0.005)
    score = final_score(deviation_score(dev), coverage_percentage(47, 47), precision_percent(47, 60))
    assert round(float(score), 2) == 82.44
    assert final_score(72.34, 100, 78.33) == pytest.approx(82.435)  # the document's rounded inputs


def test_improved_model_score_example_is_91_975() -> None:
    count = cluster_count_score(6, 7)
    assert count == pytest.approx(85.714, abs=1e-3)
    assert improved_model_score(85.7, 100, 91.1, 91.1) == pytest.approx(91.975)
    assert f"{improved_model_score(85.7, 100, 91.1, 91.1):.3f}" == "91.975"  # 91.98 to 2 decimals (the document prints 91.1)
    assert model_deviation_score([8.9, -8.9]) == pytest.approx(91.1)


def test_token_cost_example_is_0_00253455() -> None:
    assert token_cost(25_474, 2_080, 0.000075, 0.0003) == pytest.approx(0.00253455, rel=1e-12)


def test_overlap_missing_extra_example() -> None:
    bench = {"1", "2", "3", "4", "5"}
    output = ModelOutput.model_validate({"model": "m", "clusters": [{"title": "t", "message_ids": [1, 2, 3, 6, 7]}]})
    result = evaluate_model({"b": bench}, output)
    row = result.clusters[0]
    assert overlap_percentage(bench, {"1", "2", "3", "6", "7"}) == 60.0
    assert row.overlap == ["1", "2", "3"]
    assert row.missing == ["4", "5"]
    assert row.extra == ["6", "7"]
    assert row.overlap_percent == 60.0


# --- matching choices ----------------------------------------------------------------------------


def test_tie_goes_to_the_smaller_cluster_then_the_first() -> None:
    bench = {"1", "2", "3", "4"}
    assert best_match(bench, [{"1", "2", "9", "10"}, {"3", "4"}]) == (1, True)
    assert best_match(bench, [{"1", "2"}, {"3", "4"}]) == (0, True)
    assert best_match(bench, [{"1", "2", "3"}, {"4"}]) == (0, False)
    assert best_match(bench, [{"8"}, {"9"}]) == (None, False)


def test_unmatched_benchmark_cluster_scores_zero() -> None:
    output = ModelOutput.model_validate({"model": "m", "clusters": [{"title": "x", "message_ids": [9]}]})
    result = evaluate_model({"a": {"1", "2"}}, output)
    row = result.clusters[0]
    assert row.llm_cluster is None
    assert (row.deviation_percent, row.coverage_percent, row.precision_percent, row.final_score) == (-100.0, 0.0, 0.0, 0.0)
    assert result.coverage_score == 0.0
    assert result.deviation_score == 0.0


def test_one_model_cluster_matching_two_benchmark_clusters_is_reported() -> None:
    output = ModelOutput.model_validate({"model": "m", "clusters": [{"title": "merged", "message_ids": [1, 2, 3, 4]}]})
    result = evaluate_model({"a": {"1", "2"}, "b": {"3", "4"}}, output)
    assert [c.llm_cluster for c in result.clusters] == ["merged", "merged"]
    assert result.shared_matches == {"merged": ["a", "b"]}
    assert [c.precision_percent for c in result.clusters] == [50.0, 50.0]
    assert result.coverage_score == 100.0


# --- ranges --------------------------------------------------------------------------------------

ids = st.integers(min_value=0, max_value=40)
clusters = st.lists(st.sets(ids, min_size=1, max_size=15), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(bench=clusters, model=clusters)
def test_every_score_is_within_0_100(bench: list[set[int]], model: list[set[int]]) -> None:
    benchmark = {f"b{i}": {str(x) for x in s} for i, s in enumerate(bench)}
    output = ModelOutput.model_validate({"model": "m", "clusters": [{"message_ids": sorted(s)} for s in model]})
    result = evaluate_model(benchmark, output)
    for score in (result.cluster_count_score, result.coverage_score, result.precision_score, result.deviation_score, result.improved_model_score):
        assert 0.0 <= score <= 100.0 + 1e-9
    for row in result.clusters:
        for score in (row.coverage_percent, row.precision_percent, row.recall_percent, row.final_score, row.deviation_score):
            assert 0.0 <= score <= 100.0 + 1e-9
        assert row.matched_messages == len(row.overlap)
        assert set(row.overlap).isdisjoint(row.missing)


# --- bad input -----------------------------------------------------------------------------------


def _write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_empty_benchmark_cluster_names_it(tmp_path: Path) -> None:
    bench = _write(tmp_path / "b.json", {"ok": [1], "Empty one": []})
    model = _write(tmp_path / "m.json", {"model": "m", "clusters": [{"title": "t", "message_ids": [1]}]})
    with pytest.raises(UserInputError, match="benchmark cluster 'Empty one' has no message ids"):
        evaluate_clustering(bench, [model])


def test_bad_model_files_name_the_record(tmp_path: Path) -> None:
    bench = _write(tmp_path / "b.json", {"a": [1]})
    empty_cluster = _write(tmp_path / "m1.json", {"model": "m", "clusters": [{"title": "t", "message_ids": []}]})
    with pytest.raises(UserInputError, match=r"m1.json: clusters.0.message_ids: cluster has no message ids"):
        evaluate_clustering(bench, [empty_cluster])
    no_clusters = _write(tmp_path / "m2.json", {"model": "m", "clusters": []})
    with pytest.raises(UserInputError, match="m2.json: clusters: the model has no clusters"):
        evaluate_clustering(bench, [no_clusters])


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    bench = _write(tmp_path / "b.json", {"a": []})
    model = _write(tmp_path / "m.json", {"model": "m", "clusters": [{"title": "t", "message_ids": [1]}]})
    result = CliRunner().invoke(app, ["clustering", "--benchmark", str(bench), str(model), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "benchmark cluster 'a' has no message ids" in result.output
    assert "Traceback" not in result.output


# --- the command on the shipped example ----------------------------------------------------------


def test_cli_writes_csv_json_and_explains(tmp_path: Path) -> None:
    outputs = sorted(str(p) for p in (EXAMPLES / "cluster_outputs").glob("*.json"))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["clustering", "--benchmark", str(EXAMPLES / "clusters.json"), *outputs, "--out", str(out), "--explain"])
    assert result.exit_code == 0, result.output
    assert "final score = 72.3404 x 0.4 + 100 x 0.3 + 78.3333 x 0.3 = 82.4362" in result.output
    assert "token cost = 25474/1000 x 7.5e-05 + 2080/1000 x 0.0003 = $0.00253455" in result.output
    assert "is the best match of 2 benchmark clusters" in result.output

    rows = list(csv.DictReader((out / "clusters.csv").read_text(encoding="utf-8").splitlines()))
    fitfusion = next(r for r in rows if r["model"] == "model-a" and r["benchmark_cluster"] == "FitFusion Rebranding")
    assert fitfusion["final_score"] == "82.44"
    assert fitfusion["precision_percent"] == "78.33"
    assert fitfusion["deviation_percent"] == "27.66"
    models = {r["model"]: r for r in csv.DictReader((out / "models.csv").read_text(encoding="utf-8").splitlines())}
    assert models["model-a"]["token_cost_usd"] == "0.00253455"
    data = json.loads((out / "clustering.json").read_text(encoding="utf-8"))
    assert [m["model"] for m in data["models"]] == ["model-a", "model-b"]
    a = data["models"][0]
    assert a["improved_model_score"] == pytest.approx(0.25 * (80 + 100 + a["precision_score"] + a["deviation_score"]))


def test_infinite_price_is_refused_at_once_naming_file_line_and_field(tmp_path: Path) -> None:
    # issue 23: {"input": Infinity} ran and then stopped at writing (exit 5)
    source = (EXAMPLES / "cluster_outputs" / "model-a.json").read_text(encoding="utf-8")
    value = json.loads(source)
    value["prices_per_1k"] = {"input": 1.0, "output": 2.0}
    text = json.dumps(value, indent=2).replace('"input": 1.0', '"input": Infinity')
    model = tmp_path / "m.json"
    model.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if "Infinity" in row)
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["clustering", "--benchmark", str(EXAMPLES / "clusters.json"), str(model), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"m.json:{line}: prices_per_1k.input: Infinity is not a finite number" in result.output
    assert not out.exists()  # refused before anything is computed or written
    nan = _write(tmp_path / "n.json", {"model": "m", "clusters": [{"title": "t", "message_ids": [1]}]})
    nan.write_text(nan.read_text(encoding="utf-8").replace('"t"', '"t", "token_usage": {"input_tokens": NaN}'), encoding="utf-8")
    with pytest.raises(UserInputError, match=r"n.json:1: clusters\[0\].token_usage.input_tokens: NaN is not a finite number"):
        evaluate_clustering(EXAMPLES / "clusters.json", [nan])
    # a string that spells Infinity is not a number, and does not confuse the line
    fine = _write(tmp_path / "f.json", {"model": "Infinity", "clusters": [{"title": "NaN", "message_ids": [1]}]})
    assert evaluate_clustering(_write(tmp_path / "b.json", {"a": [1]}), [fine])[0].model == "Infinity"


def test_infinite_price_option_is_refused(tmp_path: Path) -> None:
    outputs = [str(EXAMPLES / "cluster_outputs" / "model-b.json")]
    args = ["clustering", "--benchmark", str(EXAMPLES / "clusters.json"), *outputs, "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, [*args, "--input-price-per-1k", "inf", "--output-price-per-1k", "1"])
    assert result.exit_code == 2, result.output
    assert "--input-price-per-1k: inf is not a finite price" in result.output
