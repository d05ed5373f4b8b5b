"""Every judge through every path (issue 23): the cells of ``harness/capabilities.py``, against
local servers that reproduce each provider.

For each supported cell the judgments equal the live run's (status, score, reason, tokens, and
cost at that path's price: batch is half price), an ``--offline`` replay of the path's cache is
identical to what the path wrote, and nothing is paid twice (requests counted at the servers).
Each unsupported cell is refused by its command in one line (exit 2) with nothing sent. The
The docs' table of what works with what (docs/guide/batch.md) is the one ``capabilities.markdown_table`` renders.

Cells that fail on main are ``xfail(strict=True)`` with the failure they show, so a fix flips them.
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
from harness.planning import RunOptions
from harness.runner.session import run_evaluation
from tests.e2e_support import KEY_ENV, read_jsonl, write_config
from tests.matrix_support import (
    DISTINCT_PROMPTS,
    FAMILY_JUDGE,
    REASONING_TOKENS,
    RUBRICS,
    CellRuns,
    Servers,
    answer_export,
    batch_guide_table,
    likert_prompts,
    live_url,
    run_two_workers,
    transcripts,
)
from tests.prompt_blocks import judged_input

OPTION_FIELDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "samples_n": {"samples": 3, "samples_via": "n", "seed": 7, "temperature": 1.0},
    "samples_requests": {"samples": 3, "samples_via": "requests", "seed": 7, "temperature": 1.0},
    "logprobs": {"logprobs": True},
    "structured": {"structured_output": True},
}
#: Batch prices of prices.toml are half the live ones for the three models used here.
BATCH_FACTOR = 0.5
#: USD per 1M tokens (harness/data/prices.toml), written out here as the test's own oracle:
#: input, output, cached input (a cache read), cache write.
PRICES = {"chat": (0.15, 0.60, 0.075, None), "reasoning": (0.25, 2.00, 0.025, None), "anthropic": (1.00, 5.00, 0.10, 1.25)}

#: Cells that fail on main (issue 23), with what they show; each flips when its fix lands.
_RUN_PATHS = ("live", "offline", "shard", "workers", "workers_pg")
_ALL_PATHS = (*_RUN_PATHS, "batch", "export")
_XFAILS: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], str], ...] = ()
XFAIL: dict[tuple[str, str, str], str] = {
    (f, o, p): why for families, options, paths, why in _XFAILS for f in families for o in options for p in paths
}

#: What a path must reproduce of the live run's judgment (not: latency, attempts, cached, key).
COMPARED = (
    "transcript_id",
    "rubric",
    "judge",
    "status",
    "score",
    "raw_score",
    "reason",
    "error",
    "raw_output",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "label",
    "samples",
    "sample_scores",
    "spread",
    "score_distribution",
    "score_mass",
)


@dataclass
class Cell(CellRuns):
    """One cell's files: its transcripts, rubrics and a config for its judge."""

    rubrics = RUBRICS

    family: str
    option: str
    tmp: Path
    data: Path = field(init=False)
    prompts: Path = field(init=False)

    def __post_init__(self) -> None:
        self.data = transcripts(self.tmp / "data.jsonl")
        self.prompts = likert_prompts(self.tmp / "prompts")

    def config(self, base_url: str | None, cache: str, name: str = "harness.toml") -> Path:
        table: dict[str, Any] = {"name": "judge", **FAMILY_JUDGE[self.family], **OPTION_FIELDS[self.option]}
        if self.family == "local" and self.option == "plain":
            return write_config(self.tmp / name, [], cache=cache)  # no judge: the embedded one, as the README runs it
        if self.family != "local":
            table |= {"base_url": base_url, "api_key_env": KEY_ENV, "max_attempts": 2}
        return write_config(self.tmp / name, [table], cache=cache)

    @property
    def expected_requests(self) -> int:
        """What one honest pass pays: each distinct prompt once per rubric (k times for k samples
        asked one request each; once for samples asked with n = k)."""
        return DISTINCT_PROMPTS * len(RUBRICS) * (3 if self.option == "samples_requests" else 1)


def view(rows: list[dict[str, Any]], cost_factor: float = 1.0) -> list[dict[str, Any]]:
    """The compared fields of each judgment, in a stable order; cost scaled to a path's price."""
    out = []
    for row in sorted(rows, key=lambda r: (r["transcript_id"], r["rubric"], r["judge"])):
        item = {name: row.get(name) for name in COMPARED}
        cost = row.get("cost_usd")
        item["cost_usd"] = None if cost is None else float(f"{cost * cost_factor:.10g}")
        out.append(item)
    return out


def replay_view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every field of every judgment but what a replay measures or marks anew."""
    ordered = sorted(rows, key=lambda r: (r["transcript_id"], r["rubric"], r["judge"]))
    return [{k: v for k, v in r.items() if k not in ("latency_ms", "attempts", "billed_retries", "cached")} for r in ordered]


def live_reference(matrix_servers: Servers, family: str, option: str, tmp_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The live run of (family, option), once per module: the judgments every path must give."""
    ref = matrix_servers.live_refs.get((family, option))
    if ref is None:
        cell = Cell(family, option, tmp_factory.mktemp(f"live-{family}-{option}"))
        cfg = cell.config(live_url(matrix_servers, family), str(cell.tmp / "cache.sqlite"))
        before = matrix_servers.sent()
        billed = matrix_servers.billed(family)
        paid_before = len(billed)
        outcome, ref = cell.run(cfg, "out")
        assert_scored(ref)
        assert outcome.exit_code == 0, outcome.message
        assert matrix_servers.sent() - before == cell.expected_requests
        # The judgments carry exactly the usage the server reported, priced by hand.
        paid = [r for r in ref if not r["cached"]]
        reported = billed[paid_before:]
        tokens = (sum(r["prompt_tokens"] or 0 for r in paid), sum(r["completion_tokens"] or 0 for r in paid))
        server = (sum(p for p, _ in reported), sum(c for _, c in reported))
        assert tokens == server, f"the judgments' (prompt, completion) tokens {tokens} are not the server's {server}"
        spent = REASONING_TOKENS * len(reported) if family == "reasoning" else 0
        reasoning = sum(r["reasoning_tokens"] or 0 for r in paid)
        assert reasoning == spent, f"the judgments' reasoning tokens {reasoning} are not the server's {spent}"
        for row in ref:
            hand = hand_cost(family, row)
            assert row["cost_usd"] == pytest.approx(hand, rel=1e-9, abs=1e-15), (
                f"{row['transcript_id']}/{row['rubric']}: cost_usd {row['cost_usd']} is not {hand} by hand from its tokens "
                f"(prompt {row['prompt_tokens']}, completion {row['completion_tokens']}, cache reads {row['cached_tokens']}, "
                f"cache writes {row['cache_write_tokens']})"
            )
        matrix_servers.live_refs[(family, option)] = ref
    return ref


def assert_same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Equal judgment views; the message names the first judgment and fields that differ."""
    if got == want:
        return
    assert len(got) == len(want), f"{len(got)} judgments, expected {len(want)}"
    for a, b in zip(got, want, strict=True):
        fields = [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if fields:
            raise AssertionError(f"{a.get('transcript_id')}/{a.get('rubric')}: " + "; ".join(fields))


def hand_cost(family: str, row: dict[str, Any]) -> float:
    fresh_in, out, read_in, write_in = PRICES[family]
    read, written = row["cached_tokens"] or 0, row["cache_write_tokens"] or 0
    fresh = row["prompt_tokens"] - read - written
    return (fresh * fresh_in + read * read_in + written * (write_in or fresh_in) + row["completion_tokens"] * out) / 1e6


def assert_scored(rows: list[dict[str, Any]]) -> None:
    bad = [f"{r['transcript_id']}/{r['rubric']}: {r['status']} {r['reason']}: {r['error']}" for r in rows if r["status"] != "scored"]
    assert not bad, f"{len(bad)} not scored, e.g. {bad[0]}"


# --- the paths ----------------------------------------------------------------------------------


def path_live(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    cfg = cell.config(live_url(matrix_servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = matrix_servers.sent()
    outcome, rows = cell.run(cfg, "out")
    assert outcome.exit_code == 0, outcome.message
    assert matrix_servers.sent() - before == cell.expected_requests
    assert_scored(rows)
    assert_same(view(rows), view(ref))
    # The same command again pays nothing and says the same.
    outcome, again = cell.run(cfg, "again")
    assert matrix_servers.sent() - before == cell.expected_requests
    assert_same(view(again), view(rows))


def path_offline(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    cfg = cell.config(live_url(matrix_servers, cell.family), str(cell.tmp / "cache.sqlite"))
    outcome, live_rows = cell.run(cfg, "live")
    assert outcome.exit_code == 0, outcome.message
    before = matrix_servers.sent()
    outcome, rows = cell.run(cfg, "replay", offline=True)
    assert outcome.exit_code == 0, outcome.message
    assert matrix_servers.sent() == before
    assert_same(replay_view(rows), replay_view(live_rows))
    assert_same(view(rows), view(ref))


def _assert_replays(cell: Cell, matrix_servers: Servers, cfg: Path, rows: list[dict[str, Any]], cache: str | None = None) -> None:
    before = matrix_servers.sent()
    outcome, replay = cell.run(cfg, "replay", offline=True, **({"cache": cache} if cache else {}))
    assert outcome.exit_code == 0, outcome.message
    assert matrix_servers.sent() == before
    assert_same(replay_view(replay), replay_view(rows))


def path_batch(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    # Anthropic's base URL is the API's root (https://api.anthropic.com), OpenAI's ends in /v1.
    url = matrix_servers.batch.root if cell.family == "anthropic" else matrix_servers.batch.base_url
    assert url is not None
    cfg = cell.config(url, str(cell.tmp / "cache.sqlite"))
    live_before = len(matrix_servers.openai.requests) + len(matrix_servers.anthropic.requests)
    received = matrix_servers.batch.requests_received
    report = asyncio.run(hb.submit(cell.options(cfg, "out")))
    assert report.sent == cell.expected_requests
    asyncio.run(hb.wait(cell.tmp / "cache.sqlite", first_s=0.01, timeout_s=20))
    collected = asyncio.run(hb.collect(cell.options(cfg, "out")))
    assert collected.outcome is not None, "a batch is still running"
    rows = read_jsonl(cell.tmp / "out" / "judgments.jsonl")
    assert_scored(rows)
    assert collected.outcome.exit_code == 0, collected.outcome.message
    assert_same(view(rows), view(ref, BATCH_FACTOR))
    assert matrix_servers.batch.requests_received - received == cell.expected_requests
    assert len(matrix_servers.openai.requests) + len(matrix_servers.anthropic.requests) == live_before
    # Submitted again: everything is cached, nothing is sent.
    assert asyncio.run(hb.submit(cell.options(cfg, "out2"))).sent == 0
    _assert_replays(cell, matrix_servers, cfg, rows)


def path_export(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    cfg = cell.config(live_url(matrix_servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = matrix_servers.contacted()
    requests, output = cell.tmp / "requests.jsonl", cell.tmp / "output.jsonl"
    report = hb.export(cell.options(cfg, None), requests)
    assert report.exported == cell.expected_requests
    assert answer_export(matrix_servers.openai, requests, output) == cell.expected_requests
    totals = hb.import_results(cell.options(cfg, "out"), [output])
    assert (totals["succeeded"], totals["failed"]) == (cell.expected_requests, 0)
    collected = asyncio.run(hb.collect(cell.options(cfg, "out")))
    assert collected.outcome is not None
    rows = read_jsonl(cell.tmp / "out" / "judgments.jsonl")
    assert_scored(rows)
    assert collected.outcome.exit_code == 0, collected.outcome.message
    assert_same(view(rows), view(ref, BATCH_FACTOR))
    assert matrix_servers.contacted() == before
    assert hb.export(cell.options(cfg, None), cell.tmp / "again.jsonl").exported == 0
    _assert_replays(cell, matrix_servers, cfg, rows)


def path_shard(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    cfg = cell.config(live_url(matrix_servers, cell.family), str(cell.tmp / "cache.sqlite"))
    before = matrix_servers.sent()
    for i in (1, 2):
        outcome, _ = cell.run(cfg, f"s{i}", shard=f"{i}/2")
        assert outcome.exit_code == 0, outcome.message
    merge_runs([cell.tmp / "s1", cell.tmp / "s2"], cell.tmp / "merged")
    rows = read_jsonl(cell.tmp / "merged" / "judgments.jsonl")
    assert matrix_servers.sent() - before == cell.expected_requests
    assert_scored(rows)
    # README: the merged judgments equal an unsharded run's, but for what is measured (latency).
    assert_same([{k: v for k, v in r.items() if k != "latency_ms"} for r in rows], [{k: v for k, v in r.items() if k != "latency_ms"} for r in ref])
    _assert_replays(cell, matrix_servers, cfg, rows)


def _two_workers(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]], cache: str) -> None:
    cfg = cell.config(live_url(matrix_servers, cell.family), cache)
    before = matrix_servers.sent()
    run_two_workers(partial(cell.options, cfg))
    assert matrix_servers.sent() - before == cell.expected_requests
    for name in ("w1", "w2"):
        rows = read_jsonl(cell.tmp / name / "judgments.jsonl")
        assert_scored(rows)
        assert_same(view(rows), view(ref))
    _assert_replays(cell, matrix_servers, cfg, read_jsonl(cell.tmp / "w1" / "judgments.jsonl"), cache)


def path_workers(cell: Cell, matrix_servers: Servers, ref: list[dict[str, Any]]) -> None:
    _two_workers(cell, matrix_servers, ref, str(cell.tmp / "cache.sqlite"))


PATHS = {"live": path_live, "offline": path_offline, "batch": path_batch, "export": path_export, "shard": path_shard, "workers": path_workers}


def _params() -> list[Any]:
    params = []
    for c in caps.CELLS:
        if not (c.supported and c.tested) or c.family == "local":
            continue
        marks: list[Any] = [pytest.mark.timeout(90)]
        if (c.family, c.option, c.path) in XFAIL:
            marks.append(pytest.mark.xfail(strict=True, reason=f"issue 23: {XFAIL[(c.family, c.option, c.path)]}"))
        params.append(pytest.param(c.family, c.option, c.path, id=f"{c.family}-{c.option}-{c.path}", marks=marks))
    return params


@pytest.mark.parametrize(("family", "option", "path"), _params())
def test_supported_cell(
    family: str,
    option: str,
    path: str,
    matrix_servers: Servers,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    ref = live_reference(matrix_servers, family, option, tmp_path_factory)
    assert_scored(ref)
    cell = Cell(family, option, tmp_path)
    if path == "workers_pg":
        _two_workers(cell, matrix_servers, ref, request.getfixturevalue("postgres").new_database())
    else:
        PATHS[path](cell, matrix_servers, ref)
    assert_agent_metrics(tmp_path)


#: The agent metrics of the matrix transcripts (tests/matrix_support.py), worked by hand, in
#: results.jsonl's order: t0 calls calc(2+2) twice where the reference expects it once (strict:
#: no match; 1 of 2 calls expected, the expected one made; the second a repeat); t1's one call
#: is to search, which the reference expects with any arguments, but it failed and is not declared,
#: so its schema cannot be checked.
AGENT = {
    "t0": {
        "trajectory_match": 0.0,
        "trajectory_precision": 0.5,
        "trajectory_recall": 1.0,
        "trajectory_f1": 2 / 3,
        "steps": 2.0,
        "failed_steps": 0.0,
        "undeclared_tools": 0.0,
        "schema_violations": 0.0,
        "repeated_calls": 1.0,
    },
    "t1": {
        "trajectory_match": 1.0,
        "trajectory_precision": 1.0,
        "trajectory_recall": 1.0,
        "trajectory_f1": 1.0,
        "steps": 1.0,
        "failed_steps": 1.0,
        "undeclared_tools": 1.0,
        "schema_violations": None,
        "repeated_calls": 0.0,
    },
}


def assert_agent_metrics(tmp: Path) -> None:
    """Every results.jsonl a path wrote holds the same agent metrics (the writer computes them on
    every path: live, offline, batch collect, import, shards and their merge, workers)."""
    written = [p for p in tmp.rglob("results.jsonl") if ".staged" not in p.name]
    assert written, "the path wrote no results.jsonl"
    for path in written:
        for row in read_jsonl(path):
            expected = AGENT.get(row["transcript_id"])
            assert row.get("agent") == (pytest.approx(expected) if expected is not None else None), f"{path}: {row['transcript_id']}"
            if expected is not None and row["transcript_id"] == "t0":
                assert row["task"] == "arith" and row["agent_steps"]["repeated_calls"] == [1]


# --- unsupported cells: refused in one line, nothing sent ----------------------------------------


def _argv(cell: Cell, path: str, matrix_servers: Servers) -> list[str]:
    url = (
        (matrix_servers.batch.root if cell.family == "anthropic" else matrix_servers.batch.base_url)
        if path == "batch"
        else live_url(matrix_servers, cell.family)
    )
    cache = "postgresql://nobody@127.0.0.1:1/none" if path == "workers_pg" else str(cell.tmp / "cache.sqlite")
    cfg = cell.config(url, cache)
    common = [str(cell.data), "--config", str(cfg), "--prompts", str(cell.prompts), *sum((["--rubric", r] for r in RUBRICS), [])]
    if path == "batch":
        return ["batch", "submit", *common]
    if path == "export":
        return ["batch", "export", *common, "--to", str(cell.tmp / "requests.jsonl")]
    extra = {"offline": ["--offline"], "shard": ["--shard", "1/2"]}.get(path, [])
    return ["run", *common, "--out", str(cell.tmp / "out"), "--no-progress", *extra]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("family", "option", "path"),
    [pytest.param(c.family, c.option, c.path, id=f"{c.family}-{c.option}-{c.path}") for c in caps.CELLS if not c.supported],
)
def test_unsupported_cell_is_refused_before_anything_is_sent(family: str, option: str, path: str, matrix_servers: Servers, tmp_path: Path) -> None:
    cell = Cell(family, option, tmp_path)
    argv = _argv(cell, path, matrix_servers)
    before = matrix_servers.contacted()
    result = CliRunner().invoke(app, argv, env={**os.environ, "COLUMNS": "400"})
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    expected = caps.cell(family, option, path).reason  # type: ignore[arg-type]
    if (family, option) == ("local", "structured"):
        expected = "cannot follow a JSON Schema"  # the config itself refuses it, naming the field
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert matrix_servers.contacted() == before
    assert not (tmp_path / "out" / "judgments.jsonl").exists()
    assert not (tmp_path / "requests.jsonl").exists()


# --- the local judge: one small cell, live and replay ---------------------------------------------


@pytest.mark.local_model
@pytest.mark.timeout(300)
def test_local_judge_live_then_offline_replay(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    cell = Cell("local", "plain", tmp_path)
    cfg = cell.config(None, str(tmp_path / "cache.sqlite"))
    outcome, rows = cell.run(cfg, "live", limit=2)
    assert outcome.exit_code == 0, outcome.message
    assert len(rows) == 2 * len(RUBRICS)
    assert all(r["status"] == "scored" for r in rows), [(r["status"], r["reason"]) for r in rows]
    outcome, replay = cell.run(cfg, "replay", limit=2, offline=True)  # offline: no judge is made at all
    assert outcome.exit_code == 0, outcome.message
    assert_same(replay_view(replay), replay_view(rows))
    outcome, again = cell.run(cfg, "again", limit=2)  # live again: every judgment from the cache, none paid twice
    assert outcome.exit_code == 0, outcome.message
    assert all(r["cached"] for r in again)
    assert_same(replay_view(again), replay_view(rows))


# --- the docs' table ------------------------------------------------------------------------------


def test_docs_table_is_the_generated_one() -> None:
    assert batch_guide_table("capabilities") == caps.markdown_table(), (
        "docs/guide/batch.md's table is stale: paste `python -m harness.capabilities` between the markers"
    )


def test_every_cell_is_listed_once_and_every_refusal_says_why() -> None:
    keys = [(c.family, c.option, c.path) for c in caps.CELLS]
    assert len(keys) == len(set(keys)) == len(caps.FAMILIES) * len(caps.OPTIONS) * len(caps.PATHS)
    assert all(c.reason for c in caps.CELLS if not c.supported)
    assert all(c.reason and c.family == "local" for c in caps.CELLS if c.supported and not c.tested)
    assert {k for k in XFAIL} <= {k for k in keys if caps.cell(*k).supported}  # type: ignore[arg-type]


def test_a_judge_is_placed_in_its_family_and_refused_with_its_name_and_the_reason() -> None:
    from harness.config import JudgeConfig
    from harness.errors import ConfigError

    def judge(**kw: Any) -> JudgeConfig:
        return JudgeConfig.model_validate({"name": "j", "model": "gpt-4o-mini", **kw})

    assert caps.judge_family(judge(model="openai/gpt-5-mini")) == "reasoning"  # after a gateway prefix
    assert caps.judge_family(judge(model="o3-mini")) == "reasoning"
    assert caps.judge_family(judge(model="gpt-5-chat-latest")) == "chat"  # takes temperature: a chat model
    assert caps.judge_family(judge(provider="anthropic", model="claude-haiku-4-5")) == "anthropic"
    assert caps.judge_options(judge()) == ("plain",)
    assert caps.judge_options(judge(samples=3, samples_via="n", logprobs=True)) == ("samples_n", "logprobs")
    caps.check_supported([judge(samples=3, samples_via="n")], "live")
    with pytest.raises(ConfigError) as refused:
        caps.check_supported([judge(), judge(name="claude", provider="anthropic", model="claude-haiku-4-5", logprobs=True)], "shard")
    assert str(refused.value) == (
        "judge 'claude' (Anthropic native with logprobs = true (G-Eval)): `--shard i/n` + merge is not supported: "
        "Anthropic's Messages API returns no logprobs: set logprobs = false"
    )


# --- the data layout's system message, in each family's own place ----------------------------------


def _data_prompts(folder: Path) -> Path:
    """A 1..5 rubric in the data layout (issue 45): its instructions are the system message."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "likert_data.md").write_text(
        '+++\nname = "likert_data"\nversion = "1"\nscale = [1, 5]\ninputs = ["query", "response"]\nmax_tokens = 16\nlayout = "data"\n+++\n'
        "Rate the answer on a scale of 1 to 5.\n\nQUESTION:\n{{query}}\n\nANSWER:\n{{response}}\n\n"
        'Respond with ONLY {"score": N}.\n',
        encoding="utf-8",
    )
    return folder


@pytest.mark.timeout(90)
@pytest.mark.parametrize("family", ["chat", "reasoning", "anthropic"])
def test_each_family_gets_the_instructions_apart_from_the_judged_text(family: str, matrix_servers: Servers, tmp_path: Path) -> None:
    """Chat models get the instructions as the ``system`` message, OpenAI's reasoning models as
    ``developer`` (live and in a batch file), Anthropic as its top-level ``system`` field; the
    user message holds the transcript's text in marked blocks and not the instructions."""
    cell = Cell(family, "plain", tmp_path)
    prompts = _data_prompts(tmp_path / "data-prompts")
    cfg = cell.config(live_url(matrix_servers, family), str(tmp_path / "cache.sqlite"))
    options = RunOptions(input=cell.data, out=tmp_path / "out", config=cfg, rubrics=["likert_data"], prompts=[prompts], progress=False)
    outcome = asyncio.run(run_evaluation(options))
    assert outcome.exit_code == 0, outcome.message
    rows = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert [(r["status"], r["rubric_version"]) for r in rows] == [("scored", "1")] * 4
    server = matrix_servers.anthropic if family == "anthropic" else matrix_servers.openai
    body = next(r["body"] for r in reversed(server.requests) if "Lyon. [[score=2]]" in json.dumps(r["body"]))
    if family == "anthropic":
        (system,) = body["system"]
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user"]
        user = "".join(part["text"] for part in messages[0]["content"])
        instructions = system["text"]
    else:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["developer" if family == "reasoning" else "system", "user"]
        instructions, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Rate the answer on a scale of 1 to 5." in instructions and "Lyon" not in instructions
    assert judged_input(user, "response") == "Lyon. [[score=2]]" and "Rate the answer" not in user
    if family != "anthropic":  # a batch file carries the same role (batch/wire.py sends request_body)
        exported = tmp_path / "requests.jsonl"
        fresh = cell.config(live_url(matrix_servers, family), str(tmp_path / "export.sqlite"), name="export.toml")  # nothing cached yet
        report = hb.export(RunOptions(input=cell.data, config=fresh, rubrics=["likert_data"], prompts=[prompts], progress=False), exported)
        assert report.exported == DISTINCT_PROMPTS
        lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
        assert {line["body"]["messages"][0]["role"] for line in lines} == {"developer" if family == "reasoning" else "system"}
