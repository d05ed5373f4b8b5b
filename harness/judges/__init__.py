"""Judges: the Judge interface, its providers (one profile each, ``profiles/``: OpenAI-compatible
HTTP, Anthropic, embedded llama.cpp), retries and rate limiting."""

from .base import Judge, JudgeReply, JudgeRequest
from .ratelimit import RateLimiter
from .registry import PROFILES, make_judge
from .retry import Attempts, call_with_retries

__all__ = ["PROFILES", "Attempts", "Judge", "JudgeReply", "JudgeRequest", "RateLimiter", "call_with_retries", "make_judge"]
