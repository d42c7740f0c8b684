"""The embedded store: one SQLite database per memory directory (the default).

``<memory-dir>/sessions.sqlite3`` (0600, WAL, ``synchronous=FULL``) and a lock file per
session in ``<memory-dir>/sessions/``. The logic is :class:`actors.store._store.Store`'s; this
module only builds it from the SQLite parts: :class:`SqliteDatabase` (transactions and error
translation), :class:`FlockLeases` (the lease) and :class:`Fts5Index` (search).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from actors.core.ids import check_session_id
from actors.store._parts import Backend
from actors.store._store import Store, private_memory_dir
from actors.store.sqlite._database import DB_NAME, SqliteDatabase
from actors.store.sqlite._index import Fts5Index
from actors.store.sqlite._lease import FlockLeases


class SqliteStore(Store):
    """Durable sessions in ``<memory_dir>/sessions.sqlite3`` (see docs/storage.md).

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds
    it. Raises :class:`StorageError` when the database cannot be opened.
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str],
        *,
        import_legacy: bool = True,
        busy_timeout: float = 10.0,
    ) -> None:
        path = private_memory_dir(memory_dir)
        db = SqliteDatabase(path / DB_NAME, busy_timeout=busy_timeout)
        self._database, self._flocks = db, FlockLeases(path / "sessions")
        backend = Backend(db, self._flocks, Fts5Index(), tuple(db.warnings), db.read_only)
        try:
            super().__init__(path, backend, import_legacy=import_legacy)
        except BaseException:
            db.close()
            raise

    @property
    def db(self) -> SqliteDatabase:
        return self._database

    @property
    def leases(self) -> FlockLeases:
        return self._flocks

    @property
    def db_path(self) -> Path:
        return self.db.path

    @property
    def _conn(self) -> sqlite3.Connection:
        """The raw connection (tests look at pragmas and rows; use it under ``db.lock``)."""
        return self.db.connection

    def lock_path(self, session_id: str) -> Path:
        """The session's lock file (kept even after the session is deleted)."""
        return self.leases.path_of(check_session_id(session_id))
