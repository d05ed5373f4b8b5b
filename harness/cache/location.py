"""Where a cache lives: a SQLite file path (the default) or a ``postgresql://`` URL.

``open_store`` and ``open_reader`` are the only places that choose a store; everything else holds
a :class:`~harness.cache.base.CacheStore` and does not know which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from ..errors import ConfigError
from .base import DEFAULT_LEASE_S, CacheStore

#: A cache location: a file path, or a PostgreSQL URL kept as text.
CacheLocation = Path | str

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.lower().startswith(_SCHEMES)


def parse_location(value: str | Path, *, base: Path | None = None) -> CacheLocation:
    """A path (relative ones resolved against ``base``) or a checked PostgreSQL URL.

    A URL is checked for form only (scheme, host or socket, database name); whether a server
    answers there is found out when the cache opens."""
    text = str(value)
    if is_postgres_url(text):
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError on a non-numeric port
        except ValueError as exc:
            raise ConfigError(f"cache {_shown(text)}: not a valid PostgreSQL URL ({exc})") from None
        if not parts.path.strip("/") and "dbname=" not in parts.query:
            raise ConfigError(f"cache {_shown(text)}: the URL names no database (postgresql://user@host:port/DATABASE)")
        return text
    if "://" in text:
        raise ConfigError(f"cache {text!r}: unknown scheme; give a file path or a postgresql:// URL")
    path = Path(text)
    if base is not None and not path.is_absolute():
        path = base / path
    return path


def _shown(url: str) -> str:
    from .postgres import redact

    return repr(redact(url))


def describe(location: CacheLocation) -> str:
    """The location for messages and summary.json (a URL without its password)."""
    if is_postgres_url(location):
        from .postgres import redact

        return redact(str(location))
    return str(location)


def open_store(location: CacheLocation, *, read_only: bool = False, lease_s: float = DEFAULT_LEASE_S) -> CacheStore:
    """The store for ``location``, not yet opened (``await store.open()`` or ``async with``)."""
    if is_postgres_url(location):
        from .postgres import PostgresCache

        return PostgresCache(str(location), read_only=read_only, lease_s=lease_s)
    from .store import JudgmentCache

    return JudgmentCache(Path(location), read_only=read_only, lease_s=lease_s)


class CacheQuestions(Protocol):
    """What the estimate asks of a cache, without writing it."""

    def completion_means(self) -> dict[tuple[str, str, str], float]: ...
    def latency_means_s(self) -> dict[tuple[str, str], float]: ...
    def present(self, keys: list[str]) -> set[str]: ...
    def close(self) -> None: ...


def open_reader(location: CacheLocation | None) -> CacheQuestions | None:
    """A read-only reader of the cache at ``location``, or None when nothing is cached there."""
    if location is None:
        return None
    if is_postgres_url(location):
        from .postgres import PostgresReader

        return PostgresReader.open(str(location))
    from .store import CacheReader

    return CacheReader.open(Path(location))
