"""``harness align`` end to end: the real command against scripted judges on 127.0.0.1 whose
agreement with people depends on the prompt (tests/align_support.py), so the effect to find is
known transcript by transcript. Then the aligned rubric in an ordinary run, ``--offline`` replay,
``harness infer`` leaving out the labels that made the judge, a judge nothing can improve, and
labels too few to split."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.rubrics.rubric import load_rubrics
from tests.align_support import AlignJudgeServer, right, setup
from tests.e2e_support import chat_requests, read_jsonl, user_prompt

pytestmark = pytest.mark.timeout(300)
N, LABELLED = 240, 200


@pytest.fixture(scope="module")
def server() -> Iterator[AlignJudgeServer]:
    with AlignJudgeServer() as srv:
        yield srv


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], terminal_width=200)


def judged_ids(server: AlignJudgeServer, since: int = 0) -> list[str]:
    """The transcript each judging request since request ``since`` judged (the last one named in its prompt)."""
    out = []
    for request in chat_requests(server)[since:]:
        prompt = user_prompt(request)
        if not prompt.startswith("ALIGN REWRITE"):
            out.append(prompt.rsplit(" id=", 1)[1].split()[0])
    return out


@pytest.fixture(scope="module")
def aligned(server: AlignJudgeServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("align")
    paths = setup(tmp, server, "sensitive", N, LABELLED)
    done = invoke("run", paths["transcripts"], "--config", paths["config"], "--cache", paths["cache"], "--out", tmp / "run")
    assert done.exit_code == 0, done.output
    before = len(chat_requests(server))
    done = invoke(
        "align", tmp / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"], "--cache", paths["cache"], "--json"
    )
    assert done.exit_code == 0, done.output
    return {"tmp": tmp, "paths": paths, "result": json.loads(done.stdout), "out": tmp / "run" / "align-relevance", "before": before}


def _truth(tid: str) -> str:
    return "pass" if (int(tid[1:]) // 2) % 2 == 0 else "fail"


def test_the_known_effect_is_found_on_the_sealed_test_set(aligned: dict[str, Any]) -> None:
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    result = aligned["result"]
    assert result["chosen"] == "few-shot" and result["improved"] is True and result["exit_code"] == 0
    assert result["verdict"].startswith("improved: Cohen's kappa +")
    test_ids = result["split"]["ids"]["test"]
    # The oracle: the scripted judge's own rule, transcript by transcript, scored by scikit-learn.
    truth = [_truth(t) == "pass" for t in test_ids]
    before = [(_truth(t) == "pass") == right("sensitive", t, False) for t in test_ids]
    after = [(_truth(t) == "pass") == right("sensitive", t, True) for t in test_ids]
    figures = {f["name"]: f for f in result["test"]["figures"]}
    assert figures["kappa"]["baseline"]["value"] == pytest.approx(cohen_kappa_score(truth, before), abs=1e-12)
    assert figures["kappa"]["aligned"]["value"] == pytest.approx(cohen_kappa_score(truth, after), abs=1e-12)
    assert figures["balanced_accuracy"]["aligned"]["value"] == pytest.approx(balanced_accuracy_score(truth, after), abs=1e-12)
    low, high = figures["kappa"]["difference"]["ci"]
    assert 0 < low <= figures["kappa"]["difference"]["value"] <= high
    assert result["test"]["n"] == len(test_ids) == 80 and result["test"]["groups"] == 40


def test_the_split_is_recorded_and_the_test_labels_never_fit_or_chose(aligned: dict[str, Any], server: AlignJudgeServer) -> None:
    result, out = aligned["result"], aligned["out"]
    ids = result["split"]["ids"]
    split_file = json.loads((out / "split.json").read_text())
    assert split_file["ids"] == ids and split_file["labels_sha256"] == hashlib.sha256(aligned["paths"]["labels"].read_bytes()).hexdigest()
    fit, select, test = set(ids["fit"]), set(ids["select"]), set(ids["test"])
    assert len(fit) + len(select) + len(test) == LABELLED and not (fit & select or fit & test or select & test)
    for part in (fit, select, test):  # a task's two transcripts stay together
        assert all(f"t{int(t[1:]) ^ 1:03d}" in part for t in part)
    few_shot = next(c for c in result["candidates"] if c["name"] == "few-shot")
    assert few_shot["from_fit"] and set(few_shot["from_fit"]) <= fit
    rewrite = next(c for c in result["candidates"] if c["name"] == "rewrite")
    assert rewrite["status"] == "tried" and set(rewrite["from_fit"]) <= fit
    assert "+EVALUATION CRITERIA (what people value: a right answer):" in rewrite["diff"]
    request = json.loads((out / "rewrite" / "request.jsonl").read_text())
    shown = set(re.findall(r"id=(t\d+)\b", request["query"] + request["response"]))
    assert shown and shown <= fit
    # What the judge was asked during align: select by both prompt candidates, test by the chosen one only.
    asked = judged_ids(server, aligned["before"])
    assert sorted(asked) == sorted([*select, *select, *test])


def test_the_aligned_rubric_is_a_new_file_version_and_cache_key(aligned: dict[str, Any]) -> None:
    result, out = aligned["result"], aligned["out"]
    rubric = load_rubrics([out / "prompts"])["relevance"]
    assert rubric.version == result["aligned_version"] and rubric.version.startswith("2-data-aligned-")  # aligned from the default version, 2-data
    head = (out / "prompts" / "relevance.md").read_text().split("+++")[1]
    assert "# aligned by harness align from relevance version 2-data (few-shot)" in head
    provenance = json.loads((out / "prompts" / "relevance.align.json").read_text())
    assert provenance["labels_sha256"] == result["labels_sha256"] and provenance["seed"] == 0
    assert provenance["test_ids"] == result["split"]["ids"]["test"] and provenance["split"]["sizes"] == {"fit": 80, "select": 40, "test": 80}
    assert provenance["test"] == result["test"]
    assert result["written"] == [str(out / "prompts" / "relevance.md"), str(out / "prompts" / "relevance.align.json")]
    baseline_keys = {r["cache_key"] for r in read_jsonl(aligned["tmp"] / "run" / "judgments.jsonl")}
    chosen = read_jsonl(out / "candidates" / "few-shot" / "test" / "judgments.jsonl")
    assert {r["rubric_version"] for r in chosen} == {rubric.version} and not baseline_keys & {r["cache_key"] for r in chosen}
    examples = set(re.findall(r"id=(t\d+)\b", rubric.template))
    assert examples and examples <= set(result["split"]["ids"]["fit"])  # no select or test transcript is an example


def test_the_terminal_shows_the_tables_the_verdict_and_the_rewrite_diff(aligned: dict[str, Any], server: AlignJudgeServer) -> None:
    paths = aligned["paths"]
    done = invoke(
        "align", aligned["tmp"] / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"],
        "--cache", paths["cache"], "--out", aligned["tmp"] / "again",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    for text in ("Candidates on the select set", "Sealed test set, measured once: 80 labels in 40 groups", "improved: Cohen's kappa +",
                 "--- relevance.md (version 2-data)", "+EVALUATION CRITERIA (what people value", "fit 80 · select 40 · sealed test 80"):  # fmt: skip
        assert text in done.output, text


def test_offline_replay_gives_the_same_answer_without_a_call(aligned: dict[str, Any], server: AlignJudgeServer) -> None:
    paths = aligned["paths"]
    before = len(server.requests)
    done = invoke(
        "align", aligned["tmp"] / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"],
        "--cache", paths["cache"], "--out", aligned["tmp"] / "offline", "--offline", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert len(server.requests) == before
    replay, live = json.loads(done.stdout), aligned["result"]
    for key in ("split", "chosen", "aligned_version", "test", "improved", "verdict", "labels_sha256"):
        assert replay[key] == live[key], key
    assert [c["select_kappa"] for c in replay["candidates"]] == [c["select_kappa"] for c in live["candidates"]]


def test_infer_leaves_out_the_labels_that_fitted_or_chose_the_judge(aligned: dict[str, Any]) -> None:
    tmp, paths, out = aligned["tmp"], aligned["paths"], aligned["out"]
    run2 = tmp / "run-aligned"
    done = invoke("run", paths["transcripts"], "--config", paths["config"], "--cache", paths["cache"], "--prompts", out / "prompts", "--out", run2)
    assert done.exit_code == 0, done.output
    refused = invoke("infer", run2, "--labels", paths["labels"], "--no-design")
    assert refused.exit_code == 2
    assert "is a rubric aligned by harness align, and its provenance (relevance.align.json" in refused.output
    done = invoke("infer", run2, "--labels", paths["labels"], "--prompts", out / "prompts", "--no-design", "--json")
    assert done.exit_code == 0, done.output
    (entry,) = json.loads(done.stdout)["metrics"][0]["judges"]
    ids = aligned["result"]["split"]["ids"]
    made = len(ids["fit"]) + len(ids["select"])
    assert entry["counts"]["labels_fitted_the_judge"] == made == 120
    assert entry["counts"]["N"] == N - made and entry["n"] == len(ids["test"])  # the test labels, in a population without the 120
    assert "left out of the labels (120 here) and of the population" in entry["notes"][0]
    # Baseline against aligned: the transcripts that made the aligned judge are out of both sides.
    done = invoke("infer", tmp / "run", run2, "--labels", paths["labels"], "--prompts", out / "prompts", "--no-design", "--json")
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)["comparisons"]
    assert row["paired_transcripts"] == N - made and row["n"] == len(ids["test"])
    assert any("fitted or chose it are left out" in note for note in row["notes"])


def test_a_judge_nothing_can_improve_is_kept(server: AlignJudgeServer, tmp_path: Path) -> None:
    paths = setup(tmp_path, server, "blind", 200)
    done = invoke("run", paths["transcripts"], "--config", paths["config"], "--cache", paths["cache"], "--out", tmp_path / "run")
    assert done.exit_code == 0, done.output
    stale = tmp_path / "run" / "align-relevance" / "prompts"
    stale.mkdir(parents=True)
    (stale / "relevance.md").write_text("left by an earlier alignment")
    done = invoke(
        "align", tmp_path / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"], "--cache", paths["cache"],
        "--candidate", "few-shot", "--candidate", "recalibration", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["improved"] is False and result["chosen"] is None and result["written"] == []
    assert result["verdict"].startswith("no better: no candidate agreed with the select labels better than the rubric")
    assert [c["name"] for c in result["candidates"]] == ["few-shot", "recalibration"]
    assert next(c for c in result["candidates"] if c["name"] == "few-shot")["gain"] == 0
    assert not (stale / "relevance.md").exists() and any("removed" in n for n in result["notes"])


def test_too_few_labels_are_refused_before_any_call(server: AlignJudgeServer, tmp_path: Path) -> None:
    paths = setup(tmp_path, server, "sensitive", 40)
    done = invoke("run", paths["transcripts"], "--config", paths["config"], "--cache", paths["cache"], "--out", tmp_path / "run")
    assert done.exit_code == 0, done.output
    before = len(server.requests)
    done = invoke("align", tmp_path / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"])
    assert done.exit_code == 2 and len(server.requests) == before
    assert done.output == (
        f"error: {paths['labels']}: relevance: 40 labels (20 pass, 20 fail): alignment needs at least 25 labels of each class "
        "(5 of each in each of fit, select and test, at shares 0.4/0.2/0.4); 5 more pass, 5 more fail\n"
    )


def test_a_json_array_of_conversations_is_grouped_by_conversation(server: AlignJudgeServer, tmp_path: Path) -> None:
    paths = setup(tmp_path, server, "sensitive", 160)
    rows = read_jsonl(paths["transcripts"])
    for row in rows:  # no task: the conversation id groups them
        row["metadata"] = {"conversation_id": row.pop("task")}
    array = tmp_path / "transcripts.json"
    array.write_text(json.dumps(rows, indent=2))  # each record spans many lines
    done = invoke("run", array, "--config", paths["config"], "--cache", paths["cache"], "--out", tmp_path / "run")
    assert done.exit_code == 0, done.output
    done = invoke(
        "align", tmp_path / "run", "--labels", paths["labels"], "--rubric", "relevance", "--config", paths["config"],
        "--cache", paths["cache"], "--candidate", "few-shot", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["split"]["grouped_by"] == {"conversation": 80} and result["chosen"] == "few-shot"
    select = read_jsonl(tmp_path / "run" / "align-relevance" / "candidates" / "few-shot" / "select.jsonl")
    assert [r["id"] for r in select] == result["split"]["ids"]["select"]
