"""The embedded session store: one SQLite database per memory directory.

Durability: WAL journal with ``synchronous=FULL``, so a transaction is on disk when ``COMMIT``
returns, and a crash at any moment leaves the last committed state (SQLite never exposes a
half-written transaction). Each public method is one transaction.

Cost: a checkpoint appends only the messages that are new since the last one. The store keeps,
per session, the saved context it last read or wrote (the caller's message objects and their
canonical JSON), so checking that a checkpoint *extends* the saved context is a pointer
comparison per message and never reads earlier messages back from disk. The cache is keyed by
``(context_version, context_len)`` of the session row, so a change made by another process or
another store instance is noticed and the cache reloaded.

Thread-safety: one connection guarded by a lock; methods are synchronous and may be called
from worker threads (the async actors use ``anyio.to_thread.run_sync``). Nothing here is
cancellable: a call that has started runs to its end in its thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import re
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.errors import (
    ContextConflict,
    CorruptSession,
    InvalidRecord,
    SessionNotFound,
    StorageError,
    UsageError,
)
from actors.ids import check_session_id, new_session_id
from actors.messages import (
    INTERRUPTED_NOTICE,
    NOT_STARTED_NOTICE,
    Message,
    call_ids_of,
    encode,
    repair,
    text_of,
    to_plain,
)
from actors.store import _lease
from actors.store._records import (
    FORMAT_VERSION,
    RECORD_FIELDS,
    STATUSES,
    normalise_record,
    read_record_file,
    timestamp,
)
from actors.store._schema import migrate

DB_NAME = "sessions.sqlite3"
MAX_INDEXED_CHARS = 100_000  # text indexed for search per message (the transcript keeps all)
SNIPPET_RADIUS = 60
_LISTED = "id, title, status, created_at, updated_at, summary, archived, project_root, parent_id"
_UPDATABLE = {"title", "summary", "archived", "status", "project_root", "parent_id", "state"}


@dataclass
class _Context:
    """The saved working context as this store last saw it."""

    version: int
    objs: list[Any]  # the caller's message objects; None where read back from disk
    texts: list[str]  # their canonical JSON

    def parsed(self, session_id: str) -> list[Message]:
        """The messages as objects (parsing, once, those read back from disk)."""
        for i, obj in enumerate(self.objs):
            if obj is None:
                self.objs[i] = _loads(session_id, self.texts[i], f"context message {i}")
        return self.objs


@dataclass
class ImportResult:
    source: str
    session_id: str | None = None
    error: str | None = None
    skipped: bool = False


@dataclass
class SessionInfo:
    """Metadata of one session without its messages (cheap: one row and a count)."""

    id: str
    title: str
    summary: str
    status: str
    archived: bool
    created_at: str
    updated_at: str
    project_root: str
    parent_id: str | None
    state: dict[str, Any]
    context_messages: int
    transcript_messages: int
    compactions: list[dict[str, Any]] = field(default_factory=list)


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


def _loads(session_id: str, body: str, what: str) -> Any:
    try:
        return json.loads(body)
    except (TypeError, ValueError) as exc:
        raise CorruptSession(
            session_id, f"{what} is not valid JSON ({exc}); {DOCTOR_HINT}"
        ) from None


def _session_text(title: str, summary: str, compaction_summaries: Iterable[str]) -> str:
    return "\n".join([title, summary, *compaction_summaries])


class SessionStore:
    """Durable sessions in ``<memory_dir>/sessions.sqlite3`` (see docs/storage.md).

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds it.
    """

    def __init__(self, memory_dir: str | os.PathLike[str], *, import_legacy: bool = True) -> None:
        self.memory_dir = Path(memory_dir).expanduser().resolve()
        self.sessions_dir = self.memory_dir / "sessions"
        self.db_path = self.memory_dir / DB_NAME
        self.import_warnings: list[str] = []
        self._lock = threading.RLock()
        self._contexts: dict[str, _Context] = {}
        with _translated(self.db_path):
            for directory in (self.memory_dir, self.sessions_dir):
                if not directory.is_dir():
                    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.chmod(directory, 0o700)
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

    # -- plumbing -------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{check_session_id(session_id)}.lock"

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block (see :mod:`actors.store._lease`)."""
        return _lease.hold(self.lock_path(session_id), session_id)

    def is_leased_here(self, session_id: str) -> bool:
        """True when this process already holds the session's lease."""
        return _lease.is_held_here(self.lock_path(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""
        return _lease.held_elsewhere(self.lock_path(session_id))

    @contextlib.contextmanager
    def _read(self, session_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """A read transaction (a consistent snapshot); damage is blamed on ``session_id``."""
        with self._lock, _translated(self.db_path, session_id):
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back whole if anything in it fails (commit included)."""
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

    @staticmethod
    def _row(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return row

    def _context(self, conn: sqlite3.Connection, session_id: str, row: sqlite3.Row) -> _Context:
        """The saved context, from the cache when it is current, else read back once."""
        cached = self._contexts.get(session_id)
        if (
            cached is not None
            and cached.version == row["context_version"]
            and len(cached.texts) == row["context_len"]
        ):
            return cached
        texts = [
            body
            for (body,) in conn.execute(
                "SELECT coalesce(c.body, t.body) FROM context c "
                "LEFT JOIN transcript t ON t.mid = c.mid "
                "WHERE c.session_rid = ? ORDER BY c.pos",
                (row["rid"],),
            )
        ]
        if len(texts) != row["context_len"] or any(t is None for t in texts):
            raise CorruptSession(session_id, "the working context refers to missing messages")
        objs: list[Any] = [None] * len(texts)  # parsed only when needed
        cached = self._contexts[session_id] = _Context(row["context_version"], objs, texts)
        return cached

    # -- creating and checkpointing -------------------------------------------------------

    def create_session(
        self,
        session_id: str | None = None,
        messages: Sequence[Any] = (),
        *,
        project_root: str = "",
        status: str = "saved",
        title: str = "",
        parent_id: str | None = None,
    ) -> str:
        """Create a session (a fresh random id unless one is given) and return its id."""
        session_id = new_session_id() if session_id is None else check_session_id(session_id)
        if status not in STATUSES:
            raise UsageError(f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")
        with self.lease(session_id), self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise UsageError(f"A session with id '{session_id}' already exists.")
            now = timestamp()
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, status, project_root,"
                " parent_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, now, now, title, status, project_root, parent_id),
            )
            self._contexts.pop(session_id, None)
            row = self._row(conn, session_id)
            self._index_session_text(conn, row["rid"], title, "", [])
            appended = self._append(conn, session_id, row, list(messages), planned_calls=False)
        appended()
        return session_id

    def checkpoint(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        state: dict[str, Any] | None = None,
        planned_calls: bool = False,
        status: str | None = None,
    ) -> int:
        """Save the working context and (optionally) the state in ONE transaction.

        ``messages`` is the whole working context; it must extend the saved one, else
        :class:`ContextConflict`. Only the new messages are written (to the transcript, the
        context and the search index). With ``planned_calls``, the tool calls of new assistant
        messages are recorded as planned (write-ahead: see :meth:`mark_started`). Returns the
        number of messages appended.
        """
        check_session_id(session_id)
        if status is not None and status not in STATUSES:
            raise UsageError(f"Unknown status {status!r}.")
        incoming = list(messages)
        with self.lease(session_id), self._write() as conn:
            row = self._row(conn, session_id)
            appended = self._append(
                conn, session_id, row, incoming, planned_calls=planned_calls, state=state,
                status=status,
            )
        return appended()

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> int:
        """Save the whole working context (the notes' API); costs only the new messages."""
        return self.checkpoint(session_id, messages)

    def _append(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        row: sqlite3.Row,
        incoming: list[Any],
        *,
        planned_calls: bool,
        state: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> Callable[[], int]:
        """Write the delta of ``incoming`` over the saved context inside ``conn``'s transaction.

        Returns a function to call after COMMIT succeeded: it updates the cache (so a failed
        commit never leaves the cache ahead of the disk) and returns the count appended.
        """
        saved = self._context(conn, session_id, row)
        n = len(saved.texts)
        if len(incoming) < n:
            raise ContextConflict(
                f"Context changed unexpectedly for session '{session_id}' ({len(incoming)} "
                f"messages given, {n} saved); only compaction may replace it."
            )
        prefix_objs = incoming[:n]
        if not all(map(operator.is_, prefix_objs, saved.objs)):
            for i, (given, kept) in enumerate(zip(prefix_objs, saved.objs, strict=True)):
                if given is not kept and encode(to_plain(given)) != saved.texts[i]:
                    raise ContextConflict(
                        f"Context changed unexpectedly for session '{session_id}' at message "
                        f"{i}; use compaction to replace it."
                    )
        new_objs = incoming[n:]
        new_plain = [to_plain(m) for m in new_objs]
        new_texts = [encode(m) for m in new_plain]
        rid = row["rid"]
        self._insert_messages(conn, rid, row["transcript_len"], n, new_plain, new_texts,
                              planned_calls=planned_calls)
        sets = ["context_len = ?", "transcript_len = ?", "updated_at = ?"]
        args: list[Any] = [n + len(new_texts), row["transcript_len"] + len(new_texts), timestamp()]
        if state is not None:
            state_text = json.dumps(state, ensure_ascii=False, sort_keys=True)
            if state_text != row["state"]:
                sets.append("state = ?")
                args.append(state_text)
        if status is not None and status != row["status"]:
            sets.append("status = ?")
            args.append(status)
        conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE rid = ?", (*args, rid))

        def commit() -> int:
            saved.objs[:] = prefix_objs
            saved.objs.extend(new_objs)
            saved.texts.extend(new_texts)
            return len(new_texts)

        return commit

    @staticmethod
    def _insert_messages(
        conn: sqlite3.Connection,
        rid: int,
        first_seq: int,
        first_pos: int | None,
        plain: list[Message],
        texts: list[str],
        *,
        planned_calls: bool,
    ) -> list[int]:
        """Append messages to the transcript (and the context at ``first_pos`` unless None)."""
        mids = []
        for i, (message, text) in enumerate(zip(plain, texts, strict=True)):
            mid = conn.execute(
                "INSERT INTO transcript (session_rid, seq, body) VALUES (?, ?, ?)",
                (rid, first_seq + i, text),
            ).lastrowid
            assert mid is not None
            mids.append(mid)
            if first_pos is not None:
                conn.execute(
                    "INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
                    (rid, first_pos + i, mid),
                )
            searchable = text_of(message)
            if searchable:
                conn.execute(
                    "INSERT INTO message_text (rowid, text) VALUES (?, ?)",
                    (mid, searchable[:MAX_INDEXED_CHARS]),
                )
            if message.get("role") == "tool":
                conn.execute(
                    "DELETE FROM tool_calls WHERE session_rid = ? AND call_id = ?",
                    (rid, str(message.get("tool_call_id"))),
                )
            elif planned_calls:
                conn.executemany(
                    "INSERT OR REPLACE INTO tool_calls (session_rid, call_id, phase) "
                    "VALUES (?, ?, 'planned')",
                    [(rid, call_id) for call_id in call_ids_of(message)],
                )
        return mids

    def mark_started(self, session_id: str, call_ids: Iterable[str]) -> None:
        """Durably record that these tool calls are about to start (write-ahead).

        After a crash, :meth:`recover` answers a started call with "outcome unknown" and a
        call that was only planned with "not executed; safe to retry".
        """
        with self.lease(session_id), self._write() as conn:
            rid = self._row(conn, session_id)["rid"]
            conn.executemany(
                "INSERT OR REPLACE INTO tool_calls (session_rid, call_id, phase) "
                "VALUES (?, ?, 'started')",
                [(rid, call_id) for call_id in call_ids],
            )

    def replace_context(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        compaction: dict[str, Any] | None = None,
        expect_prefix: Sequence[Any] | None = None,
        new_in_transcript: Sequence[Any] = (),
    ) -> None:
        """Replace the working context (compaction and repair only; the transcript is kept).

        Messages already in the saved context keep pointing at their transcript rows; messages
        in ``new_in_transcript`` are appended to the transcript first; any other new message
        (a compaction summary) is stored in the context alone. With ``compaction`` (``at``,
        ``before_tokens``, ``after_tokens``, ``summary``) the event is recorded in the same
        transaction. With ``expect_prefix``, the saved context must still start with those
        messages, else :class:`ContextConflict` (a compaction computed on an older context).
        """
        incoming = [to_plain(m) for m in messages]
        texts = [encode(m) for m in incoming]
        added = [to_plain(m) for m in new_in_transcript]
        with self.lease(session_id), self._write() as conn:
            row = self._row(conn, session_id)
            saved = self._context(conn, session_id, row)
            if expect_prefix is not None:
                expected = [encode(to_plain(m)) for m in expect_prefix]
                if saved.texts[: len(expected)] != expected:
                    raise ContextConflict(
                        f"The context of session '{session_id}' changed while it was compacted."
                    )
            rid = row["rid"]
            mids = dict(
                conn.execute(
                    "SELECT t.body, c.mid FROM context c JOIN transcript t ON t.mid = c.mid "
                    "WHERE c.session_rid = ?",
                    (rid,),
                ).fetchall()
            )
            added_texts = [encode(m) for m in added]
            added_mids = self._insert_messages(
                conn, rid, row["transcript_len"], None, added, added_texts, planned_calls=False
            )
            mids.update(zip(added_texts, added_mids, strict=True))
            conn.execute("DELETE FROM context WHERE session_rid = ?", (rid,))
            conn.executemany(
                "INSERT INTO context (session_rid, pos, mid, body) VALUES (?, ?, ?, ?)",
                [
                    (rid, pos, mids.get(text), None if text in mids else text)
                    for pos, text in enumerate(texts)
                ],
            )
            if compaction is not None:
                summaries = [c["summary"] for c in self._compactions(conn, rid)]
                conn.execute(
                    "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
                    " summary) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        rid,
                        len(summaries),
                        compaction.get("at") or timestamp(),
                        int(compaction["before_tokens"]),
                        int(compaction["after_tokens"]),
                        str(compaction["summary"]),
                    ),
                )
                summaries.append(str(compaction["summary"]))
                self._index_session_text(conn, rid, row["title"], row["summary"], summaries)
            conn.execute(
                "UPDATE sessions SET context_len = ?, transcript_len = ?,"
                " context_version = context_version + 1, updated_at = ? WHERE rid = ?",
                (len(texts), row["transcript_len"] + len(added), timestamp(), rid),
            )
            version = row["context_version"] + 1
        self._contexts[session_id] = _Context(version, list(incoming), texts)

    # -- reading --------------------------------------------------------------------------

    def load_session(self, session_id: str) -> dict[str, Any]:
        """The whole record; ``messages`` is the working context as it can be sent now.

        Tool calls still open in the saved context are shown answered with the recovery
        notice (nothing is written: :meth:`recover` persists the repair, under the lease).
        Each message is parsed once: ``messages`` and ``transcript`` share the dicts of the
        messages they have in common.
        """
        check_session_id(session_id)
        with self._read(session_id) as conn:
            row = self._row(conn, session_id)
            self._context(conn, session_id, row)  # validates and caches the context
            by_mid: dict[int, Message] = {}
            transcript = []
            for mid, seq, body in conn.execute(
                "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (row["rid"],),
            ):
                message = by_mid[mid] = _loads(session_id, body, f"transcript message {seq}")
                transcript.append(message)
            context = [
                by_mid[mid] if mid is not None else _loads(session_id, body, f"context {pos}")
                for pos, mid, body in conn.execute(
                    "SELECT pos, mid, body FROM context WHERE session_rid = ? ORDER BY pos",
                    (row["rid"],),
                )
            ]
            phases = self._phases(conn, row["rid"])
            compactions = self._compactions(conn, row["rid"])
        messages = repair(context, _notice(phases)).messages
        record = self._meta(session_id, row)
        record.update(messages=messages, transcript=transcript, compactions=compactions)
        return {key: record[key] for key in RECORD_FIELDS}

    def load_context(self, session_id: str) -> list[Message]:
        """Only the working context, repaired as in :meth:`load_session`."""
        check_session_id(session_id)
        with self._read(session_id) as conn:
            row = self._row(conn, session_id)
            context = self._context(conn, session_id, row)
            phases = self._phases(conn, row["rid"])
        return repair([json.loads(t) for t in context.texts], _notice(phases)).messages

    def info(self, session_id: str) -> SessionInfo:
        check_session_id(session_id)
        with self._read(session_id) as conn:
            row = self._row(conn, session_id)
            compactions = self._compactions(conn, row["rid"])
        meta = self._meta(session_id, row)
        return SessionInfo(
            id=session_id,
            title=meta["title"],
            summary=meta["summary"],
            status=meta["status"],
            archived=meta["archived"],
            created_at=meta["created_at"],
            updated_at=meta["updated_at"],
            project_root=meta["project_root"],
            parent_id=meta["parent_id"],
            state=meta["state"],
            context_messages=row["context_len"],
            transcript_messages=row["transcript_len"],
            compactions=compactions,
        )

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() \
                is not None

    @staticmethod
    def _meta(session_id: str, row: sqlite3.Row) -> dict[str, Any]:
        state = _loads(session_id, row["state"], "state")
        if not isinstance(state, dict):
            raise CorruptSession(session_id, "state is not an object")
        return {
            "id": row["id"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "title": row["title"],
            "summary": row["summary"],
            "archived": bool(row["archived"]),
            "status": row["status"],
            "project_root": row["project_root"],
            "parent_id": row["parent_id"],
            "state": state,
        }

    @staticmethod
    def _phases(conn: sqlite3.Connection, rid: int) -> dict[str, str]:
        return dict(
            conn.execute("SELECT call_id, phase FROM tool_calls WHERE session_rid = ?", (rid,))
        )

    @staticmethod
    def _compactions(conn: sqlite3.Connection, rid: int) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in conn.execute(
                "SELECT at, before_tokens, after_tokens, summary FROM compactions "
                "WHERE session_rid = ? ORDER BY n",
                (rid,),
            )
        ]

    def list_sessions(self, include_archived: bool = False) -> list[dict[str, Any]]:
        """Sessions, most recently updated first (archived ones only when asked)."""
        where = "" if include_archived else "WHERE archived = 0"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_LISTED} FROM sessions {where} ORDER BY updated_at DESC"
            ).fetchall()
        return [dict(r) | {"archived": bool(r["archived"])} for r in rows]

    def search_sessions(
        self, query: str, *, include_archived: bool = False, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Sessions containing every word of ``query`` (case-insensitive substrings), best first.

        Searches title, summary, compaction summaries, and every transcript message (so text
        that compaction removed from the context is still found). A session ranks higher the
        more of its messages match each word, and higher still when its title or summary
        does; ties go to the most recent. Each result carries a ``snippet`` around a match.
        """
        terms = sorted(set(re.findall(r"\w+", query.lower())), key=len, reverse=True)
        if not terms:
            return []
        with self._read() as conn:
            scores: dict[int, float] | None = None
            shown: dict[int, tuple[str, int]] = {}
            for term in terms:
                hits = self._term_hits(conn, term)
                if scores is not None:
                    hits = {rid: hit for rid, hit in hits.items() if rid in scores}
                scores = {rid: (scores or {}).get(rid, 0.0) + hit[0] for rid, hit in hits.items()}
                for rid, (_, table, rowid) in hits.items():
                    shown.setdefault(rid, (table, rowid))
                if not scores:
                    return []
            assert scores is not None
            recency = {
                rid: updated
                for rid, updated, archived in conn.execute(
                    "SELECT rid, updated_at, archived FROM sessions WHERE rid IN "
                    f"({','.join('?' * len(scores))})",
                    list(scores),
                )
                if include_archived or not archived
            }
            ranked = sorted(recency, key=recency.__getitem__, reverse=True)
            ranked = sorted(ranked, key=scores.__getitem__, reverse=True)[:limit]
            results = []
            for rid in ranked:
                item = dict(conn.execute(
                    f"SELECT {_LISTED} FROM sessions WHERE rid = ?", (rid,)
                ).fetchone())
                item["archived"] = bool(item["archived"])
                table, rowid = shown[rid]
                (text,) = conn.execute(
                    f"SELECT text FROM {table} WHERE rowid = ?", (rowid,)
                ).fetchone()
                item["snippet"] = _snippet(text, terms)
                results.append(item)
        return results

    @staticmethod
    def _term_hits(conn: sqlite3.Connection, term: str) -> dict[int, tuple[float, str, int]]:
        """``{session rid: (score, table, rowid of a match)}`` for sessions containing term.

        The score grows with the number of matching messages (log-scaled) and gets +3 for a
        match in the title, summary or a compaction summary. Counting needs no bm25 over every
        matching row, so a word found in every session stays cheap.
        """
        if len(term) >= 3:
            argument = '"' + term.replace('"', '""') + '"'
            in_messages, in_sessions = "message_text MATCH ?", "session_text MATCH ?"
        else:  # shorter than a trigram: a scan of the index text (rare, still bounded)
            escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            argument = f"%{escaped}%"
            in_messages = in_sessions = "text LIKE ? ESCAPE '\\'"
        hits: dict[int, tuple[float, str, int]] = {}
        for rid, count, rowid in conn.execute(
            "SELECT t.session_rid, count(*), max(m.rowid) FROM "
            f"(SELECT rowid FROM message_text WHERE {in_messages}) m "
            "JOIN transcript t INDEXED BY transcript_session_of ON t.mid = m.rowid "
            "GROUP BY t.session_rid",
            (argument,),
        ):
            hits[rid] = (math.log1p(count), "message_text", rowid)
        for (rid,) in conn.execute(
            f"SELECT rowid FROM session_text WHERE {in_sessions}", (argument,)
        ):
            score, table, rowid = hits.get(rid, (0.0, "session_text", rid))
            hits[rid] = (score + 3.0, table, rowid)
        return hits

    # -- metadata -------------------------------------------------------------------------

    def update(self, session_id: str, **fields: Any) -> None:
        """Set metadata fields (title, summary, archived, status, project_root, parent_id,
        state) in one transaction."""
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise TypeError(f"update() got unknown fields: {', '.join(sorted(unknown))}")
        if "status" in fields and fields["status"] not in STATUSES:
            raise UsageError(f"Unknown status {fields['status']!r}.")
        values = dict(fields)
        if "state" in values:
            values["state"] = json.dumps(values["state"], ensure_ascii=False, sort_keys=True)
        if "archived" in values:
            values["archived"] = int(bool(values["archived"]))
        with self.lease(session_id), self._write() as conn:
            row = self._row(conn, session_id)
            if values:
                assignments = ", ".join(f"{k} = ?" for k in values)
                conn.execute(
                    f"UPDATE sessions SET {assignments}, updated_at = ? WHERE rid = ?",
                    (*values.values(), timestamp(), row["rid"]),
                )
            if "title" in values or "summary" in values:
                self._index_session_text(
                    conn,
                    row["rid"],
                    values.get("title", row["title"]),
                    values.get("summary", row["summary"]),
                    [c["summary"] for c in self._compactions(conn, row["rid"])],
                )

    @staticmethod
    def _index_session_text(
        conn: sqlite3.Connection, rid: int, title: str, summary: str, compactions: Iterable[str]
    ) -> None:
        conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))
        conn.execute(
            "INSERT INTO session_text (rowid, text) VALUES (?, ?)",
            (rid, _session_text(title, summary, compactions)),
        )

    def write_summary(self, session_id: str, summary: str) -> str:
        self.update(session_id, summary=summary.strip())
        return "Saved session summary."

    def ensure_summary(self, session_id: str) -> None:
        """Write the notes' fallback summary (last six user/assistant excerpts) if none."""
        with self.lease(session_id):
            record = self.info(session_id)
            if record.summary.strip():
                return
            excerpts = []
            for message in self.load_context(session_id):
                if message.get("role") in {"user", "assistant"} and message.get("content"):
                    excerpts.append(f"{message['role']}: {text_of(message)}")
            summary = "\n".join(excerpts[-6:])[:2000] or "Session ended without messages."
            self.update(session_id, summary=summary)

    def rename(self, session_id: str, title: str) -> None:
        self.update(session_id, title=title.strip())

    def archive(self, session_id: str) -> None:
        self.update(session_id, archived=True)

    def unarchive(self, session_id: str) -> None:
        self.update(session_id, archived=False)

    # -- recovery -------------------------------------------------------------------------

    def recover(self, session_id: str) -> list[Message]:
        """Give every unanswered tool call a result and drop results answering no call.

        A call recorded as started (or not recorded at all) is answered "Execution
        interrupted; outcome unknown. Inspect state before retrying."; a call only planned is
        answered "Not executed: ... Safe to retry." Nothing is ever replayed. The notices go
        into context and transcript in one transaction. Idempotent. Returns the context.
        """
        with self.lease(session_id):
            check_session_id(session_id)
            with self._read(session_id) as conn:
                row = self._row(conn, session_id)
                context = self._context(conn, session_id, row)
                phases = self._phases(conn, row["rid"])
                objs = list(context.parsed(session_id))
            fixed = repair(objs, _notice(phases))
            if not fixed.changed:
                return objs
            if fixed.appends_only(objs):
                self.checkpoint(session_id, fixed.messages)
            else:
                self.replace_context(session_id, fixed.messages, new_in_transcript=fixed.added)
            return fixed.messages

    # -- lifecycle ------------------------------------------------------------------------

    def fork(self, session_id: str) -> str:
        """Copy a session into a new, independent one (``parent_id`` = the source); its id."""
        check_session_id(session_id)
        new_id = new_session_id()
        with self.lease(session_id), self.lease(new_id), self._write() as conn:
            src = self._row(conn, session_id)
            now = timestamp()
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_version, context_len,"
                " transcript_len) SELECT ?, ?, ?, title, summary, 0, 'saved', project_root, id,"
                " state, 0, context_len, transcript_len FROM sessions WHERE rid = ?",
                (new_id, now, now, src["rid"]),
            )
            new_rid = self._row(conn, new_id)["rid"]
            old = src["rid"]
            conn.execute(
                "INSERT INTO transcript (session_rid, seq, body) "
                "SELECT ?, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (new_rid, old),
            )
            conn.execute(
                "INSERT INTO message_text (rowid, text) SELECT t2.mid, m.text "
                "FROM transcript t1 JOIN message_text m ON m.rowid = t1.mid "
                "JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
                "WHERE t1.session_rid = ?",
                (new_rid, old),
            )
            conn.execute(
                "INSERT INTO context (session_rid, pos, mid, body) "
                "SELECT ?, c.pos, t2.mid, c.body FROM context c "
                "LEFT JOIN transcript t1 ON t1.mid = c.mid "
                "LEFT JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
                "WHERE c.session_rid = ?",
                (new_rid, new_rid, old),
            )
            for table, columns in (
                ("compactions", "n, at, before_tokens, after_tokens, summary"),
                ("tool_calls", "call_id, phase"),
            ):
                conn.execute(
                    f"INSERT INTO {table} (session_rid, {columns}) "
                    f"SELECT ?, {columns} FROM {table} WHERE session_rid = ?",
                    (new_rid, old),
                )
            conn.execute(
                "INSERT INTO session_text (rowid, text) SELECT ?, text FROM session_text "
                "WHERE rowid = ?",
                (new_rid, old),
            )
        with self.lease(new_id):
            self.recover(new_id)
        return new_id

    def delete(self, session_id: str) -> None:
        """Delete a session's record (not its lock file, nor any project file)."""
        check_session_id(session_id)
        with self.lease(session_id), self._write() as conn:
            rid = self._row(conn, session_id)["rid"]
            conn.execute(
                "DELETE FROM message_text WHERE rowid IN "
                "(SELECT mid FROM transcript WHERE session_rid = ?)",
                (rid,),
            )
            for table in ("transcript", "context", "compactions", "tool_calls"):
                conn.execute(f"DELETE FROM {table} WHERE session_rid = ?", (rid,))
            conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))
            conn.execute("DELETE FROM sessions WHERE rid = ?", (rid,))
        self._contexts.pop(session_id, None)

    # -- export and import ----------------------------------------------------------------

    def export(self, session_id: str) -> dict[str, Any]:
        """The record as portable JSON data (``format_version`` first)."""
        return {"format_version": FORMAT_VERSION, **self.load_session(session_id)}

    def import_(self, *paths: str | os.PathLike[str]) -> list[ImportResult]:
        """Import exported files, older JSON records, and directories of them.

        A record whose id already exists is skipped (importing is idempotent); a malformed
        one is reported by name and skipped; the rest are imported.
        """
        results = []
        for raw in paths:
            path = Path(raw).expanduser()
            if path.is_dir():
                files = sorted(path.glob("*.json"))
                if not files:
                    results.append(ImportResult(str(path), error=f"{path}: no *.json files"))
            elif path.exists():
                files = [path]
            else:
                results.append(ImportResult(str(path), error=f"{path}: no such file"))
                continue
            for file in files:
                try:
                    record = read_record_file(file)
                    skipped = not self.import_record(record)
                    results.append(ImportResult(str(file), record["id"], skipped=skipped))
                except (InvalidRecord, StorageError, UsageError) as exc:
                    results.append(ImportResult(str(file), error=str(exc)))
        return results

    def import_record(self, record: dict[str, Any]) -> bool:
        """Insert a normalised record; False when a session with its id already exists."""
        record = normalise_record(record, f"record {record.get('id')!r}")
        session_id = record["id"]
        with self.lease(session_id), self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                return False
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_len, transcript_len)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, record["created_at"], record["updated_at"], record["title"],
                    record["summary"], int(record["archived"]),
                    "saved" if record["status"] == "active" else record["status"],
                    record["project_root"], record["parent_id"],
                    json.dumps(record["state"], ensure_ascii=False, sort_keys=True),
                    len(record["messages"]), len(record["transcript"]),
                ),
            )
            rid = self._row(conn, session_id)["rid"]
            transcript = [to_plain(m) for m in record["transcript"]]
            texts = [encode(m) for m in transcript]
            mids = self._insert_messages(conn, rid, 0, None, transcript, texts,
                                         planned_calls=False)
            by_text = dict(zip(texts, mids, strict=True))
            conn.executemany(
                "INSERT INTO context (session_rid, pos, mid, body) VALUES (?, ?, ?, ?)",
                [
                    (rid, pos, by_text.get(text), None if text in by_text else text)
                    for pos, text in enumerate(encode(to_plain(m)) for m in record["messages"])
                ],
            )
            compactions = record["compactions"]
            conn.executemany(
                "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
                " summary) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (rid, n, str(c.get("at", "")), int(c.get("before_tokens", 0)),
                     int(c.get("after_tokens", 0)), str(c.get("summary", "")))
                    for n, c in enumerate(compactions)
                    if isinstance(c, dict)
                ],
            )
            self._index_session_text(
                conn, rid, record["title"], record["summary"],
                [str(c.get("summary", "")) for c in compactions if isinstance(c, dict)],
            )
        return True

    def _import_legacy_dir(self) -> None:
        """Import ``sessions/*.json`` of the older layout once each; never modify them."""
        try:
            entries = [e for e in os.scandir(self.sessions_dir) if e.name.endswith(".json")]
        except OSError:
            return
        if not entries:
            return
        with self._read() as conn:
            known = {
                name: (size, mtime)
                for name, size, mtime in conn.execute(
                    "SELECT name, size, mtime_ns FROM legacy_files"
                )
            }
        for entry in entries:
            try:
                stat = entry.stat()
            except OSError:
                continue
            if known.get(entry.name) == (stat.st_size, stat.st_mtime_ns):
                continue
            session_id, error = None, None
            try:
                record = read_record_file(Path(entry.path))
                self.import_record(record)
                session_id = record["id"]
            except InvalidRecord as exc:
                error = str(exc)
                self.import_warnings.append(f"Skipped legacy session file {error}")
            except UsageError:  # its lease is held: an older harness still runs it; next time
                continue
            with self._write() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO legacy_files (name, size, mtime_ns, session_id, error)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (entry.name, stat.st_size, stat.st_mtime_ns, session_id, error),
                )


def _notice(phases: dict[str, str]) -> Callable[[str], str]:
    def notice(call_id: str) -> str:
        return NOT_STARTED_NOTICE if phases.get(call_id) == "planned" else INTERRUPTED_NOTICE

    return notice


def _snippet(text: str, terms: Sequence[str]) -> str:
    lowered = text.lower()
    at = min((i for i in (lowered.find(t) for t in terms) if i >= 0), default=0)
    start = max(0, at - SNIPPET_RADIUS)
    end = min(len(text), at + SNIPPET_RADIUS * 2)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")
