"""The viewer's first pass (harness/view/light.py) against the report's own pass.

The light pass reads a few fields of each row with orjson and leaves the rest of a row's
validation to when it is shown. Here, on real runs (an agent run with tasks and agent metrics, a
run judged per turn, a plain run with tags: tests/test_view_index.py's), it gives the same table,
figures and row places as ``report.builder._read_run`` with ``build_data``; a line it cannot take
is refused with exactly the message the typed readers give; and a line that passes it and fails
its schema is refused with its place on the page that shows it, and keeps the index from being
written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UserInputError
from harness.report.builder import _read_run, build_data
from harness.report.run import open_run
from harness.view.app import make_app
from harness.view.index import ENV
from harness.view.light import first_pass
from tests.test_view_index import _cells, made, runs  # noqa: F401 - the runs made once for the module

pytestmark = pytest.mark.timeout(300)
NO_DETAILS = {"where": [], "chunks": 0, "left_out": 0}


def _data(run: Any, view: Any) -> dict[str, Any]:
    data = build_data(view, run, NO_DETAILS)
    data["meta"].pop("generated_at")
    return data


@pytest.mark.parametrize("name", ["plain", "agent", "chat"])
def test_the_light_pass_gives_the_report_pass_figures_and_places(made: Path, name: str) -> None:  # noqa: F811
    view = open_run(made / name)
    light, report = first_pass(view), _read_run(view, None)
    for f in ("ids", "columns", "rows", "result_refs", "judgment_refs", "judgment_lines", "conversations", "text_refs", "tool_calls"):
        assert getattr(light, f) == getattr(report, f), f
    for f in ("rubric_values", "label_counts", "composite_values", "agent", "judge_latency"):
        assert dict(getattr(light, f)) == dict(getattr(report, f)), f
    assert {k: v.as_dict() for k, v in light.health.items()} == {k: v.as_dict() for k, v in report.health.items()}
    # the viewer reads each transcript's agent metrics and task from perf
    assert [(p.get("agent"), p.get("task"), p.get("turns")) for p in light.perf] == [
        (p.get("agent"), p.get("task"), p.get("turns")) for p in report.perf
    ]
    assert _data(light, view) == _data(report, view)


def _damage(path: Path, line: int, change: Any) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = change(json.loads(lines[line - 1])) + b"\n"
    path.write_bytes(b"".join(lines))


def _set(**fields: Any) -> Any:
    return lambda row: json.dumps({**row, **fields}).encode()


def _drop(name: str) -> Any:
    return lambda row: json.dumps({k: v for k, v in row.items() if k != name}).encode()


REFUSED = [
    ("judgments.jsonl", lambda row: b"{not json"),
    ("judgments.jsonl", _set(score="0.5")),
    ("judgments.jsonl", _set(score=True)),
    ("judgments.jsonl", _set(attempts=1.5)),
    ("judgments.jsonl", _set(cached="yes")),
    ("judgments.jsonl", _set(status=3)),
    ("judgments.jsonl", _set(latency_ms=[1])),
    ("judgments.jsonl", _set(turn="2")),
    ("judgments.jsonl", _drop("judge")),
    ("judgments.jsonl", _drop("rubric_version")),
    ("judgments.jsonl", lambda row: json.dumps([row]).encode()),
    ("results.jsonl", lambda row: b"[1, 2"),
    ("results.jsonl", _drop("transcript_id")),
    ("results.jsonl", _set(transcript_id=7)),
    ("results.jsonl", _set(composites=[])),
    ("results.jsonl", _set(performance={"total_ms": "fast"})),
    ("results.jsonl", _set(performance={"tool_calls": 1.5})),
    ("results.jsonl", _set(task=5)),
    ("results.jsonl", _set(agent={"trajectory_match": "yes"})),
    ("results.jsonl", _set(agent=[1])),
]


@pytest.mark.parametrize(("file", "change"), REFUSED)
def test_a_line_the_light_pass_cannot_take_is_refused_as_the_typed_readers_refuse_it(runs: Path, file: str, change: Any) -> None:  # noqa: F811
    _damage(runs / "agent" / file, 2, change)
    view = open_run(runs / "agent")
    with pytest.raises(UserInputError) as typed:
        _read_run(view, None)
    with pytest.raises(UserInputError) as light:
        first_pass(view)
    assert str(light.value) == str(typed.value)
    assert str(light.value).startswith(f"{runs / 'agent' / file}:2: ")


@pytest.mark.parametrize(
    ("file", "change", "field"),
    [
        ("judgments.jsonl", _set(raw_output=5), "raw_output"),
        ("judgments.jsonl", _set(prompt_tokens="many"), "prompt_tokens"),
        ("judgments.jsonl", _set(surprise=1), "surprise"),
        ("results.jsonl", _set(unscored=[]), "unscored"),
        ("results.jsonl", _set(composites_unscored={"mini": 3}), "composites_unscored.mini"),
    ],
)
def test_a_line_that_passes_the_light_pass_and_not_its_schema_is_refused_where_it_is_shown(
    runs: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file: str,
    change: Any,
    field: str,
) -> None:
    index = tmp_path / "index"
    monkeypatch.setenv(ENV, str(index))
    # (an agent run's page reads every results row by its type for pass@k: a results row is tried on the plain run)
    name = "agent" if file == "judgments.jsonl" else "plain"
    path = runs / name / file
    _damage(path, 2, change)
    results = [json.loads(line) for line in (runs / name / "results.jsonl").read_text().splitlines() if line.strip()]
    second = results[1]["transcript_id"] if file == "results.jsonl" else json.loads(path.read_text().splitlines()[1])["transcript_id"]
    client = make_app(runs).test_client()
    # a page of the table holding that row is refused with the line's place (a 400), never drawn without it
    page = client.get(f"/run?r={name}&q={second}")
    assert page.status_code == 400
    assert f"{path}:2: {field}: " in page.get_data(as_text=True)
    shown = client.get(f"/transcript?r={name}&id={second}")
    assert shown.status_code == 400 and f"{path}:2: {field}: " in shown.get_data(as_text=True)
    # a page without it is drawn; the check behind the index names the line and keeps no index
    task = next(r.get("task") for r in results if r["transcript_id"] == second)
    other = next(
        r["transcript_id"]
        for r in results
        if (task is None or r.get("task") != task) and r["transcript_id"] not in second and second not in r["transcript_id"]
    )
    drawn = client.get(f"/run?r={name}&q={other}")
    assert drawn.status_code == 200 and other in _cells(drawn.get_data(as_text=True), "id")
    client.application.config["VIEWER"].settle()
    assert not list(index.glob("*.json"))
    again = client.get(f"/run?r={name}&q={other}").get_data(as_text=True)
    assert f"{path}:2: {field}: " in again  # the run's note


def test_the_light_pass_reads_performance_in_the_order_of_its_fields() -> None:
    # `light._result` reads a row's performance as (latencies..., tool_calls) by position
    from harness.report.builder import LATENCY_FIELDS
    from harness.transcripts import PERFORMANCE_FIELDS

    assert PERFORMANCE_FIELDS == (*LATENCY_FIELDS, "tool_calls") == ("total_ms", "llm_ms", "tool_ms", "api_ms", "tool_calls")
