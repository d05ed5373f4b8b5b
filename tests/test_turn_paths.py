"""Per-turn judging (``harness run --turns``, issue 43 part 7) through every path of the matrix.

Each cell runs conversations judged per turn by one judge family (chat, reasoning, Anthropic,
and the local judge) through one path (``--offline`` replay, shards + ``harness merge``, a
provider batch submitted and collected, the batch file export/import, a PostgreSQL cache, two
workers on one cache) and asserts what it wrote equals the live per-turn run of that family:
every turn's judgment (status, score, tokens, cost at the path's price), every conversation's
score by the named rule, and summary.json's turn scores clustered by conversation. Requests are
counted at the servers: each distinct turn prompt is paid once, a replay pays nothing. A path
that cannot judge per turn (a jury) is refused in one line before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness import batch as hb
from harness.errors import ConfigError
from harness.outputs.merge import merge_runs
from harness.planning import RunOptions, build_plan
from tests.e2e_support import KEY_ENV, read_jsonl, write_config
from tests.matrix_support import FAMILY_JUDGE, CellRuns, Servers, answer_export, likert_prompts, live_url, run_two_workers

RUBRICS = ("likert", "likert_long")
AGGREGATE = "worst"

#: Two conversations, a single exchange, and a repeat of the second conversation (its turns' prompts
#: repeat, in the other shard of two). The scripted judges score a prompt by its first
#: ``[[score=N]]``; a turn's history precedes its query in the prompt, so the marker of a first
#: turn's answer scores every turn after it too: c0's turns 3, 3, 3; c1's 2, 2.
CONVERSATIONS: list[dict[str, Any]] = [
    {
        "id": "c0",
        "messages": [
            {"role": "system", "content": "You are a travel agent."},
            {"role": "user", "content": "I want to fly to Lisbon."},
            {"role": "assistant", "content": "Where from? [[score=3]]"},
            {"role": "user", "content": "From Berlin on Tuesday."},
            {"role": "assistant", "content": "There are flights at 09:10 and 13:45."},
            {"role": "user", "content": "Book the 13:45 one."},
            {"role": "assistant", "content": "Booked BER-LIS 13:45. [[score=5]]"},
        ],
    },
    {
        "id": "c1",
        "messages": [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "Five. [[score=2]]"},
            {"role": "user", "content": "Are you sure?"},
            {"role": "assistant", "content": "Yes."},
        ],
    },
    {"id": "t2", "query": "Boiling point of water?", "response": "100 C at sea level. [[score=5]]"},
]
RECORDS = [*CONVERSATIONS, {**CONVERSATIONS[1], "id": "c1-again"}]
#: distinct turn prompts per rubric: c0's 3, c1's 2 (its repeat's are the same), t2's 1
DISTINCT_TURNS = 6
TURN_SCORES = {"c0": [3, 3, 3], "c1": [2, 2], "t2": [5], "c1-again": [2, 2]}

#: what a path must reproduce of the live run's turn judgment (not: latency, attempts, cached)
COMPARED = (
    "transcript_id",
    "turn",
    "rubric",
    "judge",
    "status",
    "score",
    "reason",
    "error",
    "raw_output",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_write_tokens",
)


@dataclass
class TurnCell(CellRuns):
    """One family's per-turn cell: the conversations, the two likert rubrics, ``--turns all``."""

    rubrics: ClassVar[tuple[str, ...]] = RUBRICS

    family: str
    tmp: Path
    data: Path = field(init=False)
    prompts: Path = field(init=False)

    def __post_init__(self) -> None:
        self.data = self.tmp / "conversations.jsonl"
        self.data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
        self.prompts = likert_prompts(self.tmp / "prompts")

    def config(self, base_url: str | None, cache: str) -> Path:
        table: dict[str, Any] = {"name": "judge", **FAMILY_JUDGE[self.family]}
        if self.family != "local":
            table |= {"base_url": base_url, "api_key_env": KEY_ENV, "max_attempts": 2}
        return write_config(self.tmp / "harness.toml", [table], cache=cache)

    def options(self, config: Path, out: str | None, **kw: Any) -> RunOptions:
        return super().options(config, out, turns="all", turn_aggregate=AGGREGATE, **kw)


def view(rows: list[dict[str, Any]], cost_factor: float = 1.0, keys: bool = True) -> list[dict[str, Any]]:
    """The compared fields of each turn judgment, cost at a path's price; ``keys``: the cache key
    too (a batch's differs: its endpoint is the batch server's)."""
    out = []
    for row in sorted(rows, key=lambda r: (r["transcript_id"], r["turn"], r["rubric"], r["judge"])):
        item = {name: row.get(name) for name in (*COMPARED, *(("cache_key",) if keys else ()))}
        cost = row.get("cost_usd")
        item["cost_usd"] = None if cost is None else float(f"{cost * cost_factor:.10g}")
        out.append(item)
    return out


def conversations(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each conversation's scores and turns (results.jsonl, in file order), and summary.json's
    rubric series and conversations section (the turn scores' clustered intervals included)."""
    results = [{k: r.get(k) for k in ("transcript_id", "scores", "unscored", "turns")} for r in read_jsonl(run / "results.jsonl")]
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    series = {name: {judge: {k: v for k, v in s.items() if k != "cost"} for judge, s in by.items()} for name, by in summary["rubrics"].items()}
    return results, {"rubrics": series, "conversations": summary["conversations"]}


def assert_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want), f"{len(got)} turn judgments, expected {len(want)}"
    for a, b in zip(got, want, strict=True):
        diff = [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        assert not diff, f"{a['transcript_id']} turn {a['turn']} {a['rubric']}: " + "; ".join(diff)


@dataclass
class Live:
    rows: list[dict[str, Any]]
    conversations: tuple[list[dict[str, Any]], dict[str, Any]]


_LIVE: dict[str, Live] = {}


def live(family: str, servers: Servers, tmp_factory: pytest.TempPathFactory) -> Live:
    """The live per-turn run of ``family``, once per module: what every path must give."""
    if family not in _LIVE:
        cell = TurnCell(family, tmp_factory.mktemp(f"turns-live-{family}"))
        cfg = cell.config(live_url(servers, family), str(cell.tmp / "cache.sqlite"))
        before = servers.sent()
        outcome, rows = cell.run(cfg, "out")
        assert outcome.exit_code == 0, outcome.message
        assert servers.sent() - before == DISTINCT_TURNS * len(RUBRICS)
        assert all(r["status"] == "scored" for r in rows), [(r["transcript_id"], r["turn"], r["reason"], r["error"]) for r in rows]
        # each turn's score as scripted, and each conversation's the worst of its turns'
        got = {tid: [r["score"] for r in rows if r["transcript_id"] == tid and r["rubric"] == "likert"] for tid in TURN_SCORES}
        assert got == TURN_SCORES
        results, _ = conversations(cell.tmp / "out")
        assert [r["scores"]["judge"]["likert"] for r in results] == [min(s) for s in TURN_SCORES.values()]
        _LIVE[family] = Live(rows, conversations(cell.tmp / "out"))
    return _LIVE[family]


def _replays(cell: TurnCell, servers: Servers, cfg: Path, want: Live, cache: str | None = None) -> None:
    before = servers.sent()
    outcome, rows = cell.run(cfg, "replay", offline=True, **({"cache": cache} if cache else {}))
    assert outcome.exit_code == 0, outcome.message
    assert servers.sent() == before, "an offline replay sent a request"
    assert_rows(view(rows), view(want.rows))
    assert conversations(cell.tmp / "replay") == want.conversations


def path_offline(cell: TurnCell, servers: Servers, want: Live) -> None:
    cfg = cell.config(live_url(servers, cell.family), str(cell.tmp / "cache.sqlite"))
    outcome, rows = cell.run(cfg, "live")
    assert outcome.exit_code == 0, outcome.message
    assert_rows(view(rows), view(want.rows))
    _replays(cell, servers, cfg, want)


def path_shard(cell: TurnCell, servers: Servers, want: Live) -> None:
    cfg = cell.config(live_url(servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = servers.sent()
    for i in (1, 2):
        outcome, _ = cell.run(cfg, f"s{i}", shard=f"{i}/2")
        assert outcome.exit_code == 0, outcome.message
    assert servers.sent() - before == DISTINCT_TURNS * len(RUBRICS)  # c1-again's turns: cached in shard 2
    merge_runs([cell.tmp / "s1", cell.tmp / "s2"], cell.tmp / "merged")
    rows = read_jsonl(cell.tmp / "merged" / "judgments.jsonl")
    # the merged rows are the unsharded run's, the paid copy of a repeated turn first, but for latency
    assert [{k: v for k, v in r.items() if k != "latency_ms"} for r in rows] == [{k: v for k, v in r.items() if k != "latency_ms"} for r in want.rows]
    assert conversations(cell.tmp / "merged") == want.conversations
    _replays(cell, servers, cfg, want)


def path_batch(cell: TurnCell, servers: Servers, want: Live) -> None:
    url = servers.batch.root if cell.family == "anthropic" else servers.batch.base_url
    assert url is not None
    cfg = cell.config(url, str(cell.tmp / "cache.sqlite"))
    live_before = len(servers.openai.requests) + len(servers.anthropic.requests)
    received = servers.batch.requests_received
    report = asyncio.run(hb.submit(cell.options(cfg, "out")))
    # one request per distinct turn prompt, each its own custom_id (the turn's cache key)
    assert (report.judgments, report.sent) == (sum(map(len, TURN_SCORES.values())) * len(RUBRICS), DISTINCT_TURNS * len(RUBRICS))
    asyncio.run(hb.wait(cell.tmp / "cache.sqlite", first_s=0.01, timeout_s=20))
    collected = asyncio.run(hb.collect(cell.options(cfg, "out")))
    assert collected.outcome is not None and collected.outcome.exit_code == 0, collected.outcome
    rows = read_jsonl(cell.tmp / "out" / "judgments.jsonl")
    assert_rows(view(rows, keys=False), view(want.rows, 0.5, keys=False))  # batch rates: half price
    results, summary = conversations(cell.tmp / "out")
    assert results == want.conversations[0] and summary["conversations"] == want.conversations[1]["conversations"]
    assert servers.batch.requests_received - received == DISTINCT_TURNS * len(RUBRICS)
    assert len(servers.openai.requests) + len(servers.anthropic.requests) == live_before
    assert asyncio.run(hb.submit(cell.options(cfg, "out2"))).sent == 0


def path_export(cell: TurnCell, servers: Servers, want: Live) -> None:
    cfg = cell.config(live_url(servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = servers.contacted()
    requests, output = cell.tmp / "requests.jsonl", cell.tmp / "output.jsonl"
    assert hb.export(cell.options(cfg, None), requests).exported == DISTINCT_TURNS * len(RUBRICS)
    ids = [json.loads(line)["custom_id"] for line in requests.read_text(encoding="utf-8").splitlines()]
    assert len(set(ids)) == len(ids) == DISTINCT_TURNS * len(RUBRICS)
    assert answer_export(servers.openai, requests, output) == DISTINCT_TURNS * len(RUBRICS)
    hb.import_results(cell.options(cfg, "out"), [output])
    collected = asyncio.run(hb.collect(cell.options(cfg, "out")))
    assert collected.outcome is not None and collected.outcome.exit_code == 0
    assert_rows(view(read_jsonl(cell.tmp / "out" / "judgments.jsonl")), view(want.rows, 0.5))  # the live endpoint: the same keys
    assert conversations(cell.tmp / "out")[0] == want.conversations[0]
    assert servers.contacted() == before


def path_postgres(cell: TurnCell, servers: Servers, want: Live, cache: str) -> None:
    cfg = cell.config(live_url(servers, cell.family), cache)
    before = servers.sent()
    outcome, rows = cell.run(cfg, "live")
    assert outcome.exit_code == 0, outcome.message
    assert servers.sent() - before == DISTINCT_TURNS * len(RUBRICS)
    assert_rows(view(rows), view(want.rows))
    assert conversations(cell.tmp / "live") == want.conversations
    _replays(cell, servers, cfg, want, cache)


def path_workers(cell: TurnCell, servers: Servers, want: Live) -> None:
    """Two workers on one cache at once: each turn paid once between them, both write the live rows."""
    cfg = cell.config(live_url(servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = servers.sent()
    run_two_workers(partial(cell.options, cfg))
    assert servers.sent() - before == DISTINCT_TURNS * len(RUBRICS)
    for name in ("w1", "w2"):
        assert_rows(view(read_jsonl(cell.tmp / name / "judgments.jsonl")), view(want.rows))
        assert conversations(cell.tmp / name)[0] == want.conversations[0]


PATHS = {"offline": path_offline, "shard": path_shard, "batch": path_batch, "export": path_export, "workers": path_workers}
CELLS = [
    *[(f, p) for f in ("chat", "reasoning", "anthropic") for p in ("offline", "shard", "batch", "postgres")],
    ("chat", "export"),  # the batch file format is OpenAI's (vLLM run_batch)
    ("chat", "workers"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("family", "path"), CELLS, ids=[f"{f}-{p}" for f, p in CELLS])
def test_per_turn_cell_equals_the_live_per_turn_run(
    family: str, path: str, matrix_servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    want = live(family, matrix_servers, tmp_path_factory)
    cell = TurnCell(family, tmp_path)
    if path == "postgres":
        path_postgres(cell, matrix_servers, want, request.getfixturevalue("postgres").new_database())
    else:
        PATHS[path](cell, matrix_servers, want)


@pytest.mark.local_model
@pytest.mark.timeout(600)
def test_local_judge_per_turn_live_then_offline_replay(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    cell = TurnCell("local", tmp_path)
    cfg = cell.config(None, str(tmp_path / "cache.sqlite"))
    outcome, rows = cell.run(cfg, "live", limit=2)
    assert outcome.exit_code == 0, outcome.message
    assert [(r["transcript_id"], r["turn"]) for r in rows if r["rubric"] == "likert"] == [("c0", 1), ("c0", 2), ("c0", 3), ("c1", 1), ("c1", 2)]
    outcome, replay = cell.run(cfg, "replay", limit=2, offline=True)
    assert outcome.exit_code == 0, outcome.message
    assert [{k: r.get(k) for k in COMPARED} for r in replay] == [{k: r.get(k) for k in COMPARED} for r in rows]
    assert conversations(tmp_path / "replay") == conversations(tmp_path / "live")


def test_shards_judged_per_turn_differently_are_not_merged(tmp_path: Path, matrix_servers: Servers) -> None:
    from harness.errors import UserInputError
    from harness.runner import run_evaluation

    cell = TurnCell("chat", tmp_path)
    cfg = cell.config(live_url(matrix_servers, "chat"), str(tmp_path / "cache.sqlite"))
    assert cell.run(cfg, "s1", shard="1/2")[0].exit_code == 0  # --turn-aggregate worst
    mean = RunOptions(
        input=cell.data, out=tmp_path / "s2", config=cfg, rubrics=list(RUBRICS), prompts=[cell.prompts], progress=False, shard="2/2", turns="all"
    )
    assert asyncio.run(run_evaluation(mean)).exit_code == 0  # --turn-aggregate mean
    with pytest.raises(UserInputError, match=re.escape("judged per turn differently from")):
        merge_runs([tmp_path / "s1", tmp_path / "s2"], tmp_path / "merged")


def test_a_jury_is_refused_per_turn_before_anything_is_sent(tmp_path: Path) -> None:
    config = tmp_path / "harness.toml"
    config.write_text(
        '[[judges]]\nname = "a"\nmodel = "gpt-4o-mini"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[[judges]]\nname = "b"\nmodel = "gpt-4o-mini"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[[juries]]\nname = "panel"\nmembers = ["a", "b"]\nmethod = "mean"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=re.escape("--turns: the config's [[juries]] are not judged per turn yet")):
        build_plan(RunOptions(input=tmp_path / "t.jsonl", out=tmp_path / "out", config=config, turns="all"))


@pytest.mark.timeout(60)
def test_every_command_that_plans_a_run_takes_the_same_turn_options(tmp_path: Path, matrix_servers: Servers) -> None:
    """D6: --turns and its companions are one value (``TurnFlags``) that run, estimate, race and
    batch carry; from the command line, each plans the same turns."""
    from typer.testing import CliRunner

    from harness.cli import app

    cell = TurnCell("chat", tmp_path)
    cfg = cell.config(live_url(matrix_servers, "chat"), str(tmp_path / "cache.sqlite"))
    common = [str(cell.data), "--config", str(cfg), "--prompts", str(cell.prompts), *[a for r in RUBRICS for a in ("--rubric", r)]]
    turns = ["--turns", "all", "--turn-aggregate", AGGREGATE, "--history-turns", "3"]
    runner = CliRunner()
    estimated = runner.invoke(app, ["estimate", *common, *turns, "--json"])
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.output)["judges"][0]["requests"] == DISTINCT_TURNS * len(RUBRICS)  # a repeated turn is paid once
    exported = runner.invoke(app, ["batch", "export", *common, *turns, "--to", str(tmp_path / "requests.jsonl")])
    assert exported.exit_code == 0, exported.output
    assert len((tmp_path / "requests.jsonl").read_text(encoding="utf-8").splitlines()) == DISTINCT_TURNS * len(RUBRICS)
    for command in (
        ["run", "-o", str(tmp_path / "out")],
        ["estimate"],
        ["batch", "submit"],
        ["batch", "collect", "-o", str(tmp_path / "o")],
        ["race"],
    ):
        shown = runner.invoke(app, [*command, "--help"], terminal_width=200)
        assert all(flag in shown.output for flag in ("--turns", "--turn-aggregate", "--history-turns", "--history-tokens", "--pass-threshold")), (
            command
        )
    refused = runner.invoke(app, ["estimate", *common, "--turn-aggregate", "worst"])
    assert refused.exit_code == 2 and "give --turns too" in refused.output
