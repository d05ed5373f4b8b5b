"""Repeated samples and logprob-weighted scores, against scripted judges whose truth is known.

A real run (the CLI, a real server on 127.0.0.1, the SQLite cache) for each behaviour: an honest
judge's samples agree (spread 0, no judge noise); a noisy judge's samples are measured as noisy
(its noise variance found near the true NOISE_SD², the noise share checked against SciPy's
one-way ANOVA); ``n = k`` asks once per judgment; logprob scores equal the probability-weighted
mean computed here from the known distribution, and a judge without logprobs is never scored.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.e2e_support import Outputs, cache_rows, chat_requests, judge, write_config, write_jsonl
from tests.scripted_judges import NOISE_SD, ScriptedJudgeServer, likert_prompts, score_distribution

N = 40
K = 5


def truths(n: int = N, seed: int = 3) -> list[float]:
    rng = np.random.default_rng(seed)
    return [round(float(v), 3) for v in rng.uniform(0.1, 0.9, n)]


def transcripts(path: Path, qualities: list[float]) -> Path:
    return write_jsonl(
        path, [{"id": f"t{i:02d}", "query": f"Question {i}?", "response": f"Answer {i}. quality={q}"} for i, q in enumerate(qualities)]
    )


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "--no-progress"])


@pytest.mark.timeout(180)
def test_repeated_samples_measure_an_honest_judge_steady_and_a_noisy_one_noisy(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    from scipy import stats as sp

    assert scripted_server.base_url
    qualities = truths()
    data = transcripts(tmp_path / "t.jsonl", qualities)
    judges = [judge(name, scripted_server.base_url, model=name, samples=K, seed=1, temperature=1.0) for name in ("honest", "noisy")]
    config = write_config(tmp_path / "harness.toml", judges, cache=str(tmp_path / "cache.sqlite"), rubrics=["relevance"])
    before = len(chat_requests(scripted_server))
    result = run(str(data), "--config", str(config), "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    requests = chat_requests(scripted_server)[before:]
    assert len(requests) == N * K * 2  # k requests per judgment, each its own
    assert sorted({r["body"]["seed"] for r in requests}) == [1, 2, 3, 4, 5]  # sample i asks with seed + i
    assert len(cache_rows(tmp_path / "cache.sqlite")) == N * K * 2  # each cached

    assert "Judge noise" in result.output
    out = Outputs(tmp_path / "a")
    rows = out.by_key()  # one row per (transcript, rubric, judge), not k
    assert len(rows) == N * 2
    groups = {}
    for name in ("honest", "noisy"):
        samples = []
        for i in range(N):
            row = rows[(f"t{i:02d}", "relevance", name)]
            assert row["samples"] == K and len(row["sample_scores"]) == K and row["status"] == "scored"
            values = row["sample_scores"]
            assert row["score"] == pytest.approx(statistics.fmean(values), abs=1e-12)
            assert row["spread"] == pytest.approx(statistics.stdev(values), abs=1e-12)
            samples.append(values)
        groups[name] = samples
    honest = out.summary["judge_noise"]["relevance"]["honest"]
    assert all(row["spread"] == 0.0 for (_, _, j), row in rows.items() if j == "honest")
    assert [rows[(f"t{i:02d}", "relevance", "honest")]["score"] for i in range(N)] == pytest.approx(qualities, abs=1e-9)
    assert honest["noise_variance"] == 0.0 and honest["noise_share"] == 0.0

    noisy = out.summary["judge_noise"]["relevance"]["noisy"]
    f = sp.f_oneway(*[np.array(g) for g in groups["noisy"]]).statistic  # one-way ANOVA: F = MSB / MSW
    assert noisy["noise_share"] == pytest.approx(K / (f + K - 1), rel=1e-9)  # 1 - ICC(1), balanced
    within = np.mean([np.var(g, ddof=1) for g in groups["noisy"]])
    assert noisy["noise_variance"] == pytest.approx(within, rel=1e-12)
    # The truth: the judge adds N(0, 0.1²) noise (clipped at the scale's ends, rarely). 160 degrees of
    # freedom put the estimate within ±35 % of 0.01 with overwhelming probability.
    assert 0.65 * NOISE_SD**2 < noisy["noise_variance"] < 1.35 * NOISE_SD**2
    expected_share = NOISE_SD**2 / (NOISE_SD**2 + np.var(qualities, ddof=1))
    assert abs(noisy["noise_share"] - expected_share) < 0.08
    assert noisy["noise_share_of_mean"] < noisy["noise_share"]  # averaging 5 samples cuts the noise

    # A rerun is served from the cache, judgment for judgment.
    again = run(str(data), "--config", str(config), "--out", str(tmp_path / "b"), "--offline")
    assert again.exit_code == 0, again.output
    replay = Outputs(tmp_path / "b").by_key()
    assert {k: (r["score"], r["sample_scores"]) for k, r in replay.items()} == {k: (r["score"], r["sample_scores"]) for k, r in rows.items()}
    assert all(r["cached"] for r in replay.values())


@pytest.mark.timeout(180)
def test_samples_via_n_ask_once_and_fall_back_when_the_endpoint_ignores_n(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    assert scripted_server.base_url
    data = transcripts(tmp_path / "t.jsonl", truths(10))
    judges = [
        judge("noisy", scripted_server.base_url, model="noisy", samples=K, samples_via="n", seed=1, temperature=1.0),
        judge("plain", scripted_server.base_url, model="nologprobs", samples=3, samples_via="n", temperature=1.0),
    ]
    config = write_config(tmp_path / "harness.toml", judges, cache=str(tmp_path / "cache.sqlite"), rubrics=["relevance"])
    before = len(chat_requests(scripted_server))
    result = run(str(data), "--config", str(config), "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    requests = chat_requests(scripted_server)[before:]
    by_model = {m: [r for r in requests if r["body"]["model"] == m] for m in ("noisy", "nologprobs")}
    assert len(by_model["noisy"]) == 10 and {r["body"]["n"] for r in by_model["noisy"]} == {K}
    # An endpoint that answers one choice to n = 3: the other two samples are asked one by one.
    assert len(by_model["nologprobs"]) == 10 * 3
    assert sorted(r["body"].get("n", 1) for r in by_model["nologprobs"]) == [1] * 20 + [3] * 10
    rows = Outputs(tmp_path / "a").by_key()
    noisy = [rows[(f"t{i:02d}", "relevance", "noisy")] for i in range(10)]
    assert all(len(set(r["sample_scores"])) == K for r in noisy)  # five distinct choices of one request
    assert len(cache_rows(tmp_path / "cache.sqlite")) == 10 * K + 10 * 3
    judges_summary = Outputs(tmp_path / "a").summary["judges"]
    assert judges_summary["noisy"]["requests"] == 10 and judges_summary["plain"]["requests"] == 30  # requests sent, not samples
    again = run(str(data), "--config", str(config), "--out", str(tmp_path / "b"), "--offline")
    assert again.exit_code == 0, again.output
    replay = Outputs(tmp_path / "b").by_key()
    assert {k: r["sample_scores"] for k, r in replay.items()} == {k: r["sample_scores"] for k, r in rows.items()}


@pytest.mark.timeout(180)
def test_logprob_scores_are_the_weighted_mean_and_missing_logprobs_are_never_a_silent_fallback(
    scripted_server: ScriptedJudgeServer, tmp_path: Path
) -> None:
    from scipy import stats as sp

    assert scripted_server.base_url
    qualities = truths(30, seed=11)
    data = transcripts(tmp_path / "t.jsonl", qualities)
    prompts = likert_prompts(tmp_path)
    judges = [
        judge("geval", scripted_server.base_url, model="honest", logprobs=True),
        judge("bare", scripted_server.base_url, model="nologprobs", logprobs=True),
        judge("argmax", scripted_server.base_url, model="honest"),
    ]
    config = write_config(tmp_path / "harness.toml", judges, cache=str(tmp_path / "cache.sqlite"), rubrics=["likert"], prompts=[str(prompts)])
    before = len(chat_requests(scripted_server))
    result = run(str(data), "--config", str(config), "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    bodies = [r["body"] for r in chat_requests(scripted_server)[before:]]
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in bodies if b["model"] == "nologprobs")
    assert all("logprobs" not in b for b in bodies if b["model"] == "honest" and "top_logprobs" not in b)
    rows = Outputs(tmp_path / "a").by_key()
    weighted, argmax = [], []
    for i, q in enumerate(qualities):
        value = 1 + 4 * q
        dist = score_distribution(value, 1, 5)  # the judge's true distribution; the server sent 0.98 of it
        expected = sum(s * p for s, p in dist.items())  # Σ p(s)·s over the score tokens, renormalised
        row = rows[(f"t{i:02d}", "likert", "geval")]
        assert row["status"] == "scored" and row["score"] == pytest.approx(expected, abs=1e-9)
        assert row["score_mass"] == pytest.approx(0.98, abs=1e-9)
        assert row["score_distribution"] == pytest.approx({str(s): p for s, p in dist.items()}, abs=1e-9)
        weighted.append(row["score"])
        argmax.append(rows[(f"t{i:02d}", "likert", "argmax")]["score"])
        bare = rows[(f"t{i:02d}", "likert", "bare")]
        # The reply holds a readable '{"score": N}', and still it is not scored from the text.
        assert bare["status"] == "unscored" and bare["reason"] == "logprobs_unavailable" and bare["score"] is None
        assert '"score"' in bare["raw_output"]
    truth = [1 + 4 * q for q in qualities]
    # The weighted score follows the continuous truth where the sampled integer cannot.
    assert sp.spearmanr(weighted, truth).statistic > sp.spearmanr(argmax, truth).statistic
    assert sp.spearmanr(weighted, truth).statistic == pytest.approx(1.0)

    again = run(str(data), "--config", str(config), "--out", str(tmp_path / "b"), "--offline")
    assert again.exit_code == 0, again.output  # replayed from the stored logprobs
    replay = Outputs(tmp_path / "b").by_key()
    assert {k: (r["status"], r["score"]) for k, r in replay.items()} == {k: (r["status"], r["score"]) for k, r in rows.items()}


def test_logprobs_on_a_fractional_scale_is_a_one_line_config_error(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    assert scripted_server.base_url
    data = transcripts(tmp_path / "t.jsonl", truths(2))
    config = write_config(tmp_path / "harness.toml", [judge("geval", scripted_server.base_url, logprobs=True)], rubrics=["relevance"])
    result = run(str(data), "--config", str(config), "--out", str(tmp_path / "a"), "--no-cache")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and line.endswith(
        "relevance.md: scale: judge 'geval' has logprobs = true, which needs a whole-number scale such as [1, 5], but rubric 'relevance' has [0.0, 1.0] (choose its rubrics with --rubric)"
    )


@pytest.mark.timeout(180)
def test_raising_k_reuses_the_plain_judgment_as_sample_0(scripted_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    assert scripted_server.base_url
    data = transcripts(tmp_path / "t.jsonl", truths(6))
    cache = str(tmp_path / "cache.sqlite")
    plain = write_config(tmp_path / "one.toml", [judge("noisy", scripted_server.base_url, model="noisy", seed=1)], cache=cache, rubrics=["relevance"])
    assert run(str(data), "--config", str(plain), "--out", str(tmp_path / "one")).exit_code == 0
    three = write_config(
        tmp_path / "three.toml", [judge("noisy", scripted_server.base_url, model="noisy", seed=1, samples=3)], cache=cache, rubrics=["relevance"]
    )
    estimate = CliRunner().invoke(app, ["estimate", str(data), "--config", str(three), "--cache", cache, "--json"])
    assert estimate.exit_code == 0, estimate.output
    line = json.loads(estimate.stdout)["lines"][0]
    assert (line["requests"], line["cache_hits"]) == (6 * 2, 6)  # the estimate plans the same k jobs: sample 0 is a hit
    before = len(chat_requests(scripted_server))
    assert run(str(data), "--config", str(three), "--out", str(tmp_path / "three")).exit_code == 0
    assert len(chat_requests(scripted_server)) - before == 6 * 2  # only samples 1 and 2 were asked
    first = Outputs(tmp_path / "one").by_key()
    rows = Outputs(tmp_path / "three").by_key()
    for key, row in rows.items():
        assert row["sample_scores"][0] == first[key]["score"] and row["cached"] is False
