"""truncate = "middle": the cut prompt fits the window and keeps about as much whatever the input size,
and a huge field is cut by characters before it is tokenized."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from harness.cost.tokens import TokenCounter
from harness.planning.fit import CUT_MARK, MAX_TOKEN_CHARS, fit
from harness.rubrics.rubric import load_rubrics
from harness.transcripts.models import Transcript

WINDOW, COMPLETION = 8192, 256
ROOM = WINDOW - COMPLETION
WORDS = ["alpha", "beta", "gamma", "delta", "Paris", "rain", "14", "C,", "umbrella", "\n", "value=3.5;", "(x)"]


class CountingCounter:
    """The judge's real counter, recording the longest text it was asked to tokenize."""

    def __init__(self) -> None:
        self.real = TokenCounter.for_model("gpt-4o-mini")
        self.longest = 0

    def count_text(self, text: str) -> int:
        self.longest = max(self.longest, len(text))
        return self.real.count_text(text)

    def count_messages(self, messages: Sequence[dict[str, str]]) -> int:
        self.longest = max(self.longest, sum(len(m["content"]) for m in messages))
        return self.real.count_messages(messages)


def _text(size: int, seed: int) -> str:
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(size // 4)]
    return ("HEAD " + " ".join(words))[: size - 5] + " TAIL"


@pytest.mark.timeout(120)
def test_the_cut_prompt_fits_and_does_not_shrink_as_the_input_grows() -> None:
    rubric = load_rubrics()["relevance"]
    assert "response" in rubric.inputs
    kept = {}
    for size in (100_000, 1_000_000, 5_000_000):
        transcript = Transcript(id="t", query="Should I take an umbrella?", response=_text(size, size)).resolved()
        counter = CountingCounter()
        fitted = fit(
            tuple(rubric.render(transcript)), transcript, rubric, window=WINDOW, completion_tokens=COMPLETION, counter=counter, truncate=True
        )  # type: ignore[arg-type]
        assert fitted.messages is not None and fitted.truncated
        tokens = counter.real.count_messages(fitted.messages)  # counted again, apart from fit
        assert tokens == fitted.prompt_tokens and tokens <= ROOM
        assert tokens >= 0.9 * ROOM, (size, tokens)  # close to the window, not a few hundred tokens
        user = fitted.messages[-1]["content"]
        assert "HEAD" in user and "TAIL" in user and "Should I take an umbrella?" in user
        assert CUT_MARK.split("{n}")[1] in user
        kept[size] = sum(len(m["content"]) for m in fitted.messages)
        # never the whole input tokenized: at most what the room could hold, 128 characters a token
        assert counter.longest <= ROOM * MAX_TOKEN_CHARS + 10_000, (size, counter.longest)
    smallest, largest = min(kept.values()), max(kept.values())
    assert largest <= 1.1 * smallest, kept  # about the same prompt, whatever the input size
    assert kept[5_000_000] >= 0.95 * kept[100_000], kept


def test_a_prompt_that_fits_is_left_alone_and_without_truncate_is_refused() -> None:
    rubric = load_rubrics()["relevance"]
    transcript = Transcript(id="t", query="q?", response=_text(200_000, 1)).resolved()
    messages = tuple(rubric.render(transcript))
    counter = TokenCounter.for_model("gpt-4o-mini")
    refused = fit(messages, transcript, rubric, window=WINDOW, completion_tokens=COMPLETION, counter=counter, truncate=False)
    assert refused.messages is None and refused.prompt_tokens == counter.count_messages(messages) > ROOM
    short = Transcript(id="s", query="q?", response="a short answer").resolved()
    kept = fit(tuple(rubric.render(short)), short, rubric, window=WINDOW, completion_tokens=COMPLETION, counter=counter, truncate=True)
    assert kept.messages == tuple(rubric.render(short)) and not kept.truncated
