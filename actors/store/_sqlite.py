"""The embedded backend: one SQLite database per memory directory (the default store).

Durability: WAL journal with ``synchronous=FULL``, so a transaction is on disk when ``COMMIT``
returns, and a crash at any moment leaves the last committed state (SQLite never exposes a
half-written transaction). Each public method is one transaction (``BEGIN IMMEDIATE`` for
writes, so writers of different processes queue on SQLite's lock for up to 10 s).

What is SQLite's own here (the logic is :class:`actors.store._base.Store`'s): the database file
and its pragmas, the error translation (``_translated``), the ``flock`` lease
(:mod:`actors.store._lease`), the schema (:mod:`actors.store._schema`) and the trigram FTS5
search index.

Threads: one connection guarded by the store's lock; methods are synchronous and may be
called from worker threads (the async actors use ``anyio.to_thread.run_sync``). Nothing here is
cancellable: a call that has started runs to its end in its thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from actors.core.errors import CorruptSession, StorageError
from actors.core.ids import check_session_id
from actors.store import _lease
from actors.store._base import Conn, Store
from actors.store._records import timestamp
from actors.store._schema import migrate
from actors.store._search import like_pattern

DB_NAME = "sessions.sqlite3"
_MESSAGE_MATCHES = (
    "SELECT t.session_rid, count(*), max(m.rowid) FROM "
    "(SELECT rowid FROM message_text WHERE {where}) m "
    "JOIN transcript t INDEXED BY transcript_session_of ON t.mid = m.rowid "
    "GROUP BY t.session_rid"
)


def _primary_code(exc: sqlite3.Error) -> int:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


_CAUSES = {
    13: "No space left on device (the session store could not grow)",
    10: "Disk I/O error while accessing the session store",
    8: "The session store is read-only",
    5: "The session store is busy: another process kept it locked too long",
    14: "Cannot open the session store file",
}


DOCTOR_HINT = "run `harness --doctor` to check it and `harness --doctor --repair` to repair"


@contextlib.contextmanager
def _translated(db_path: Path, session_id: str | None = None) -> Iterator[None]:
    """Turn sqlite3 and OS errors into :class:`StorageError` naming the cause (one boundary).

    Damage found while reading one session is reported as that session's
    (:class:`CorruptSession`); other sessions may well be readable.
    """
    try:
        yield
    except sqlite3.Error as exc:
        code = _primary_code(exc)
        if code in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
            if session_id is not None:
                raise CorruptSession(session_id, f"{exc}; {DOCTOR_HINT}") from exc
            raise StorageError(
                f"The session store {db_path} is damaged ({exc}); {DOCTOR_HINT}."
            ) from exc
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
        raise StorageError(f"{cause} ({db_path}).") from exc
    except OSError as exc:
        raise StorageError(f"{exc.strerror or exc} ({exc.filename or db_path}).") from exc


def _pad_if_truncated(db_path: Path) -> str | None:
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
    backup = db_path.with_name(f"{db_path.name}.truncated-{timestamp().replace(':', '')}")
    shutil.copyfile(db_path, backup)
    os.chmod(backup, 0o600)
    with open(db_path, "r+b") as f:
        f.truncate(pages * page_size)
    return (
        f"The session store was truncated ({size // page_size} of {pages} pages); a copy is "
        f"kept at {backup}. Sessions stored in the lost part are damaged; {DOCTOR_HINT}."
    )


def _match(term: str) -> tuple[str, str]:
    """The FTS5 condition and argument finding ``term`` as a case-insensitive substring."""
    if len(term) >= 3:
        return "{table} MATCH ?", '"' + term.replace('"', '""') + '"'
    # shorter than a trigram: a scan of the index text (rare, still bounded)
    return "text LIKE ? ESCAPE '\\'", like_pattern(term)


class SessionStore(Store):
    """Durable sessions in ``<memory_dir>/sessions.sqlite3`` (see docs/storage.md).

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds it.
    """

    damage_hint = DOCTOR_HINT

    def __init__(self, memory_dir: str | os.PathLike[str], *, import_legacy: bool = True) -> None:
        super().__init__(memory_dir)
        self.db_path = self.memory_dir / DB_NAME
        with _translated(self.db_path):
            if not self.db_path.exists():
                os.close(os.open(self.db_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            elif not self.db_path.with_name(DB_NAME + "-wal").exists():
                warning = _pad_if_truncated(self.db_path)
                if warning:
                    self.import_warnings.append(warning)
            conn = sqlite3.connect(
                self.db_path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        self._conn = conn
        conn.row_factory = sqlite3.Row
        try:
            with _translated(self.db_path):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = OFF")
                migrate(conn)
        except BaseException:
            conn.close()
            raise
        if import_legacy:
            self._import_legacy_dir()

    # -- connection and transactions ------------------------------------------------------

    @property
    def location(self) -> str:
        return str(self.db_path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def _read(self, session_id: str | None = None) -> Iterator[Conn]:
        with self._lock, _translated(self.db_path, session_id):
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _write(self, *leased: str) -> Iterator[Conn]:
        # A flock lease cannot be lost while its process lives: nothing to check for ``leased``.
        with self._lock, _translated(self.db_path):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    # -- the lease ------------------------------------------------------------------------

    def lock_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{check_session_id(session_id)}.lock"

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block (see :mod:`actors.store._lease`)."""
        return _lease.hold(self.lock_path(session_id), session_id)

    def is_leased_here(self, session_id: str) -> bool:
        return _lease.is_held_here(self.lock_path(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        return _lease.held_elsewhere(self.lock_path(session_id))

    # -- the search index (FTS5, trigram tokenizer) ---------------------------------------

    def _index_messages(self, conn: Conn, rid: int, rows: list[tuple[int, str]]) -> None:
        conn.executemany("INSERT INTO message_text (rowid, text) VALUES (?, ?)", rows)

    def _index_session_text(self, conn: Conn, rid: int, text: str) -> None:
        conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))
        conn.execute("INSERT INTO session_text (rowid, text) VALUES (?, ?)", (rid, text))

    def _unindex_session(self, conn: Conn, rid: int) -> None:
        conn.execute(
            "DELETE FROM message_text WHERE rowid IN "
            "(SELECT mid FROM transcript WHERE session_rid = ?)",
            (rid,),
        )
        conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))

    def _copy_index(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        conn.execute(
            "INSERT INTO message_text (rowid, text) SELECT t2.mid, m.text "
            "FROM transcript t1 JOIN message_text m ON m.rowid = t1.mid "
            "JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
            "WHERE t1.session_rid = ?",
            (new_rid, old_rid),
        )
        conn.execute(
            "INSERT INTO session_text (rowid, text) SELECT ?, text FROM session_text "
            "WHERE rowid = ?",
            (new_rid, old_rid),
        )

    def _message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        """Counting through the covering index ``transcript (mid, session_rid)``, named with
        ``INDEXED BY``, never touches the pages that hold message bodies."""
        condition, argument = _match(term)
        where = condition.format(table="message_text")
        return conn.execute(_MESSAGE_MATCHES.format(where=where), (argument,))

    def _session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        condition, argument = _match(term)
        where = condition.format(table="session_text")
        return [rid for (rid,) in conn.execute(
            f"SELECT rowid FROM session_text WHERE {where}", (argument,)
        )]

    def _indexed_texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        """One lookup per key: FTS5 answers ``rowid = ?`` directly but scans for ``IN``."""
        table = "message_text" if kind == "message" else "session_text"
        texts = {}
        for key in keys:
            row = conn.execute(f"SELECT text FROM {table} WHERE rowid = ?", (key,)).fetchone()
            if row is not None:
                texts[key] = row[0]
        return texts
