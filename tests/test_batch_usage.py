"""A batch reply is kept whole (issue 23): the usage and logprobs a result line carries are read by
the live judges' readers, stored in the batch ledger (migration 8) and given back at collect; and
a samples judgment sums every part of its samples' usage. The matrix (``tests/test_matrix.py``)
shows the cells these fix; these tests show each piece alone, with numbers worked by hand."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from harness.batch.collected import batch_parts
from harness.batch.wire import read_anthropic_result, read_openai_result
from harness.cache import MIGRATIONS, migrate
from harness.cache.batches import BatchStore, Outcome, sort_results
from harness.config import JudgeConfig
from harness.cost.prices import call_cost, with_batch_prices, with_prices
from harness.judges.anthropic import read_message
from harness.judges.base import JudgeReply, JudgeRequest
from harness.judges.protocol import read_completion
from harness.planning import Job, make_entry
from harness.planning.samples import combine_samples
from harness.rubrics.rubric import parse_rubric
from harness.runner import verdict
from harness.transcripts.models import Transcript
from harness.usage import PROMPT_TOKEN_SLACK, Budget, Usage, checked_usage, usage_within

KEY = "a" * 64
LOGPROBS = (('{"', (('{"', -0.01),)), ("4", (("4", -0.2), ("3", -1.8), ("5", -3.1))), ("}", (("}", 0.0),)))
#: An OpenAI chat completion as a gpt-5 model answers it: reasoning tokens, a prompt-cache read, logprobs.
COMPLETION = {
    "choices": [
        {
            "message": {"role": "assistant", "content": '{"score": 4}'},
            "finish_reason": "stop",
            "logprobs": {
                "content": [
                    {"token": token, "logprob": alts[0][1], "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alts]}
                    for token, alts in LOGPROBS
                ]
            },
        }
    ],
    "usage": {
        "prompt_tokens": 120,
        "completion_tokens": 19,
        "completion_tokens_details": {"reasoning_tokens": 7},
        "prompt_tokens_details": {"cached_tokens": 64},
    },
}
#: An Anthropic message with a prompt-cache write and read: the prompt is 10 + 50 + 20 tokens.
MESSAGE = {
    "content": [{"type": "text", "text": '{"score": 2}'}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 20},
}


def test_a_batch_result_line_is_read_by_the_live_readers_and_keeps_the_whole_usage_and_logprobs() -> None:
    line = {"id": "r1", "custom_id": KEY, "response": {"status_code": 200, "request_id": "q", "body": COMPLETION}, "error": None}
    got = read_openai_result(line, "out.jsonl:1")
    live = read_completion(COMPLETION, "live")
    assert got.usage == live.usage == Usage(120, 19, reasoning=7, cached_read=64)
    assert got.logprobs == live.logprobs == LOGPROBS
    assert (got.reply, got.finish_reason, got.error) == ('{"score": 4}', "stop", None)

    got = read_anthropic_result({"custom_id": KEY, "result": {"type": "succeeded", "message": MESSAGE}}, "results:1")
    assert got.usage == read_message(MESSAGE, "live").usage == Usage(80, 5, cached_read=20, cache_write=50)
    assert got.logprobs is None


def test_the_ledger_keeps_a_results_usage_and_logprobs_and_collect_gives_them_back(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    others = ["b" * 64, "c" * 64]
    with BatchStore(path) as store:
        claimed = store.claim(api="openai", endpoint="http://127.0.0.1:1/v1", api_key_env="K", judge="j", model="m", keys=[KEY, *others])
        assert claimed is not None
        stored = [
            Outcome(KEY, '{"score": 4}', Usage(120, 19, 7, 64, None), "stop", logprobs=LOGPROBS),
            Outcome(others[0], '{"score": 2}', Usage(80, 5, None, 20, 50), "end_turn"),
            Outcome(others[1], '{"score": 3}', None, "stop"),  # a result without usage: unknown, not 0
        ]
        results, counts = sort_results([KEY, *others], stored, "none")
        assert counts == {"succeeded": 3, "failed": 0, "unknown": 0, "duplicate": 0}
        store.settle([(claimed[0], results)])  # no judgments: the ledger keeps every reply for a later collect
        assert store.counts(claimed[0]) == {"succeeded": 3}
    with BatchStore(path) as store:
        assert {o.key: o for o in store.outcomes()} == {o.key: o for o in stored}
        given = {o.key: o for o in store.outcomes()}
    request = JudgeRequest(messages=({"role": "user", "content": "x"},), max_tokens=64, temperature=0.0, key=KEY)
    # As a collect reads it: the text, the usage held to the budget, not cut; its logprobs as kept.
    assert batch_parts(given[KEY], request) == ('{"score": 4}', Usage(120, 19, 7, 64, None), False)
    assert (given[KEY].finish_reason, given[KEY].logprobs) == ("stop", LOGPROBS)
    # The budget of the request as submitted: one choice of 64 tokens (+16 slack) cannot have made 81.
    assert batch_parts(Outcome(KEY, "x", Usage(120, 81), "stop"), request)[1] is None
    assert batch_parts(Outcome(KEY, "x", Usage(120, 80), "stop"), request)[1] == Usage(120, 80)


def test_migration_8_upgrades_a_ledger_in_place_and_an_older_result_keeps_its_two_counts(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, MIGRATIONS[:7])
    db.execute(
        "INSERT INTO batches (api, endpoint, api_key_env, judge, model, status, requests, created_at, updated_at) "
        "VALUES ('openai', 'e', 'K', 'j', 'm', 'completed', 1, 'now', 'now')"
    )
    db.execute(
        "INSERT INTO batch_requests (key, batch, state, reply, prompt_tokens, completion_tokens, finish_reason) VALUES (?, 1, 'succeeded', 'r', 30, 4, 'stop')",
        (KEY,),
    )
    db.close()
    with BatchStore(path) as store:  # opening migrates
        assert list(store.outcomes()) == [Outcome(KEY, "r", Usage(30, 4), "stop")]
    db = sqlite3.connect(path)
    assert db.execute("SELECT max(version), count(*) FROM _migrations").fetchone() == (len(MIGRATIONS), len(MIGRATIONS))
    columns = {row[1] for row in db.execute("PRAGMA table_info(batch_requests)")}
    assert {"reasoning_tokens", "cached_tokens", "cache_write_tokens", "logprobs"} <= columns
    db.close()


# -- samples: every part of the usage is summed ----------------------------------------------------

RUBRIC = '+++\nname = "g"\nversion = "1"\nscale = [1, 5]\ninputs = ["response"]\nmax_tokens = 16\n+++\n{{response}}\n'


def sample_jobs(**fields: object) -> list[Job]:
    judge = JudgeConfig(name="j", model="claude-haiku-4-5", provider="anthropic", samples=3, seed=1, **fields)  # type: ignore[arg-type]
    judge = with_prices(judge)
    entry = make_entry(Transcript(id="t", response="r").resolved(), [parse_rubric(RUBRIC, "g.md")], [judge])
    assert len(entry.jobs) == 3
    return entry.jobs


def test_a_samples_judgment_sums_reasoning_cache_reads_and_writes_and_its_cost_is_its_tokens() -> None:
    jobs = sample_jobs()
    usages = [Usage(80, 5, 2, 20, 50), Usage(70, 6, 3, 0, 60), Usage(60, 4, 0, 10, 0)]
    for job, usage, score in zip(jobs, usages, (2, 3, 4), strict=True):
        job.result = verdict.from_reply(job, JudgeReply(f'{{"score": {score}}}', usage, "end_turn"), attempts=1, latency_ms=1.0)
    got = combine_samples(jobs)
    tokens = (got.prompt_tokens, got.completion_tokens, got.reasoning_tokens, got.cached_tokens, got.cache_write_tokens)
    assert tokens == (210, 15, 5, 30, 110)
    # claude-haiku-4-5 per 1M: input 1.00, output 5.00, cache read 0.10, cache write 1.25.
    assert got.cost_usd == pytest.approx(((210 - 30 - 110) * 1.00 + 30 * 0.10 + 110 * 1.25 + 15 * 5.00) / 1e6, rel=1e-12)


def test_one_unknown_part_makes_the_samples_total_unknown_and_a_failed_sample_adds_nothing() -> None:
    jobs = sample_jobs()
    jobs[0].result = verdict.from_reply(jobs[0], JudgeReply('{"score": 2}', Usage(80, 5, None, 20, 50), "end_turn"), attempts=1, latency_ms=1.0)
    jobs[1].result = verdict.from_reply(jobs[1], JudgeReply('{"score": 3}', Usage(70, 6, 3, 0, 60), "end_turn"), attempts=1, latency_ms=1.0)
    jobs[2].result = jobs[2].judgment("failed", reason="http_error", error="HTTP 500")
    got = combine_samples(jobs)
    assert (got.prompt_tokens, got.reasoning_tokens, got.cached_tokens, got.cache_write_tokens) == (150, None, 20, 110)


def test_a_choice_of_an_n_request_has_zero_of_each_part_its_request_reported_and_unknown_of_the_rest() -> None:
    leader, member = sample_jobs()[:2]
    paid = verdict.from_reply(leader, JudgeReply('{"score": 2}', Usage(40, 12, 7, 0, None), "stop"), attempts=1, latency_ms=9.0)
    choice = verdict.from_choice(member, paid, '{"score": 4}', None)
    assert (choice.reasoning_tokens, choice.cached_tokens, choice.cache_write_tokens) == (0, 0, None)


# -- batch prices: the discount covers prompt-cache reads and writes -------------------------------


def test_batch_prices_discount_cache_reads_and_writes_so_a_batch_call_costs_half_the_live_one() -> None:
    judge = JudgeConfig(name="j", model="claude-haiku-4-5", provider="anthropic")
    live, batch = with_prices(judge), with_batch_prices(judge)
    assert (batch.input_price_per_1m, batch.output_price_per_1m) == (0.50, 2.50)
    assert (batch.cached_input_price_per_1m, batch.cache_write_price_per_1m) == pytest.approx((0.05, 0.625))
    # 80 prompt tokens (10 fresh, 20 read, 50 written) and 5 out: 10 + 2 + 62.5 + 25 = 99.5 per 1M, live.
    assert call_cost(live, 80, 5, 20, 50) == pytest.approx(99.5e-6, rel=1e-12)
    assert call_cost(batch, 80, 5, 20, 50) == pytest.approx(49.75e-6, rel=1e-12)


def test_usage_within_decides_as_the_whole_budget_check_does() -> None:
    # The shortcut counts no prompt bytes under the slack every budget allows: it must decide every
    # usage exactly as checked_usage against the request's whole budget, at and around each bound.
    rng = random.Random(7)
    for _ in range(3000):
        content = "é" * rng.randint(0, 3) + "x" * rng.choice([0, 10, PROMPT_TOKEN_SLACK // 2, PROMPT_TOKEN_SLACK + 5])
        request = JudgeRequest(
            messages=({"role": "user", "content": content},), max_tokens=rng.choice([-1, 0, 8, 64]), temperature=0.0, key=KEY, n=rng.choice([1, 3])
        )
        budget = Budget.of(request)
        prompt = rng.choice([-1, 0, 5, PROMPT_TOKEN_SLACK, PROMPT_TOKEN_SLACK + 1, budget.prompt_tokens, budget.prompt_tokens + 1, 2**53, True])
        completion = rng.choice([0, 3, budget.completion_tokens, budget.completion_tokens + 1, -2])
        reasoning = rng.choice([None, 0, completion, completion + 1])
        usage = rng.choice([None, Usage(prompt, completion, reasoning, rng.choice([None, 2, prompt]), rng.choice([None, 1]))])
        assert usage_within(usage, request) == checked_usage(usage, budget), (usage, request.max_tokens, request.n, len(content))
