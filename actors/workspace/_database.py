"""The SQLite file of the workspace objects, beside the session store in the memory dir.

A file of its own (``<memory-dir>/workspace/objects.sqlite3``), not tables in the sessions
database: a snapshot that stores many new files then never holds the session store's write
lock, so checkpoints of this and other sessions never wait for it. The marks that name
snapshots live in this file too, written after the snapshot's objects, so nothing ever
names a missing object.

WAL journal with ``synchronous=NORMAL`` for snapshots: a commit is in the log (the OS's page
cache) before it returns, so a kill -9 loses nothing, and a power cut can lose only the last
snapshots, never consistency (the log is replayed in order: a mark never outlives its
objects). A snapshot then costs no ``fsync``: on a busy disk that was most of its time. The
commit point of a rewind is written with :meth:`WorkspaceDatabase.write` ``durable=True``
(``synchronous=FULL``: on disk, with every commit before it, the rewind's undo point
included, before any file of the project is written).

Every sqlite3 and OS error is translated here, once, into :class:`StorageError` naming the
cause. Threads: one connection behind a lock; nothing here is cancellable (a transaction that
has started runs to its end in its thread).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from actors.core.errors import StorageError
from actors.store import Conn

WAL_LIMIT = 1024 * 1024  # the log is cut back to this after a checkpoint (a big snapshot
# would otherwise leave it at its largest)

_CAUSES = {
    13: "No space left on device (the workspace snapshots could not grow)",
    10: "Disk I/O error while accessing the workspace snapshots",
    8: "The workspace snapshots are read-only",
    5: "The workspace snapshots are busy: another process kept them locked too long",
    6: "The workspace snapshots are busy: another process kept them locked too long",
    11: "The workspace snapshots are damaged (delete the file to start afresh)",
    26: "The workspace snapshots file is not a database (delete it to start afresh)",
}


@contextlib.contextmanager
def translated(path: Path) -> Iterator[None]:
    """sqlite3 and OS errors as :class:`StorageError` (one boundary)."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        cause = _CAUSES.get(code)
        if cause is None:
            text = str(exc)
            cause = _CAUSES[13] if "full" in text else f"Workspace snapshots error: {text}"
        raise StorageError(f"{cause} ({path}).") from exc
    except OSError as exc:
        raise StorageError(f"{exc.strerror or exc} ({exc.filename or path}).") from exc

class Database(Protocol):
    """Where the objects live: one transaction per ``with`` block, errors translated."""

    dialect: str  # "sqlite" or "postgres"

    @property
    def location(self) -> str: ...

    def read(self) -> AbstractContextManager[Conn]: ...

    def write(self, *, durable: bool = False) -> AbstractContextManager[Conn]: ...


class WorkspaceDatabase:
    """Transactions on the workspace objects file (the shape of the store's
    :class:`actors.store`'s ``Transactions``: ``read()``, ``write()``, ``close()``)."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.lock = threading.RLock()
        with translated(path):
            if not path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
            except BaseException:
                conn.close()
                raise
        self.connection = conn

    @property
    def location(self) -> str:
        return str(self.path)

    def close(self) -> None:
        with self.lock:
            self.connection.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[Conn]:
        with self.lock, translated(self.path):
            self.connection.execute("BEGIN")
            try:
                yield self.connection
            finally:
                self.connection.execute("COMMIT")

    @contextlib.contextmanager
    def write(self, *, durable: bool = False) -> Iterator[Conn]:
        """One write transaction; ``durable``: on disk when it returns (see the module doc)."""
        with self.lock, translated(self.path):
            conn = self.connection
            if durable:
                conn.execute("PRAGMA synchronous = FULL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous = NORMAL")
