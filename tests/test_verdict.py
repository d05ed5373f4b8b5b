"""``runner/verdict.py`` alone: a reply (live, cached, repeated or one choice of n) and a job make
a judgment, with no I/O. Prices are worked by hand: 0.15 and 0.60 USD per 1M tokens."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math

import pytest

from harness.cache.base import CachedJudgment
from harness.config import JudgeConfig
from harness.errors import FatalJudgeError, TransientJudgeError
from harness.judges.base import JudgeReply
from harness.planning import Job, make_entry
from harness.rubrics.rubric import parse_rubric
from harness.runner import verdict
from harness.transcripts.models import Transcript
from harness.usage import Usage

NUMERIC = '+++\nname = "n"\nversion = "1"\nscale = [0.0, 1.0]\ninputs = ["response"]\nmax_tokens = 64\n+++\n{{response}}\n'
LIKERT = '+++\nname = "g"\nversion = "1"\nscale = [1, 5]\ninputs = ["response"]\nmax_tokens = 8\n+++\n{{response}}\n'
LABELS = '+++\nname = "l"\nversion = "1"\nscale = [0, 1]\nlabels = ["yes", "no"]\ninputs = ["response"]\n+++\n{{response}}\n'
PRICED = {"input_price_per_1m": 0.15, "output_price_per_1m": 0.60}


def job(rubric: str = NUMERIC, **judge_fields: object) -> Job:
    judge = JudgeConfig(name="j", model="m", base_url="http://127.0.0.1:1/v1", **{**PRICED, **judge_fields})  # type: ignore[arg-type]
    entry = make_entry(Transcript(id="t1", response="r").resolved(), [parse_rubric(rubric, "r.md")], [judge])
    (only,) = entry.jobs
    return only


def observable(judgment: object) -> dict[str, object]:
    """A judgment's fields but what differs by construction between a call and its replay."""
    row = dataclasses.asdict(judgment)  # type: ignore[call-overload]
    for name in ("cached", "attempts", "retries", "billed_retries"):
        row.pop(name)
    return row


def test_a_reply_is_read_and_priced_by_hand() -> None:
    reply = JudgeReply('{"score": 0.75}', Usage(1000, 10), finish_reason="stop")
    got = verdict.from_reply(job(), reply, attempts=2, latency_ms=12.3456, billed_retries=1)
    assert (got.status, got.score, got.raw_output, got.reason) == ("scored", 0.75, '{"score": 0.75}', None)
    assert got.cost_usd == pytest.approx((1000 * 0.15 + 10 * 0.60) / 1e6)  # 1.56e-4
    assert got.billed_cost_usd == pytest.approx(2 * 1.56e-4)
    assert (got.attempts, got.retries, got.latency_ms, got.cached) == (2, 1, 12.346, False)


def test_a_truncated_reply_is_unscored_cached_marked_and_replays_as_it_was() -> None:
    the_job = job()
    # A cut reply whose partial text holds a score: never read for it.
    reply = JudgeReply("Score: 0.9 because", Usage(50, 64, reasoning=60), finish_reason="length")
    live = verdict.from_reply(the_job, reply, attempts=1, latency_ms=5.0)
    assert (live.status, live.reason, live.score, live.raw_output) == ("unscored", "truncated", None, "Score: 0.9 because")
    assert live.error == (
        "reply cut off at the completion budget of 64 tokens (64 used, 60 of them reasoning): raise the judge's max_tokens or reasoning_budget"
    )
    row = verdict.to_cached(the_job, live, reply.text, reply.logprobs, attempts=1)
    assert row.truncated is True and row.status == "unscored"
    replayed = verdict.from_cache(the_job, row)
    assert replayed.cached and observable(replayed) == observable(live)
    # The same row read back from a store: SQLite gives 1, an older row NULL (not truncated).
    assert CachedJudgment(**{**row.as_dict(), "truncated": 1}).truncated is True
    assert CachedJudgment(**{**row.as_dict(), "truncated": None}).truncated is False


def test_a_cache_row_puts_each_value_in_its_column() -> None:
    # cache_row builds the row positionally (no CachedJudgment for each of a collect's rows): every
    # field is given a distinct value here, so a value in the wrong column cannot go unseen.
    the_job = job(logprobs=True)
    the_job.key = "k" * 64
    reply = JudgeReply("Score: 0.9 because", Usage(50, 64, reasoning=7, cached_read=11, cache_write=13), "length", logprobs=(("9", (("9", -0.5),)),))
    live = verdict.from_reply(the_job, reply, attempts=3, latency_ms=5.0)
    row = verdict.to_cached(the_job, live, reply.text, reply.logprobs, attempts=3, tier="batch", base_url="http://endpoint/v1")
    assert row.as_dict() == {
        "key": "k" * 64,
        "judge_model": "m",
        "base_url": "http://endpoint/v1",
        "rubric": "n",
        "rubric_version": "1",
        "raw_output": "Score: 0.9 because",
        "prompt_tokens": 50,
        "completion_tokens": 64,
        "latency_ms": 5.0,
        "cost_usd": live.cost_usd,
        "attempts": 3,
        "status": "unscored",
        "score": None,
        "created_at": None,
        "tier": "batch",
        "logprobs": '[["9", [["9", -0.5]]]]',
        "reasoning_tokens": 7,
        "cached_tokens": 11,
        "cache_write_tokens": 13,
        "truncated": True,
    }
    assert live.cost_usd is not None and live.cost_usd > 0
    assert verdict.cache_row(the_job, live, reply.text, reply.logprobs, attempts=3, tier="batch", base_url="http://endpoint/v1") == tuple(
        row.as_dict().values()
    )
    assert verdict.to_cached(the_job, live, reply.text, None, attempts=1).base_url == "http://127.0.0.1:1/v1"  # the judge's own


@pytest.mark.parametrize(
    ("rubric", "fields", "reply"),
    [
        (NUMERIC, {}, JudgeReply('{"score": 1.7}', Usage(20, 3, cached_read=10, cache_write=4), "stop")),  # clamped
        (LABELS, {}, JudgeReply('{"label": "no"}', Usage(20, 3), "stop")),
        (NUMERIC, {}, JudgeReply("no number here", Usage(20, 3), "stop")),
        (LIKERT, {"logprobs": True}, JudgeReply("4", Usage(20, 1), "stop", logprobs=(("4", (("4", math.log(0.6)), ("5", math.log(0.4)))),))),
    ],
)
def test_a_cached_reply_replays_as_the_call_read_it(rubric: str, fields: dict[str, object], reply: JudgeReply) -> None:
    the_job = job(rubric, **fields)
    live = verdict.from_reply(the_job, reply, attempts=1, latency_ms=3.0)
    replayed = verdict.from_cache(the_job, verdict.to_cached(the_job, live, reply.text, reply.logprobs, attempts=1))
    assert replayed.cached and observable(replayed) == observable(live)
    if fields.get("logprobs"):  # G-Eval: 4 * 0.6 + 5 * 0.4, from the stored logprobs
        assert replayed.score == pytest.approx(4.4) and replayed.score_distribution == pytest.approx({"4": 0.6, "5": 0.4})


def test_a_repeat_is_the_paid_judgment_marked_cached_with_no_attempts() -> None:
    paid_job, repeat_job = job(), job()
    reply = JudgeReply('{"score": 0.5}', Usage(30, 4, cached_read=8, cache_write=2), "stop")
    paid = verdict.from_reply(paid_job, reply, attempts=3, latency_ms=7.0, billed_retries=1)
    copy = verdict.repeat(repeat_job, paid)
    assert (copy.cached, copy.attempts, copy.retries, copy.billed_retries) == (True, 0, 0, 0)
    assert observable(copy) == observable(paid)  # cache_write_tokens too (an older copy dropped them)
    # A repeat of a key served from the cache reads the same as the cache hit itself.
    hit = verdict.from_cache(paid_job, verdict.to_cached(paid_job, paid, reply.text, None, attempts=3))
    assert observable(verdict.repeat(repeat_job, hit)) == observable(hit)
    failed = verdict.from_failure(paid_job, TransientJudgeError("boom", status=500), attempts=2, latency_ms=1.0)
    assert (verdict.repeat(repeat_job, failed).status, verdict.repeat(repeat_job, failed).attempts) == ("failed", 0)


def test_a_failure_counts_its_retries_and_a_refused_schema_gets_the_hint() -> None:
    plain = verdict.from_failure(job(), FatalJudgeError("HTTP 400: bad", status=400), attempts=1, latency_ms=2.0)
    assert (plain.status, plain.reason, plain.attempts, plain.retries, plain.error) == ("failed", "fatal", 1, 0, "HTTP 400: bad")
    schema = verdict.from_failure(job(structured_output=True), FatalJudgeError("HTTP 400: bad", status=400), attempts=1, latency_ms=2.0)
    assert schema.error == "HTTP 400: bad" + verdict.SCHEMA_HINT
    retried = verdict.from_failure(job(), TransientJudgeError("HTTP 500", status=500), attempts=4, latency_ms=2.0)
    assert (retried.attempts, retried.retries) == (4, 3)


def test_a_choice_of_an_n_request_costs_nothing_of_its_own() -> None:
    leader, member = job(), job()
    paid = verdict.from_reply(leader, JudgeReply('{"score": 0.2}', Usage(40, 12), "stop"), attempts=1, latency_ms=9.0)
    choice = verdict.from_choice(member, paid, '{"score": 0.4}', None)
    assert (choice.score, choice.prompt_tokens, choice.completion_tokens, choice.cost_usd, choice.attempts, choice.latency_ms) == (
        0.4,
        0,
        0,
        0.0,
        0,
        9.0,
    )


def test_the_module_does_no_io() -> None:
    """Pure: it imports nothing that reaches a file, a socket, a clock or an event loop."""
    tree = ast.parse(inspect.getsource(verdict))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"asyncio", "time", "os", "socket", "sqlite3", "aiohttp", "pathlib"}, imported
    # The same inputs give the same judgment, and the reply is left as it was.
    reply = JudgeReply('{"score": 0.3}', Usage(10, 2), "stop")
    the_job = job()
    assert verdict.from_reply(the_job, reply, attempts=1, latency_ms=1.0) == verdict.from_reply(the_job, reply, attempts=1, latency_ms=1.0)
    assert the_job.result is None
