"""The SQLite database of the embedded store: the file, its pragmas, transactions, errors.

Durability: WAL journal with ``synchronous=FULL``, so a transaction is on disk when ``COMMIT``
returns, and a crash at any moment leaves the last committed state (SQLite never exposes a
half-written transaction). Writes begin with ``BEGIN IMMEDIATE``, so writers of different
processes queue on SQLite's lock for up to 10 s. Every sqlite3 and OS error is translated at
one boundary, :func:`translated`, into :class:`StorageError` with the cause in words.

A database file shorter than its header says (a copy cut short, a full disk during a copy)
is kept aside and padded back on open (:func:`pad_if_truncated`), so the intact sessions
read again and only the lost ones are reported damaged.

Threads: one connection guarded by a lock; transactions are synchronous and may run in
worker threads. Nothing here is cancellable: a call that has started runs to its end.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from actors.core.errors import CorruptSession, HarnessError, StorageError
from actors.store._parts import Conn
from actors.store._records import timestamp
from actors.store._rows import is_undecodable
from actors.store.sqlite._schema import check_readable, migrate
from actors.store.sqlite._users import StoreUsers
from actors.store.sqlite._wal_watch import WalWatch

DB_NAME = "sessions.sqlite3"
DOCTOR_HINT = "run `harness --doctor` to check it and `harness --doctor --repair` to repair"

_CAUSES = {
    13: "No space left on device (the session store could not grow)",
    10: "Disk I/O error while accessing the session store",
    8: "The session store is read-only",
    5: "The session store is busy: another process kept it locked too long",
    6: "The session store is busy: another process kept it locked too long",
    14: "Cannot open the session store file",
}


def _primary_code(exc: sqlite3.Error) -> int:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


def translation(exc: BaseException, db_path: Path,
                session_id: str | None = None) -> HarnessError | None:
    """What a sqlite3 or OS error ``exc`` is for the user: :class:`StorageError` naming the
    cause, :class:`CorruptSession` for damage found while reading one session (other sessions
    may well be readable); None for any other exception (it goes on as it is)."""
    if isinstance(exc, sqlite3.Error):
        code = _primary_code(exc)
        if session_id is not None and is_undecodable(exc):  # text that is not UTF-8
            return CorruptSession(session_id, f"{exc}; {DOCTOR_HINT}")
        if code in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
            if session_id is not None:
                return CorruptSession(session_id, f"{exc}; {DOCTOR_HINT}")
            return StorageError(f"The session store {db_path} is damaged ({exc}); {DOCTOR_HINT}.")
        cause = _CAUSES.get(code)
        if code in (8, 14) and not os.access(db_path.parent, os.W_OK):
            cause = "The session store's directory is read-only (cannot write there)"
        if cause is None:
            text = str(exc)
            if "full" in text:
                cause = _CAUSES[13]
            elif "readonly" in text or "read-only" in text:
                cause = _CAUSES[8]
            else:
                cause = f"Session store error: {text}"
        return StorageError(f"{cause} ({db_path}).")
    if isinstance(exc, OSError):
        return StorageError(f"{exc.strerror or exc} ({exc.filename or db_path}).")
    return None


@contextlib.contextmanager
def translated(db_path: Path, session_id: str | None = None) -> Iterator[None]:
    """Turn sqlite3 and OS errors into :class:`StorageError` naming the cause (one boundary,
    :func:`translation`)."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        error = translation(exc, db_path, session_id)
        assert error is not None
        raise error from exc


class _DurableWrite:
    """One durable write transaction of :meth:`SqliteDatabase.write` (every checkpoint is
    one): the lock, the side files' check, ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back
    whole on any exception), errors translated (:func:`translation`). A class rather than
    nested generators: their entering and leaving was a tenth of an append's own time."""

    __slots__ = ("conn", "db")

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        db = self.db
        db.lock.acquire()
        try:
            db._check_side_files()  # may reopen: read the connection after it
            conn = self.conn = db.connection
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            db.lock.release()
            error = translation(exc, db.path)
            if error is None:
                raise
            raise error from exc
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        db, conn = self.db, self.conn
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                    return
                except BaseException as failed:
                    exc = failed
            if conn is db.connection and conn.in_transaction:  # not after a reopen
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            assert exc is not None
            error = translation(exc, db.path)
            if error is not None:
                raise error from exc
            if kind is None:  # COMMIT failed with something else: let it go on
                raise exc
        finally:
            db.lock.release()


def pad_if_truncated(db_path: Path) -> str | None:
    """If the database file is shorter than its header says, keep a copy and pad it back.

    A truncated file makes SQLite refuse every query; padded with empty pages, the intact
    pages (and the sessions stored in them) read again, and only sessions whose rows were in
    the lost part are damaged (reported by id when loaded). Returns a warning, or None.
    """
    try:
        with open(db_path, "rb") as f:
            header = f.read(100)
        size = db_path.stat().st_size
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[92:96] != header[24:28] or page_size < 512 or pages * page_size <= size:
        return None
    import shutil  # here only: with its compressors it cost every start a few milliseconds

    backup = db_path.with_name(f"{db_path.name}.truncated-{timestamp().replace(':', '')}")
    shutil.copyfile(db_path, backup)
    os.chmod(backup, 0o600)
    with open(db_path, "r+b") as f:
        f.truncate(pages * page_size)
    return (
        f"The session store was truncated ({size // page_size} of {pages} pages); a copy is "
        f"kept at {backup}. Sessions stored in the lost part are damaged; {DOCTOR_HINT}."
    )


def _writable(path: Path) -> bool:
    """Whether the database at ``path`` can be written: its directory (where SQLite keeps
    its ``-wal`` and ``-shm``) and the file, if there is one."""
    return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says the database is locked by someone else, as
    opposed to damaged: a busy store must never be treated as a broken one."""
    cause = exc.__cause__ if isinstance(exc, StorageError) else exc
    return isinstance(cause, sqlite3.Error) and _primary_code(cause) in (5, 6)


class SqliteDatabase:
    """The :class:`~actors.store._parts.Transactions` of the SQLite store: one connection
    to ``db_path`` (created 0600, migrated on open) behind a lock.

    While open it holds the store's users lock shared (:mod:`._users`), so a repair never
    replaces the file under it. ``busy_timeout``: how long a statement waits for another
    process's lock before the store is reported busy.

    Before every write transaction it checks that the ``-wal`` and ``-shm`` names still name
    the files SQLite has open (:mod:`._wal_watch`). If another program deleted or replaced
    one, what the orphaned log holds is written back into the database
    (``wal_checkpoint(TRUNCATE)``), the connection is reopened and :class:`StorageError`
    says what happened: that write is not made, and none acknowledged before is lost.
    """

    damage_hint = DOCTOR_HINT

    def __init__(self, db_path: Path, *, busy_timeout: float = 10.0) -> None:
        self.path = db_path
        self.warnings: list[str] = []
        self.lock = threading.RLock()  # guards the connection (the doctor holds it too)
        # A file system mounted read-only (as ext4 remounts itself after an I/O error), or
        # a directory or file this user may not write: read what is there, write nothing.
        self.read_only = not _writable(db_path)
        self.users = StoreUsers(db_path.parent)
        self.users.share(read_only=self.read_only)
        self._busy_timeout = busy_timeout
        self._watch = WalWatch(db_path)
        try:
            self.connection = (self._connect_read_only() if self.read_only
                               else self._connect(busy_timeout))
        except BaseException:
            self.users.close()
            raise
        if not self.read_only:
            self._watch.start()

    def _connect_read_only(self) -> sqlite3.Connection:
        """The database opened for reading only: through its write-ahead log where one was
        left (SQLite then needs its ``-shm`` too, as left beside it), else as an unchanging
        file (nothing can change it here). Its schema must be one this version reads."""
        db_path = self.path
        if not db_path.exists():
            raise StorageError(f"The session store's directory is read-only and holds no "
                               f"store ({db_path}).")
        log = db_path.with_name(db_path.name + "-wal")
        how = "mode=ro" if log.exists() and log.stat().st_size else "immutable=1"
        with translated(db_path):
            conn = sqlite3.connect(f"{db_path.as_uri()}?{how}", uri=True, isolation_level=None,
                                   check_same_thread=False)
            try:
                check_readable(conn)
            except BaseException:
                conn.close()
                raise
        conn.row_factory = sqlite3.Row
        return conn

    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        db_path = self.path
        with translated(db_path):
            if not db_path.exists():
                os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            elif not db_path.with_name(db_path.name + "-wal").exists():
                warning = pad_if_truncated(db_path)
                if warning:
                    self.warnings.append(warning)
            conn = sqlite3.connect(
                db_path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
        conn.row_factory = sqlite3.Row
        try:
            with translated(db_path):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = OFF")
                self.warnings += migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def location(self) -> str:
        return str(self.path)

    def companion(self) -> None:
        """None: the workspace keeps a file of its own beside this one."""
        return None

    def close(self) -> None:
        with self.lock:
            self.connection.close()
            self.users.close()

    @contextlib.contextmanager
    def read(self, session_id: str | None = None) -> Iterator[Conn]:
        with self.lock, translated(self.path, session_id):
            self.connection.execute("BEGIN")
            try:
                yield self.connection
            finally:
                self.connection.execute("COMMIT")

    def write(self, *leased: str, durable: bool = True) -> contextlib.AbstractContextManager[Conn]:
        """``durable=False``: ``synchronous=NORMAL`` for this transaction, whose COMMIT then
        writes the log without syncing it; the next ``FULL`` commit's sync covers it. Such a
        write (the search index) does not look at the side files either: the next durable
        write does, and reports a deleted log to the user, whose data (this write's too) is
        then written back. A read-only store refuses at once, in words."""
        if self.read_only:
            raise StorageError(f"The session store is read-only ({self.path}): nothing can "
                               "be saved.")
        # A flock lease cannot be lost while its process lives: nothing to check for ``leased``.
        return _DurableWrite(self) if durable else self._derived_write()

    @contextlib.contextmanager
    def _derived_write(self) -> Iterator[Conn]:
        with self.lock, translated(self.path):
            conn = self.connection
            conn.execute("PRAGMA synchronous = NORMAL")
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
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA synchronous = FULL")

    def _check_side_files(self) -> None:
        """Raise :class:`StorageError`, after a safe reopen, when the ``-wal`` or ``-shm`` file
        was deleted or replaced behind SQLite's back (before a write transaction begins:
        there, unlike just before ``COMMIT``, the ``stat`` of the log costs nothing
        measurable, because the log holds no unsynced pages then)."""
        change = self._watch.changed()
        if change is None:
            return
        conn = self.connection
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        written_back = False
        with contextlib.suppress(sqlite3.Error):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            written_back = busy == 0
        kept = (
            "everything saved before it was written back into the database, which was "
            "reopened" if written_back else
            "what was saved since SQLite's last checkpoint could not be written back into the "
            "database and may be lost"
        )
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        self.connection = self._connect(self._busy_timeout)
        self._watch.start()
        raise StorageError(
            f"The session store's {change} by another program while the harness was running "
            f"({self.path.parent}). This change was not saved; {kept}."
        )
