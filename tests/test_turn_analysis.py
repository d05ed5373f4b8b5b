"""The analysis commands on runs judged per turn (issue 43 part 5): the conversation is the unit.

Two runs of eight three-turn conversations, judged per turn (``--turns all``, the mean of the
turns), by a scripted judge that scores each turn by a number in its query; ``compare``, ``gate``,
``passk``, ``agreement``, ``infer`` and ``race`` each count eight units (conversations), never
the 24 turns, and each figure is the one worked by hand from the conversations' scores.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.planning import RunOptions
from harness.runner import run_evaluation
from tests.e2e_support import judge, read_jsonl, serve, write_config, write_jsonl
from tests.prompt_blocks import judged_input

pytestmark = pytest.mark.timeout(300)
CONVERSATIONS = 8
#: a human label per conversation (not in the order of its score)
LABELS = [0.3 + 0.05 * ((3 * i) % CONVERSATIONS) for i in range(CONVERSATIONS)]


def reply(body: dict[str, Any]) -> str:
    """The judged turn's score is the ``s=X`` of its query (the history before it is not read)."""
    query = judged_input(body["messages"][-1]["content"], "query")
    value = re.search(r"s=(\d\.\d+)", query or "")
    return json.dumps({"score": float(value[1]) if value else 0.5})


def turn_scores(side: str, i: int) -> list[float]:
    return [0.2 + 0.05 * i, 0.4, 0.3] if side == "a" else [0.3 + 0.07 * i, 0.6 - 0.04 * i, 0.5]


def conversation(side: str, i: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for t, s in enumerate(turn_scores(side, i), start=1):
        messages += [
            {"role": "user", "content": f"{side}: conversation {i}, question {t} s={s:.2f}"},
            {"role": "assistant", "content": f"answer {t}"},
        ]
    return {"id": f"c{i}", "task": f"task{i % 3}", "messages": messages}


def hand(side: str) -> dict[str, float]:
    """Each conversation's score by the mean rule, worked from the scripted turn scores."""
    return {f"c{i}": statistics.fmean(round(s, 2) for s in turn_scores(side, i)) for i in range(CONVERSATIONS)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("turn-analysis")
    with serve(reply=reply) as server:
        assert server.base_url
        write_config(tmp / "harness.toml", [judge("j", server.base_url)])
        for side in "ab":
            write_jsonl(tmp / f"{side}.jsonl", [conversation(side, i) for i in range(CONVERSATIONS)])
            options = RunOptions(
                input=tmp / f"{side}.jsonl",
                out=tmp / side,
                config=tmp / "harness.toml",
                rubrics=["relevance"],
                cache=tmp / "cache.sqlite",
                progress=False,
                turns="all",
            )
            outcome = asyncio.run(run_evaluation(options))
            assert outcome.exit_code == 0, outcome.message
        write_jsonl(tmp / "labels.jsonl", [{"transcript_id": f"c{i}", "rubric": "relevance", "label": LABELS[i]} for i in range(CONVERSATIONS)])
        yield tmp


def harness(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_the_runs_hold_each_conversations_score_of_its_turns(runs: Path) -> None:
    for side in "ab":
        judged = [r for r in read_jsonl(runs / side / "judgments.jsonl")]
        assert len(judged) == 3 * CONVERSATIONS
        got = {r["transcript_id"]: r["scores"]["j"]["relevance"] for r in read_jsonl(runs / side / "results.jsonl")}
        assert got == pytest.approx(hand(side))


def test_compare_pairs_conversations(runs: Path) -> None:
    code, out = harness("compare", str(runs / "a"), str(runs / "b"), "--json")
    assert code == 0, out
    (metric,) = json.loads(out)["metrics"]
    a, b = hand("a"), hand("b")
    diffs = [b[k] - a[k] for k in a]
    assert metric["paired"]["n"] == CONVERSATIONS
    assert metric["paired"]["mean_difference"] == pytest.approx(statistics.fmean(diffs))
    from scipy import stats  # the oracle of the paired test over conversations

    assert metric["paired"]["ttest"]["pvalue"] == pytest.approx(stats.ttest_rel(list(b.values()), list(a.values())).pvalue, rel=1e-9)


def test_gate_reads_the_conversations_mean(runs: Path) -> None:
    code, out = harness("gate", str(runs / "b"), "--min", "relevance=0.3")
    assert code == 0, out
    mean = statistics.fmean(hand("b").values())
    assert f"mean {mean:.3f}" in out and f"over {CONVERSATIONS} transcripts" in out


def test_passk_decides_each_conversation(runs: Path) -> None:
    code, out = harness("passk", str(runs / "a"), "--success", "relevance>=0.3", "--k", "1,2", "--json")
    assert code == 0, out
    result = json.loads(out)
    assert result["runs"]["transcripts"] == CONVERSATIONS
    passed = {f"task{t}": sum(1 for i in range(CONVERSATIONS) if i % 3 == t and hand("a")[f"c{i}"] >= 0.3) for t in range(3)}
    assert {task["task"]: task["c"] for task in result["tasks"]} == passed
    assert sum(task["n"] for task in result["tasks"]) == CONVERSATIONS


def test_agreement_and_infer_pair_labels_with_conversations(runs: Path) -> None:
    code, out = harness("agreement", str(runs / "a"), "--labels", str(runs / "labels.jsonl"), "--json")
    assert code == 0, out
    (row,) = json.loads(out)["metrics"][0]["judges"]
    assert row["n"] == row["counts"]["paired"] == CONVERSATIONS
    from scipy import stats

    a = hand("a")
    scores = [a[f"c{i}"] for i in range(CONVERSATIONS)]
    assert row["spearman"]["value"] == pytest.approx(stats.spearmanr(scores, LABELS).statistic)
    assert row["pearson"]["value"] == pytest.approx(stats.pearsonr(scores, LABELS).statistic)
    # infer: five conversations labelled, the judge's scores of all eight carry the rest
    write_jsonl(runs / "some.jsonl", [{"transcript_id": f"c{i}", "rubric": "relevance", "label": LABELS[i]} for i in range(5)])
    code, out = harness("infer", str(runs / "a"), "--labels", str(runs / "some.jsonl"), "--min-labels", "5", "--json", "--no-save")
    assert code == 0, out
    (estimate,) = json.loads(out)["metrics"][0]["judges"]
    assert (estimate["counts"]["N"], estimate["counts"]["labelled_in_run"]) == (CONVERSATIONS, 5)
    assert estimate["judge_only"]["mean"] == pytest.approx(statistics.fmean(a.values()))


def test_race_pairs_conversations_judged_per_turn(runs: Path) -> None:
    code, out = harness(
        "race",
        str(runs / "a.jsonl"),
        str(runs / "b.jsonl"),
        "--metric",
        "relevance",
        "--out",
        str(runs / "race"),
        "--config",
        str(runs / "harness.toml"),
        "--cache",
        str(runs / "cache.sqlite"),
        "--offline",
        "--turns",
        "all",
        "--round",
        "4",
    )
    assert code == 0, out
    race = json.loads((runs / "race" / "race.json").read_text(encoding="utf-8"))
    assert (race["pairs_total"], race["pairs_judged"], race["judgments"]) == (CONVERSATIONS, CONVERSATIONS, 2 * 3 * CONVERSATIONS)
    a, b = hand("a"), hand("b")
    assert race["looks"][-1]["mean"] == pytest.approx(statistics.fmean(b[k] - a[k] for k in a))
    # its run directories are per-turn runs, as the rounds judged them
    assert json.loads((runs / "race" / "a" / "summary.json").read_text(encoding="utf-8"))["conversations"]["judged_as"] == "per turn"
