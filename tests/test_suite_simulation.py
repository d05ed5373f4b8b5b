"""`harness simulation` (seed 002): each formula by hand, ranges, the fallback heuristic, the
categorical judge rubrics (a core change: rubric ``labels``) against a real local server, and the
experiment comparisons against SciPy."""

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
from harness.errors import RubricError, UserInputError
from harness.planning import JudgeOptions
from harness.rubrics.rubric import parse_rubric
from harness.suites.simulation import (
    ExperimentComparison,
    behavioral_variance_score,
    crrs,
    crrs_interpretation,
    decision_explainability_index,
    evaluate_simulation,
    heuristic_message_score,
    message_score,
    normalize_item,
    order_restriction_adherence,
    persona_adherence_score,
    transition_rate,
)
from tests.e2e_support import read_jsonl, serve, write_jsonl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# --- formulas ------------------------------------------------------------------------------------


def test_pas_and_heuristic() -> None:
    assert message_score(1, 1, 0, 1) == 0.75
    assert persona_adherence_score([0.75, 0.25]) == 0.5
    assert persona_adherence_score([]) == 0.0
    assert heuristic_message_score("busy_professional", "no_exploration", "frustrated", "all_at_once") == pytest.approx(1.0)
    assert heuristic_message_score("busy_professional", "explores_menu", "casual", "one_by_one") == pytest.approx(0.34)
    assert heuristic_message_score("curious_explorer", "explores_menu", "confused", "x") == 0.5
    assert heuristic_message_score("indecisive", "x", "casual", "one_by_one") == 1.0
    assert heuristic_message_score("family_group", "explores_menu", "x", "all_at_once") == 0.5
    with pytest.raises(ValueError, match="unknown persona type"):
        heuristic_message_score("pirate", "a", "b", "c")


def test_bvs_transition_rates_and_peak() -> None:
    assert transition_rate(["a", "a", "b", "b", "a"]) == 0.5
    assert transition_rate(["a"]) == 0.0
    assert behavioral_variance_score(0.2) == 1.0
    assert behavioral_variance_score(0.1) == pytest.approx(0.5)
    assert behavioral_variance_score(0.6) == pytest.approx(0.5)
    assert behavioral_variance_score(0.0) == 0.0
    assert behavioral_variance_score(1.0) == pytest.approx(0.0)


def test_ora_normalisation_and_f1() -> None:
    assert normalize_item("The Fish and Chips!") == "fish chips"
    assert normalize_item("Spaghetti with MEATBALLS") == "spaghetti meatballs"
    assert order_restriction_adherence(["Margherita Pizza", "the Tiramisu"], ["margherita pizza!", "Tiramisu"]) == 1.0
    # T = {pizza, salad}, C = {pizza, soda, cake}: P = 1/3, R = 1/2, F1 = 0.4
    assert order_restriction_adherence(["pizza", "salad"], ["pizza", "soda", "cake"]) == pytest.approx(0.4)
    assert order_restriction_adherence([], ["pizza"]) == 0.0
    assert order_restriction_adherence(["the"], ["a"]) == 0.0


items = st.lists(st.sampled_from(["pizza", "salad", "soda", "cake", "the tea", "Fish and chips"]), max_size=6)


@settings(max_examples=80, deadline=None)
@given(t=items, c=items)
def test_ora_is_symmetric_matches_expanded_formula_and_sklearn(t: list[str], c: list[str]) -> None:
    from sklearn.metrics import f1_score

    ora = order_restriction_adherence(t, c)
    assert 0.0 <= ora <= 1.0
    assert ora == pytest.approx(order_restriction_adherence(c, t))
    ts, cs = {normalize_item(x) for x in t}, {normalize_item(x) for x in c}
    both = len(ts & cs)
    if ts and cs:
        # F1 of sets is 2|C∩T| / (|C| + |T|). The document's "EXPANDED FORMULA" 2|C∩T|² / (|C||T| +
        # |C∩T|(|C| + |T| − |C∩T|)) is not F1 (C = {a, b}, T = {a}: 0.5, F1 2/3); the Step 4 definition wins.
        assert ora == pytest.approx(2 * both / (len(cs) + len(ts)))
        universe = sorted(ts | cs)
        assert ora == pytest.approx(f1_score([u in ts for u in universe], [u in cs for u in universe], zero_division=0.0))


def test_document_expanded_ora_formula_disagrees_with_its_f1() -> None:
    c, t, both = 2, 1, 1
    assert 2 * both**2 / (c * t + both * (c + t - both)) == 0.5
    assert order_restriction_adherence(["soup"], ["soup", "bread"]) == pytest.approx(2 / 3)


def test_dei_caps_per_experiment() -> None:
    on = {
        "order_tracking": [True] * 4,
        "behavioral_tracking": [True, False, True, False],
        "message_attributes": [True] * 4,
        "basic_tools": [True, True, False, False],
    }
    assert decision_explainability_index(5, on, 4) == pytest.approx(6 / 8)
    assert decision_explainability_index(4, on, 4) == 0.5
    assert decision_explainability_index(3, on, 4) == 0.5
    assert decision_explainability_index(2, on, 4) == pytest.approx(0.1)
    assert decision_explainability_index(1, on, 4) == 0.0


def test_crrs_fixed_weights_and_bands() -> None:
    assert crrs(1, 1, 1, 1) == pytest.approx(1.0)
    assert crrs(0.8, 0.7, 0.9, 0.5) == pytest.approx(0.25 * 0.8 + 0.2 * 0.7 + 0.35 * 0.9 + 0.2 * 0.5)
    assert [crrs_interpretation(x) for x in (0.9, 0.85, 0.7, 0.69, 0.5, 0.49)] == ["Excellent", "Good", "Good", "Acceptable", "Acceptable", "Poor"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=4, max_size=4), st.floats(0, 1))
def test_ranges(parts: list[float], tr: float) -> None:
    assert 0.0 <= float(behavioral_variance_score(tr)) <= 1.0
    assert -1e-12 <= float(crrs(*parts)) <= 1 + 1e-12


# --- conversations -------------------------------------------------------------------------------


def _conv(cid: str, experiment: int, persona: dict[str, Any], moods: list[str | None], **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, mood in enumerate(moods):
        attrs: dict[str, Any] = {"exploration": "explores_menu", "ordering": "one_by_one", "complete": i == len(moods) - 1}
        if mood is not None:
            attrs["mood"] = mood
        messages.append(
            {
                "role": "guest",
                "content": f"message {i} of {cid}",
                "attributes": attrs,
                "tools": {"order_tracking": True, "behavioral_tracking": i % 2 == 0},
            }
        )
        messages.append({"role": "waiter", "content": "Sure."})
    messages.append({"role": "guest", "content": "exit"})
    return {
        "id": cid,
        "experiment": experiment,
        "persona": persona,
        "target_order": ["Pizza", "Salad"],
        "current_order": ["the pizza"],
        "messages": messages,
        **extra,
    }


EXPECTED = {"type": "indecisive", "expected": {"exploration": "explores_menu", "moods": ["casual"], "ordering": "one_by_one", "complete": False}}


def test_conversation_scores_by_hand(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            _conv("a", 5, EXPECTED, ["casual", "casual", "casual", "casual", "frustrated", "casual"]),
            _conv("b", 5, {"type": "Family / Group"}, ["casual", "casual"]),
        ],
    )
    result = evaluate_simulation(path, tmp_path / "out", None).as_dict()
    a, b = result["conversations"]
    # PAS: C1, C3 always; C2 on 5 of 6; C4 (expected incomplete) on 5 of 6 → (6+5+6+5)/4/6
    assert a["PAS"] == pytest.approx((6 + 5 + 6 + 5) / 24)
    # mood changes twice in 5 transitions; ordering and exploration never: TR_avg = 0.4/3
    assert a["transition_rates"]["average"] == pytest.approx(0.4 / 3)
    assert a["BVS"] == pytest.approx(0.4 / 3 / 0.2)
    assert a["ORA"] == pytest.approx(2 / 3)
    assert a["DEI"] == pytest.approx((6 + 3) / 12)
    assert a["CRRS"] == pytest.approx(0.25 * a["PAS"] + 0.2 * a["BVS"] + 0.35 * a["ORA"] + 0.2 * a["DEI"])
    assert b["used_heuristic"] and b["persona_type"] == "family_group"
    assert b["PAS"] == 1.0  # one_by_one and explores_menu on every message
    assert a["counts"]["guest_messages"] == 6  # 'exit' excluded


def test_experiment_comparison_matches_scipy(tmp_path: Path) -> None:
    from scipy import stats as sps

    rows = [_conv(f"e1-{i}", 1, EXPECTED, ["casual"] * (2 + i)) for i in range(3)]
    rows += [_conv(f"e5-{i}", 5, EXPECTED, ["casual", "frustrated"] * (1 + i)) for i in range(3)]
    result = evaluate_simulation(write_jsonl(tmp_path / "c.jsonl", rows), tmp_path / "out", None).as_dict()
    crrs_1 = [c["CRRS"] for c in result["conversations"] if c["experiment"] == 1]
    crrs_5 = [c["CRRS"] for c in result["conversations"] if c["experiment"] == 5]
    row = next(r for r in result["comparisons"] if r["metric"] == "CRRS")
    oracle = sps.ttest_ind(crrs_1, crrs_5, equal_var=False)
    assert row["welch_t"] == pytest.approx(oracle.statistic)
    assert row["p_value"] == pytest.approx(oracle.pvalue)
    pooled = np.sqrt((np.var(crrs_1, ddof=1) * 2 + np.var(crrs_5, ddof=1) * 2) / 4)
    assert row["cohens_d_abs"] == pytest.approx(abs(np.mean(crrs_1) - np.mean(crrs_5)) / pooled)
    lo, hi = result["experiments"]["1"]["crrs_ci95"]
    half = sps.t.ppf(0.975, 2) * np.std(crrs_1, ddof=1) / np.sqrt(3)
    assert (lo, hi) == pytest.approx((np.mean(crrs_1) - half, np.mean(crrs_1) + half))
    # DEI is 0 in every experiment-1 conversation: zero variance is reported, never a warning
    dei = next(r for r in result["comparisons"] if r["metric"] == "DEI")
    assert dei["notes"] == [] or all("variance" in n for n in dei["notes"])


def test_bad_input_names_the_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [_conv("ok", 1, EXPECTED, ["casual"]), _conv("p1", 1, {"type": "pirate"}, ["casual"])])
    with pytest.raises(UserInputError, match=r"c.jsonl:2: conversation 'p1': persona type 'pirate' has no fallback heuristic"):
        evaluate_simulation(path, tmp_path / "out", None)
    cli = CliRunner().invoke(app, ["simulation", str(path), "--no-judge", "--out", str(tmp_path / "o")])
    assert cli.exit_code == 2
    assert "persona type 'pirate'" in cli.output
    silent = write_jsonl(tmp_path / "s.jsonl", [_conv("quiet", 1, EXPECTED, [])])
    with pytest.raises(UserInputError, match=r"s.jsonl:1: conversation 'quiet' has no guest message"):
        evaluate_simulation(silent, tmp_path / "out", None)


# --- categorical rubrics (core change) and the judged path ---------------------------------------


def test_categorical_rubric_header() -> None:
    text = '+++\nname = "x"\nversion = "1"\nscale = [0.0, 1.0]\nlabels = ["yes", "no"]\ninputs = ["response"]\n+++\n{{response}}\n'
    assert parse_rubric(text, "x.md").labels == ("yes", "no")
    with pytest.raises(RubricError, match="labels: must be a non-empty list of distinct"):
        parse_rubric(text.replace('["yes", "no"]', '["yes", "YES"]'), "x.md")


def _reply(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    if "MOOD TONE" in text:
        return "Label: Frustrated" if "message 1 of m" in text else '{"label": "happy"}'
    return '{"label": "explores_menu"}'


def test_missing_attributes_are_classified_by_the_judge_and_replayed(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            _conv("m", 3, EXPECTED, ["casual", None, "casual"]),
            _conv("n", 3, EXPECTED, ["casual", "casual", None]),
        ],
    )
    cache = tmp_path / "cache.sqlite"
    with serve(reply=_reply) as server:
        judge = JudgeOptions(model="judge-model", base_url=server.base_url, cache=cache)
        result = evaluate_simulation(path, tmp_path / "out", judge).as_dict()
        assert server.count() == 2 * 4  # two messages missing a mood, four rubrics each
    judgments = read_jsonl(tmp_path / "out" / "judgments" / "judgments.jsonl")
    mood = {j["transcript_id"]: j for j in judgments if j["rubric"] == "guest_mood"}
    assert mood["m::2"]["status"] == "scored" and mood["m::2"]["label"] == "frustrated"
    assert mood["m::2"]["score"] is None
    assert mood["n::4"]["status"] == "unscored" and mood["n::4"]["reason"] == "invalid_label"
    summary = json.loads((tmp_path / "out" / "judgments" / "summary.json").read_text(encoding="utf-8"))
    assert summary["rubrics"]["guest_mood"]["judge-model"]["unscored"] == 1
    m, n = result["conversations"]
    assert m["counts"]["attributes_from_judge"] == 1 and m["counts"]["pas_messages"] == 3
    assert m["transition_rates"]["mood"] == 1.0  # casual → frustrated → casual
    assert n["counts"]["pas_skipped_unknown"] == 1 and n["counts"]["bvs_states"] == 2

    offline = JudgeOptions(model="judge-model", base_url=judge.base_url, cache=cache, offline=True)
    replay = evaluate_simulation(path, tmp_path / "replay", offline).as_dict()
    assert replay["exit_code"] == 0
    assert [c["CRRS"] for c in replay["conversations"]] == [c["CRRS"] for c in result["conversations"]]


def test_example_runs_without_judge(tmp_path: Path) -> None:
    cli = CliRunner().invoke(app, ["simulation", str(EXAMPLES / "conversations.jsonl"), "--no-judge", "--out", str(tmp_path)])
    assert cli.exit_code == 0, cli.output
    data = json.loads((tmp_path / "simulation.json").read_text(encoding="utf-8"))
    assert set(data["experiments"]) == {"1", "3", "5"}
    assert all(0 <= c["CRRS"] <= 1 for c in data["conversations"])
    assert data["unjudged_messages"] == 1


def test_ora_folds_accents_and_case() -> None:
    # issue 23: the same order typed without accents scored 0.35
    assert order_restriction_adherence(["Crème brûlée", "Café au lait"], ["creme brulee", "cafe au lait"]) == 1.0
    assert normalize_item("Crème Brûlée") == normalize_item("CREME BRULEE") == "creme brulee"
    assert normalize_item("The Straße") == "strasse"  # casefold, not lower
    assert normalize_item("ﬁsh") == "fish"  # NFKD splits the ligature


def test_constant_experiments_are_undefined_not_significant(tmp_path: Path) -> None:
    # issue 23: two experiments whose values are identical constants were called significant
    rows = [_conv(f"e1-{i}", 1, EXPECTED, ["casual"] * 3) for i in range(3)]
    rows += [_conv(f"e2-{i}", 2, EXPECTED, ["casual", "frustrated", "casual"]) for i in range(3)]
    typed = evaluate_simulation(write_jsonl(tmp_path / "c.jsonl", rows), tmp_path / "out", None)
    assert all(c.significant_at_0_05 is None and c.undefined for c in typed.comparisons if isinstance(c, ExperimentComparison) and c.metric == "PAS")
    result = typed.as_dict()
    by_metric = {r["metric"]: r for r in result["comparisons"]}
    pas, crrs_row = by_metric["PAS"], by_metric["CRRS"]
    assert pas["mean_a"] != pas["mean_b"]  # different constants: the old code said p = 0, significant
    for row in (pas, crrs_row):
        assert row["significant_at_0_05"] is None
        assert row["p_value"] is None and row["welch_t"] is None and row["cohens_d"] is None
        assert "zero variance" in row["undefined"]
    assert not any(r["significant_at_0_05"] for r in result["comparisons"])
    written = json.loads((tmp_path / "out" / "simulation.json").read_text(encoding="utf-8"))
    assert written["comparisons"][0]["undefined"] and written["comparisons"][0]["significant_at_0_05"] is None
