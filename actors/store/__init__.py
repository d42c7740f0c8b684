"""Durable sessions: ``open_store(memory_dir, url)`` opens the backend a URL names
(docs/storage.md); :class:`SqliteStore` (the default, also ``SessionStore`` for scripts) and
:class:`PostgresStore` are the two backends, and :class:`Store` is the type to annotate with.

The store is synchronous (usable from scripts); the async actors call it through a worker
thread. Export and import are functions over its API (:func:`export_session`,
:func:`import_paths`). The PostgreSQL backend is imported only when asked for (psycopg is an
optional dependency).

Layout::

    _store.py        Store: the writable face, built up from the concerns below
    _reads.py        SessionReader: the read-only face (what everyone but a writer gets)
    _writes.py       create, checkpoint/append, write-ahead marks, replace, recover, metadata
    _branching.py    fork, rewind
    _importing.py    whole records in; the older layout's files noted
    _shared.py       the state both faces of one store share; the memory directory
    _results.py      what reads answer: listings, search hits, info, rewinds (typed)
    _appends.py      the one write path of a checkpoint: what an append writes
    _indexer.py      the search index, caught up behind the checkpoints
    _parts.py        what a backend supplies: Transactions, Lease, SearchIndex
    _extend.py       the extend rule and the context cache behind it
    _rows.py         the shared SQL of the tables (row functions; no SQL elsewhere but
    _branches.py     ... the cuts and copies of forks and rewinds,
    _write_ahead.py  ... planned/started tool calls, and what recovery answers,
    _search.py       ... and search: terms, ranking, snippets, running a query)
    _text.py         what the search index holds
    _records.py      the portable record: fields, defaults, markdown
    _hostile.py      records from files checked before anything is written
    _portability.py  export, import, the older JSON layout
    _factory.py      open_store
    sqlite/          SqliteStore: database, flock lease, FTS5 index, schema, doctor
    postgres/        PostgresStore: connections, advisory-lock lease, pg_trgm index, schema
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.store._factory import is_sqlite_url, open_store
from actors.store._hostile import check_values, context_problem, decode_record
from actors.store._parts import Conn
from actors.store._portability import export_session, import_paths
from actors.store._reads import SessionReader
from actors.store._records import (
    FORMAT_VERSION,
    ExportedRecord,
    SessionRecord,
    timestamp,
    to_markdown,
)
from actors.store._results import (
    Compaction,
    FoundSession,
    ImportResult,
    ListedSession,
    Rewound,
    SessionInfo,
    UserMessage,
)
from actors.store._store import Store
from actors.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from actors.store._atif import to_atif
    from actors.store.postgres import PostgresStore

SessionStore = SqliteStore  # the name scripts know

__all__ = [
    "FORMAT_VERSION",
    "Compaction",
    "Conn",
    "ExportedRecord",
    "FoundSession",
    "ImportResult",
    "ListedSession",
    "PostgresStore",
    "Rewound",
    "SessionInfo",
    "SessionReader",
    "SessionRecord",
    "SessionStore",
    "SqliteStore",
    "Store",
    "UserMessage",
    "check_values",
    "context_problem",
    "decode_record",
    "export_session",
    "import_paths",
    "is_sqlite_url",
    "open_store",
    "timestamp",
    "to_atif",
    "to_markdown",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # needs psycopg: imported on first use
        from actors.store.postgres import PostgresStore

        return PostgresStore
    if name == "to_atif":  # the ATIF export, imported only when asked for
        from actors.store._atif import to_atif

        return to_atif
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
