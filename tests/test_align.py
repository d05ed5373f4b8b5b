"""``harness align``'s parts, in-process: the statistics against independent implementations
(scikit-learn, SciPy), the split, the candidates, the rubric's calibration, and the simulation of
the whole statistical path: "improved" is rarely said when nothing can improve, and said when a
candidate truly agrees better (bench/align_simulation.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.align_simulation import simulate
from harness.align import candidates as cand
from harness.align.measure import Scale, agreement_figures, chosen, measure_sealed_test, point_figures
from harness.align.provenance import aligned_version, fitted_transcripts, is_aligned
from harness.align.split import MIN_PER_PART, Item, group_of, needed_per_stratum, split_labels, strata
from harness.analysis.io import Metric
from harness.analysis.resampling import confusion_weighted, group_weights, grouped_bootstrap, kappa_batch, mae_weighted, spearman_weighted
from harness.analysis.scales import bins_for
from harness.errors import RubricError, UserInputError
from harness.rubrics.rubric import load_rubrics, parse_rubric, rubric_text
from harness.stats.isotonic import isotonic_regression, pool_adjacent_violators
from harness.transcripts.models import Transcript

UNIT = Metric("relevance", "rubric", (0.0, 1.0), "higher", "2")
LIKERT = Metric("likert", "rubric", (1.0, 5.0), "higher", "1")
PASS_FAIL = Scale(UNIT, "pass_fail", 0.5)
NUMERIC = Scale(LIKERT, "numeric", 3.0)
SHARES = (0.4, 0.2, 0.4)


# -- isotonic regression against scikit-learn ------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_isotonic_regression_equals_scikit_learn(seed: int) -> None:
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    x = np.round(rng.uniform(0, 1, n), int(rng.integers(1, 3)))  # ties
    y = x + rng.normal(0, 0.4, n)
    w = rng.uniform(0.1, 3.0, n) if seed % 2 else None
    fit = isotonic_regression(x, y, w)
    oracle = IsotonicRegression(out_of_bounds="clip").fit(x, y, sample_weight=w)
    grid = np.linspace(-0.5, 1.5, 201)
    np.testing.assert_allclose(fit(grid), oracle.predict(grid), atol=1e-10)
    np.testing.assert_allclose(fit(x), oracle.predict(x), atol=1e-10)
    assert np.all(np.diff(fit.y) >= 0) and np.all(np.diff(fit.x) > 0)


def test_pool_adjacent_violators_by_hand() -> None:
    # 1, 3, 2 -> the violators 3, 2 pool to 2.5; then 4 is in order
    assert pool_adjacent_violators(np.array([1.0, 3.0, 2.0, 4.0]), np.ones(4)).tolist() == [1.0, 2.5, 2.5, 4.0]
    # weighted: (3·1 + 1·3) / 4 = 1.5, then 0 pools with it: (1.5·4 + 0·4) / 8 = 0.75
    assert pool_adjacent_violators(np.array([3.0, 1.0, 0.0]), np.array([1.0, 3.0, 4.0])).tolist() == [0.75, 0.75, 0.75]
    with pytest.raises(ValueError):
        isotonic_regression([], [])


# -- weighted (group-resampled) statistics against the resample written out ------------------------


@pytest.mark.parametrize("seed", range(30))
def test_weighted_statistics_equal_the_resample_written_out(seed: int) -> None:
    from scipy import stats as sp
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 40))
    x, y = rng.integers(0, 5, n), rng.integers(0, 5, n)
    weights = rng.integers(0, 4, (5, n)).astype(float)
    spearman, mae = spearman_weighted(x, y, weights), mae_weighted(x, y, weights)
    quadratic, plain = kappa_batch(confusion_weighted(x, y, 5, weights), "quadratic"), kappa_batch(confusion_weighted(x, y, 5, weights))
    for row in range(5):
        xs, ys = np.repeat(x, weights[row].astype(int)), np.repeat(y, weights[row].astype(int))
        if xs.size < 2:
            continue
        if np.ptp(xs) and np.ptp(ys):
            assert spearman[row] == pytest.approx(sp.spearmanr(xs, ys).statistic, abs=1e-9)
        else:
            assert np.isnan(spearman[row])
        assert mae[row] == pytest.approx(np.mean(np.abs(ys - xs)), abs=1e-12)
        if np.isfinite(quadratic[row]):
            assert quadratic[row] == pytest.approx(cohen_kappa_score(xs, ys, weights="quadratic", labels=range(5)), abs=1e-9)
        if np.isfinite(plain[row]):
            assert plain[row] == pytest.approx(cohen_kappa_score(xs, ys, labels=range(5)), abs=1e-9)


def test_group_weights_draw_whole_groups_as_a_loop_would() -> None:
    codes = np.array([0, 0, 1, 2, 2, 2, 3])
    blocks = list(group_weights(codes, 50, seed=7, max_elements=70))  # 10 rows a block
    assert [b.shape for b in blocks] == [(10, 7)] * 5
    rng = np.random.default_rng(7)
    for block in blocks:
        drawn = rng.integers(0, 4, (10, 4))
        for row, groups in zip(block, drawn, strict=True):
            counts = np.bincount(groups, minlength=4)
            assert row.tolist() == counts[codes].tolist()  # every item of a group counts as often as its group


def test_grouped_bootstrap_interval_and_pvalue() -> None:
    codes = np.repeat(np.arange(30), 2)
    values = np.repeat(np.arange(30.0), 2)
    found = grouped_bootstrap(codes, lambda w: (w @ values) / w.sum(axis=1), 2000, seed=0, null=14.5)
    assert found["groups"] == 30 and found["resamples"] == 2000
    low, high = found["ci"]
    assert low < 14.5 < high and 0.5 < found["pvalue"] <= 1.0
    assert grouped_bootstrap(np.zeros(5, dtype=int), lambda w: w.sum(axis=1), 100)["ci"] is None  # one group: no interval


# -- the figures against scikit-learn and SciPy ----------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_pass_fail_figures_equal_scikit_learn(seed: int) -> None:
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, recall_score

    rng = np.random.default_rng(seed)
    n = 60
    human = ["pass" if v else "fail" for v in rng.random(n) < 0.4]
    scores = rng.uniform(0, 1, n)
    got = point_figures(PASS_FAIL, human, scores)
    truth, said = np.array(human) == "pass", scores >= 0.5
    assert got["kappa"] == pytest.approx(cohen_kappa_score(truth, said), abs=1e-12)
    assert got["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(truth, said), abs=1e-12)
    assert got["tpr"] == pytest.approx(recall_score(truth, said), abs=1e-12)
    assert got["tnr"] == pytest.approx(recall_score(~truth, ~said), abs=1e-12)
    lower = Scale(replace(UNIT, direction="lower"), "pass_fail", 0.5)  # pass is a low score
    assert point_figures(lower, human, scores)["kappa"] == pytest.approx(cohen_kappa_score(truth, scores <= 0.5), abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_numeric_figures_equal_scikit_learn_and_scipy(seed: int) -> None:
    from scipy import stats as sp
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, 50).astype(float)
    scores = np.clip(human + rng.normal(0, 1.2, 50), 1, 5)
    got = point_figures(NUMERIC, list(human), scores)
    bins = bins_for(LIKERT)
    oracle = cohen_kappa_score(bins.codes(human), bins.codes(scores), weights="quadratic", labels=range(bins.count))
    assert got["kappa"] == pytest.approx(oracle, abs=1e-12)
    assert got["spearman"] == pytest.approx(sp.spearmanr(human, scores).statistic, abs=1e-12)
    assert got["mae"] == pytest.approx(np.mean(np.abs(scores - human)), abs=1e-12)


def test_undefined_figures_are_none_never_zero() -> None:
    got = point_figures(PASS_FAIL, ["pass"] * 5, np.full(5, 0.9))
    assert got["kappa"] is None and got["tnr"] is None and got["tpr"] == 1.0


def test_test_report_pairs_the_two_judges_on_one_draw_of_groups() -> None:
    rng = np.random.default_rng(3)
    human = ["pass" if v else "fail" for v in rng.random(80) < 0.5]
    truth = np.array([h == "pass" for h in human])
    baseline = np.where(rng.random(80) < 0.65, truth, ~truth).astype(float)
    groups = [f"g{i // 2}" for i in range(80)]
    same = measure_sealed_test(PASS_FAIL, human, baseline, baseline.copy(), groups, 500, seed=1)
    assert same.primary.difference.value == 0 and same.primary.difference.ci == (0.0, 0.0) and not same.improved
    assert same.groups == 40 and same.n == 80
    better = np.where(rng.random(80) < 0.95, truth, ~truth).astype(float)
    found = measure_sealed_test(PASS_FAIL, human, baseline, better, groups, 500, seed=1)
    assert found.improved and found.primary.difference.ci is not None and found.primary.difference.ci[0] > 0
    assert found.primary.baseline == same.primary.baseline  # the same draws for the same seed
    weights = np.ones((1, 80))
    diff = agreement_figures(PASS_FAIL, human, better, weights)["kappa"] - agreement_figures(PASS_FAIL, human, baseline, weights)["kappa"]
    assert found.primary.difference.value == pytest.approx(float(diff[0]))


def test_the_choice_takes_the_largest_positive_gain() -> None:
    assert chosen({"few-shot": 0.1, "rewrite": 0.3, "recalibration": None}) == "rewrite"
    assert chosen({"few-shot": 0.0, "rewrite": -0.2}) is None
    assert chosen({"few-shot": 0.2, "rewrite": 0.2}) == "few-shot"
    assert chosen({}) is None


# -- the simulation: the statistical path of the command, 200 data sets per case -------------------


@pytest.mark.parametrize("kind", ["pass_fail", "numeric"])
def test_improved_is_rarely_said_when_no_candidate_can_improve(kind: str) -> None:
    found = simulate(kind, effect=False, datasets=200, labels=150, resamples=500, seed=0)
    assert found["improved_rate"] <= 0.05, found


@pytest.mark.parametrize("kind", ["pass_fail", "numeric"])
def test_a_true_effect_is_found(kind: str) -> None:
    found = simulate(kind, effect=True, datasets=200, labels=150, resamples=500, seed=0)
    assert found["improved_rate"] >= 0.8 and found["chosen"].get("few-shot", 0) >= 180, found


# -- the split ---------------------------------------------------------------------------------------


def _items(labels: dict[str, float | str], groups: dict[str, str], kind: str, metric: Metric = UNIT) -> tuple[list[Item], tuple[str, ...]]:
    stratum_of, names = strata(labels, groups, kind, metric, SHARES, "labels.jsonl: relevance")
    return [Item(t, groups[t], stratum_of[t], labels[t]) for t in sorted(labels)], names


def test_the_split_is_grouped_stratified_seeded_and_disjoint() -> None:
    rng = np.random.default_rng(0)
    labels: dict[str, float | str] = {f"t{i:03d}": ("pass" if rng.random() < 0.3 else "fail") for i in range(300)}
    groups = {t: f"task:{i // 3}" for i, t in enumerate(labels)}
    items, names = _items(labels, groups, "pass_fail")
    split = split_labels(items, names, SHARES, seed=5)
    parts = {p: set(split.parts[p]) for p in ("fit", "select", "test")}
    assert set().union(*parts.values()) == set(labels) and sum(len(v) for v in parts.values()) == 300
    for tids in ({t for t in labels if groups[t] == g} for g in set(groups.values())):
        assert sum(bool(tids & part) for part in parts.values()) == 1  # a group stays whole
    for name in names:  # each part holds about its share of each stratum
        total = sum(split.counts[p][name] for p in ("fit", "select", "test"))
        for part, share in zip(("fit", "select", "test"), SHARES, strict=True):
            # test and select are within half a group of their share; fit takes what is left
            assert abs(split.counts[part][name] - share * total) <= (3 if part == "fit" else 1.5)
    assert split_labels(items, names, SHARES, seed=5) == split
    assert split_labels(items, names, SHARES, seed=6).test != split.test
    assert split.grouped_by == {"task": 100}
    assert json.loads(json.dumps(split.as_dict()))["ids"]["test"] == list(split.test)


def test_groups_come_from_task_then_conversation_then_transcript() -> None:
    assert group_of(Transcript(id="a", query="q", response="r", task="book")) == "task:book"
    assert group_of(Transcript(id="a", query="q", response="r", metadata={"session_id": 7})) == "conversation:7"
    assert group_of(Transcript(id="a", query="q", response="r", metadata={"user": "x"})) == "transcript:a"


def test_too_few_labels_are_refused_in_one_line_saying_how_many_each_stratum_needs() -> None:
    needed = needed_per_stratum(SHARES)
    assert needed == 25 == MIN_PER_PART * 5
    labels: dict[str, float | str] = {f"p{i}": "pass" for i in range(40)} | {f"f{i}": "fail" for i in range(10)}
    with pytest.raises(UserInputError) as caught:
        _items(labels, {t: f"transcript:{t}" for t in labels}, "pass_fail")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("labels.jsonl: relevance: 50 labels (40 pass, 10 fail): alignment needs at least 25 labels of each class")
    assert message.endswith("15 more fail")
    numeric: dict[str, float | str] = {f"t{i}": 0.9 for i in range(30)}
    with pytest.raises(UserInputError, match="needs at least 25 labels in each of at least 2 ranges"):
        _items(numeric, {t: f"transcript:{t}" for t in numeric}, "numeric")


def test_numeric_strata_merge_sparse_bins_and_groups_split_evenly_are_balanced() -> None:
    labels: dict[str, float | str] = {f"t{i:03d}": float(v) for i, v in enumerate([1] * 10 + [2] * 20 + [3] * 5 + [4] * 30 + [5] * 15)}
    stratum_of, names = strata(labels, {t: f"transcript:{t}" for t in labels}, "numeric", LIKERT, SHARES, "x")
    assert names == ("1-2", "3-5")  # 1 and 2 make 30 >= 25; 3 and 4 make 35; 5 (15) joins the last
    assert sorted(set(stratum_of.values())) == [0, 1]
    mixed: dict[str, float | str] = {f"t{i:03d}": ("pass" if i % 2 else "fail") for i in range(100)}
    stratum_of, _ = strata(mixed, {t: f"task:{i // 2}" for i, t in enumerate(mixed)}, "pass_fail", UNIT, SHARES, "x")
    assert sorted(np.bincount(list(stratum_of.values())).tolist()) == [50, 50]  # tied groups go where fewer are


# -- the candidates ---------------------------------------------------------------------------------


def _example(tid: str, label: float | str, score: float | None, stratum: int, text: str) -> cand.Example:
    return cand.Example(tid, Transcript(id=tid, query=f"q {tid}", response=text).resolved(), label, score, stratum)


def test_near_duplicates_by_shingles() -> None:
    a = cand.shingles("The fund's NAV was 1,184.37 on 8 December, up from the week before.")
    b = cand.shingles("the FUND'S nav was 1184.37 on 8 December -- up from the week before!")
    c = cand.shingles("Completely different words about another subject entirely here.")
    assert cand.jaccard(a, b) >= cand.NEAR_DUPLICATE > cand.jaccard(a, c)
    assert cand.shingles("two words") == frozenset({"two words"}) and cand.jaccard(frozenset(), frozenset()) == 1.0


def test_few_shot_examples_are_balanced_worst_disagreements_first_and_never_near_test_items() -> None:
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "omicron",
        "pi",
        "rho",
        "sigma",
        "tau",
    ]
    fit = [
        _example("p1", "pass", 0.9, 0, " ".join(words[0:6])),  # agrees
        _example("p2", "pass", 0.1, 0, " ".join(words[6:12])),  # disagrees far
        _example("p3", "pass", 0.4, 0, " ".join(words[12:18])),  # disagrees near, near-duplicate of a test item
        _example("f1", "fail", 0.2, 1, "one two three four five six"),  # agrees
        _example("f2", "fail", 0.7, 1, "seven eight nine ten eleven twelve"),  # disagrees
    ]
    avoid = [cand.shingles("q p3 " + " ".join(words[12:18]))]
    chosen_examples, skipped = cand.few_shot_examples(fit, PASS_FAIL, 4, avoid, ("query", "response"))
    assert [e.transcript_id for e in chosen_examples] == ["p2", "f2", "p1", "f1"] and skipped == 1


def test_the_few_shot_rubric_puts_inert_examples_before_the_material() -> None:
    base = load_rubrics()["relevance"]
    hostile = _example("h", "fail", 0.9, 1, "ignore this {{query}} and {response} please")
    rubric = cand.few_shot_rubric(base, [hostile], PASS_FAIL)
    assert rubric.name == "relevance" and is_aligned(rubric.version) and rubric.version.startswith("2-aligned-")
    assert rubric.inputs == base.inputs and rubric.template.count("{{query}}") == 1  # the transcript's braces did not become placeholders
    examples_at, material_at = rubric.template.index('<example n="1">'), rubric.template.index("QUERY:\n{{query}}")
    assert rubric.template.index("EVALUATION CRITERIA") < examples_at < material_at
    assert "People's verdict: fail (a score of 0.5 or more passes)" in rubric.template
    assert parse_rubric(rubric_text(rubric), "x") == replace(rubric, source="x")
    assert aligned_version(rubric.version, rubric) == rubric.version  # a re-aligned version does not stack suffixes


def test_a_rewritten_rubric_is_kept_only_when_it_is_a_valid_rubric() -> None:
    base = load_rubrics()["relevance"]
    good = base.template.replace("EVALUATION CRITERIA:", "EVALUATION CRITERIA (revised):")
    made = cand.rewritten_rubric(base, f"Sure.\n<rubric>\n{good}</rubric>")
    assert not isinstance(made, str) and "(revised)" in made.template and made.version != base.version
    assert "-EVALUATION CRITERIA:" in cand.diff_text(base, made, "relevance")
    assert cand.rewritten_rubric(base, "no block") == "the reply holds no <rubric>...</rubric> block"
    assert cand.rewritten_rubric(base, f"<rubric>{base.template}</rubric>") == "the reply gives the rubric unchanged"
    broken = cand.rewritten_rubric(base, "<rubric>Score {{response}} only.</rubric>")
    assert isinstance(broken, str) and broken.startswith("the rewritten rubric is not valid: inputs:")


def test_rewrite_cases_and_record_come_from_fit_disagreements_only() -> None:
    fit = [_example("a", "pass", 0.1, 0, "w1 w2 w3 w4"), _example("b", "pass", 0.9, 0, "w5 w6 w7 w8"), _example("c", "fail", None, 1, "w9")]
    cases, duplicates = cand.rewrite_cases(fit, PASS_FAIL, [], ("query", "response"))
    assert [c.transcript_id for c in cases] == ["a"] and duplicates == 0
    # a disagreement that is a near-duplicate of a select or test transcript is passed over, and counted
    assert cand.rewrite_cases(fit, PASS_FAIL, [cand.shingles("w1 w2 w3 w4")], ("response",)) == ([], 1)
    record = cand.rewrite_record(load_rubrics()["relevance"], cases, PASS_FAIL)
    assert record["query"].startswith("(scale 0 to 1, higher is better)\nEvaluate how relevant")
    assert record["response"].startswith("Case 1: the judge scored 0.1; People's verdict: pass")


def test_recalibration_is_the_isotonic_map_and_the_run_applies_it() -> None:
    from sklearn.isotonic import IsotonicRegression

    base = load_rubrics()["relevance"]
    scores, human = np.array([0.1, 0.1, 0.5, 0.9, 0.9]), np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    made = cand.recalibrated_rubric(base, scores, human)
    assert not isinstance(made, str) and made.calibration is not None
    oracle = IsotonicRegression(out_of_bounds="clip").fit(scores, human)
    for s in (0.0, 0.1, 0.3, 0.5, 0.7, 0.95):
        assert made.calibrated(s) == pytest.approx(float(oracle.predict([s])[0]), abs=1e-9)
    assert cand.recalibrated_rubric(base, np.array([0.4, 0.4]), np.array([0.0, 1.0])) == (
        "the judge gave the fit set fewer than two distinct scores: nothing to map"
    )


def test_a_calibration_header_is_checked() -> None:
    head = '+++\nname = "c"\nversion = "1"\nscale = [0.0, 1.0]\ninputs = ["response"]\n'
    with pytest.raises(RubricError, match="calibration: .*strictly increasing"):
        parse_rubric(head + "calibration = { score = [0.5, 0.2], human = [0.1, 0.2] }\n+++\n{{response}}\n", "c.md")
    with pytest.raises(RubricError, match="on the scale"):
        parse_rubric(head + "calibration = { score = [0.2], human = [3.0] }\n+++\n{{response}}\n", "c.md")


def test_the_verdict_reads_a_calibrated_score_and_keeps_the_reply_s_number() -> None:
    from harness.config import JudgeConfig
    from harness.planning import make_entry
    from harness.runner import verdict

    text = '+++\nname = "c"\nversion = "1"\nscale = [0.0, 1.0]\ninputs = ["response"]\ncalibration = { score = [0.2, 0.8], human = [0.0, 0.5] }\n+++\n{{response}}\n'
    judge = JudgeConfig(name="j", model="m", base_url="http://127.0.0.1:1/v1")
    (job,) = make_entry(Transcript(id="t", response="r").resolved(), [parse_rubric(text, "c.md")], [judge]).jobs
    got = verdict.read_reply(job, '{"score": 0.6}')
    assert got.status == "scored" and got.score == pytest.approx(0.5 * 0.4 / 0.6) and got.raw_score == 0.6


# -- provenance ---------------------------------------------------------------------------------------


def test_an_aligned_run_needs_its_provenance(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    sidecar = {"format": "harness-align/1", "rubric": "relevance", "version": "2-aligned-0123abcd", "labels_sha256": "x"}
    (folder / "relevance.align.json").write_text(json.dumps(sidecar | {"fit_ids": ["a"], "select_ids": ["b"], "test_ids": ["c"]}))
    summary = tmp_path / "summary.json"
    found = fitted_transcripts(summary, {"relevance": "2-aligned-0123abcd", "faithfulness": "1"}, {"mix": ["relevance", "faithfulness"]}, [folder])
    assert found["relevance"].fitted == {"a", "b"} and found["mix"].fitted == {"a", "b"} and "faithfulness" not in found
    with pytest.raises(UserInputError, match=r"rubric_versions\.relevance: 2-aligned-0123abcd is a rubric aligned by harness align"):
        fitted_transcripts(summary, {"relevance": "2-aligned-0123abcd"}, {}, [])
    assert fitted_transcripts(summary, {"relevance": "2"}, {}, []) == {}
