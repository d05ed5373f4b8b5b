"""The judgment cache: key derivation, numbered migrations, one store interface with two stores
(SQLite, the embedded default; PostgreSQL, shared by a team), claims on keys in flight, and
read-only readers.

Every SQL statement on a cache lives in this package.
"""

from .base import DEFAULT_LEASE_S, CachedJudgment, CachedReply, CacheStats, CacheStore
from .keys import cache_key
from .location import CacheLocation, describe, is_postgres_url, open_reader, open_store, parse_location
from .migrations import MIGRATIONS, migrate
from .store import CacheReader, JudgmentCache, SqliteCache

__all__ = [
    "DEFAULT_LEASE_S",
    "MIGRATIONS",
    "CacheLocation",
    "CacheReader",
    "CacheStats",
    "CacheStore",
    "CachedJudgment",
    "CachedReply",
    "JudgmentCache",
    "SqliteCache",
    "cache_key",
    "describe",
    "is_postgres_url",
    "migrate",
    "open_reader",
    "open_store",
    "parse_location",
]
