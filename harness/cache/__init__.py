"""The judgment cache: key derivation, numbered migrations, the aiosqlite store and a read-only reader.

Every SQL statement on the cache file lives in this package."""

from .keys import cache_key
from .migrations import MIGRATIONS, migrate
from .store import CachedJudgment, CacheReader, JudgmentCache

__all__ = ["MIGRATIONS", "CacheReader", "CachedJudgment", "JudgmentCache", "cache_key", "migrate"]
