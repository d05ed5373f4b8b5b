"""A jury through every path a judge goes through (``capabilities.JURY_KINDS`` x ``PATHS``), against
the local servers of ``tests/test_matrix.py``.

Three judges sit on the jury; the server scores by the transcript's ``[[score=N]]`` shifted by the
request's seed (``tests/matrix_support.py``), so members a (seed 0) and b (seed 5) give the same
score and c (seed 1) one step higher: their votes differ where the scale allows. For each kind of
jury (per transcript, fitted over the run, sequential) and each supported path, the jury's rows
(verdicts, votes, confidence, members not asked) equal the live run's, and its members' rows do
too; an offline replay of the path's cache says the same. A path a kind is refused on ends in one
line (exit 2) with nothing sent.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness import batch as hb
from harness import capabilities as caps
from harness.cli import app
from harness.outputs.merge import merge_runs
from harness.runner.session import RunOutcome
from tests.e2e_support import KEY_ENV, read_jsonl, write_jsonl
from tests.matrix_support import (
    CellRuns,
    Servers,
    answer_export,
    likert_prompts,
    run_two_workers,
)

RUBRICS = ("likert", "likert_long")
#: (name, seed, input and output USD per 1M): the members, cheapest first
MEMBERS = (("a", 0, 0.10, 0.40), ("b", 5, 0.15, 0.60), ("c", 1, 2.50, 10.0))
SCORES = (4, 2, 5, 4, 1, 3, 5, 2, 3, 4, 1, 5)
KINDS: dict[str, dict[str, Any]] = {
    "per_transcript": {"method": "majority"},
    "fitted": {"method": "dawid_skene", "anchored": True, "labels": "labels.jsonl"},
    "sequential": {"method": "majority", "sequential": True},
}
#: A jury row's fields every path must give as the live run gave them.
JURY_FIELDS = ("transcript_id", "rubric", "judge", "status", "score", "reason", "jury")
MEMBER_FIELDS = ("transcript_id", "rubric", "judge", "status", "score", "reason", "raw_output", "prompt_tokens", "completion_tokens")


def _toml(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


@dataclass
class Cell(CellRuns):
    rubrics = RUBRICS
    kind: str
    tmp: Path
    data: Path = field(init=False)
    prompts: Path = field(init=False)

    def __post_init__(self) -> None:
        rows = [{"id": f"t{i}", "query": f"Question {i}?", "response": f"Answer {i}. [[score={s}]]"} for i, s in enumerate(SCORES)]
        self.data = write_jsonl(self.tmp / "data.jsonl", rows)
        self.prompts = likert_prompts(self.tmp / "prompts")
        labels = [{"transcript_id": f"t{i}", "rubric": r, "label": SCORES[i]} for i in range(0, len(SCORES), 3) for r in RUBRICS]
        write_jsonl(self.tmp / "labels.jsonl", labels)

    def config(self, base_url: str, cache: str) -> Path:
        lines = [f"cache = {_toml(cache)}"]
        for name, seed, inp, out in MEMBERS:
            lines += ["", "[[judges]]", f'name = "{name}"', 'model = "gpt-4o-mini"', f"seed = {seed}", f"base_url = {_toml(base_url)}"]
            lines += [f'api_key_env = "{KEY_ENV}"', "max_attempts = 2", f"input_price_per_1m = {inp}", f"output_price_per_1m = {out}"]
        lines += ["", "[[juries]]", 'name = "panel"', 'members = ["a", "b", "c"]']
        lines += [f"{k} = {_toml(v)}" for k, v in KINDS[self.kind].items()]
        path = self.tmp / "harness.toml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def run(self, config: Path, out: str, **kw: Any) -> tuple[RunOutcome, list[dict[str, Any]]]:
        outcome, rows = super().run(config, out, **kw)
        assert outcome.exit_code == 0, outcome.message
        return outcome, rows


def view(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in fields} for r in sorted(rows, key=lambda r: (r["transcript_id"], r["rubric"], r["judge"]))]


def juries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return view([r for r in rows if r["judge"] == "panel"], JURY_FIELDS)


def members(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return view([r for r in rows if r["judge"] != "panel"], MEMBER_FIELDS)


def live(matrix_servers: Servers, kind: str, tmp_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The live run of a kind of jury, once per module: what every path must give."""
    if kind not in matrix_servers.kept:
        cell = Cell(kind, tmp_factory.mktemp(f"live-{kind}"))
        assert matrix_servers.openai.base_url
        _, rows = cell.run(cell.config(matrix_servers.openai.base_url, str(cell.tmp / "cache.sqlite")), "out")
        verdicts = juries(rows)
        assert len(verdicts) == len(SCORES) * len(RUBRICS)
        assert all(v["status"] == "scored" for v in verdicts)
        matrix_servers.kept[kind] = rows
    return matrix_servers.kept[kind]


def assert_same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert juries(got) == juries(want)
    assert members(got) == members(want)


def replays(cell: Cell, matrix_servers: Servers, config: Path, rows: list[dict[str, Any]], cache: str | None = None) -> None:
    before = matrix_servers.sent()
    _, replay = cell.run(config, "replay", offline=True, **({"cache": cache} if cache else {}))
    assert matrix_servers.sent() == before
    assert_same(replay, rows)


def path_live(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    assert matrix_servers.openai.base_url
    config = cell.config(matrix_servers.openai.base_url, str(cell.tmp / "cache.sqlite"))
    _, rows = cell.run(config, "out")
    assert_same(rows, ref)
    before = matrix_servers.sent()
    _, again = cell.run(config, "again")  # all cached: nothing is paid twice
    assert matrix_servers.sent() == before
    assert_same(again, rows)


def path_offline(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    assert matrix_servers.openai.base_url
    config = cell.config(matrix_servers.openai.base_url, str(cell.tmp / "cache.sqlite"))
    _, rows = cell.run(config, "out")
    replays(cell, matrix_servers, config, rows)
    assert_same(rows, ref)


def path_batch(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    assert matrix_servers.batch.base_url
    config = cell.config(matrix_servers.batch.base_url, str(cell.tmp / "cache.sqlite"))
    live_before = len(matrix_servers.openai.requests)
    report = asyncio.run(hb.submit(cell.options(config, "out")))
    assert report.sent > 0
    asyncio.run(hb.wait(cell.tmp / "cache.sqlite", first_s=0.01, timeout_s=20))
    collected = asyncio.run(hb.collect(cell.options(config, "out")))
    assert collected.outcome is not None and collected.outcome.exit_code == 0
    rows = read_jsonl(cell.tmp / "out" / "judgments.jsonl")
    assert_same(rows, ref)
    assert len(matrix_servers.openai.requests) == live_before
    replays(cell, matrix_servers, config, rows)


def path_export(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    assert matrix_servers.openai.base_url
    config = cell.config(matrix_servers.openai.base_url, str(cell.tmp / "cache.sqlite"))
    before = matrix_servers.contacted()
    requests, output = cell.tmp / "requests.jsonl", cell.tmp / "output.jsonl"
    exported = hb.export(cell.options(config, None), requests).exported
    assert answer_export(matrix_servers.openai, requests, output) == exported
    hb.import_results(cell.options(config, "out"), [output])
    collected = asyncio.run(hb.collect(cell.options(config, "out")))
    assert collected.outcome is not None and collected.outcome.exit_code == 0
    rows = read_jsonl(cell.tmp / "out" / "judgments.jsonl")
    assert_same(rows, ref)
    assert matrix_servers.contacted() == before
    replays(cell, matrix_servers, config, rows)


def path_shard(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    assert matrix_servers.openai.base_url
    config = cell.config(matrix_servers.openai.base_url, str(cell.tmp / "cache.sqlite"))
    for i in (1, 2):
        cell.run(config, f"s{i}", shard=f"{i}/2")
    merge_runs([cell.tmp / "s1", cell.tmp / "s2"], cell.tmp / "merged")
    rows = read_jsonl(cell.tmp / "merged" / "judgments.jsonl")
    # the merged juries are decided over every shard's votes: the unsharded run's verdicts
    assert_same(rows, ref)
    summary = json.loads((cell.tmp / "merged" / "summary.json").read_text(encoding="utf-8"))
    whole = json.loads((cell.tmp / "s1" / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["juries"]["panel"]) == set(whole["juries"]["panel"])
    assert summary["juries"]["panel"]["verdicts"] == {"scored": len(SCORES) * len(RUBRICS)}
    replays(cell, matrix_servers, config, rows)


def _two_workers(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]], cache: str) -> None:
    assert matrix_servers.openai.base_url
    config = cell.config(matrix_servers.openai.base_url, cache)
    run_two_workers(partial(cell.options, config))
    for name in ("w1", "w2"):
        assert_same(read_jsonl(cell.tmp / name / "judgments.jsonl"), ref)
    replays(cell, matrix_servers, config, read_jsonl(cell.tmp / "w1" / "judgments.jsonl"), cache)


PATHS = {
    "live": path_live,
    "offline": path_offline,
    "batch": path_batch,
    "export": path_export,
    "shard": path_shard,
    "workers": lambda cell, matrix_servers, ref: _two_workers(cell, matrix_servers, ref, str(cell.tmp / "cache.sqlite")),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", caps.PATHS)
@pytest.mark.parametrize("kind", list(caps.JURY_KINDS))
def test_a_jury_goes_through_every_path(
    kind: str, path: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    if (kind, path) in caps.JURY_REFUSED:
        return _refused(kind, path, matrix_servers, tmp_path)
    ref = live(matrix_servers, kind, tmp_path_factory)
    cell = Cell(kind, tmp_path)
    if path == "workers_pg":
        _two_workers(cell, matrix_servers, ref, request.getfixturevalue("postgres").new_database())
    else:
        PATHS[path](cell, matrix_servers, ref)


def _refused(kind: str, path: str, matrix_servers: Servers, tmp_path: Path) -> None:
    cell = Cell(kind, tmp_path)
    assert matrix_servers.batch.base_url
    config = cell.config(matrix_servers.batch.base_url, str(cell.tmp / "cache.sqlite"))
    common = [str(cell.data), "--config", str(config), "--prompts", str(cell.prompts), *sum((["--rubric", r] for r in RUBRICS), [])]
    argv = ["batch", "submit", *common] if path == "batch" else ["batch", "export", *common, "--to", str(tmp_path / "requests.jsonl")]
    before = matrix_servers.contacted()
    result = CliRunner().invoke(app, argv, env={**os.environ, "COLUMNS": "400"})
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and caps.SEQUENTIAL_BATCH_WHY in lines[0], result.output
    assert matrix_servers.contacted() == before
    assert not (tmp_path / "requests.jsonl").exists()


def test_the_sequential_jury_asks_fewer_members_for_the_same_verdicts(matrix_servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> None:
    whole, sequential = live(matrix_servers, "per_transcript", tmp_path_factory), live(matrix_servers, "sequential", tmp_path_factory)
    strip = [{k: v for k, v in r.items() if k != "jury"} for r in juries(whole)]
    assert [{k: v for k, v in r.items() if k != "jury"} for r in juries(sequential)] == strip
    for full, seq in zip(juries(whole), juries(sequential), strict=True):
        assert {m: v for m, v in seq["jury"]["votes"].items() if m not in seq["jury"]["settled"]} == {
            m: v for m, v in full["jury"]["votes"].items() if m not in seq["jury"]["settled"]
        }
    # a and b (the cheapest) agree on every transcript here: c, the dearest, is never asked
    settled = [r for r in sequential if r["reason"] == "jury_settled"]
    assert {r["judge"] for r in settled} == {"c"}
    assert len(settled) == len(SCORES) * len(RUBRICS)
    assert all(r["cost_usd"] is None and r["attempts"] == 0 for r in settled)


def test_the_juries_guide_shows_the_table_of_paths() -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "juries.md").read_text(encoding="utf-8")
    assert caps.jury_table() in guide
