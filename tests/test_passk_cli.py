"""``harness passk``: repeated runs of tasks read from real run directories, through the CLI runner.

Run A is made by the real harness against a scripted judge (tests/analysis_support.py); its
results rows carry no task ids, so they come from the transcripts file. Run B's rows are given a
``task`` and ``agent`` metrics afterwards (as the run writes them for agent transcripts) and its
transcripts file is removed, so its tasks can only come from the rows. Every number is checked
against the hand-worked counts below and scipy.stats.bootstrap with the same seed.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.analysis_support import CANNOT, ScriptedJudges, make_run, record
from tests.e2e_support import read_jsonl, write_jsonl

RESAMPLES = 400
SEED = 7

# Run A's relevance scores per task; at --at-least 0.7 a run succeeds when its score is >= 0.7.
#   t1: S S F S F        -> n 5, c 3
#   t2: S S S            -> n 3, c 3
#   t3: F S (unscored) F -> n 3, c 1 (the unscored run is left out, not a failure)
#   t4: F F              -> n 2, c 0
A_SCORES: dict[str, list[float | str]] = {
    "t1": [0.9, 0.8, 0.2, 0.7, 0.1],
    "t2": [0.9, 0.95, 1.0],
    "t3": [0.1, 0.9, CANNOT, 0.3],
    "t4": [0.1, 0.2],
}
# pass@k = 1 - C(n-c, k) / C(n, k); pass^k = C(c, k) / C(n, k):
#   t1 (5, 3): k=1 0.6 / 0.6;  k=2 1 - 1/10 = 0.9 / 3/10 = 0.3;   k=3 1 - 0/10 = 1 / 1/10 = 0.1
#   t2 (3, 3): k=1 1 / 1;      k=2 1 / 1;                         k=3 1 / 1
#   t3 (3, 1): k=1 1/3 / 1/3;  k=2 1 - 1/3 = 2/3 / 0;             k=3 1 / 0
#   t4 (2, 0): k=1 0 / 0;      k=2 0 / 0;                         k=3 undefined (k > n)
EXPECTED = {
    "t1": {"n": 5, "c": 3, "at": {1: 0.6, 2: 0.9, 3: 1.0}, "hat": {1: 0.6, 2: 0.3, 3: 0.1}, "flakiness": 1 - abs(2 * 3 / 5 - 1)},
    "t2": {"n": 3, "c": 3, "at": {1: 1.0, 2: 1.0, 3: 1.0}, "hat": {1: 1.0, 2: 1.0, 3: 1.0}, "flakiness": 0.0},
    "t3": {"n": 3, "c": 1, "at": {1: 1 / 3, 2: 2 / 3, 3: 1.0}, "hat": {1: 1 / 3, 2: 0.0, 3: 0.0}, "flakiness": 1 - abs(2 / 3 - 1)},
    "t4": {"n": 2, "c": 0, "at": {1: 0.0, 2: 0.0, 3: None}, "hat": {1: 0.0, 2: 0.0, 3: None}, "flakiness": 0.0},
}
# Run B: tasks t1..t3 and t5. Its agent metric trajectory_match (1 = matched, null = cannot be
# said) and its relevance scores (0.9 / 0.1 / unscored) say the same:
#   t1: 1 1 1 1 0 -> (5, 4);  t2: 1 0 1 -> (3, 2);  t3: 1 1 null 1 -> (3, 3);  t5: 1 1 -> (2, 2)
B_MATCH: dict[str, list[Any]] = {"t1": [1, 1, 1, 1, 0], "t2": [1, 0, 1], "t3": [1, 1, None, 1], "t5": [1, 1]}


def _records(scores: dict[str, list[Any]], prefix: str) -> tuple[list[dict[str, Any]], dict[tuple[str, str, str], float | str]]:
    records, table = [], {}
    for task, values in scores.items():
        for i, value in enumerate(values):
            tid = f"{prefix}{task}-{i}"
            records.append({**record(tid), "task": task})
            table[(tid, "relevance", "mini")] = value
    return records, table


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("passk")
    server = ScriptedJudges()
    server.start()
    try:
        a_records, a_table = _records(A_SCORES, "a-")
        a_records.append(record("a-loner"))  # no task: left out, counted
        a_table[("a-loner", "relevance", "mini")] = 0.9
        run_a = make_run(tmp, "A", server, a_records, a_table, rubrics=("relevance",))
        b_scores = {t: [CANNOT if v is None else 0.9 if v else 0.1 for v in values] for t, values in B_MATCH.items()}
        b_records, b_table = _records(b_scores, "b-")
        run_b = make_run(tmp, "B", server, b_records, b_table, rubrics=("relevance",))
        no_task = make_run(
            tmp,
            "N",
            server,
            [record("n1"), record("n2")],
            {("n1", "relevance", "mini"): 0.5, ("n2", "relevance", "mini"): 0.5},
            rubrics=("relevance",),
        )
    finally:
        server.stop()
    # B's rows get their task and agent metrics, and its transcripts file goes away.
    rows = read_jsonl(run_b / "results.jsonl")
    match = {f"b-{t}-{i}": v for t, values in B_MATCH.items() for i, v in enumerate(values)}
    for row in rows:
        row["task"] = row["transcript_id"].split("-")[1]
        row["agent"] = {"trajectory_match": match[row["transcript_id"]], "repeated_calls": 0}
    write_jsonl(run_b / "results.jsonl", rows)
    (tmp / "B-input" / "transcripts.jsonl").unlink()
    yield {"A": run_a, "B": run_b, "N": no_task, "tmp": tmp}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["passk", *map(str, args)], terminal_width=200)


def passk_json(*args: Any) -> dict[str, Any]:
    result = invoke(*args, "--json", "--resamples", str(RESAMPLES), "--seed", str(SEED))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def bootstrap(values: list[float]) -> list[float]:
    from scipy import stats as sp

    res = sp.bootstrap((np.array(values),), np.mean, n_resamples=RESAMPLES, method="percentile", random_state=np.random.default_rng(SEED))
    return [res.confidence_interval.low, res.confidence_interval.high]


def test_per_task_and_means_from_a_judged_rubric(runs: dict[str, Path]) -> None:
    out = passk_json(runs["A"], "--rubric", "relevance", "--at-least", "0.7", "--k", "3,1,2")
    assert out["k"] == [1, 2, 3]
    assert out["success"]["rule"] == "relevance (judge mini) >= 0.7"
    assert out["runs"] == {"transcripts": 15, "decided": 13, "undecided": 1, "undecided_reasons": {"unscored: no_score_found": 1}, "without_task": 1}
    assert [t["task"] for t in out["tasks"]] == ["t1", "t2", "t3", "t4"]
    for row in out["tasks"]:
        want = EXPECTED[row["task"]]
        assert (row["n"], row["c"]) == (want["n"], want["c"])
        assert row["flakiness"] == pytest.approx(want["flakiness"], abs=1e-12)
        for k in (1, 2, 3):
            for key, name in (("at", "pass_at_k"), ("hat", "pass_hat_k")):
                expected = want[key][k]
                assert row[name][str(k)] == (None if expected is None else pytest.approx(expected, abs=1e-12)), (row["task"], name, k)
    assert out["tasks"][3]["undefined"] == {"3": "k=3 is more than the task's 2 runs: no set of 3 runs to count"}
    assert out["tasks"][2]["undecided"] == 1
    for m in out["means"]:
        k = m["k"]
        used = [t for t in EXPECTED if EXPECTED[t]["n"] >= k]
        assert (m["tasks"], m["left_out"]) == (len(used), 4 - len(used))
        for key, name in (("at", "pass_at_k"), ("hat", "pass_hat_k")):
            values = [EXPECTED[t][key][k] for t in used]
            assert m[name]["value"] == pytest.approx(np.mean(values), abs=1e-12)
            assert m[name]["ci"] == pytest.approx(bootstrap(values), abs=1e-12)
    # k = 1: pass^1 = (0.6 + 1 + 1/3 + 0) / 4 = 0.48333; k = 3: pass^3 = (0.1 + 1 + 0) / 3 = 0.36667 over t1-t3.
    assert out["means"][0]["pass_hat_k"]["value"] == pytest.approx(0.48333333, abs=1e-8)
    assert out["means"][2]["pass_hat_k"]["value"] == pytest.approx(0.36666667, abs=1e-8)
    flaky = out["flakiness"]
    assert (flaky["tasks"], flaky["flaky"], flaky["flaky_share"]) == (4, 2, 0.5)
    assert flaky["mean"]["value"] == pytest.approx((0.8 + 0 + 2 / 3 + 0) / 4, abs=1e-12)
    assert any("1 transcript(s) have no task id" in n for n in out["notes"])
    assert any("k=3: 1 task(s) with fewer than 3 decided runs are left out of the means" in n for n in out["notes"])


def test_the_terminal_table(runs: dict[str, Path]) -> None:
    result = invoke(runs["A"], "--rubric", "relevance", "--at-least", "0.7", "--k", "1,3", "--resamples", str(RESAMPLES), "--seed", str(SEED))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"{runs['A']}: 13 decided runs of 4 tasks; success: relevance (judge mini) >= 0.7" in result.stdout
    row = next(line.split() for line in lines if line.startswith("t1 "))
    assert row == ["t1", "5", "3", "0.800", "0.600", "0.600", "1.000", "0.100"]
    row = next(line.split() for line in lines if line.startswith("t4 "))
    assert row == ["t4", "2", "0", "0.000", "0.000", "0.000", "—", "—"]
    hat3 = bootstrap([0.1, 1.0, 0.0])
    means = next(line.split() for line in lines if line.startswith("3 "))
    assert means[:5] == ["3", "3", "1.000", "[1.000,", "1.000]"] and means[5] == "0.367" and " ".join(means[6:]) == f"[{hat3[0]:.3f}, {hat3[1]:.3f}]"
    assert "flaky tasks (0 < c < n): 2 of 4 with 2 or more runs (0.500)" in result.stdout
    assert "note: 1 run(s) whose success cannot be decided are left out of their task's n (unscored: no_score_found 1)" in result.output


def test_an_agent_metric_read_from_the_rows(runs: dict[str, Path]) -> None:
    # B's tasks come from its rows: its transcripts file is gone.
    b = passk_json(runs["B"], "--metric", "trajectory_match", "--at-least", "1", "--k", "1,2")
    assert [(t["task"], t["n"], t["c"]) for t in b["tasks"]] == [("t1", 5, 4), ("t2", 3, 2), ("t3", 3, 3), ("t5", 2, 2)]
    assert b["runs"]["undecided_reasons"] == {"cannot be said": 1}
    assert b["success"]["rule"] == "agent metric trajectory_match >= 1"
    # pass^2: t1 C(4,2)/C(5,2) = 6/10; t2 C(2,2)/C(3,2) = 1/3; t3 1; t5 1.
    assert [t["pass_hat_k"]["2"] for t in b["tasks"]] == pytest.approx([0.6, 1 / 3, 1.0, 1.0], abs=1e-12)
    # --at-most: a lower-is-better metric. repeated_calls is 0 everywhere: every run succeeds.
    zero = passk_json(runs["B"], "--metric", "repeated_calls", "--at-most", "0", "--k", "2")
    assert [t["c"] for t in zero["tasks"]] == [5, 3, 4, 2] and zero["means"][0]["pass_hat_k"]["value"] == 1.0


def test_two_agents_on_pass_hat_k(runs: dict[str, Path]) -> None:
    out = passk_json(runs["B"], "--rubric", "relevance", "--at-least", "0.7", "--k", "1,3", "--against", runs["A"])
    assert [(t["task"], t["n"], t["c"]) for t in out["tasks"]] == [("t1", 5, 4), ("t2", 3, 2), ("t3", 3, 3), ("t5", 2, 2)]
    against = out["against"]
    assert against["difference"] == "RUN - OTHER"
    assert (against["tasks_only_in_run"], against["tasks_only_in_other"]) == (1, 1)  # t5 only in B, t4 only in A
    assert [(t["task"], t["n"], t["c"]) for t in against["other"]["tasks"]] == [("t1", 5, 3), ("t2", 3, 3), ("t3", 3, 1), ("t4", 2, 0)]
    # Shared tasks with n >= k in both: t1, t2, t3 at k = 1 and 3.
    #   pass^1: B 0.8, 2/3, 1 ; A 0.6, 1, 1/3  -> differences 0.2, -1/3, 2/3, mean 0.17778
    #   pass^3: B 4/10, 0, 1  ; A 0.1, 1, 0    -> differences 0.3, -1, 1,     mean 0.1
    #   pass@3: B 1, 1, 1     ; A 1, 1, 1      -> differences 0, 0, 0
    hat = {1: ([0.8, 2 / 3, 1.0], [0.6, 1.0, 1 / 3]), 3: ([0.4, 0.0, 1.0], [0.1, 1.0, 0.0])}
    for row in against["per_k"]:
        run, other = hat[row["k"]]
        diff = list(np.subtract(run, other))
        assert row["shared_tasks"] == 3
        assert row["pass_hat_k"]["run"] == pytest.approx(np.mean(run), abs=1e-12)
        assert row["pass_hat_k"]["other"] == pytest.approx(np.mean(other), abs=1e-12)
        assert row["pass_hat_k"]["difference"] == pytest.approx(np.mean(diff), abs=1e-12)
        assert row["pass_hat_k"]["ci"] == pytest.approx(bootstrap(diff), abs=1e-12)
    assert against["per_k"][0]["pass_hat_k"]["difference"] == pytest.approx(0.17777778, abs=1e-8)
    assert against["per_k"][1]["pass_hat_k"]["difference"] == pytest.approx(0.1, abs=1e-12)
    assert against["per_k"][1]["pass_at_k"]["difference"] == 0.0 and against["per_k"][1]["pass_at_k"]["ci"] == [0.0, 0.0]
    # The terminal: one row per k.
    result = invoke(
        runs["B"],
        "--rubric",
        "relevance",
        "--at-least",
        "0.7",
        "--k",
        "1,3",
        "--against",
        runs["A"],
        "--resamples",
        str(RESAMPLES),
        "--seed",
        str(SEED),
    )
    assert result.exit_code == 0, result.output
    ci = bootstrap([0.3, -1.0, 1.0])
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith("3 ") and "+0.100" in line)
    assert row[:5] == ["3", "3", "0.467", "0.367", "+0.100"] and " ".join(row[5:7]) == f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def test_labels_decide_success(runs: dict[str, Path]) -> None:
    labels = runs["tmp"] / "labels.jsonl"
    rows = [
        {"transcript_id": "a-t1-0", "rubric": "relevance", "label": "pass"},
        {"transcript_id": "a-t1-1", "rubric": "relevance", "label": False},
        {"transcript_id": "a-t1-2", "rubric": "relevance", "label": True},
        {"transcript_id": "a-t2-0", "rubric": "relevance", "label": "pass"},
        {"transcript_id": "a-t2-1", "rubric": "relevance", "label": "fail"},
        {"transcript_id": "elsewhere", "rubric": "relevance", "label": "pass"},
    ]
    write_jsonl(labels, rows)
    out = passk_json(runs["A"], "--labels", labels, "--rubric", "relevance", "--k", "1,2")
    # t1: pass fail pass -> (3, 2); t2: pass fail -> (2, 1); t3, t4: no label -> n 0.
    assert [(t["task"], t["n"], t["c"]) for t in out["tasks"]] == [("t1", 3, 2), ("t2", 2, 1), ("t3", 0, 0), ("t4", 0, 0)]
    assert out["success"]["rule"] == "relevance labels = pass"
    assert out["runs"]["undecided_reasons"] == {"no label": 9}  # 14 runs with a task, 5 labelled
    # pass^2: t1 C(2,2)/C(3,2) = 1/3, t2 0 -> mean 1/6 over the two tasks with n >= 2.
    assert out["means"][1]["pass_hat_k"]["value"] == pytest.approx(1 / 6, abs=1e-12) and out["means"][1]["tasks"] == 2
    assert any("1 relevance label(s) name transcripts the run" in n for n in out["notes"])
    result = invoke(runs["A"], "--labels", labels, "--rubric", "relevance", "--at-least", "0.5")
    assert result.exit_code == 2 and "the relevance labels are pass/fail; leave out --at-least and --at-most" in result.output


def test_tasks_from_a_moved_transcripts_file(runs: dict[str, Path], tmp_path: Path) -> None:
    moved = tmp_path / "A"
    shutil.copytree(runs["A"], moved)
    summary = json.loads((moved / "summary.json").read_text())
    original = Path(summary["input"])
    summary["input"] = str(tmp_path / "gone.jsonl")
    (moved / "summary.json").write_text(json.dumps(summary))
    result = invoke(moved, "--rubric", "relevance", "--at-least", "0.7")
    assert result.exit_code == 2
    assert "results.jsonl has no task ids and its input file" in result.output and "pass --input" in result.output
    out = passk_json(moved, "--rubric", "relevance", "--at-least", "0.7", "--input", original, "--k", "1")
    assert [(t["task"], t["n"], t["c"]) for t in out["tasks"]] == [("t1", 5, 3), ("t2", 3, 3), ("t3", 3, 1), ("t4", 2, 0)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("N", "--rubric", "relevance", "--at-least", "0.5"), 'no transcript has a task id: give each transcript a "task"'),
        (("A", "--rubric", "relevance", "--at-least", "0.7", "--k", "2,6"), "--k 6: more than every task's decided runs in"),
        (("A", "--rubric", "relevance", "--at-least", "0.7", "--k", "1,x"), "--k 1,x: expected positive integers separated by commas"),
        (("A", "--rubric", "relevance", "--at-least", "0.7", "--k", "0"), "--k 0: expected positive integers"),
        (("A", "--rubric", "relevance", "--metric", "m", "--at-least", "1"), "decide success by one rule"),
        (("A", "--at-least", "1"), "decide success by one rule"),
        (("A", "--rubric", "relevance"), "say which runs succeed: --at-least X or --at-most X on relevance"),
        (("A", "--rubric", "relevance", "--at-least", "1", "--at-most", "2"), "give one of --at-least and --at-most, not both"),
        (("A", "--rubric", "relevance", "--at-least", "3"), "--at-least 3: outside the relevance scale [0, 1]"),
        (("A", "--rubric", "nope", "--at-least", "0.5"), "--rubric nope: not a rubric or composite of the run"),
        (("A", "--rubric", "relevance", "--at-least", "0.5", "--judge", "big"), "--judge: 'big' is not a judge of the run"),
        (("A", "--metric", "trajectory_match", "--at-least", "1"), "--metric trajectory_match: not an agent metric of the run"),
        (("B", "--metric", "nope", "--at-least", "1"), "(it has: repeated_calls, trajectory_match)"),
        (("B", "--metric", "trajectory_match", "--at-least", "1", "--against", "A"), "--metric trajectory_match: not an agent metric of the run"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(runs: dict[str, Path], args: tuple[str, ...], message: str) -> None:
    result = invoke(runs[args[0]], *(str(runs[a]) if a in runs and i > 0 and args[i - 1] == "--against" else a for i, a in enumerate(args) if i > 0))
    assert result.exit_code == 2, result.output
    assert message in result.output
    # One line, besides the note that --rubric/--metric/--at-least/--at-most are the old spelling of --success.
    lines = [line for line in result.output.strip().splitlines() if "is deprecated; use --success" not in line]
    assert len(lines) == 1, result.output
    assert len(result.output.strip().splitlines()) == 1 + any(a in ("--rubric", "--metric", "--at-least", "--at-most") for a in args), result.output


def test_k_larger_than_some_tasks_is_undefined_there_not_extrapolated(runs: dict[str, Path]) -> None:
    out = passk_json(runs["A"], "--rubric", "relevance", "--at-least", "0.7", "--k", "5")
    # Only t1 has 5 runs: C(3,5) = 0 -> pass^5 = 0; C(2,5) = 0 -> pass@5 = 1.
    assert [(t["task"], t["pass_hat_k"]["5"], t["pass_at_k"]["5"]) for t in out["tasks"]] == [
        ("t1", 0.0, 1.0),
        ("t2", None, None),
        ("t3", None, None),
        ("t4", None, None),
    ]
    mean = out["means"][0]
    assert (mean["tasks"], mean["left_out"]) == (1, 3)
    assert mean["pass_hat_k"] == {"value": 0.0, "ci": None, "tasks": 1, "note": "one task: no interval over tasks"}
    assert math.isclose(mean["pass_at_k"]["value"], 1.0)
