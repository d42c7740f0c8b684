"""The shared store: sessions in a PostgreSQL database that several machines use at once.

Same record, same semantics as the SQLite store (the logic is
:class:`actors.store._store.Store`'s); this module only builds it from the PostgreSQL parts:
:class:`PgDatabase` (pipelined transactions that re-check the lease, error translation),
:class:`PgLeases` (advisory locks on a dedicated connection) and :class:`TrigramIndex`
(pg_trgm search). Needs psycopg 3.
"""

from __future__ import annotations

import os

from actors.store._parts import Backend
from actors.store._store import Store, private_memory_dir
from actors.store.postgres import _lease
from actors.store.postgres._conn import PgConn, connect, display_url, translated
from actors.store.postgres._database import PgDatabase
from actors.store.postgres._index import TrigramIndex
from actors.store.postgres._schema import migrate


class PostgresStore(Store):
    """Durable sessions in the PostgreSQL database ``url`` names (see docs/storage.md).

    ``url`` is a libpq URL or conninfo (``postgresql://user@host:5432/db``); the tables live
    in its current schema (``?options=-csearch_path%3Dteam`` picks one), created and migrated
    on open. ``memory_dir`` still holds the prompt history and memory notes of this machine,
    and is where older JSON records are imported from. Synchronous and thread-safe; every
    mutating method takes the session's lease (re-entrant in this process) and fails at once
    with :class:`SessionLocked`, naming the holder's pid and host, if another process holds
    it. Raises :class:`StorageError` when the server cannot be reached.
    """

    def __init__(
        self, url: str, memory_dir: str | os.PathLike[str], *, import_legacy: bool = True
    ) -> None:
        path = private_memory_dir(memory_dir)
        where = display_url(url)
        conn = PgConn(connect(url, where))
        try:
            with translated(where):
                namespace = migrate(conn.raw)
        except BaseException:
            conn.raw.close()
            raise
        keeper = _lease.attach(url, where, namespace)
        db = PgDatabase(url, where, conn, namespace, keeper)
        leases = _lease.PgLeases(keeper, namespace, db)
        self._database, self._advisory = db, leases
        try:
            super().__init__(path, Backend(db, leases, TrigramIndex()), import_legacy=import_legacy)
        except BaseException:
            db.close()
            leases.close()
            raise
        self.url = url
        self.namespace = namespace

    @property
    def db(self) -> PgDatabase:
        return self._database

    @property
    def leases(self) -> _lease.PgLeases:
        return self._advisory
