"""Judges: the Judge interface, its providers (OpenAI-compatible HTTP, embedded llama.cpp), retries
and rate limiting."""

from .base import Judge, JudgeReply, JudgeRequest
from .ratelimit import RateLimiter
from .registry import PROVIDERS, make_judge
from .retry import Attempts, call_with_retries

__all__ = ["PROVIDERS", "Attempts", "Judge", "JudgeReply", "JudgeRequest", "RateLimiter", "call_with_retries", "make_judge"]
