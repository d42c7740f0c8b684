"""Durable sessions: ``from actors.store import SessionStore`` (SQLite, the default) or
``open_store(memory_dir, url)`` for the backend a URL names (docs/storage.md).

The store is synchronous (usable from scripts); the async actors call it through a worker
thread. Annotate with :class:`Store`, the base both backends share. The PostgreSQL backend is
imported only when asked for (psycopg is an optional dependency).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.store._base import Store
from actors.store._factory import open_store
from actors.store._records import (
    FORMAT_VERSION,
    STATE_DEFAULTS,
    ImportResult,
    SessionInfo,
    timestamp,
    to_markdown,
)
from actors.store._sqlite import SessionStore

if TYPE_CHECKING:
    from actors.store._postgres import PostgresSessionStore

__all__ = [
    "FORMAT_VERSION",
    "STATE_DEFAULTS",
    "ImportResult",
    "PostgresSessionStore",
    "SessionInfo",
    "SessionStore",
    "Store",
    "open_store",
    "timestamp",
    "to_markdown",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresSessionStore":  # needs psycopg: imported on first use
        from actors.store._postgres import PostgresSessionStore

        return PostgresSessionStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
