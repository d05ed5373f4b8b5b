"""The pieces under repeated samples and logprob scores, against oracles and hand-worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.config import JudgeConfig
from harness.judges.base import JudgeRequest
from harness.judges.protocol import read_completion, request_body
from harness.planning import Judgment, make_entry
from harness.planning.samples import collapse_samples, combine_samples
from harness.rubrics.logprob_score import integer_scale, logprob_score
from harness.rubrics.rubric import parse_rubric
from harness.stats.noise import noise_share
from harness.transcripts.models import Transcript


def test_noise_share_against_scipy_one_way_anova_on_unbalanced_groups() -> None:
    from scipy import stats as sp

    rng = np.random.default_rng(1)
    groups = [rng.normal(rng.normal(0, 2), 1.0, size=int(rng.integers(2, 7))) for _ in range(25)]
    figures = noise_share([(g.size, float(g.mean()), float(g.var(ddof=1))) for g in groups])
    f = sp.f_oneway(*groups).statistic
    sizes = np.array([g.size for g in groups])
    big, count = sizes.sum(), sizes.size
    n0 = (big - (sizes**2).sum() / big) / (count - 1)
    # share = MSW / (MSW + (MSB - MSW) / n0) = n0 / (n0 + F - 1) when F >= 1
    assert figures["noise_share"] == pytest.approx(n0 / (n0 + f - 1), rel=1e-10)
    within = sum((g.size - 1) * g.var(ddof=1) for g in groups) / (big - count)
    assert figures["noise_variance"] == pytest.approx(within, rel=1e-12)


def test_noise_share_hand_worked_and_undefined_cases() -> None:
    # Two transcripts, two samples each: (1, 3) and (5, 7). MSW = (2 + 2) / 2 = 2; means 2 and 6,
    # grand 4, MSB = 2·(4 + 4) / 1 = 16; n0 = 2; σ²_T = (16 - 2) / 2 = 7; share = 2 / 9.
    figures = noise_share([(2, 2.0, 2.0), (2, 6.0, 2.0)])
    assert figures["noise_share"] == pytest.approx(2 / 9)
    assert figures["noise_share_of_mean"] == pytest.approx(1 / 8)  # (2/2) / (2/2 + 7)
    assert figures["mean_spread"] == pytest.approx(math.sqrt(2))
    assert noise_share([(3, 1.0, 0.5)])["noise_share"] is None  # one transcript
    assert noise_share([(1, 1.0, 0.0), (1, 2.0, 0.0)])["note"].startswith("needs")  # one sample each
    assert noise_share([(2, 1.0, 0.0), (2, 1.0, 0.0)])["noise_share"] is None  # nothing varies at all


def test_logprob_score_hand_worked() -> None:
    # At the score token: " 4" 0.4 and "4" 0.2 are one score (0.6), "3" 0.3, "five" 0.1 is no score.
    # mass 0.9; score = (4·0.6 + 3·0.3) / 0.9 = 3.6667.
    spec = [('{"', {'{"': 1.0}), ("score", {"score": 1.0}), ('":', {'":': 1.0}), ("4", {" 4": 0.4, "4": 0.2, "3": 0.3, "five": 0.1})]
    tokens = tuple((token, tuple((alt, math.log(p)) for alt, p in alts.items())) for token, alts in spec)
    got = logprob_score(tokens, 1, 5)
    assert got.status == "scored" and got.score == pytest.approx((4 * 0.6 + 3 * 0.3) / 0.9)
    assert got.mass == pytest.approx(0.9) and got.distribution == pytest.approx({"3": 1 / 3, "4": 2 / 3})
    assert logprob_score(None, 1, 5).reason == "logprobs_unavailable"
    assert logprob_score((("no", (("no", 0.0),)),), 1, 5).reason == "no_score_found"
    assert logprob_score((("9", (("9", 0.0),)),), 1, 5).reason == "no_score_found"  # off the scale
    assert integer_scale(1, 5) and integer_scale(0, 10) and not integer_scale(0.0, 1.0) and not integer_scale(0.5, 4.5)


def test_protocol_reads_openai_shaped_logprobs_and_asks_for_n_and_top_logprobs() -> None:
    request = JudgeRequest(({"role": "user", "content": "x"},), 16, 1.0, 3, n=3, top_logprobs=20)
    body = request_body("m", request)
    assert body["n"] == 3 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert "n" not in request_body("m", JudgeRequest(({"role": "user", "content": "x"},), 16, 0.0))
    token = {
        "token": "4",
        "logprob": -0.5,
        "bytes": [52],
        "top_logprobs": [{"token": "4", "logprob": -0.5, "bytes": [52]}, {"token": "3", "logprob": -1.2, "bytes": [51]}],
    }
    data = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "4"},
                "logprobs": {"content": [token], "refusal": None},
                "finish_reason": "stop",
            },
            {"index": 1, "message": {"role": "assistant", "content": "3"}, "logprobs": None, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    reply = read_completion(data, "w")
    assert reply.logprobs == (("4", (("4", -0.5), ("3", -1.2))),)
    assert reply.more_texts == ("3",) and reply.more_logprobs == (None,)


RUBRIC = '+++\nname = "{name}"\nversion = "1"\nscale = [1, 5]\ninputs = ["response"]\n{extra}+++\n{{{{response}}}}\n'


def test_combine_samples_mean_spread_majority_and_outcomes() -> None:
    numeric = parse_rubric(RUBRIC.format(name="n", extra="samples = 3\n"), "n.md")
    labels = parse_rubric(RUBRIC.format(name="l", extra='labels = ["yes", "no"]\nsamples = 4\n'), "l.md")
    judge = JudgeConfig(name="j", model="m", seed=7)
    entry = make_entry(Transcript(id="t", response="r").resolved(), [numeric, labels], [judge])
    assert [(j.rubric.name, j.sample, j.request.seed) for j in entry.jobs] == [  # type: ignore[union-attr]
        ("n", 0, 7),
        ("n", 1, 8),
        ("n", 2, 9),
        ("l", 0, 7),
        ("l", 1, 8),
        ("l", 2, 9),
        ("l", 3, 10),
    ]
    assert len({j.key for j in entry.jobs}) == 7
    for job, score in zip(entry.jobs[:3], (2.0, None, 4.0), strict=True):
        job.result = (
            job.judgment("scored", score=score, cost_usd=0.1, attempts=1)
            if score
            else job.judgment("unscored", reason="no_score_found", cost_usd=0.05, attempts=1)
        )
    for job, label in zip(entry.jobs[3:], ("no", "yes", "yes", "no"), strict=True):
        job.result = job.judgment("scored", label=label, attempts=1)
    collapse_samples(entry)
    first, second = (job.result for job in entry.jobs)
    assert isinstance(first, Judgment) and isinstance(second, Judgment)
    assert first.score == 3.0 and first.sample_scores == [2.0, None, 4.0] and first.spread == pytest.approx(math.sqrt(2))
    assert first.cost_usd == pytest.approx(0.25) and first.attempts == 3 and first.samples == 3
    # An answered sample whose cost is unknown makes the sum unknown, never a partial sum.
    unknown = make_entry(Transcript(id="t", response="r").resolved(), [numeric], [judge])
    for job, cost in zip(unknown.jobs, (0.1, None, 0.1), strict=True):
        job.result = job.judgment("scored", score=3.0, cost_usd=cost, prompt_tokens=None if cost is None else 5, completion_tokens=1, attempts=1)
    partly = combine_samples(unknown.jobs)
    assert partly.cost_usd is None and partly.prompt_tokens is None and partly.completion_tokens == 3
    assert second.label == "yes" and second.spread == 0.5  # a 2-2 tie goes to the first label of the rubric
    failed = make_entry(Transcript(id="t", response="r").resolved(), [numeric], [judge])
    for job in failed.jobs:
        job.result = job.judgment("failed", reason="transient", error="boom")
    combined = combine_samples(failed.jobs)
    assert combined.status == "failed" and combined.score is None and combined.sample_scores == [None, None, None]
