"""harness/rows.py: every row type writes the bytes a run writes and reads back equal; a bad row is
one line naming file, line and field; and no module but rows.py names a run's row files."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import UserInputError
from harness.outputs.writer import judgment_line
from harness.planning.judgment import Judgment
from harness.rows import (
    JUDGMENT_FIELDS,
    JudgmentRow,
    ResultRow,
    TurnJudgmentRow,
    TurnScores,
    iter_judgment_rows,
    iter_result_rows,
    parse_judgment,
    parse_result,
)
from harness.transcripts.performance import Performance

ROOT = Path(__file__).resolve().parent.parent

text = st.text(max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
maybe_float = st.none() | finite
maybe_int = st.none() | st.integers(min_value=0, max_value=2**40)
names = st.text(min_size=1, max_size=6)


@st.composite
def judgments(draw: st.DrawFn) -> Judgment:
    return Judgment(
        transcript_id=draw(text),
        rubric=draw(names),
        rubric_version=draw(text),
        judge=draw(names),
        status=draw(st.sampled_from(["scored", "unscored", "failed"])),
        score=draw(maybe_float),
        raw_score=draw(maybe_float),
        clamped=draw(st.booleans()),
        reason=draw(st.none() | text),  # type: ignore[arg-type]
        error=draw(st.none() | text),
        raw_output=draw(st.none() | st.text(max_size=40)),
        prompt_tokens=draw(maybe_int),
        completion_tokens=draw(maybe_int),
        cost_usd=draw(maybe_float),
        latency_ms=draw(maybe_float),
        attempts=draw(st.integers(0, 9)),
        cached=draw(st.booleans()),
        cache_key=draw(st.none() | text),
        label=draw(st.none() | text),
        samples=draw(st.none() | st.integers(2, 9)),
        sample_scores=draw(st.none() | st.lists(maybe_float, max_size=4)),
        sample_labels=draw(st.none() | st.lists(st.none() | text, max_size=4)),
        score_distribution=draw(st.none() | st.dictionaries(names, finite, max_size=3)),
        jury=draw(st.none() | st.fixed_dictionaries({"method": text, "votes": st.dictionaries(names, maybe_float, max_size=3)})),
    )


@st.composite
def results(draw: st.DrawFn) -> ResultRow:
    per_judge = st.dictionaries(names, st.dictionaries(names, maybe_float, max_size=3), max_size=2)
    reasons = st.dictionaries(names, st.dictionaries(names, text, max_size=2), max_size=2)
    agent = draw(st.none() | st.dictionaries(names, st.none() | finite | st.integers(0, 10**6), max_size=4))
    turns = draw(
        st.none()
        | st.builds(
            TurnScores,
            st.lists(st.integers(1, 9), min_size=1, max_size=3),
            st.sampled_from(["mean", "min", "last"]),
            st.dictionaries(names, st.dictionaries(names, st.lists(maybe_float, max_size=3), max_size=2), max_size=2),
            st.none() | st.integers(1, 5),
        )
    )
    return ResultRow(
        transcript_id=draw(text),
        scores=draw(per_judge),
        composites=draw(per_judge),
        unscored=draw(reasons),
        composites_unscored=draw(reasons),
        performance=Performance(draw(maybe_float), draw(maybe_float), draw(maybe_float), draw(maybe_float), draw(st.none() | st.integers(0, 99))),
        task=draw(st.none() | st.text(min_size=1, max_size=6)),
        turns=turns,
        agent=agent,
        agent_unscored=None if agent is None else draw(st.dictionaries(names, text, max_size=2)),
        agent_steps=None if agent is None else draw(st.dictionaries(names, st.lists(st.integers(0, 50), max_size=3), max_size=2)),
        agent_notes=draw(st.none() | st.dictionaries(names, text, min_size=1, max_size=2)),
    )


def test_the_judgment_row_has_the_judgments_fields_in_order() -> None:
    from dataclasses import fields

    assert tuple(f.name for f in fields(Judgment)) == JUDGMENT_FIELDS


@settings(max_examples=150, deadline=None)
@given(judgments())
def test_a_judgment_row_writes_the_runs_bytes_and_reads_back_equal(j: Judgment) -> None:
    row = JudgmentRow.of(j)
    assert row.line() == judgment_line(j)  # the bytes the writer writes for the judgment itself
    assert json.loads(row.line()) == j.as_dict()
    assert parse_judgment(row.line()) == row


@settings(max_examples=100, deadline=None)
@given(judgments(), st.integers(1, 50))
def test_a_turn_judgment_row_has_its_turn_second_and_reads_back_equal(j: Judgment, turn: int) -> None:
    row = TurnJudgmentRow.of_turn(j, turn)
    assert list(json.loads(row.line()))[:2] == ["transcript_id", "turn"]
    back = parse_judgment(row.line())
    assert type(back) is TurnJudgmentRow and back == row


@settings(max_examples=150, deadline=None)
@given(results())
def test_a_results_row_reads_back_equal_and_writes_the_same_bytes(row: ResultRow) -> None:
    line = row.line()
    back = parse_result(line)
    assert back == row
    assert back.line() == line
    keys = list(json.loads(line))
    assert keys[:6] == ["transcript_id", "scores", "composites", "unscored", "composites_unscored", "performance"]
    assert ("task" in keys) == (row.task is not None) and ("agent_notes" in keys) == bool(row.agent_notes)


def test_counts_stay_integers_and_rates_floats() -> None:
    row = ResultRow("t", {}, {}, {}, {}, Performance(), agent={"steps": 20, "trajectory_match": 1.0}, agent_unscored={}, agent_steps={})
    assert b'"steps":20,' in row.line() and b'"trajectory_match":1.0' in row.line()
    back = parse_result(row.line())
    assert back.agent is not None and type(back.agent["steps"]) is int and type(back.agent["trajectory_match"]) is float


GOOD = json.loads(JudgmentRow("t1", "relevance", "1", "mini", "scored", score=0.5).line())


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"score": "high"}, "score: Input should be a valid number"),
        ({"attempts": True}, "attempts: Input should be a valid integer"),
        ({"bogus": 1}, "bogus: unknown field"),
        ({"judge": None}, "judge: Input should be a valid string"),
    ],
)
def test_a_bad_judgment_row_is_one_line_naming_file_line_and_field(tmp_path: Path, change: dict[str, object], said: str) -> None:
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(GOOD | change) + "\n")
    with pytest.raises(UserInputError) as caught:
        list(iter_judgment_rows(path))
    assert str(caught.value) == f"{path}:3: {said}"


def test_a_bad_results_row_names_its_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    good = ResultRow("t", {}, {}, {}, {}, Performance()).line().decode()
    path.write_text(good + good.replace('"performance":{"total_ms":null', '"performance":{"total_ms":"slow"'))
    with pytest.raises(UserInputError) as caught:
        list(iter_result_rows(path))
    assert str(caught.value) == f"{path}:2: performance.total_ms: Input should be a valid number"
    path.write_text(good + "{oops\n")
    with pytest.raises(UserInputError, match=r"results\.jsonl:2: <json>: invalid JSON"):
        list(iter_result_rows(path))
    path.write_text(good.replace('"scores":{}', '"scores":{"mini":{"r":NaN}}'))
    with pytest.raises(UserInputError, match=r"results\.jsonl:1: scores\.mini\.r: "):
        list(iter_result_rows(path))


def test_no_module_but_rows_names_a_runs_row_files() -> None:
    """A run's row files are opened through harness/rows.py alone: no other module holds their
    names as a string (a path ``x / "judgments.jsonl"``, a tuple of them); messages may mention them."""
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if path == ROOT / "harness" / "rows.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("judgments.jsonl", "results.jsonl"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
