"""The session store's logic, shared by the SQLite and the PostgreSQL backend.

:class:`Store` holds everything that does not depend on the database: the extend rule and its
context cache, delta appends, write-ahead tool-call records, recovery, compaction's context
replacement, fork, delete, summaries, search ranking, import and export. The SQL it issues is
the common dialect of SQLite ≥ 3.35 and PostgreSQL (``?`` placeholders; the PostgreSQL
backend adapts them in one place). A backend supplies only what differs: its connection and
transactions (:meth:`Store._read`, :meth:`Store._write`) with their error translation, the
lease, the schema, and the search index (keeping it up to date and finding one word in it).

Cost: a checkpoint appends only the messages that are new since the last one. The store keeps,
per session, the saved context it last read or wrote (the caller's message objects and their
canonical JSON), so checking that a checkpoint *extends* the saved context is a pointer
comparison per message and never reads earlier messages back. The cache is keyed by
``(context_version, context_len)`` of the session row, so a change made by another process,
another machine or another store instance is noticed and the cache reloaded.

Threads and cancellation: every public method is synchronous, thread-safe (one connection
behind ``self._lock``) and one transaction; async callers run it in a worker thread. Nothing
is cancellable: a call that has started runs to its end in its thread, and the cache is
updated only after COMMIT returned, so it is never ahead of the database.
"""

from __future__ import annotations

import abc
import contextlib
import json
import operator
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from actors.core.errors import (
    ContextConflict,
    CorruptSession,
    SessionNotFound,
    StorageError,
    UsageError,
)
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import (
    INTERRUPTED_NOTICE,
    NOT_STARTED_NOTICE,
    Message,
    call_ids_of,
    encode,
    repair,
    text_of,
    to_plain,
)
from actors.store._portability import Portability
from actors.store._records import (
    RECORD_FIELDS,
    STATUSES,
    SessionInfo,
    timestamp,
)
from actors.store._search import (
    MAX_INDEXED_CHARS,
    Hit,
    query_terms,
    session_text,
    snippet,
    term_hits,
)

_SESSION_COLUMNS = (
    "rid", "id", "created_at", "updated_at", "title", "summary", "archived", "status",
    "project_root", "parent_id", "state", "context_version", "context_len", "transcript_len",
)
_LISTED_COLUMNS = (
    "id", "title", "status", "created_at", "updated_at", "summary", "archived", "project_root",
    "parent_id",
)
_LISTED = ", ".join(_LISTED_COLUMNS)
_COMPACTION_COLUMNS = ("at", "before_tokens", "after_tokens", "summary")
_UPDATABLE = {"title", "summary", "archived", "status", "project_root", "parent_id", "state"}
_PLANNED = (
    "INSERT INTO tool_calls (session_rid, call_id, phase) VALUES (?, ?, ?) "
    "ON CONFLICT (session_rid, call_id) DO UPDATE SET phase = excluded.phase"
)


class Cursor(Protocol):
    """What the shared code reads from a statement: rows as tuples (or tuple-like rows)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The connection the shared code writes SQL to (``?`` placeholders)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...


Row = dict[str, Any]


@dataclass
class _Context:
    """The saved working context as this store last saw it."""

    version: int
    objs: list[Any]  # the caller's message objects; None where read back from disk
    texts: list[str]  # their canonical JSON

    def parsed(self, loads: Callable[[str, str], Any]) -> list[Message]:
        """The messages as objects (parsing, once, those read back from disk)."""
        for i, obj in enumerate(self.objs):
            if obj is None:
                self.objs[i] = loads(self.texts[i], f"context message {i}")
        return self.objs


def _notice(phases: dict[str, str]) -> Callable[[str], str]:
    def notice(call_id: str) -> str:
        return NOT_STARTED_NOTICE if phases.get(call_id) == "planned" else INTERRUPTED_NOTICE

    return notice


def _in_list(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


class Store(Portability, abc.ABC):
    """Durable sessions (see docs/storage.md); the backends are :class:`SessionStore`
    (SQLite, the default) and :class:`PostgresSessionStore`.

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds
    it; reads take no lease.
    """

    #: how to get a damaged session looked at, appended to :class:`CorruptSession` messages
    damage_hint = "delete it (--delete ID --yes) or restore it from an export"

    def __init__(self, memory_dir: str | os.PathLike[str]) -> None:
        """Create the memory directory (0700) and the state shared by all backends; the
        subclass then opens its database and calls :meth:`_import_legacy_dir`."""
        self.memory_dir = Path(memory_dir).expanduser().resolve()
        self.sessions_dir = self.memory_dir / "sessions"
        self.import_warnings: list[str] = []
        self._lock = threading.RLock()  # guards the connection; methods nest
        self._contexts: dict[str, _Context] = {}
        try:
            for directory in (self.memory_dir, self.sessions_dir):
                if not directory.is_dir():
                    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.chmod(directory, 0o700)
        except OSError as exc:
            raise StorageError(
                f"{exc.strerror or exc} ({exc.filename or self.memory_dir})."
            ) from exc

    # -- what a backend supplies ----------------------------------------------------------

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the sessions are, for people (a file path, or a URL without password)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connections (idempotent)."""

    @abc.abstractmethod
    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block; re-entrant within this process.

        May be entered in one thread and exited in another (the supervisor does). Raises
        :class:`SessionLocked` at once, never after waiting, when another process holds it.
        """

    @abc.abstractmethod
    def is_leased_here(self, session_id: str) -> bool:
        """True when this process already holds the session's lease."""

    @abc.abstractmethod
    def is_running_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""

    @abc.abstractmethod
    def _read(self, session_id: str | None = None) -> contextlib.AbstractContextManager[Conn]:
        """A read transaction (one consistent snapshot); damage is blamed on ``session_id``."""

    @abc.abstractmethod
    def _write(self, *leased: str) -> contextlib.AbstractContextManager[Conn]:
        """One write transaction, rolled back whole if anything in it fails (COMMIT included).

        ``leased`` are the sessions it writes, whose leases the caller holds: a backend whose
        lease can be lost behind its back checks, inside the transaction, that it still holds
        them, and refuses to write otherwise.
        """

    @abc.abstractmethod
    def _index_messages(self, conn: Conn, rid: int, rows: list[tuple[int, str]]) -> None:
        """Add ``(mid, text)`` of new transcript messages of session ``rid`` to the index."""

    @abc.abstractmethod
    def _index_session_text(self, conn: Conn, rid: int, text: str) -> None:
        """Set the indexed title/summary/compaction-summary text of session ``rid``."""

    @abc.abstractmethod
    def _unindex_session(self, conn: Conn, rid: int) -> None:
        """Remove session ``rid``'s messages and text from the index (before its rows go)."""

    @abc.abstractmethod
    def _copy_index(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        """Index the fork ``new_rid`` as ``old_rid`` is (transcripts matched by ``seq``)."""

    @abc.abstractmethod
    def _message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        """``(session rid, matching messages, mid of one of them)`` for messages containing
        ``term`` as a case-insensitive substring."""

    @abc.abstractmethod
    def _session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        """Rids of sessions whose title, summary or compaction summaries contain ``term``."""

    @abc.abstractmethod
    def _indexed_texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        """The indexed text of messages (``kind`` "message", by mid) or sessions ("session",
        by rid), for snippets."""

    @staticmethod
    def _rid_among(rids: list[int]) -> tuple[str, Sequence[Any]]:
        """A condition on ``rid`` matching any of ``rids`` (which may be thousands), and its
        parameters: ``IN (?, …)`` unless the backend has something better."""
        return f"IN ({_in_list(rids)})", rids

    # -- plumbing -------------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _loads(self, session_id: str) -> Callable[[str, str], Any]:
        """A JSON parser that reports bad rows as damage of ``session_id``."""

        def loads(body: str, what: str) -> Any:
            try:
                return json.loads(body)
            except (TypeError, ValueError) as exc:
                raise CorruptSession(
                    session_id, f"{what} is not valid JSON ({exc}); {self.damage_hint}"
                ) from None

        return loads

    @staticmethod
    def _row(conn: Conn, session_id: str) -> Row:
        row = conn.execute(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return dict(zip(_SESSION_COLUMNS, row, strict=True))

    def _context(self, conn: Conn, session_id: str, row: Row) -> _Context:
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
        with self.lease(session_id), self._write(session_id) as conn:
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
            self._index_session_text(conn, row["rid"], session_text(title, "", []))
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
        with self.lease(session_id), self._write(session_id) as conn:
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
        conn: Conn,
        session_id: str,
        row: Row,
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

    def _insert_messages(
        self,
        conn: Conn,
        rid: int,
        first_seq: int,
        first_pos: int | None,
        plain: list[Message],
        texts: list[str],
        *,
        planned_calls: bool,
    ) -> list[int]:
        """Append messages to the transcript (and the context at ``first_pos`` unless None),
        index them and update the write-ahead records; their transcript row ids (mids).

        The statements are batched, so their number does not grow with the messages.
        """
        if not plain:
            return []
        conn.executemany(
            "INSERT INTO transcript (session_rid, seq, body) VALUES (?, ?, ?)",
            [(rid, first_seq + i, text) for i, text in enumerate(texts)],
        )
        mids = [
            mid
            for (mid,) in conn.execute(
                "SELECT mid FROM transcript WHERE session_rid = ? AND seq >= ? ORDER BY seq",
                (rid, first_seq),
            )
        ]
        if first_pos is not None:
            conn.executemany(
                "INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
                [(rid, first_pos + i, mid) for i, mid in enumerate(mids)],
            )
        indexed = []
        phases: dict[str, str | None] = {}  # call id -> new write-ahead phase; None: answered
        for message, mid in zip(plain, mids, strict=True):
            searchable = text_of(message)
            if searchable:
                indexed.append((mid, searchable[:MAX_INDEXED_CHARS]))
            if message.get("role") == "tool":
                phases[str(message.get("tool_call_id"))] = None
            elif planned_calls:
                phases.update(dict.fromkeys(call_ids_of(message), "planned"))
        if indexed:
            self._index_messages(conn, rid, indexed)
        answered = [(rid, call_id) for call_id, phase in phases.items() if phase is None]
        if answered:
            conn.executemany(
                "DELETE FROM tool_calls WHERE session_rid = ? AND call_id = ?", answered
            )
        planned = [(rid, call_id, phase) for call_id, phase in phases.items() if phase]
        if planned:
            conn.executemany(_PLANNED, planned)
        return mids

    def mark_started(self, session_id: str, call_ids: Iterable[str]) -> None:
        """Durably record that these tool calls are about to start (write-ahead).

        After a crash, :meth:`recover` answers a started call with "outcome unknown" and a
        call that was only planned with "not executed; safe to retry".
        """
        with self.lease(session_id), self._write(session_id) as conn:
            rid = self._row(conn, session_id)["rid"]
            rows = [(rid, call_id, "started") for call_id in call_ids]
            if rows:
                conn.executemany(_PLANNED, rows)

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
        with self.lease(session_id), self._write(session_id) as conn:
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
            if texts:
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
                self._index_session_text(
                    conn, rid, session_text(row["title"], row["summary"], summaries)
                )
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
        loads = self._loads(session_id)
        with self._read(session_id) as conn:
            row = self._row(conn, session_id)
            self._context(conn, session_id, row)  # validates and caches the context
            by_mid: dict[int, Message] = {}
            transcript = []
            for mid, seq, body in conn.execute(
                "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (row["rid"],),
            ):
                message = by_mid[mid] = loads(body, f"transcript message {seq}")
                transcript.append(message)
            context = [
                by_mid[mid] if mid is not None else loads(body, f"context {pos}")
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
            found = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
            return found.fetchone() is not None

    def _meta(self, session_id: str, row: Row) -> dict[str, Any]:
        state = self._loads(session_id)(row["state"], "state")
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
    def _phases(conn: Conn, rid: int) -> dict[str, str]:
        return dict(
            conn.execute("SELECT call_id, phase FROM tool_calls WHERE session_rid = ?", (rid,))
        )

    @staticmethod
    def _compactions(conn: Conn, rid: int) -> list[dict[str, Any]]:
        return [
            dict(zip(_COMPACTION_COLUMNS, r, strict=True))
            for r in conn.execute(
                f"SELECT {', '.join(_COMPACTION_COLUMNS)} FROM compactions "
                "WHERE session_rid = ? ORDER BY n",
                (rid,),
            )
        ]

    @staticmethod
    def _listed(row: Sequence[Any]) -> dict[str, Any]:
        item = dict(zip(_LISTED_COLUMNS, row, strict=True))
        item["archived"] = bool(item["archived"])
        return item

    def list_sessions(self, include_archived: bool = False) -> list[dict[str, Any]]:
        """Sessions, most recently updated first (archived ones only when asked)."""
        where = "" if include_archived else "WHERE archived = 0"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_LISTED} FROM sessions {where} ORDER BY updated_at DESC"
            ).fetchall()
        return [self._listed(r) for r in rows]

    def search_sessions(
        self, query: str, *, include_archived: bool = False, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Sessions containing every word of ``query`` (case-insensitive substrings), best first.

        Searches title, summary, compaction summaries, and every transcript message (so text
        that compaction removed from the context is still found). A session ranks higher the
        more of its messages match each word, and higher still when its title or summary
        does; ties go to the most recent. Each result carries a ``snippet`` around a match.
        """
        terms = query_terms(query)
        if not terms:
            return []
        with self._read() as conn:
            scores: dict[int, float] | None = None
            shown: dict[int, Hit] = {}
            for term in terms:
                hits = term_hits(
                    self._message_matches(conn, term), self._session_matches(conn, term)
                )
                if scores is not None:
                    hits = {rid: hit for rid, hit in hits.items() if rid in scores}
                scores = {rid: (scores or {}).get(rid, 0.0) + hit[0]
                          for rid, hit in hits.items()}
                for rid, hit in hits.items():
                    shown.setdefault(rid, hit)
                if not scores:
                    return []
            assert scores is not None
            among, params = self._rid_among(list(scores))
            recency = {
                rid: updated
                for rid, updated, archived in conn.execute(
                    f"SELECT rid, updated_at, archived FROM sessions WHERE rid {among}", params
                ).fetchall()
                if include_archived or not archived
            }
            ranked = sorted(recency, key=recency.__getitem__, reverse=True)
            ranked = sorted(ranked, key=scores.__getitem__, reverse=True)[:limit]
            if not ranked:
                return []
            items = {
                row[0]: self._listed(row[1:])
                for row in conn.execute(
                    f"SELECT rid, {_LISTED} FROM sessions WHERE rid IN ({_in_list(ranked)})",
                    ranked,
                )
            }
            texts = {
                kind: self._indexed_texts(
                    conn, kind, [shown[rid][2] for rid in ranked if shown[rid][1] == kind]
                )
                for kind in ("message", "session")
            }
        results = []
        for rid in ranked:
            item = items[rid]
            _, kind, key = shown[rid]
            item["snippet"] = snippet(texts[kind].get(key, ""), terms)
            results.append(item)
        return results

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
        with self.lease(session_id), self._write(session_id) as conn:
            row = self._row(conn, session_id)
            if values:
                assignments = ", ".join(f"{k} = ?" for k in values)
                conn.execute(
                    f"UPDATE sessions SET {assignments}, updated_at = ? WHERE rid = ?",
                    (*values.values(), timestamp(), row["rid"]),
                )
            if "title" in values or "summary" in values:
                self._index_session_text(conn, row["rid"], session_text(
                    values.get("title", row["title"]),
                    values.get("summary", row["summary"]),
                    [c["summary"] for c in self._compactions(conn, row["rid"])],
                ))

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
                objs = list(context.parsed(self._loads(session_id)))
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
        with (
            self.lease(session_id),
            self.lease(new_id),
            self._write(session_id, new_id) as conn,
        ):
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
            self._copy_index(conn, old, new_rid)
        with self.lease(new_id):
            self.recover(new_id)
        return new_id

    def delete(self, session_id: str) -> None:
        """Delete a session's record (not its lock file, nor any project file)."""
        check_session_id(session_id)
        with self.lease(session_id), self._write(session_id) as conn:
            rid = self._row(conn, session_id)["rid"]
            self._unindex_session(conn, rid)
            for table in ("transcript", "context", "compactions", "tool_calls"):
                conn.execute(f"DELETE FROM {table} WHERE session_rid = ?", (rid,))
            conn.execute("DELETE FROM sessions WHERE rid = ?", (rid,))
        self._contexts.pop(session_id, None)
