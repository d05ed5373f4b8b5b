"""summary.json through its one schema (``harness/metrics/schema.py``): what a run writes is what
``read_summary`` reads back and writes again byte for byte; a run sets every field a reader reads;
sections this harness does not know are kept; a damaged file is one line naming the field.

Real runs through the CLI on a local judge server (tests/judge_server.py): plain, with repeated
samples, an agent's steps, a budget, a jury, and two shards merged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import UserInputError
from harness.metrics.schema import RunSummary
from harness.outputs.files import dumps
from harness.rundir import read_summary
from tests.e2e_support import KEY, KEY_ENV, judge, serve, write_config

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("runs")
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp, serve() as server:
        mp.setenv(KEY_ENV, KEY)
        assert server.base_url
        judges = [judge("a", server.base_url), judge("b", server.base_url, prices=False), judge("n", server.base_url, samples=3)]
        config = write_config(tmp / "h.toml", judges, composites={"grounded": {"faithfulness": 0.5, "hallucination": 0.5}})
        priced = write_config(tmp / "priced.toml", [judge("a", server.base_url)])
        jury = write_config(tmp / "jury.toml", judges[:2])
        jury.write_text(jury.read_text(encoding="utf-8") + '\n[[juries]]\nname = "panel"\nmembers = ["a", "b"]\n', encoding="utf-8")
        transcripts, agent = ROOT / "examples" / "transcripts.jsonl", ROOT / "examples" / "agent_runs.jsonl"
        common = ["--cache", str(tmp / "c.sqlite"), "--no-progress"]
        commands = {
            "plain": ["run", str(transcripts), "--config", str(config), *common],
            "agent": ["run", str(agent), "--config", str(config), *common],
            "budget": ["run", str(transcripts), "--config", str(priced), "--max-cost", "5", *common],
            "jury": ["run", str(transcripts), "--config", str(jury), *common],
            "s1": ["run", str(agent), "--config", str(config), "--shard", "1/2", *common],
            "s2": ["run", str(agent), "--config", str(config), "--shard", "2/2", *common],
            "merged": ["merge", str(tmp / "s1"), str(tmp / "s2")],
        }
        for name, args in commands.items():
            done = runner.invoke(app, [*args, "--out", str(tmp / name)])
            assert done.exit_code == 0, done.output
    yield {name: tmp / name for name in commands}


@pytest.mark.parametrize("name", ["plain", "agent", "budget", "jury", "s1", "merged"])
def test_a_summary_read_back_is_written_back_byte_for_byte(runs: dict[str, Path], name: str) -> None:
    text = (runs[name] / "summary.json").read_text(encoding="utf-8")
    assert dumps(read_summary(runs[name]).as_json(), indent=2) + "\n" == text


def _unset(model: BaseModel, where: str = "") -> list[str]:
    """Fields of ``model`` and its sections that the file did not hold."""
    missing = [f"{where}{name}" for name in type(model).model_fields if name not in model.model_fields_set]
    for name in model.model_fields_set:
        value = getattr(model, name)
        values = value.values() if isinstance(value, dict) else [value]
        for item in values:
            for inner in item.values() if isinstance(item, dict) else [item]:
                if isinstance(inner, BaseModel):
                    missing += _unset(inner, f"{where}{name}.")
    return missing


def test_a_run_sets_every_field_a_reader_reads(runs: dict[str, Path]) -> None:
    # Only a shard's "shard" is left out of an unsharded run, and the percentiles of the bounded
    # agent metrics (a count's spread is told by percentiles, a score's by its scale).
    # A run without juries has no juries section and no jury among its judge_models; a scored
    # rubric's scale has no labels. A run that does not scan for injections (config injection,
    # off by default) has no injection section. "planned_transcripts" is written only by a run that
    # stopped short (interrupted or aborted): a finished run wrote a row for each transcript it was given.
    bounded = {"agent.p50", "agent.p95", "agent.p99"}
    # a run of single exchanges has no conversations section (issue 43: multi-turn transcripts, --turns)
    jury_only = {"juries", "judge_models.jury", "rubric_scales.labels", "injection", "conversations"}
    # the unscored reasons' per-input counts (the closing line's "no context") are held in memory
    # and never written (``JudgeSummary.missing_inputs``, excluded from the dump)
    short = {"planned_transcripts", "judges.missing_inputs"}
    assert set(_unset(read_summary(runs["agent"]))) == {"shard", *short, *bounded, *jury_only}
    assert set(_unset(read_summary(runs["s1"]))) == {*short, *bounded, *jury_only}
    assert set(_unset(read_summary(runs["merged"]))) == {"shard", *short, *bounded, *jury_only}
    # a run with a jury sets its section and its panel (the judges' entries have no jury)
    assert set(_unset(read_summary(runs["jury"]))) == {"shard", *short, "judge_models.jury", "rubric_scales.labels", "injection", "conversations"}
    assert read_summary(runs["jury"]).juries["panel"].members == ["a", "b"]
    assert read_summary(runs["budget"]).budget is not None


def test_the_merged_summary_is_the_unsharded_runs_in_the_same_order(runs: dict[str, Path]) -> None:
    merged = json.loads((runs["merged"] / "summary.json").read_text(encoding="utf-8"))
    single = json.loads((runs["agent"] / "summary.json").read_text(encoding="utf-8"))
    assert list(merged) == list(single)


def test_sections_this_harness_does_not_know_are_kept(runs: dict[str, Path], tmp_path: Path) -> None:
    raw = json.loads((runs["plain"] / "summary.json").read_text(encoding="utf-8"))
    raw["judges"]["a"]["future_figure"] = 3
    raw["future_section"] = {"x": [1, 2]}
    (tmp_path / "summary.json").write_text(json.dumps(raw), encoding="utf-8")
    again = read_summary(tmp_path).as_json()
    assert again["future_section"] == {"x": [1, 2]} and again["judges"]["a"]["future_figure"] == 3


def test_a_summary_from_an_older_harness_reads_with_what_it_has(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"judge_models": {"j": {"model": "m"}}, "rubric_versions": {"relevance": "1"}}))
    summary = read_summary(tmp_path)
    assert summary.composite_weights is None and summary.judge_configs is None and summary.rubrics == {}
    assert summary.as_json() == {"judge_models": {"j": {"model": "m"}}, "rubric_versions": {"relevance": "1"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"transcripts": "many"}, "summary.json: transcripts: Input should be a valid integer"),
        ({"judges": {"a": {"latency_ms": []}}}, "summary.json: judges.a.latency_ms: Input should be a valid dictionary"),
        ({"judge_models": None}, "summary.json: judge_models: missing or not an object (written by an older harness?)"),
    ],
)
def test_a_damaged_summary_is_one_line_naming_the_field(runs: dict[str, Path], tmp_path: Path, change: dict[str, object], message: str) -> None:
    raw = json.loads((runs["plain"] / "summary.json").read_text(encoding="utf-8")) | change
    (tmp_path / "summary.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(UserInputError) as caught:
        read_summary(tmp_path)
    assert f"{tmp_path / 'summary.json'}: " in str(caught.value) and message in str(caught.value) and "\n" not in str(caught.value)


def test_the_summary_type_is_what_the_session_returns(runs: dict[str, Path]) -> None:
    assert isinstance(read_summary(runs["plain"]), RunSummary)
