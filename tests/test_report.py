"""The run report (``harness report``, ``run --report``) and ``harness explain``, on real runs.

Two runs are made with the real harness against tests/judge_server.py: a small one (two judges, one
without prices; five rubrics, one of them a custom 1..5; three composites, one with a lower-is-better
rubric; replies that are clamped, invalid, refused, numberless, retried and failed; a transcript
without contexts and one full of hostile HTML), and a 10,000-transcript one (one rubric, one judge,
64 calls in flight). Every expectation is computed here from what the run wrote (judgments.jsonl,
results.jsonl, summary.json), not from the report's own code.

report.html is opened in headless Chromium: Debian's /usr/bin/chromium driven by the ``playwright``
package with ``executable_path`` (its own browser download does not work here); scripts/test installs
both. Without them the browser tests FAIL with the reason, they never skip. Screenshots are written
under each test's tmp_path.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import build_report
from harness.report.aggregate import (
    Health,
    count_histogram,
    latency_histogram,
    score_histogram,
)
from harness.rows import JudgmentRow
from harness.rubrics.rubric import load_rubrics
from tests.e2e_support import KEY, KEY_ENV, judge, read_jsonl, serve, write_config, write_jsonl
from tests.judge_server import deterministic_score, prompt_text

ROOT = Path(__file__).resolve().parent.parent

CHROMIUM = os.environ.get("HARNESS_TEST_CHROMIUM", "/usr/bin/chromium")
# The flags this machine needs (python.md): no sandbox as root, no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
N_BIG = 10_000
HELP_LINE = "Rate how helpful the response is, 1 to 5."
TONE_LINE = "Classify the tone of the response as polite or rude."
FIRST_LINE = {r.template.splitlines()[0]: name for name, r in load_rubrics().items()}
HOSTILE = "<img src=x onerror=\"alert('xss')\"></script><script>alert(2)</script> {{query}} $1 \\1 <!-- <b>bold</b>"
COMPOSITES = {
    "grounded": {"faithfulness": 0.5, "hallucination": 0.5},
    "helpful_mix": {"helpfulness": 0.6, "relevance": 0.4},
}
PARSE_REASONS = {"no_score_found", "invalid_score", "refusal", "empty_reply", "no_label_found", "invalid_label"}


# -- the runs ------------------------------------------------------------------------------------


def _reply(body: dict[str, Any]) -> str:
    """Score mode, plus a refusal and a numberless reply on request, 1..5 for helpfulness, and a
    label for the categorical tone rubric."""
    prompt = body["messages"][-1]["content"]
    # a rubric's first line opens the user message (inline) or the system message's instructions (the data layout)
    system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    lines = [prompt.splitlines()[0], *system.splitlines()]
    first = next((line for line in lines if line in FIRST_LINE or line in (TONE_LINE, HELP_LINE)), lines[0])
    if first == TONE_LINE:
        if "REFUSE" in prompt:
            return "I'm sorry, but I cannot evaluate this."
        if "NONUMBER" in prompt:
            return "The response looks fine to me."
        return "Label: " + ("polite" if deterministic_score(prompt) < 0.6 else "rude")
    rubric = "helpfulness" if first == HELP_LINE else FIRST_LINE[first]
    if marker := re.search(r"\[\[score=([^\]]*)\]\]", prompt):
        return '{"score": ' + marker.group(1) + "}"
    if "REFUSE" in prompt:
        return "I'm sorry, but I cannot evaluate this."
    if "NONUMBER" in prompt:
        return "The response looks fine to me."
    score = deterministic_score(prompt_text(body["messages"]))
    return f"Rating: {1 + round(4 * score)} out of 5" if rubric == "helpfulness" else f"Score: {score:.2f}"


def _record(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"t{i:02d}",
        "query": f"What is the NAV of fund {i}?",
        "response": f"The NAV of fund {i} is {100 + i}.",
        "contexts": [f"Fund {i}: NAV {100 + i}.", {"nav": 100 + i}],
        "timings": {"total_ms": 400 + 97 * i, "llm_ms": 150 + 31 * i, "tool_ms": 60 * (i % 7), "api_ms": 10 + i},
        "tool_calls": i % 5,
    }
    extra = {1: " [[score=1.4]]", 2: " [[score=NaN]]", 3: " REFUSE", 4: " NONUMBER", 5: " [[fault:500:1]]", 6: " [[fault:400]]"}
    row["response"] += extra.get(i, "")
    if i == 7:
        row["response"] = HOSTILE
    if i == 8:
        del row["contexts"]
    return row


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 30-transcript run made by ``harness run ... --report`` through the CLI."""
    root = tmp_path_factory.mktemp("small")
    prompts = root / "prompts"
    prompts.mkdir()
    (prompts / "helpfulness.md").write_text(
        '+++\nname = "helpfulness"\nversion = "2"\nscale = [1.0, 5.0]\ndirection = "higher"\n'
        f'inputs = ["query", "response"]\n+++\n{HELP_LINE}\n\n{{{{query}}}}\n\n{{{{response}}}}\n',
        encoding="utf-8",
    )
    (prompts / "tone.md").write_text(
        '+++\nname = "tone"\nversion = "3"\nscale = [0.0, 1.0]\nlabels = ["polite", "rude"]\n'
        f'inputs = ["response"]\n+++\n{TONE_LINE}\n\n{{{{response}}}}\n',
        encoding="utf-8",
    )
    data = write_jsonl(root / "transcripts.jsonl", [_record(i) for i in range(30)])
    with serve(reply=_reply) as server:
        assert server.base_url
        config = write_config(
            root / "harness.toml",
            [judge("mini", server.base_url, api_key_env=""), judge("big", server.base_url, model="judge-big", prices=False, api_key_env="")],
            composites=COMPOSITES,
        )
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(data),
                "--out",
                str(root / "run"),
                "--config",
                str(config),
                "--prompts",
                str(prompts),
                "--cache",
                str(root / "cache.sqlite"),
                "--no-progress",
                "--report",
            ],
        )
    assert result.exit_code == 1, result.output  # the [[fault:400]] judgments fail
    return {"root": root, "run": root / "run", "data": data, "config": config, "prompts": prompts, "output": result.output}


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """10,000 transcripts, one rubric, one judge at 64 calls in flight; then ``harness report``."""
    root = tmp_path_factory.mktemp("big")
    words = ["nav", "fund", "growth", "equity", "index", "return", "risk", "ratio", "expense", "yield", "bond", "debt", "market"]
    rng = np.random.default_rng(0)
    with (root / "transcripts.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(N_BIG):
            picks = rng.integers(0, len(words), 120)
            text = [words[k] for k in picks]
            fh.write(
                json.dumps(
                    {
                        "id": f"b{i:05d}",
                        "query": f"Q{i}: " + " ".join(text[:14]) + "?",
                        "response": f"A{i}: " + " ".join(text[14:60]),
                        "contexts": [" ".join(text[60:90]), " ".join(text[90:])],
                        "timings": {
                            "total_ms": float(rng.lognormal(7.5, 0.6)),
                            "llm_ms": int(rng.integers(100, 2000)),
                            "tool_ms": int(rng.integers(0, 2000)),
                            "api_ms": int(rng.integers(0, 300)),
                        },
                        "tool_calls": int(rng.integers(0, 5)),
                    }
                )
                + "\n"
            )
    started = time.perf_counter()
    with serve() as server:
        assert server.base_url
        config = write_config(root / "harness.toml", [judge("j", server.base_url, api_key_env="", max_concurrency=64)], rubrics=["relevance"])
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(root / "transcripts.jsonl"),
                "--out",
                str(root / "run"),
                "--config",
                str(config),
                "--cache",
                str(root / "cache.sqlite"),
                "--no-progress",
            ],
        )
    run_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["report", str(root / "run"), "--config", str(config)])
    report_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    return {"root": root, "run": root / "run", "run_s": run_s, "report_s": report_s}


def page_data(path: Path) -> dict[str, Any]:
    page = path.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.DOTALL)
    assert match, "the page holds its data blob"
    return json.loads(match.group(1))


def page_details(path: Path) -> list[dict[str, Any]]:
    """Every transcript's details, row by row, decoded here with base64 and zlib (raw DEFLATE)
    from the page's compressed chunks, as report.js inflates them."""
    page = path.read_text(encoding="utf-8")
    found = re.findall(r'<script type="application/octet-stream" class="details" id="details-(\d+)">([A-Za-z0-9+/=]*)</script>', page)
    chunks = {int(n): json.loads(zlib.decompress(base64.b64decode(body), wbits=-15)) for n, body in found}
    where = page_data(path)["details"]["where"]
    assert sorted(chunks) == list(range(len(chunks))) and sum(map(len, chunks.values())) == len(where)
    return [chunks[c][k] for c, k in where]


def judgments_of(run: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(j["transcript_id"], j["rubric"], j["judge"]): j for j in read_jsonl(run / "judgments.jsonl")}


# -- the page, without a browser -----------------------------------------------------------------


def test_run_report_option_writes_one_self_contained_page(small: dict[str, Any]) -> None:
    path = small["run"] / "report.html"
    assert f"wrote {path}" in small["output"]
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    # Nothing is loaded from anywhere: no src/href other than in-page anchors, no <link>, no imports.
    refs = re.findall(r"""<[^>]+\s(?:src|href)\s*=\s*["']?([^"'\s>]+)""", page[: page.index('id="report-data"')])
    assert refs and all(ref.startswith("#") for ref in refs), refs
    assert "<link" not in page
    assert "Chart.js v4.6.1" in page and "sourceMappingURL" not in page
    # The only "</script" are the closing tags of the page's scripts: transcript text cannot end an element.
    assert page.lower().count("</script") == page.lower().count("<script") == 3 + page_data(path)["details"]["chunks"]
    data = page_data(path)
    assert [row[0] for row in data["table"]["rows"]] == [f"t{i:02d}" for i in range(30)]
    assert "The NAV of fund 12 is 112." not in page and HOSTILE not in page  # texts are only in the compressed chunks
    details = page_details(path)
    assert details[7]["texts"]["response"] == HOSTILE
    assert details[3]["texts"]["query"] == "What is the NAV of fund 3?" and data["table"]["queries"][3] == "What is the NAV of fund 3?"


def test_page_numbers_match_the_run(small: dict[str, Any]) -> None:
    run = small["run"]
    data = page_data(run / "report.html")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    judgments = judgments_of(run)
    meta = data["meta"]
    assert meta["transcripts"] == 30 and meta["input"] == str(small["data"])
    assert [j["name"] for j in meta["judges"]] == ["mini", "big"]
    assert meta["cost_usd"] is None  # "big" has no price: unknown, never 0
    assert meta["notes"] == []  # weights from --config, every rubric file found, texts found
    assert meta["texts_available"] == 30
    assert {r["name"]: r["version"] for r in meta["rubrics"]}["helpfulness"] == "2"
    metrics = {m["name"]: m for m in data["metrics"]}
    assert set(metrics) == {*summary["rubrics"], *summary["composites"]}
    for name, metric in metrics.items():
        section = summary["rubrics" if metric["kind"] == "rubric" else "composites"][name]
        for judge_name in ("mini", "big"):
            assert metric["stats"][judge_name] == section[judge_name]
            if name != "tone":
                assert sum(metric["hist"]["counts"][judge_name]) == section[judge_name]["n"]
    # A categorical rubric: judgments per label, in the rubric's order.
    tone = metrics["tone"]
    assert tone["labels"] == tone["hist"]["labels"] == ["polite", "rude"]
    for judge_name in ("mini", "big"):
        labels = [j["label"] for (_, r, jd), j in judgments.items() if r == "tone" and jd == judge_name and j["status"] == "scored"]
        assert tone["hist"]["counts"][judge_name] == [labels.count("polite"), labels.count("rude")]
        assert 0 < labels.count("polite") < 28
    # A 1..5 rubric has one bin per step; 0..1 metrics have twenty.
    assert metrics["helpfulness"]["hist"]["labels"] == ["1", "2", "3", "4", "5"]
    assert len(metrics["relevance"]["hist"]["labels"]) == 20
    helpful = [j["score"] for (_, r, jd), j in judgments.items() if r == "helpfulness" and jd == "mini" and j["status"] == "scored"]
    assert 1.4 in helpful  # t01's marker: a 1..5 score between steps goes to the nearest step's bin
    assert metrics["helpfulness"]["hist"]["counts"]["mini"] == np.histogram(helpful, bins=np.arange(0.5, 6))[0].tolist()

    health = {(h["judge"], h["rubric"]): h for h in data["health"]}
    for (judge_name, rubric), h in health.items():
        rows = [j for (_, r, jd), j in judgments.items() if r == rubric and jd == judge_name]
        parse = [j for j in rows if j["status"] == "unscored" and j["reason"] in PARSE_REASONS]
        scored = [j for j in rows if j["status"] == "scored"]
        assert h["judgments"] == len(rows)
        assert h["parse_failures"] == len(parse)
        assert h["clamped"] == sum(j["clamped"] for j in scored)
        assert h["clamp_rate"] == pytest.approx(sum(j["clamped"] for j in scored) / len(scored))
        assert h["retried"] == sum(1 for j in rows if j["attempts"] > 1 and not j["cached"])
        assert h["failed"] == sum(1 for j in rows if j["status"] == "failed")
    # The planted replies, as the run recorded them: t02 invalid, t03 refused, t04 no number.
    assert health[("mini", "relevance")]["parse_reasons"] == {"invalid_score": 1, "no_score_found": 1, "refusal": 1}
    assert health[("mini", "relevance")]["clamped"] == 1  # t01's 1.4
    assert health[("mini", "relevance")]["error_kinds"] == {"fatal": 1}  # t06's 400
    assert sum(h["retried"] for h in health.values()) >= 1  # t05's one 500
    assert health[("mini", "faithfulness")]["other_unscored"] == {"missing_input": 1}  # t08
    assert health[("mini", "tone")]["parse_reasons"] == {"no_label_found": 1, "refusal": 1}
    assert data["cost"]["summary"] == summary["cost"]
    perf = data["performance"]
    assert sum(perf["agent"]["total_ms"]["hist"]["counts"]) == 30
    assert perf["tool_calls"]["hist"] == {"labels": ["0", "1", "2", "3", "4"], "counts": [6, 6, 6, 6, 6]}
    live = [j["latency_ms"] for j in judgments.values() if j["judge"] == "mini" and j["attempts"] and not j["cached"] and j["status"] != "failed"]
    assert sum(perf["judges"]["mini"]["hist"]["counts"]) == len(live)


def test_composite_arithmetic_with_the_numbers_put_in(small: dict[str, Any]) -> None:
    run = small["run"]
    judgments = judgments_of(run)
    results = {r["transcript_id"]: r for r in read_jsonl(run / "results.jsonl")}
    details = page_details(run / "report.html")
    lines = {(c["judge"], c["name"]): c for c in details[10]["c"]}
    score = {r: judgments[("t10", r, "mini")]["score"] for r in ("relevance", "faithfulness", "hallucination", "helpfulness")}
    rel, faith, hall, helpful = score["relevance"], score["faithfulness"], score["hallucination"], score["helpfulness"]
    value = results["t10"]["composites"]["mini"]["answer_correctness"]
    assert value == pytest.approx(0.7 * rel + 0.3 * faith)
    ac = lines[("mini", "answer_correctness")]
    assert ac["text"] == f"answer_correctness = 0.7·relevance + 0.3·faithfulness = 0.7·{rel:g} + 0.3·{faith:g} = {value:.6g}"
    assert ac["agrees"] is True and ac["steps"] == []
    grounded = lines[("mini", "grounded")]
    assert grounded["text"].startswith(f"grounded = 0.5·faithfulness + 0.5·hallucination = 0.5·{faith:g} + 0.5·{1 - hall:g} = ")
    assert grounded["steps"] == [f"hallucination {hall:g}, lower is better: 1 − {hall:g} = {1 - hall:g}"]
    unit = (helpful - 1) / 4
    assert lines[("mini", "helpful_mix")]["steps"] == [f"helpfulness {helpful:g} on [1, 5]: ({helpful:g} − 1)/(5 − 1) = {unit:g}"]
    assert all(c["agrees"] is True for d in details for c in d["c"] if c["status"] == "scored")
    # t06's relevance failed: the composite says why instead of a number.
    failed = {(c["judge"], c["name"]): c for c in details[6]["c"]}[("mini", "answer_correctness")]
    assert failed["value"] is None and failed["text"].endswith("unscored (relevance failed (fatal))")


# -- harness explain ------------------------------------------------------------------------------


def _explain(small: dict[str, Any], tid: str, *extra: str) -> Any:
    return CliRunner().invoke(app, ["explain", str(small["run"]), tid, *extra])


def test_explain_prints_formula_reply_version_and_cache_key(small: dict[str, Any]) -> None:
    run = small["run"]
    judgments = judgments_of(run)
    results = {r["transcript_id"]: r for r in read_jsonl(run / "results.jsonl")}
    result = _explain(small, "t01", "--config", str(small["config"]), "--prompts", str(small["prompts"]))
    assert result.exit_code == 0, result.output
    out = result.output
    assert "What is the NAV of fund 1?" in out and "The NAV of fund 1 is 101. [[score=1.4]]" in out
    faith = judgments[("t01", "faithfulness", "big")]["score"]
    value = results["t01"]["composites"]["big"]["answer_correctness"]
    assert f"judge big: answer_correctness = 0.7·relevance + 0.3·faithfulness = 0.7·1 + 0.3·{faith:g} = {value:.6g}" in out
    assert "relevance v2-data · judge mini: scored 1 (clamped from 1.4)" in out
    for key in [("t01", r, jd) for r in ("relevance", "helpfulness", "contextual_relevance") for jd in ("mini", "big")]:
        row = judgments[key]
        assert f"{key[1]} v{row['rubric_version']} · judge {key[2]}: " in out
        assert f"cache key {row['cache_key']}" in out
        assert row["raw_output"] in out
    assert '{"score": 1.4}' in out
    assert "helpfulness v2 · judge mini" in out
    assert "where helpfulness" in out  # the 1..5 normalisation of helpful_mix
    label = judgments[("t01", "tone", "mini")]["label"]
    assert label in ("polite", "rude") and f"tone v3 · judge mini: scored label {label}" in out


def test_explain_failed_and_missing_judgments(small: dict[str, Any]) -> None:
    out = _explain(small, "t06", "--config", str(small["config"]), "--prompts", str(small["prompts"])).output
    assert "relevance v2-data · judge mini: failed (fatal)" in out
    assert "error: " in out and "no judge reply" in out
    assert "judge mini: answer_correctness = 0.7·relevance + 0.3·faithfulness: unscored (relevance failed (fatal))" in out
    out = _explain(small, "t08", "--config", str(small["config"]), "--prompts", str(small["prompts"])).output
    assert "faithfulness v2-data · judge mini: unscored (missing_input)" in out
    assert "contexts: 0" in out


def test_explain_unknown_id_is_one_line_and_exit_2(small: dict[str, Any]) -> None:
    result = _explain(small, "no-such-id")
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "no transcript 'no-such-id'" in result.output
    result = CliRunner().invoke(app, ["explain", str(small["root"] / "nowhere"), "t01"])
    assert result.exit_code == 2 and "no such run directory" in result.output


def test_explain_without_the_config_reads_the_weights_the_run_recorded(small: dict[str, Any], tmp_path: Path) -> None:
    out = _explain(small, "t10").output
    assert "answer_correctness = 0.7·relevance + 0.3·faithfulness = " in out
    # summary.json records every composite's weights, so the config is not needed for them...
    assert "grounded = 0.5·faithfulness + 0.5·hallucination = " in out
    assert "weights unknown" not in out
    assert "note: rubric helpfulness: no rubric file found" in out
    # ...and a run written before the weights were recorded says what it cannot show.
    copy = tmp_path / "old-run"
    shutil.copytree(small["run"], copy)
    summary = json.loads((copy / "summary.json").read_text(encoding="utf-8"))
    del summary["composite_weights"]
    (copy / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    old = CliRunner().invoke(app, ["explain", str(copy), "t10"]).output
    assert "judge mini: grounded: weights unknown (pass the run's --config)" in old


def test_other_weights_are_flagged_not_hidden(small: dict[str, Any], tmp_path: Path) -> None:
    text = (
        small["config"]
        .read_text(encoding="utf-8")
        .replace("[composites.grounded]\nfaithfulness = 0.5\nhallucination = 0.5", "[composites.grounded]\nfaithfulness = 0.9\nhallucination = 0.1")
    )
    assert "faithfulness = 0.9" in text
    other = tmp_path / "other.toml"
    other.write_text(text, encoding="utf-8")
    # A run without recorded weights (an older summary.json) takes them from the config given.
    copy = tmp_path / "run"
    shutil.copytree(small["run"], copy)
    summary = json.loads((copy / "summary.json").read_text(encoding="utf-8"))
    del summary["composite_weights"]
    (copy / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    out = CliRunner().invoke(app, ["explain", str(copy), "t10", "--config", str(other), "--prompts", str(small["prompts"])]).output
    assert "! results.jsonl holds" in out
    result = build_report(copy, config=other, prompts=[small["prompts"]])
    assert any("differ from the formula" in n for n in result.notes)


def test_report_and_explain_when_the_input_file_is_gone(small: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(small["run"], copy)
    gone = tmp_path / "moved.jsonl"
    result = CliRunner().invoke(app, ["report", str(copy), "--input", str(gone), "--config", str(small["config"])])
    assert result.exit_code == 0, result.output
    assert f"input file {gone} is gone" in result.output
    data = page_data(copy / "report.html")
    assert all(d["texts"] is None and "left_out" not in d for d in page_details(copy / "report.html"))
    assert any(f"input file {gone} is gone" in n for n in data["meta"]["notes"])
    out = _explain(small, "t10", "--input", str(gone)).output
    assert f"texts: input file {gone} is gone" in out and "judgments" in out


def test_report_on_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "not a run directory" in result.output


# -- aggregates, against NumPy ----------------------------------------------------------------------


def test_histograms_against_numpy() -> None:
    rng = np.random.default_rng(1)
    scores = rng.random(500).round(2)
    hist = score_histogram(scores, (0.0, 1.0))
    assert hist["counts"] == np.histogram(scores, bins=20, range=(0, 1))[0].tolist()
    assert score_histogram([1, 2, 2, 5], (1.0, 5.0)) == {"labels": ["1", "2", "3", "4", "5"], "counts": [1, 2, 0, 0, 1]}
    assert sum(score_histogram([], None)["counts"]) == 0
    latencies = np.append(rng.uniform(0, 100, 990), [5000.0] * 10)
    hist = latency_histogram(latencies)
    assert hist is not None and hist["overflow"] and hist["labels"][-1].startswith("> ")
    assert sum(hist["counts"]) == 1000 and hist["counts"][-1] >= 10
    assert latency_histogram([]) is None
    assert count_histogram([0, 1, 1, 40]) == {"labels": [*map(str, range(30)), "≥30"], "counts": [1, 2, *[0] * 28, 1]}


def test_health_rates() -> None:
    h = Health()
    rows = [
        {"status": "scored", "score": 1.0, "clamped": True, "attempts": 2, "retries": 1},
        {"status": "scored", "score": 0.5, "clamped": False, "attempts": 1},
        {"status": "unscored", "reason": "refusal", "attempts": 1},
        {"status": "unscored", "reason": "missing_input", "attempts": 0},
        {"status": "failed", "reason": "transient", "attempts": 6, "retries": 5},
        {"status": "scored", "score": 0.5, "clamped": False, "attempts": 0, "cached": True},
        # repeated samples: three attempts, none of them a retry
        {"status": "scored", "score": 0.5, "attempts": 3, "retries": 0, "samples": 3},
    ]
    for row in rows:
        h.add(JudgmentRow("t", "r", "1", "j", **row))  # type: ignore[arg-type]
    d = h.as_dict()
    assert (d["answered"], d["parse_failures"], d["parse_failure_rate"]) == (5, 1, 0.2)
    assert (d["clamped"], d["clamp_rate"]) == (1, pytest.approx(1 / 4))
    assert (d["live"], d["retried"], d["retry_rate"], d["cached"]) == (5, 2, 0.4, 1)
    assert d["error_kinds"] == {"transient": 1} and d["other_unscored"] == {"missing_input": 1}


# -- in Chromium ------------------------------------------------------------------------------------


@pytest.fixture
def browser() -> Iterator[Any]:
    # Per test, not per module: while sync playwright is open its event loop counts as running in
    # this thread, so a harness run (asyncio.run) in a module fixture set up later would fail.
    # Module fixtures are set up before function ones, so the runs are always made first.
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the report's browser tests need the playwright package (pip install playwright==1.65.2; scripts/test installs it)", pytrace=False
        )
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"the report's browser tests need Chromium at {CHROMIUM} (apt-get install chromium chromium-driver; scripts/test installs it)",
            pytrace=False,
        )
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Opened:
    """A report page in a fresh browser context, with everything it complained about."""

    def __init__(self, browser: Any, path: Path, scheme: str = "light") -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=scheme)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        # An uncaught error stops the wait at once instead of at its timeout.
        self.page.add_init_script("window.addEventListener('error', () => { window.__failed = true; });")
        started = time.perf_counter()
        self.page.goto(path.as_uri())
        self.page.wait_for_function("() => document.documentElement.dataset.ready === '1' || window.__failed === true", timeout=120_000)
        self.load_s = time.perf_counter() - started
        assert self.page.get_attribute("html", "data-ready") == "1", f"the page did not finish rendering: {self.problems}"
        self.ready_ms = int(self.page.get_attribute("html", "data-ready-ms") or -1)

    def charts(self) -> list[dict[str, Any]]:
        return self.page.evaluate("""() => Array.from(document.querySelectorAll('canvas')).map(c => {
            const chart = Chart.getChart(c), box = c.getBoundingClientRect();
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let painted = 0;
            for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) painted++;
            return {width: box.width, height: box.height, type: chart ? chart.config.type : null, painted,
                    values: chart ? chart.data.datasets.reduce((n, d) => n + d.data.filter(v => v !== null).length, 0) : 0};
        })""")

    def count_text(self) -> str:
        return self.page.text_content("#row-count") or ""

    def close(self) -> None:
        self.context.close()


def _clean(opened: Opened) -> None:
    assert opened.problems == [], opened.problems
    assert opened.requests == [], f"the page asked the network for {opened.requests}"


def test_small_report_in_chromium(small: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    opened = Opened(browser, small["run"] / "report.html")
    page = opened.page
    try:
        charts = opened.charts()
        # 6 rubrics + 3 composites, 4 agent latencies + tool calls + 2 judges, 2 cost, 1 health.
        assert len(charts) == 19, charts
        for chart in charts:
            assert chart["type"] == "bar" and chart["width"] > 100 and chart["height"] > 100, chart
            assert chart["values"] > 0 and chart["painted"] > 1000, chart
        overview = page.text_content("#overview") or ""
        assert str(small["data"]) in overview and "30" in overview and "unknown" in overview  # total cost: a judge has no price
        assert opened.count_text() == "30 of 30 transcripts"
        page.screenshot(path=str(tmp_path / "report-small.png"), full_page=True)

        # Worst first: the first row is the lowest answer_correctness of judge mini.
        results = {r["transcript_id"]: r for r in read_jsonl(small["run"] / "results.jsonl")}
        scored = {
            t: r["composites"]["mini"]["answer_correctness"] for t, r in results.items() if r["composites"]["mini"]["answer_correctness"] is not None
        }
        worst = min(scored, key=lambda t: (scored[t], t))
        first = page.locator(".vrow").first
        assert first.locator("div").first.text_content() == worst
        first.click()
        dialog = page.locator("dialog#detail")
        dialog.wait_for(state="visible")
        number = int(worst[1:])
        assert dialog.get_by_text(f"What is the NAV of fund {number}?", exact=True).is_visible()
        judgments = judgments_of(small["run"])
        raw = judgments[(worst, "relevance", "mini")]["raw_output"]
        assert dialog.locator("pre.reply", has_text=raw).first.is_visible()
        formula = dialog.locator(".formula", has_text="answer_correctness = 0.7·relevance + 0.3·faithfulness = 0.7·").first
        assert formula.is_visible()
        assert f"= {scored[worst]:.6g}" in (formula.text_content() or "")
        assert dialog.get_by_text(judgments[(worst, "relevance", "mini")]["cache_key"]).first.is_visible()
        assert dialog.get_by_text(f"label {judgments[(worst, 'tone', 'mini')]['label']}", exact=True).first.is_visible()
        page.screenshot(path=str(tmp_path / "report-small-transcript.png"))
        page.click("#detail-close")
        dialog.wait_for(state="hidden")

        # Filtering by id, and by status.
        page.fill("#filter", "t07")
        page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
        page.locator(".vrow").first.click()
        dialog.wait_for(state="visible")
        assert dialog.locator("pre.response").text_content() == HOSTILE  # shown as text, never as HTML
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        page.click("#detail-close")
        page.fill("#filter", "")
        page.select_option("#status-filter", "failed")
        page.wait_for_function("!document.querySelector('#row-count').textContent.startsWith('30 of')")
        with_failures = sorted({j["transcript_id"] for j in judgments.values() if j["status"] == "failed"})
        assert opened.count_text() == f"{len(with_failures)} of 30 transcripts"
        assert [r.locator("div").first.text_content() for r in page.locator(".vrow").all()] == with_failures
        page.select_option("#status-filter", "all")

        # Sorting: the id column, then the other way.
        page.click("#table-head > div:first-child")
        assert page.locator(".vrow").first.locator("div").first.text_content() == "t00"
        page.click("#table-head > div:first-child")
        assert page.locator(".vrow").first.locator("div").first.text_content() == "t29"
        _clean(opened)
    finally:
        opened.close()


def test_small_report_in_dark_mode(small: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    light = Opened(browser, small["run"] / "report.html")
    dark = Opened(browser, small["run"] / "report.html", scheme="dark")
    try:
        look = "() => [getComputedStyle(document.body).backgroundColor, Chart.defaults.color]"
        light_bg, light_ink = light.page.evaluate(look)
        dark_bg, dark_ink = dark.page.evaluate(look)
        assert light_bg == "rgb(255, 255, 255)" and dark_bg == "rgb(15, 18, 23)"
        assert light_ink != dark_ink  # charts take the scheme's colours
        assert all(c["painted"] > 1000 for c in dark.charts())
        light.page.emulate_media(color_scheme="dark")  # the scheme changes while the page is open
        light.page.wait_for_function(f"() => Chart.defaults.color === {json.dumps(dark_ink)}")
        assert light.page.evaluate(look) == [dark_bg, dark_ink]
        dark.page.screenshot(path=str(tmp_path / "report-small-dark.png"), full_page=True)
        _clean(light)
        _clean(dark)
    finally:
        light.close()
        dark.close()


def test_10k_report_in_chromium(big: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    path = big["run"] / "report.html"
    size_mb = path.stat().st_size / 1e6
    opened = Opened(browser, path)
    page = opened.page
    try:
        timings = {
            "run_s": round(big["run_s"], 2),
            "report_build_s": round(big["report_s"], 2),
            "report_mb": round(size_mb, 1),
            "page_load_s": round(opened.load_s, 2),
            "page_ready_ms": opened.ready_ms,
        }
        print(f"\n10k report: {timings}")
        (tmp_path / "timings.json").write_text(json.dumps(timings), encoding="utf-8")
        assert opened.count_text() == f"{N_BIG:,} of {N_BIG:,} transcripts"
        assert page.locator(".vrow").count() < 100  # only the rows in view are in the page
        charts = opened.charts()
        assert len(charts) == 10 and all(c["painted"] > 1000 and c["values"] > 0 for c in charts), charts
        judgments = read_jsonl(big["run"] / "judgments.jsonl")
        assert len(judgments) == N_BIG
        lowest = min(j["score"] for j in judgments)
        worst = min(j["transcript_id"] for j in judgments if j["score"] == lowest)
        assert page.locator(".vrow").first.locator("div").first.text_content() == worst
        page.screenshot(path=str(tmp_path / "report-10k.png"), full_page=True)

        # The last row is reachable by scrolling, the table still holding only what is in view.
        page.click("#table-head > div:first-child")
        page.eval_on_selector("#table-body", "b => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }")
        page.locator(".vrow", has_text=f"b{N_BIG - 1:05d}").wait_for()
        assert page.locator(".vrow").count() < 100

        started = time.perf_counter()
        page.fill("#filter", "Q4242:")
        page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
        print(f"filter 10k by query text: {time.perf_counter() - started:.2f} s")
        page.locator(".vrow").first.click()
        page.locator("dialog#detail").wait_for(state="visible")
        assert page.locator("dialog#detail pre.query").text_content().startswith("Q4242: ")
        page.screenshot(path=str(tmp_path / "report-10k-transcript.png"))
        _clean(opened)
    finally:
        opened.close()


# -- a run with long texts: the page's size is capped, the texts come on demand --------------------

N_LONG = 2_000
LONG_CHARS = 5_500  # five passages each: 55 MB of text, more than the page may hold


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """2,000 transcripts of five 5,500-character passages of word-like text (bench/report_scale.py's,
    which compresses about as well as prose), judged live on relevance."""
    from bench.report_scale import write_transcripts

    root = tmp_path_factory.mktemp("long")
    data = root / "transcripts.jsonl"
    write_transcripts(data, N_LONG, LONG_CHARS)
    with serve() as server:
        assert server.base_url
        config = write_config(root / "harness.toml", [judge("j", server.base_url, api_key_env="", max_concurrency=64)], rubrics=["relevance"])
        result = CliRunner().invoke(app, ["run", str(data), "--out", str(root / "run"), "--config", str(config), "--no-cache", "--no-progress"])
    assert result.exit_code == 0, result.output
    texts = {r["id"]: r for r in read_jsonl(data)}
    assert sum(len(r["query"]) + len(r["response"]) + sum(map(len, r["contexts"])) for r in texts.values()) > 50_000_000
    return {"root": root, "run": root / "run", "config": config, "texts": texts}


@pytest.mark.timeout(300)
def test_long_texts_stay_under_the_cap_and_open_on_demand(long_run: dict[str, Any], browser: Any) -> None:
    """55 MB of text: the page stays under 50 MB with every text in it (compressed), and opening a
    row in Chromium inflates that transcript's text."""
    run, texts = long_run["run"], long_run["texts"]
    result = CliRunner().invoke(app, ["report", str(run), "--config", str(long_run["config"])])
    assert result.exit_code == 0, result.output
    path = run / "report.html"
    assert path.stat().st_size < 50_000_000, path.stat().st_size
    data = page_data(path)
    assert data["details"]["left_out"] == 0 and data["details"]["chunks"] > 10 and "left out" not in result.output
    details = page_details(path)
    assert all(d["texts"]["response"] == texts[row[0]]["response"] for d, row in zip(details, data["table"]["rows"], strict=True))
    opened = Opened(browser, path)
    page = opened.page
    try:
        for tid in ("conv-001999", "conv-000000", "conv-001234"):
            page.fill("#filter", tid)
            page.wait_for_function(f"document.querySelector('.vrow > div').textContent === '{tid}'")
            page.locator(".vrow").first.click()
            page.locator("dialog#detail pre.query").wait_for()
            dialog = page.locator("dialog#detail")
            assert dialog.locator("pre.query").text_content() == texts[tid]["query"]
            assert dialog.locator("pre.response").text_content() == texts[tid]["response"]
            assert [c.text_content() for c in dialog.locator("pre.context").all()] == [f"[{k + 1}] {c}" for k, c in enumerate(texts[tid]["contexts"])]
            page.click("#detail-close")
        _clean(opened)
    finally:
        opened.close()


@pytest.mark.timeout(300)
def test_past_the_cap_the_best_transcripts_lose_their_texts_with_a_note(
    long_run: dict[str, Any], browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an 8 MB cap the page stays under it; the worst transcripts keep their texts, the best
    lose them (their judgments stay), and the page and the terminal say so."""
    monkeypatch.setattr("harness.report.builder.MAX_PAGE_BYTES", 8_000_000)
    texts = long_run["texts"]
    shutil.copytree(long_run["run"], tmp_path / "run")
    run, out = tmp_path / "run", tmp_path / "run" / "report.html"
    result = CliRunner().invoke(app, ["report", str(run), "--config", str(long_run["config"])])
    assert result.exit_code == 0, result.output
    assert 7_000_000 < out.stat().st_size < 8_000_000, out.stat().st_size
    data = page_data(out)
    left_out = data["details"]["left_out"]
    assert 0 < left_out < N_LONG
    note = f"the texts of {left_out:,} of {N_LONG:,} transcripts (the best by relevance) are left out to keep report.html under 8 MB"
    assert note in " ".join(result.output.split()) and any(n.startswith(note) for n in data["meta"]["notes"])
    # Worst first: the kept texts are exactly those of the lowest scores.
    details = page_details(out)
    rows = data["table"]["rows"]
    kept = [row[1] for row, d in zip(rows, details, strict=True) if d["texts"] is not None]
    dropped = [row[1] for row, d in zip(rows, details, strict=True) if d.get("left_out")]
    assert len(kept) + len(dropped) == N_LONG and len(dropped) == left_out and max(kept) <= min(dropped)
    assert all(len(d["j"]) == 1 for d in details)
    opened = Opened(browser, out)
    page = opened.page
    try:
        worst = page.locator(".vrow").first.locator("div").first.text_content() or ""
        page.locator(".vrow").first.click()
        page.locator("dialog#detail pre.query").wait_for()
        assert page.locator("dialog#detail pre.response").text_content() == texts[worst]["response"]
        page.click("#detail-close")
        best = next(row[0] for row, d in zip(rows, details, strict=True) if d.get("left_out"))
        page.fill("#filter", best)
        page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
        page.locator(".vrow").first.click()
        page.locator("dialog#detail .judgment").wait_for()
        body = page.locator("#detail-body").text_content() or ""
        assert "left out of this page" in body and f"harness explain {run} {best}" in body and "score " in body
        assert page.locator("dialog#detail pre.query").count() == 0
        _clean(opened)
    finally:
        opened.close()


def test_agent_steps_in_the_report_as_a_timeline(browser: Any, tmp_path: Path) -> None:
    """An agent transcript's detail view shows its steps (turn, group, call, result or error) and
    its agent metrics; the page's data holds them as the run's input gave them."""
    data = tmp_path / "agent_runs.jsonl"
    data.write_text((ROOT / "examples" / "agent_runs.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    with serve() as server:
        config = write_config(tmp_path / "harness.toml", [judge("mini", server.base_url)], cache=str(tmp_path / "cache.sqlite"))
        # a child process: the browser's sync API holds this thread's event loop
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                str(data),
                "--config",
                str(config),
                "--rubric",
                "relevance",
                "--out",
                str(tmp_path / "run"),
                "--report",
            ],
            env={**os.environ, KEY_ENV: KEY},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "run" / "report.html"
    details = page_details(page_file)
    steps = [d["texts"]["steps"] for d in details if d["texts"] and d["texts"]["steps"] and len(d["texts"]["steps"]) == 3]
    assert steps and steps[0][2]["error"] == "scheme not found" and steps[0][2]["failed"] is True
    opened = Opened(browser, page_file)
    page = opened.page
    try:
        page.fill("#filter", "ter-run-2")
        page.wait_for_function("document.querySelector('#row-count').textContent.startsWith('1 of')")
        page.locator(".vrow").first.click()
        dialog = page.locator("dialog#detail")
        dialog.wait_for(state="visible")
        assert dialog.get_by_text("steps (3)", exact=True).is_visible()
        assert dialog.get_by_text("✗ scheme not found", exact=True).is_visible()
        assert dialog.get_by_text('turn — · group 1 · get_expense_ratio({"scheme":"Axis Bluechip Fund"}) · 300 ms', exact=True).is_visible()
        assert dialog.get_by_text("agent metrics", exact=True).is_visible()
        assert dialog.get_by_text("repeated_calls", exact=False).first.is_visible()
        page.screenshot(path=str(tmp_path / "report-agent-steps.png"))
        _clean(opened)
    finally:
        opened.close()
