"""Durable sessions: ``open_store(memory_dir, url)`` opens the backend a URL names
(docs/storage.md); :class:`SqliteStore` (the default, also ``SessionStore`` for scripts) and
:class:`PostgresStore` are the two backends, and :class:`Store` is the type to annotate with.

The store is synchronous (usable from scripts); the async actors call it through a worker
thread. Export and import are functions over its API (:func:`export_session`,
:func:`import_paths`). The PostgreSQL backend is imported only when asked for (psycopg is an
optional dependency).

Layout::

    _store.py        Store: the public API, each method one transaction under the lease
    _parts.py        what a backend supplies: Transactions, Lease, SearchIndex
    _extend.py       the extend rule and the context cache behind it
    _rows.py         the shared SQL of the tables
    _write_ahead.py  planned/started tool calls, and what recovery answers
    _search.py       search: terms, ranking, snippets, running a query
    _text.py         what the search index holds
    _records.py      the portable record: fields, defaults, markdown
    _portability.py  export, import, the older JSON layout
    _factory.py      open_store
    sqlite/          SqliteStore: database, flock lease, FTS5 index, schema, doctor
    postgres/        PostgresStore: connections, advisory-lock lease, pg_trgm index, schema
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.store._branches import UserMessage
from actors.store._factory import is_sqlite_url, open_store
from actors.store._portability import export_session, import_paths
from actors.store._records import (
    FORMAT_VERSION,
    ImportResult,
    Rewound,
    SessionInfo,
    timestamp,
    to_markdown,
)
from actors.store._store import Store
from actors.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from actors.store.postgres import PostgresStore

SessionStore = SqliteStore  # the name scripts know

__all__ = [
    "FORMAT_VERSION",
    "ImportResult",
    "PostgresStore",
    "Rewound",
    "SessionInfo",
    "SessionStore",
    "SqliteStore",
    "Store",
    "UserMessage",
    "export_session",
    "import_paths",
    "is_sqlite_url",
    "open_store",
    "timestamp",
    "to_markdown",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # needs psycopg: imported on first use
        from actors.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
