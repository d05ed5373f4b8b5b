"""The juries' small parts: model lineages, what a jury votes on, its config's one-line errors, a
jury row's cost and status from its members' rows, and the outputs' guards."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.config import load_config
from harness.errors import ConfigError, OutputError
from harness.jury.classes import Classes
from harness.jury.outputs import JuryRun
from harness.jury.panel import Panel
from harness.outputs.files import StagedFile
from harness.outputs.writer import judgment_line
from harness.planning import Judgment
from harness.providers import lineage_of, same_lineage
from harness.rows import JudgmentRow, ResultRow
from harness.transcripts.performance import Performance


@pytest.mark.parametrize(
    ("model", "lineage"),
    [
        ("gpt-4o-mini", "OpenAI GPT"),
        ("openai/gpt-4.1-nano", "OpenAI GPT"),
        ("o3-mini", "OpenAI GPT"),
        ("claude-haiku-4-5", "Anthropic Claude"),
        ("anthropic/claude-3-5-sonnet", "Anthropic Claude"),
        ("gemini-2.5-flash", "Google Gemini"),
        ("meta-llama/Llama-3.1-8B-Instruct", "Meta Llama"),
        ("llama3.1:8b", "Meta Llama"),
        ("mistral-small", "Mistral"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen"),
        ("deepseek-chat", "DeepSeek"),
        ("SmolLM2-135M-Instruct-Q4_1", "Hugging Face SmolLM"),
        ("my-finetune", None),
    ],
)
def test_lineages(model: str, lineage: str | None) -> None:
    found = lineage_of(model)
    assert (found.name if found else None) == lineage


def test_same_lineage() -> None:
    assert same_lineage("gpt-4o-mini", "gpt-4o") is not None
    assert same_lineage("claude-haiku-4-5", "gpt-4o") is None
    assert same_lineage("my-model", "vendor/my-model") is not None  # the very model, of an unknown lineage
    assert same_lineage("my-model", "other-model") is None


def test_classes() -> None:
    likert = Classes("r", 1.0, 5.0)
    assert likert.count == 5 and likert.values() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert likert.codes(np.array([1.0, 2.49, 2.5, np.nan, 5.0])).tolist() == [0, 1, 2, -1, 4]
    assert likert.rank.tolist() == [0, 1, 2, 3, 4]
    assert Classes("r", 1.0, 5.0, "lower").rank.tolist() == [4, 3, 2, 1, 0]
    unit = Classes("r", 0.0, 1.0)
    assert unit.count == 11 and unit.codes(np.array([0.35, 0.04])).tolist() == [4, 0]  # halves round up
    labels = Classes("r", 0.0, 1.0, labels=("a", "b"))
    assert labels.value(1) == "b" and labels.codes(np.array([1.0, np.nan])).tolist() == [1, -1]
    assert Classes("r", 0.0, 10.0, "lower").normalised(2.0) == pytest.approx(0.8)


def _config(tmp_path: Path, jury: str) -> Path:
    path = tmp_path / "harness.toml"
    path.write_text('[[judges]]\nname = "a"\nmodel = "m"\n[[judges]]\nname = "b"\nmodel = "m"\n\n[[juries]]\n' + jury, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("jury", "expected"),
    [
        ('name = "p"\nmembers = ["a"]\n', "juries[0].members: List should have at least 2 items"),
        ('name = "p"\nmembers = ["a", "b"]\nmethod = "vote"\n', "juries[0].method: Input should be"),
        ('name = "p"\nmembers = ["a", "b"]\nweights = [1, 2]\n', "juries[0].weights: unknown key"),
        ('name = "p"\nmembers = ["a", "b"]\nmethod = "weighted"\nsequential = true\n', "juries[0]: sequential: needs method majority or median"),
        ('name = "p q"\nmembers = ["a", "b"]\n', "juries[0].name: String should match pattern"),
    ],
)
def test_a_bad_jury_table_is_one_line_naming_file_and_key(tmp_path: Path, jury: str, expected: str) -> None:
    path = _config(tmp_path, jury)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


def test_two_juries_of_one_name(tmp_path: Path) -> None:
    path = _config(tmp_path, 'name = "p"\nmembers = ["a", "b"]\n[[juries]]\nname = "p"\nmembers = ["b", "a"]\n')
    with pytest.raises(ConfigError, match=r"juries: name 'p' is used by juries\[0\] and juries\[1\]"):
        load_config(path)


@pytest.mark.parametrize(
    ("method", "score", "confidence"),
    [
        # votes 1, 5, 1, 4 on 1..5 (docs/guide/juries.md): the mean is 11 / 4 = 2.75; the distances
        # from it 1.75, 2.25, 1.75, 1.25 average 1.75, so the confidence is 1 - 1.75 / 4 = 0.5625.
        ("mean", 2.75, 0.5625),
        # sorted 1, 1, 4, 5: the median is (1 + 4) / 2 = 2.5; distances 1.5, 1.5, 1.5, 2.5 average
        # 1.75 too, so the confidence is again 1 - 1.75 / 4 = 0.5625.
        ("median", 2.5, 0.5625),
    ],
)
def test_a_mean_or_median_jury_writes_the_mean_or_median_itself(method: str, score: float, confidence: float) -> None:
    """Not the whole bin it falls in (both were written 3.0, halves rounding up), and with a
    confidence that says how close the votes are (the share of votes in the bin of 2.75 was 0.0)."""
    members = ("a", "b", "c", "d")
    jury = JuryRun([Panel("p", members, ("m",) * 4, method)], [Classes("r", 1.0, 5.0)], {"r": "1"})
    rows = {
        "t1": [_member("t1", m, score=v) for m, v in zip(members, (1.0, 5.0, 1.0, 4.0), strict=True)],
        "t2": [_member("t2", m, score=v) for m, v in zip(members, (4.0, 4.0, 4.0, 4.0), strict=True)],
        "t3": [
            *(_member("t3", m, score=v) for m, v in zip(members[:2], (2.0, 3.0), strict=True)),
            *(_member("t3", m, status="failed", reason="fatal") for m in members[2:]),
        ],
    }
    for tid, judgments in rows.items():
        jury.observe(tid, None, judgments, len(judgments))
    jury.finish()
    out = {}
    for ordinal, (tid, judgments) in enumerate(rows.items()):
        (row,) = jury.rows(ordinal, {(j.rubric, j.judge): JudgmentRow.of(j) for j in judgments})
        out[tid] = row
    assert out["t1"].score == score and out["t1"].jury["confidence"] == pytest.approx(confidence)
    assert out["t2"].score == 4.0 and out["t2"].jury["confidence"] == 1.0  # unanimous
    # two votes, 2 and 3: mean and median 2.5, each vote 0.5 from it: 1 - 0.5 / 4 = 0.875
    assert out["t3"].score == 2.5 and out["t3"].jury["confidence"] == pytest.approx(0.875)


def test_labels_are_relative_to_the_config(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, 'name = "p"\nmembers = ["a", "b"]\nlabels = "l.jsonl"\n'))
    assert config.juries[0].labels == tmp_path / "l.jsonl"


def _member(tid: str, judge: str, **fields: object) -> Judgment:
    return Judgment(tid, "r", "1", judge, **{"status": "scored", "attempts": 1, **fields})  # type: ignore[arg-type]


def test_a_jury_row_sums_its_members_and_takes_their_outcome_when_nobody_voted() -> None:
    jury = JuryRun([Panel("p", ("a", "b"), ("m", "m"), "majority")], [Classes("r", 0.0, 1.0)], {"r": "1"})
    rows = {
        "t1": [_member("t1", "a", score=0.8, cost_usd=0.1, prompt_tokens=10), _member("t1", "b", score=0.8, cost_usd=0.2, prompt_tokens=5)],
        "t2": [_member("t2", "a", score=0.2, cost_usd=None), _member("t2", "b", status="failed", reason="fatal", error="400", attempts=1)],
        "t3": [
            _member("t3", "a", status="unscored", reason="missing_input", attempts=0),
            _member("t3", "b", status="unscored", reason="missing_input", attempts=0),
        ],
        "t4": [_member("t4", "a", status="failed", reason="transient", error="503"), _member("t4", "b", status="unscored", reason="no_score_found")],
    }
    for tid, judgments in rows.items():
        jury.observe(tid, None, judgments, len(judgments))
    jury.finish()
    out = {}
    for ordinal, (tid, judgments) in enumerate(rows.items()):
        (row,) = jury.rows(ordinal, {(j.rubric, j.judge): JudgmentRow.of(j) for j in judgments})
        out[tid] = row
    assert (out["t1"].score, out["t1"].cost_usd, out["t1"].prompt_tokens, out["t1"].attempts) == (0.8, pytest.approx(0.3), 15, 2)
    assert out["t2"].score == 0.2 and out["t2"].cost_usd is None  # a's cost is unknown: the sum is unknown, never partial
    assert (out["t3"].status, out["t3"].reason, out["t3"].cost_usd) == ("unscored", "missing_input", None)
    assert (out["t4"].status, out["t4"].reason) == ("failed", "transient")  # a failure before an unscored reply
    assert "no member of jury p voted" in (out["t4"].error or "")
    assert out["t4"].jury == {"method": "majority", "votes": {"a": None, "b": None}, "settled": [], "confidence": None}
    assert jury.report()["p"]["verdicts"] == {"failed": 1, "scored": 2, "unscored": 1}


def test_a_jury_composite_weighs_a_bounded_agent_metric_as_a_judge_does() -> None:
    """A composite of a rubric and trajectory_f1: the agent metric is the results row's, the same
    under every judge and jury; unscored when the row cannot say it."""
    jury = JuryRun([Panel("p", ("a", "b"), ("m", "m"), "majority")], [Classes("r", 0.0, 1.0)], {"r": "1"})
    rows = {t: [_member(t, "a", score=0.8), _member(t, "b", score=0.8)] for t in ("t1", "t2")}
    for tid, judgments in rows.items():
        jury.observe(tid, None, judgments, len(judgments))
    jury.finish()
    weights = {"c": {"r": 0.5, "trajectory_f1": 0.5}}
    agent = {"t1": ({"trajectory_f1": 0.4}, {}), "t2": ({"trajectory_f1": None}, {"trajectory_f1": "no steps to match"})}
    out = {}
    for ordinal, (tid, judgments) in enumerate(rows.items()):
        added = jury.rows(ordinal, {(j.rubric, j.judge): JudgmentRow.of(j) for j in judgments})
        values, why = agent[tid]
        written = ResultRow(tid, {}, {}, {}, {}, Performance(), agent=values, agent_unscored=why, agent_steps={})
        row, results = jury.results(ordinal, written, added, weights)
        (result,) = [r for _, r in results]
        out[tid] = (row, result)
    assert out["t1"][0].composites["p"]["c"] == pytest.approx(0.5 * 0.8 + 0.5 * 0.4)
    assert out["t2"][0].composites["p"]["c"] is None
    assert "trajectory_f1 unscored (no steps to match)" in out["t2"][0].composites_unscored["p"]["c"]


def test_a_jury_row_with_a_non_finite_number_is_refused() -> None:
    row = Judgment("t", "r", "1", "p", "scored", score=0.5, jury={"method": "mean", "votes": {"a": math.inf}, "settled": [], "confidence": 1.0})
    assert row.non_finite() == "jury"
    with pytest.raises(OutputError):
        judgment_line(row)


def test_a_staged_file_is_rewritten_through_swap(tmp_path: Path) -> None:
    staged = StagedFile(tmp_path / "f.jsonl")
    staged.write("one\n")
    previous = staged.swap()
    assert previous.read_text() == "one\n"
    staged.write("two\n")
    staged.discard()
    assert not previous.exists() and not (tmp_path / "f.jsonl").exists()
    staged = StagedFile(tmp_path / "f.jsonl")
    staged.write("one\n")
    previous = staged.swap()
    staged.write(previous.read_text() + "two\n")
    previous.unlink()
    staged.commit()
    assert (tmp_path / "f.jsonl").read_text() == "one\ntwo\n"
