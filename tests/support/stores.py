"""Opening session stores of either backend in tests, each test in its own database space.

PostgreSQL tests need a server: ``AGENT_HARNESS_TEST_PG=postgresql://…`` (``.ci/run`` starts a
throwaway cluster and sets it; locally ``.ci/postgres start DIR`` prints a URL). Without it they
are skipped, or fail when ``AGENT_HARNESS_TEST_STRICT=1`` (``.ci/run``;
tests/support/strict.py). Every test gets fresh schemas (``CREATE SCHEMA t_…``, dropped
afterwards) and the URL selects one through ``options=-csearch_path=…``, so tests never see each
other's sessions.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from actors.core.config import STORE_ENV
from actors.store import SessionInfo, SessionStore, Store, open_store
from tests.support.strict import unavailable

PG_ENV = "AGENT_HARNESS_TEST_PG"
SKIP_REASON = (
    f"PostgreSQL store tests need {PG_ENV}=postgresql://… (.ci/run starts a server and sets it; "
    "locally: .ci/postgres start DIR)"
)
BACKENDS = ("sqlite", "postgresql")


def pg_server_url() -> str | None:
    """The test server's URL, or None (the PostgreSQL tests are then skipped)."""
    return os.environ.get(PG_ENV) or None


def with_schema(url: str, schema: str) -> str:
    """``url`` with its tables in ``schema`` (a ``search_path`` option)."""
    option = quote(f"-csearch_path={schema}", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


class Schemas:
    """Creates throwaway schemas on the test server and drops them at the end.

    pg_trgm is created once in ``public`` first, so dropping a test schema never drops it.
    """

    def __init__(self, server: str) -> None:
        import psycopg

        self.server = server
        self._conn = psycopg.connect(server, autocommit=True)
        self._conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        self._made: list[str] = []

    def new(self) -> str:
        """The URL of a fresh, empty schema."""
        schema = f"t_{uuid.uuid4().hex[:16]}"
        self._conn.execute(f'CREATE SCHEMA "{schema}"')
        self._made.append(schema)
        return with_schema(self.server, schema)

    def drop_all(self) -> None:
        for schema in self._made:
            self._conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self._made.clear()
        self._conn.close()


class Stores:
    """The stores of one backend a test opens; all closed (and schemas dropped) at the end.

    ``url`` names the test's database: None for SQLite (each memory dir has its own file),
    a fresh schema for PostgreSQL. ``env`` passes it to harness subprocesses.
    """

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._schemas: Schemas | None = None
        self._open: list[Store] = []
        self.url: str | None = None
        if backend == "postgresql":
            server = pg_server_url()
            if server is None:
                unavailable(SKIP_REASON)
            self._schemas = Schemas(server)
            self.url = self._schemas.new()

    @property
    def is_pg(self) -> bool:
        return self.backend == "postgresql"

    @property
    def env(self) -> dict[str, str]:
        """Environment for a harness subprocess using this test's store."""
        return {STORE_ENV: self.url or "sqlite"}

    def open(self, memory_dir: Path, **kwargs: Any) -> Store:
        """A store instance on this test's database (SQLite: ``memory_dir``'s own file)."""
        store = open_store(memory_dir, self.url, **kwargs)
        self._open.append(store)
        return store

    def fresh_url(self) -> str | None:
        """The URL of another, empty database of the same backend (SQLite: None, the memory
        dir decides)."""
        return self._schemas.new() if self._schemas is not None else None

    def open_other(self, memory_dir: Path) -> Store:
        """A store instance on another, empty database of the same backend."""
        store = open_store(memory_dir, self.fresh_url())
        self._open.append(store)
        return store

    def rows(self, store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` (``?`` placeholders) in a read transaction of ``store``."""
        with store.db.read() as conn:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]

    def write(self, store: Store, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run ``sql`` behind the store's back (to damage rows), in one transaction."""
        with store.db.write() as conn:
            conn.execute(sql, params)

    def close(self) -> None:
        for store in self._open:
            with contextlib.suppress(Exception):
                store.close()
        if self._schemas is not None:
            self._schemas.drop_all()


@contextlib.contextmanager
def stores_for(backend: str) -> Iterator[Stores]:
    stores = Stores(backend)
    try:
        yield stores
    finally:
        stores.close()


def wait_until(condition: Callable[[], object], timeout: float = 10) -> None:
    """Poll ``condition`` until it is true (e.g. the server noticed a killed client)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {condition}")
        time.sleep(0.02)


def pending_index(store: Store) -> int:
    """Messages not in the search index yet (SQLite: the rows after the mark; PostgreSQL:
    one mark each)."""
    with store.db.read() as conn:
        if store.db.location.startswith("postgresql"):
            return int(conn.execute("SELECT count(*) FROM index_pending").fetchone()[0])
        return int(conn.execute("SELECT count(*) FROM transcript WHERE mid > "
                                "(SELECT upto FROM index_state)").fetchone()[0])


def without_tails(db_path: Path, version: int) -> None:
    """Make the SQLite store at ``db_path`` (closed) one of an earlier ``version`` (7 or 8):
    every context written as rows of its own, no ``tail_from`` nor ``listed_at`` (schema 9
    added them), the listing's index on ``updated_at``, as an earlier harness left it."""
    import sqlite3

    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("INSERT INTO context (session_rid, pos, mid) SELECT t.session_rid,"
                     " s.context_len - s.transcript_len + t.seq, t.mid FROM transcript t"
                     " JOIN sessions s ON s.rid = t.session_rid WHERE t.seq >= s.tail_from")
        conn.execute("DROP INDEX sessions_listed")
        conn.execute("ALTER TABLE sessions DROP COLUMN tail_from")
        conn.execute("ALTER TABLE sessions DROP COLUMN listed_at")
        conn.execute("CREATE INDEX sessions_recent ON sessions (archived, updated_at DESC)")
        conn.execute(f"PRAGMA user_version = {int(version)}")
    finally:
        conn.close()


def info_of(memory_dir: Path, session_id: str) -> SessionInfo:
    """A session's info, read from the SQLite store in ``memory_dir``."""
    with SessionStore(memory_dir) as store:
        return store.info(session_id)
