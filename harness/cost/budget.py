"""``--max-cost``: a spending cap enforced while the run goes.

Before a call is sent, its worst case (exact prompt tokens at the input price plus the request's
``max_tokens`` at the output price) is reserved. A call goes only if what has been spent plus
every reservation still in flight stays within the cap; once one would cross it, the budget is
exhausted and nothing more is dispatched. When a call ends its reservation is replaced by what it
actually cost, billed retries included (nothing for a failed call; the reservation itself when
usage is not reported).
"""

from __future__ import annotations

from ..config import JudgeConfig
from ..judges.base import JudgeRequest
from .prices import call_cost
from .tokens import TokenCounter


class Budget:
    def __init__(self, limit_usd: float, judges: list[JudgeConfig]) -> None:
        self.limit = limit_usd
        self.spent = 0.0
        self.reserved = 0.0
        self.exhausted = False
        self._counters = {j.name: TokenCounter.for_model(j.model, j.tokenizer) for j in judges}

    def worst_case(self, judge: JudgeConfig, request: JudgeRequest) -> float:
        prompt = self._counters[judge.name].count_messages(request.messages)
        cost = call_cost(judge, prompt, request.max_tokens * request.n)  # n = k choices: k replies at most
        assert cost is not None, "a budget is only made for priced judges"
        return cost

    def reserve(self, amount: float) -> bool:
        """Reserve ``amount``; False (and the budget exhausted from then on) if it would cross the cap."""
        if self.exhausted or self.spent + self.reserved + amount > self.limit:
            self.exhausted = True
            return False
        self.reserved += amount
        return True

    def settle(self, reserved: float, actual: float | None) -> None:
        self.reserved -= reserved
        self.spent += reserved if actual is None else actual
