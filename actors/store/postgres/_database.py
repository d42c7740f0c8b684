"""The PostgreSQL store's transactions: the data connection, pipelined, with the lease check.

Durability: each public method of the store is one transaction; ``synchronous_commit`` is on,
so a checkpoint that returned is on the server's disk. A write transaction first checks that
this process still holds the lease of every session it writes (the lease lives on another
connection, which can drop on its own); if not, it writes nothing and raises
:class:`StorageError`. Reads run in ``REPEATABLE READ, READ ONLY`` transactions: one snapshot,
however many statements, while other machines write.

Connection failures: any psycopg error becomes :class:`StorageError` naming the cause
(:func:`actors.store.postgres._conn.translated`); the transaction is rolled back (or died with
the connection), so no acknowledged checkpoint is lost and nothing half-written is visible.
The next transaction reconnects.

Threads: one data connection guarded by a lock; transactions are synchronous and may run in
worker threads. Nothing here is cancellable: a call that has started runs to its end in its
thread (a KeyboardInterrupt in the middle rolls the transaction back).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from actors.core.errors import StorageError
from actors.store._parts import Conn
from actors.store.postgres import _lease
from actors.store.postgres._conn import PgConn, connect, translated

_LEASE_STILL_HELD = (
    "SELECT 1 FROM session_leases l WHERE l.session_id = ? AND l.backend_pid = ? AND EXISTS ("
    + _lease.HELD_BY + " AND k.pid = l.backend_pid) FOR SHARE OF l"
)


class PgDatabase:
    """The :class:`~actors.store._parts.Transactions` of the PostgreSQL store.

    ``conn`` is the (migrated) data connection to ``url`` in schema ``namespace``; ``keeper``
    holds this process's leases there and tells which server backend should hold each.
    """

    damage_hint = "delete it (--delete ID --yes) or restore it from an export or a backup"

    def __init__(
        self, url: str, where: str, conn: PgConn, namespace: str, keeper: _lease.LeaseKeeper
    ) -> None:
        self.url = url
        self.where = where
        self.connection = conn
        self.namespace = namespace
        self.keeper = keeper
        self.lock = threading.RLock()  # guards the data connection
        self._closed = False

    @property
    def location(self) -> str:
        return f"{self.where} (schema {self.namespace})"

    def companion(self) -> PgDatabase:
        """A connection of its own to this database and schema (same lease keeper)."""
        return PgDatabase(self.url, self.where, PgConn(connect(self.url, self.where)),
                          self.namespace, self.keeper)

    def close(self) -> None:
        with self.lock:
            if not self._closed:
                self._closed = True
                self.connection.raw.close()

    def _live(self) -> PgConn:
        """The data connection, reconnected if it was lost (the caller holds the lock)."""
        raw = self.connection.raw
        if raw.closed or raw.broken:
            if self._closed:
                raise StorageError(f"The session store {self.where} is closed.")
            self.connection.raw = connect(self.url, self.where)
        return self.connection

    def _rollback(self) -> None:
        raw = self.connection.raw
        with contextlib.suppress(psycopg.Error):
            raw.execute("ROLLBACK")
        if raw.info.transaction_status != TransactionStatus.IDLE:
            raw.close()  # in an unknown state (interrupted mid-protocol): start afresh

    @contextlib.contextmanager
    def read(self, session_id: str | None = None) -> Iterator[Conn]:
        """A ``REPEATABLE READ, READ ONLY`` transaction in pipeline mode: ``BEGIN`` travels
        with the first query and ``COMMIT`` is not waited for separately."""
        with self.lock, translated(self.where, session_id):
            conn = self._live()
            try:
                with conn.raw.pipeline():
                    conn.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield conn
                    conn.raw.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    @contextlib.contextmanager
    def write(self, *leased: str, durable: bool = True) -> Iterator[Conn]:
        """One transaction in pipeline mode: statements whose results are not read travel
        together, so a checkpoint costs about three round trips (the session row, the new
        transcript ids, the rest with COMMIT) whatever it appends.

        The lease check of ``leased`` is sent first (it takes its row lock at once) and
        its answer is looked at just before ``COMMIT``: a lost lease rolls everything back.
        ``durable=False``: ``synchronous_commit`` off for this transaction (COMMIT does not
        wait for the WAL flush; the server flushes it within moments).
        """
        with self.lock, translated(self.where):
            conn = self._live()
            try:
                with conn.raw.pipeline():
                    conn.raw.execute("BEGIN")
                    if not durable:
                        conn.raw.execute("SET LOCAL synchronous_commit TO OFF")
                    checks = [(sid, self._lease_check(conn, sid)) for sid in leased]
                    yield conn
                    for session_id, check in checks:
                        if check is None or check.fetchone() is None:
                            raise self._lost_lease(session_id)
                    conn.raw.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _lease_check(self, conn: PgConn, session_id: str) -> psycopg.Cursor[Any] | None:
        """Ask whether this process still holds the session's lock (None: it never did).

        The row lock (``FOR SHARE``) on the session's ``session_leases`` row lasts until the
        transaction ends: a process taking the lease over must update that row first, so it
        cannot start writing before this transaction is over.
        """
        backend = self.keeper.backend_pid(session_id)
        if backend is None:
            return None
        high, low = _lease.key_halves(_lease.lock_key(self.namespace, session_id))
        return conn.execute(_LEASE_STILL_HELD, (session_id, backend, high, low))

    def _lost_lease(self, session_id: str) -> StorageError:
        return StorageError(
            f"Lost the lease of session '{session_id}': the connection holding it "
            f"({self.where}) is gone, so another process may take the session over. "
            "Nothing more was saved; resume the session to go on."
        )
