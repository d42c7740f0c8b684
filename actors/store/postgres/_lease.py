"""The PostgreSQL lease: a session-level advisory lock per session, on a dedicated connection.

Per database URL, this process keeps one :class:`LeaseKeeper`: one connection that holds
``pg_try_advisory_lock(key)`` for every session the process leases there (``key``: a stable
64-bit hash of the store's schema and the session id). The server releases the locks when
that connection ends, however it ends: the process exits or is killed, the machine vanishes
(server-side TCP keepalives notice within about a minute), the network drops.

* **Refusal.** A lock held by another backend is refused at once with :class:`SessionLocked`
  naming the holder ("pid N on HOST"), read from ``session_leases``, which every holder fills
  in right after taking a lock (only a row whose backend still holds the lock counts).
* **Re-entrance.** Inside one process the lease is re-entrant across threads and store
  instances: holds are counted, and the lock is released when the outermost one ends.
* **Threads.** A hold may be entered in one thread and left in another (the supervisor does
  both in worker threads); the keeper's connection is used under its own lock, never the
  store's, and nothing is thread-affine.
* **Losing it.** If the connection dies, the holds it carried are lost. The store notices in
  the next write: :meth:`LeaseKeeper.backend_pid` tells which server backend should hold the
  lock, and the write transaction checks ``pg_locks`` for it before writing anything.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from actors.core.errors import SessionLocked
from actors.store._parts import Transactions
from actors.store._records import timestamp
from actors.store.postgres._conn import connect, translated
from actors.store.postgres._schema import namespaced_key

# A lock on a 64-bit key shows in pg_locks as classid = high 32 bits, objid = low 32 bits.
HELD_BY = (
    "SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted"
    " AND k.objsubid = 1 AND k.classid::bigint = ? AND k.objid::bigint = ?"
)


def lock_key(namespace: str, session_id: str) -> int:
    """The advisory-lock key of a session in the store living in schema ``namespace``."""
    return namespaced_key(namespace, f"session\0{session_id}")


def key_halves(key: int) -> tuple[int, int]:
    """``(classid, objid)`` under which pg_locks shows the lock of ``key``."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


@dataclass
class _Hold:
    key: int
    backend_pid: int  # the server backend (of the keeper's connection) that took the lock
    count: int


class LeaseKeeper:
    """The dedicated lease connection of one database URL in this process, and its holds."""

    def __init__(self, url: str, where: str, namespace: str) -> None:
        self.url = url
        self.where = where
        self.namespace = namespace
        self.users = 0  # open store instances using this keeper
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._holds: dict[str, _Hold] = {}

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            # Holds taken on a dead connection stay recorded with their old backend pid, so
            # the store's next write under them fails instead of writing without the lock.
            conn = self._conn = connect(self.url, self.where)
        return conn

    def _holder(self, conn: psycopg.Connection[Any], session_id: str, key: int) -> str | None:
        high, low = key_halves(key)
        row = conn.execute(
            "SELECT l.host, l.pid FROM session_leases l WHERE l.session_id = %s AND EXISTS ("
            + HELD_BY.replace("?", "%s") + " AND k.pid = l.backend_pid)",
            (session_id, high, low),
        ).fetchone()
        return None if row is None else f"pid {row[1]} on {row[0]}"

    @contextlib.contextmanager
    def hold(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for the ``with`` block (re-entrant in this process).

        Blocking only for a round trip or two to the server; async callers run it in a
        worker thread. Raises :class:`SessionLocked` when another process holds it, and
        :class:`StorageError` when the server cannot be reached.
        """
        self._acquire(session_id)
        try:
            yield
        finally:
            self._release(session_id)

    def _acquire(self, session_id: str) -> None:
        with self._lock:
            held = self._holds.get(session_id)
            if held is not None:
                held.count += 1
                return
            key = lock_key(self.namespace, session_id)
            with translated(self.where):
                conn = self._connection()
                try:  # one round trip: lock and, only if locked, record who holds it
                    got = conn.execute(
                        "INSERT INTO session_leases (session_id, host, pid, backend_pid, since)"
                        " SELECT %s, %s, %s, pg_backend_pid(), %s"
                        " WHERE pg_try_advisory_lock(%s) ON CONFLICT (session_id)"
                        " DO UPDATE SET host = excluded.host, pid = excluded.pid,"
                        " backend_pid = excluded.backend_pid, since = excluded.since"
                        " RETURNING 1",
                        (session_id, socket.gethostname(), os.getpid(), timestamp(), key),
                    ).fetchone()
                except BaseException:  # the lock may be taken even if the row failed
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                    raise
                if got is None:
                    raise SessionLocked(session_id, self._holder(conn, session_id, key))
            self._holds[session_id] = _Hold(key, conn.info.backend_pid, 1)

    def _release(self, session_id: str) -> None:
        with self._lock:
            held = self._holds[session_id]
            held.count -= 1
            if held.count:
                return
            del self._holds[session_id]
            conn = self._conn
            if (conn is not None and not conn.closed and not conn.broken
                    and conn.info.backend_pid == held.backend_pid):
                # A failure here means the connection died: the server released the lock.
                with contextlib.suppress(psycopg.Error):
                    conn.execute(
                        "WITH gone AS (DELETE FROM session_leases WHERE session_id = %s"
                        " AND backend_pid = pg_backend_pid()) SELECT pg_advisory_unlock(%s)",
                        (session_id, held.key),
                    )
            self._close_if_unused()

    def _close_if_unused(self) -> None:
        if self.users == 0 and not self._holds and self._conn is not None:
            self._conn.close()
            self._conn = None

    def is_held(self, session_id: str) -> bool:
        """True when this process holds (or held and then lost) the session's lease."""
        with self._lock:
            return session_id in self._holds

    def backend_pid(self, session_id: str) -> int | None:
        """The server backend that should hold the session's lock (None: not leased here)."""
        with self._lock:
            held = self._holds.get(session_id)
            return None if held is None else held.backend_pid


_keepers: dict[str, LeaseKeeper] = {}
_keepers_lock = threading.Lock()


def attach(url: str, where: str, namespace: str) -> LeaseKeeper:
    """The keeper of ``url`` for one more store instance (connected on the first hold)."""
    with _keepers_lock:
        keeper = _keepers.get(url)
        if keeper is None:
            keeper = _keepers[url] = LeaseKeeper(url, where, namespace)
        keeper.users += 1
        return keeper


def detach(keeper: LeaseKeeper) -> None:
    """A store instance closed; the connection closes once no store uses it and no lease
    is held through it."""
    with _keepers_lock, keeper._lock:
        keeper.users -= 1
        if keeper.users == 0:
            keeper._close_if_unused()
            if not keeper._holds and _keepers.get(keeper.url) is keeper:
                del _keepers[keeper.url]


class PgLeases:
    """The :class:`~actors.store._parts.Lease` of one PostgreSQL store instance: this
    process's :class:`LeaseKeeper` of the database (shared with other instances), and the
    store's own transactions to look in ``pg_locks`` for holders elsewhere."""

    def __init__(self, keeper: LeaseKeeper, namespace: str, db: Transactions) -> None:
        self.keeper = keeper
        self.namespace = namespace
        self._db = db

    def hold(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        return self.keeper.hold(session_id)

    def is_held_here(self, session_id: str) -> bool:
        return self.keeper.is_held(session_id)

    def held_elsewhere(self, session_id: str) -> bool:
        if self.keeper.is_held(session_id):
            return False
        high, low = key_halves(lock_key(self.namespace, session_id))
        with self._db.read() as conn:
            return conn.execute(HELD_BY, (high, low)).fetchone() is not None

    def close(self) -> None:
        """Let go of the keeper (its connection closes once no store uses it and no lease
        is held through it)."""
        detach(self.keeper)
