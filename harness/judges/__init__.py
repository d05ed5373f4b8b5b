"""Judges: the Judge interface, the judges of each protocol (OpenAI-compatible HTTP, Anthropic,
embedded llama.cpp; which provider uses which is its profile's, ``harness/providers/``), retries
and rate limiting."""

from .base import Judge, JudgeReply, JudgeRequest
from .ratelimit import RateLimiter
from .registry import make_judge
from .retry import Attempts, call_with_retries

__all__ = ["Attempts", "Judge", "JudgeReply", "JudgeRequest", "RateLimiter", "call_with_retries", "make_judge"]
