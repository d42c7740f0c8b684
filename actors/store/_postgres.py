"""The shared backend: sessions in a PostgreSQL database that several machines use at once.

Same record, same semantics as the SQLite store (the logic is :class:`actors.store._base.Store`'s);
what is PostgreSQL's own here: the connections and transactions, the error translation
(:mod:`actors.store._pg_conn`), the advisory-lock lease (:mod:`actors.store._pg_lease`), the
schema (:mod:`actors.store._pg_schema`) and the search index (pg_trgm over text lowercased
once, when it is written, so that matching compares bytes).

Durability: each public method is one transaction; ``synchronous_commit`` is on, so a
checkpoint that returned is on the server's disk. A write transaction first checks that this
process still holds the lease of every session it writes (the lease lives on another
connection, which can drop on its own); if not, it writes nothing and raises
:class:`StorageError`. Reads run in ``REPEATABLE READ, READ ONLY`` transactions: one snapshot,
however many statements, while other machines write.

Connection failures: any psycopg error becomes :class:`StorageError` naming the cause; the
transaction is rolled back (or died with the connection), so no acknowledged checkpoint is
lost and nothing half-written is visible. The next call reconnects.

Threads: one data connection guarded by the store's lock; methods are synchronous and may be
called from worker threads. Nothing here is cancellable: a call that has started runs to its
end in its thread (a KeyboardInterrupt in the middle rolls the transaction back).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from actors.core.errors import StorageError
from actors.core.ids import check_session_id
from actors.core.messages import text_of
from actors.store import _pg_lease
from actors.store._base import Conn, Store
from actors.store._pg_conn import PgConn, connect, display_url, translated
from actors.store._pg_schema import migrate
from actors.store._search import MAX_INDEXED_CHARS, like_pattern

_LEASE_STILL_HELD = (
    "SELECT 1 FROM session_leases l WHERE l.session_id = ? AND l.backend_pid = ? AND EXISTS ("
    + _pg_lease.HELD_BY + " AND k.pid = l.backend_pid) FOR SHARE OF l"
)


def _storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL characters; the index drops them."""
    return text.replace("\x00", "") if "\x00" in text else text


def _snippet_source(body: str) -> str:
    """The indexed text of a transcript message, as written (what SQLite's index holds)."""
    try:
        return _storable(text_of(json.loads(body))[:MAX_INDEXED_CHARS])
    except (TypeError, ValueError, AttributeError):
        return ""


class PostgresSessionStore(Store):
    """Durable sessions in the PostgreSQL database ``url`` names (see docs/storage.md).

    ``url`` is a libpq URL or conninfo (``postgresql://user@host:5432/db``); the tables live
    in its current schema (``?options=-csearch_path%3Dteam`` picks one). ``memory_dir`` still
    holds the prompt history and memory notes of this machine, and is where older JSON
    records are imported from. Synchronous and thread-safe; every mutating method takes the
    session's lease (re-entrant in this process) and fails at once with
    :class:`SessionLocked`, naming the holder's pid and host, if another process holds it.
    """

    damage_hint = "delete it (--delete ID --yes) or restore it from an export or a backup"

    def __init__(
        self, url: str, memory_dir: str | os.PathLike[str], *, import_legacy: bool = True
    ) -> None:
        super().__init__(memory_dir)
        self.url = url
        self._where = display_url(url)
        self._closed = False
        self._conn = PgConn(connect(url, self._where))
        try:
            with translated(self._where):
                self.namespace = migrate(self._conn.raw)
        except BaseException:
            self._conn.raw.close()
            raise
        self._keeper = _pg_lease.attach(url, self._where, self.namespace)
        if import_legacy:
            self._import_legacy_dir()

    # -- connection and transactions ------------------------------------------------------

    @property
    def location(self) -> str:
        return f"{self._where} (schema {self.namespace})"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.raw.close()
        _pg_lease.detach(self._keeper)

    def _live(self) -> PgConn:
        """The data connection, reconnected if it was lost (the caller holds the lock)."""
        raw = self._conn.raw
        if raw.closed or raw.broken:
            if self._closed:
                raise StorageError(f"The session store {self._where} is closed.")
            self._conn.raw = connect(self.url, self._where)
        return self._conn

    def _rollback(self) -> None:
        raw = self._conn.raw
        with contextlib.suppress(psycopg.Error):
            raw.execute("ROLLBACK")
        if raw.info.transaction_status != TransactionStatus.IDLE:
            raw.close()  # in an unknown state (interrupted mid-protocol): start afresh

    @contextlib.contextmanager
    def _read(self, session_id: str | None = None) -> Iterator[Conn]:
        """A ``REPEATABLE READ, READ ONLY`` transaction in pipeline mode: ``BEGIN`` travels
        with the first query and ``COMMIT`` is not waited for separately."""
        with self._lock, translated(self._where, session_id):
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
    def _write(self, *leased: str) -> Iterator[Conn]:
        """One transaction in pipeline mode: statements whose results are not read travel
        together, so a checkpoint costs about three round trips (the session row, the new
        transcript ids, the rest with COMMIT) whatever it appends.

        The lease check of ``leased`` is sent first (it takes its row lock at once) and
        its answer is looked at just before ``COMMIT``: a lost lease rolls everything back.
        """
        with self._lock, translated(self._where):
            conn = self._live()
            try:
                with conn.raw.pipeline():
                    conn.raw.execute("BEGIN")
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
        backend = self._keeper.backend_pid(session_id)
        if backend is None:
            return None
        high, low = _pg_lease.key_halves(_pg_lease.lock_key(self.namespace, session_id))
        return conn.execute(_LEASE_STILL_HELD, (session_id, backend, high, low))

    def _lost_lease(self, session_id: str) -> StorageError:
        return StorageError(
            f"Lost the lease of session '{session_id}': the connection holding it "
            f"({self._where}) is gone, so another process may take the session over. "
            "Nothing more was saved; resume the session to go on."
        )

    # -- the lease ------------------------------------------------------------------------

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block (see :mod:`actors.store._pg_lease`)."""
        return self._keeper.hold(check_session_id(session_id))

    def is_leased_here(self, session_id: str) -> bool:
        return self._keeper.is_held(check_session_id(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        if self.is_leased_here(session_id):
            return False
        high, low = _pg_lease.key_halves(_pg_lease.lock_key(self.namespace, session_id))
        with self._read() as conn:
            return conn.execute(_pg_lease.HELD_BY, (high, low)).fetchone() is not None

    # -- the search index (pg_trgm over lowercased text) ---------------------------------

    @staticmethod
    def _rid_among(rids: list[int]) -> tuple[str, Sequence[Any]]:
        """One array parameter instead of thousands of placeholders (a common word matches
        every session: psycopg would parse 2,000 of them per search)."""
        return "= ANY(?)", [rids]

    def _index_messages(self, conn: Conn, rid: int, rows: list[tuple[int, str]]) -> None:
        conn.executemany(
            "INSERT INTO message_text (mid, session_rid, text) VALUES (?, ?, ?)",
            [(mid, rid, _storable(text).lower()) for mid, text in rows],
        )

    def _index_session_text(self, conn: Conn, rid: int, text: str) -> None:
        text = _storable(text)
        conn.execute(
            "INSERT INTO session_text (rid, text, lowered) VALUES (?, ?, ?) ON CONFLICT (rid) "
            "DO UPDATE SET text = excluded.text, lowered = excluded.lowered",
            (rid, text, text.lower()),
        )

    def _unindex_session(self, conn: Conn, rid: int) -> None:
        conn.execute("DELETE FROM message_text WHERE session_rid = ?", (rid,))
        conn.execute("DELETE FROM session_text WHERE rid = ?", (rid,))

    def _copy_index(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        conn.execute(
            "INSERT INTO message_text (mid, session_rid, text) SELECT t2.mid, t2.session_rid,"
            " m.text FROM transcript t1 JOIN message_text m ON m.mid = t1.mid "
            "JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
            "WHERE t1.session_rid = ?",
            (new_rid, old_rid),
        )
        conn.execute(
            "INSERT INTO session_text (rid, text, lowered) SELECT ?, text, lowered "
            "FROM session_text WHERE rid = ?",
            (new_rid, old_rid),
        )

    @staticmethod
    def _prefer_index(conn: Conn, term: str) -> None:
        """Use the trigram index whenever the word has trigrams (until the transaction ends).

        The planner charges a ``LIKE`` on long text like any cheap operator and would rather
        scan a few hundred pages than use the index: 2-3 ms per word for 2,000 session texts,
        where the index takes 0.1 ms. Pipelined: no round trip of its own.
        """
        conn.execute(
            "SELECT set_config('enable_seqscan', ?, true)", ("off" if len(term) >= 3 else "on",)
        )

    def _message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        """``LIKE '%term%'`` over lowercased text through the trigram index (terms are
        lowercase; words shorter than three letters scan the table).

        """
        self._prefer_index(conn, term)
        return conn.execute(
            "SELECT session_rid, count(*), max(mid) FROM message_text WHERE text LIKE ? "
            "GROUP BY session_rid",
            (like_pattern(term),),
        ).fetchall()  # at once: row by row costs psycopg ~2 µs each in pipeline mode

    def _session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        self._prefer_index(conn, term)
        return [rid for (rid,) in conn.execute(
            "SELECT rid FROM session_text WHERE lowered LIKE ?", (like_pattern(term),)
        )]

    def _indexed_texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        if kind == "session":
            rows: Any = conn.execute(
                f"SELECT rid, text FROM session_text WHERE rid IN ({marks})", list(keys)
            )
            return dict(rows)
        return {
            mid: _snippet_source(body)
            for mid, body in conn.execute(
                f"SELECT mid, body FROM transcript WHERE mid IN ({marks})", list(keys)
            )
        }
