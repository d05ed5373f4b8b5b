"""The judgment cache: key derivation, numbered migrations and the aiosqlite store."""

from .keys import cache_key
from .migrations import MIGRATIONS, migrate
from .store import CachedJudgment, JudgmentCache

__all__ = ["MIGRATIONS", "CachedJudgment", "JudgmentCache", "cache_key", "migrate"]
