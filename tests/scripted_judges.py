"""Judges whose true behaviour is known, served by a real :class:`tests.judge_server.JudgeServer`.

Every transcript carries its true quality in its text (``quality=0.62``: a number in 0..1), and
every judge model answers by a rule, so a test knows what a measurement must find:

- ``honest``: the true quality, on the rubric's scale;
- ``noisy``: the true quality plus Gaussian noise of SD ``NOISE_SD`` (in units of the scale's
  width), drawn per request from the prompt, the request's seed and the choice index: repeated
  samples differ, a repeated request (a retry) does not;
- ``verbose``: the true quality plus ``VERBOSITY_BONUS`` when the response is longer than
  ``LONG_RESPONSE`` characters (it rewards padding);
- ``primacy``: the true quality plus ``PRIMACY_BONUS`` when the first context is the one marked
  ``GOLD`` (it rewards the order of the evidence); in pairwise prompts it answers ``1`` unless
  answer 2 is better by more than ``PRIMACY_MARGIN``;
- ``nologprobs``: as ``honest`` but ignores ``logprobs`` and ``n``, like an endpoint without them.

Pairwise prompts (answers in the context blocks) are answered by the qualities of the two answers:
``honest`` names the better one, ``tie`` when equal. On a whole-number scale with ``logprobs``
asked, ``honest`` replies ``{"score": N}`` tokenised as OpenAI does, with ``top_logprobs`` at the
score token from the known distribution ``score_distribution(true value)``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.judge_server import JudgeServer, prompt_text
from tests.prompt_blocks import judged_contexts, judged_input

NOISE_SD = 0.1
VERBOSITY_BONUS = 0.25
LONG_RESPONSE = 400
PRIMACY_BONUS = 0.2
PRIMACY_MARGIN = 0.5
LOGPROB_SD = 0.8

_QUALITY = re.compile(r"quality=([0-9.]+)")
_SCALE = re.compile(r"SCALE (\d+(?:\.\d+)?) TO (\d+(?:\.\d+)?)")


def score_distribution(value: float, lo: int, hi: int) -> dict[int, float]:
    """The honest logprob judge's probabilities over the whole numbers lo..hi: a discretised
    Gaussian of SD ``LOGPROB_SD`` around the true value."""
    weights = {s: math.exp(-((s - value) ** 2) / (2 * LOGPROB_SD**2)) for s in range(lo, hi + 1)}
    total = sum(weights.values())
    return {s: w / total for s, w in weights.items()}


def _tokens(text: str) -> list[str]:
    return re.findall(r'\{"|score|":|\s+|\d+|\}|[^\s\d]+', text)


def _logprob_content(tokens: list[str], at: int, alternatives: dict[str, float]) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs.content``: the chosen token with its top alternatives at position ``at``
    (the score), a near-certain token elsewhere."""
    content = []
    for index, token in enumerate(tokens):
        if index == at:
            top = sorted(alternatives.items(), key=lambda kv: -kv[1])
            items = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in top]
            content.append({"token": token, "logprob": math.log(alternatives[token]), "bytes": list(token.encode()), "top_logprobs": items})
        else:
            lp = -1e-4
            content.append(
                {
                    "token": token,
                    "logprob": lp,
                    "bytes": list(token.encode()),
                    "top_logprobs": [{"token": token, "logprob": lp, "bytes": list(token.encode())}],
                }
            )
    return content


class ScriptedJudgeServer(JudgeServer):
    """A judge server whose reply is decided by the judge model's rule (module docstring)."""

    def __init__(self) -> None:
        super().__init__(choices=self._choices)

    def _choices(self, body: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
        model = body["model"]
        n = 1 if model == "nologprobs" else int(body.get("n") or 1)
        return [self._one(body, model, index) for index in range(n)]

    def _one(self, body: dict[str, Any], model: str, index: int) -> tuple[str, list[dict[str, Any]] | None]:
        text = prompt_text(body["messages"])
        user = body["messages"][-1]["content"]
        contexts = judged_contexts(user)  # in either layout of a rubric (tests/prompt_blocks.py)
        if "Two assistants answered" in text:
            return self._pairwise(model, contexts), None
        match = _SCALE.search(text)  # the instructions: the system message in the data layout
        lo, hi = (float(match.group(1)), float(match.group(2))) if match else (0.0, 1.0)
        response = judged_input(user, "response")
        source = response if response is not None else user
        quality = float(_QUALITY.search(source).group(1))  # type: ignore[union-attr]
        unit = quality
        if model == "noisy":
            seed = f"{hashlib.sha256(text.encode()).hexdigest()}:{body.get('seed')}:{index}"
            unit += random.Random(seed).gauss(0.0, NOISE_SD)
        elif model == "verbose" and response and len(response) > LONG_RESPONSE:
            unit += VERBOSITY_BONUS
        elif model == "primacy" and contexts.get("1", "").startswith("GOLD"):
            unit += PRIMACY_BONUS
        value = lo + min(1.0, max(0.0, unit)) * (hi - lo)
        whole = float(lo).is_integer() and float(hi).is_integer() and hi - lo >= 2
        if whole and body.get("logprobs") and model != "nologprobs":
            dist = score_distribution(value, int(lo), int(hi))
            best = max(dist, key=lambda s: dist[s])
            content = '{"score": ' + str(best) + "}"
            tokens = _tokens(content)
            at = tokens.index(str(best))
            alternatives = {str(s): p * 0.98 for s, p in dist.items()} | {"N/A": 0.02}
            alternatives = {t: p for t, p in alternatives.items() if p > 1e-9}
            return content, _logprob_content(tokens, at, alternatives)
        if whole:
            return '{"score": ' + str(round(value)) + "}", None
        return json.dumps({"score": round(value, 4)}), None

    @staticmethod
    def _pairwise(model: str, contexts: dict[str, str]) -> str:
        first = float(_QUALITY.search(contexts["1"]).group(1))  # type: ignore[union-attr]
        second = float(_QUALITY.search(contexts["2"]).group(1))  # type: ignore[union-attr]
        if model == "primacy":
            return "2" if second - first > PRIMACY_MARGIN else "1"
        if first == second:
            return "tie"
        return "1" if first > second else "2"


@contextmanager
def serving() -> Iterator[ScriptedJudgeServer]:
    """A started :class:`ScriptedJudgeServer`, stopped on exit (a module fixture's body)."""
    srv = ScriptedJudgeServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def likert_prompts(tmp: Path) -> Path:
    """A prompts folder with one whole-number rubric, ``likert`` (1..5), that logprob judges can score."""
    folder = tmp / "likert_prompts"
    folder.mkdir(exist_ok=True)
    (folder / "likert.md").write_text(
        '+++\nname = "likert"\nversion = "1"\nscale = [1, 5]\ninputs = ["query", "response"]\nmax_tokens = 16\n+++\n'
        'Rate the answer on a SCALE 1 TO 5.\n{{query}}\n{{response}}\nReply {"score": N}.\n',
        encoding="utf-8",
    )
    return folder
