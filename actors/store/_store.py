"""The session store: durable sessions behind one API, on either backend (docs/storage.md).

:class:`Store` is built from a backend's parts (:class:`~actors.store._parts.Backend`: its
transactions, its lease and its search index) and holds the logic once: every public method
is one transaction under the session's lease, made of the pieces that live beside it:

* the extend rule and its context cache (:mod:`actors.store._extend`): a checkpoint costs
  only the messages it appends;
* the shared SQL of the tables (:mod:`actors.store._rows`);
* the write-ahead records of tool calls, and what recovery answers them
  (:mod:`actors.store._write_ahead`);
* search and its ranking (:mod:`actors.store._search`);
* export, import and the older JSON layout, as functions over this API
  (:mod:`actors.store._portability`).

Threads and cancellation: every public method is synchronous, thread-safe (the
transactions hold the database's lock) and one transaction; async callers run it in a worker
thread. Nothing is cancellable: a call that has started runs to its end in its thread, and
the cache is updated only after COMMIT returned, so it is never ahead of the database.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.core.budget import forked_state
from actors.core.errors import (
    AmbiguousSessionId,
    ContextConflict,
    CorruptSession,
    SessionLocked,
    SessionNotFound,
    StorageError,
    UsageError,
)
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import (
    Message,
    apply_plan,
    call_ids_of,
    encode,
    repair,
    repair_plan,
    text_of,
    to_plain,
    tool_result,
)
from actors.core.previews import latest_user_text, one_line, own_user_text
from actors.core.stored import StoredMessages
from actors.core.titles import SOURCES
from actors.store import (
    _appends,
    _branches,
    _portability,
    _rows,
    _search,
    _survivors,
    _write_ahead,
)
from actors.store._extend import ContextCache, Extension, SavedContext, appended, extension
from actors.store._parts import Backend, Conn
from actors.store._records import (
    RECORD_FIELDS,
    STATUSES,
    Rewound,
    SessionInfo,
    normalise_record,
    timestamp,
)
from actors.store._rows import AppendRow, SessionRow
from actors.store._text import indexed_text, session_text

FALLBACK_SUMMARY_EXCERPTS = 6  # the notes' fallback summary: the last six excerpts
FALLBACK_SUMMARY_CHARS = 2000
INDEX_BATCH = 256  # messages indexed per transaction of the background indexer


def private_memory_dir(memory_dir: str | os.PathLike[str]) -> Path:
    """The memory directory, resolved, with it and its ``sessions/`` created 0700.

    Every directory it creates is 0700 whatever the umask, the missing parents included
    (``~/.agent-harness`` of the default ``~/.agent-harness/memory``): ``mkdir -p`` would make
    them 0777 under ``umask 000``.
    """
    path = Path(memory_dir).expanduser().resolve()
    try:
        missing = []
        for directory in (path, *path.parents):
            if directory.exists():
                break
            missing.append(directory)
        for directory in [*reversed(missing), path / "sessions"]:
            if not directory.is_dir():
                with contextlib.suppress(FileExistsError):  # another process made it
                    directory.mkdir(mode=0o700)
                    os.chmod(directory, 0o700)
    except OSError as exc:
        raise StorageError(f"{exc.strerror or exc} ({exc.filename or path}).") from exc
    return path


class _StoppedOnAsk(Mapping[str, str]):
    """Call id -> what became of its recorded process group, found (and a survivor stopped)
    when recovery asks, which it does for the calls still open only: one repair pass."""

    def __init__(self, groups: dict[str, _write_ahead.ProcessRecord]) -> None:
        self._groups = groups
        self._lines: dict[str, str | None] = {}

    def __getitem__(self, call_id: str) -> str:
        if call_id not in self._lines:
            group = self._groups.get(call_id)
            self._lines[call_id] = None if group is None else _survivors.stop_survivor(
                group.pgid, group.leader_start, group.host)
        line = self._lines[call_id]
        if line is None:
            raise KeyError(call_id)
        return line

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


def _repaired(messages: StoredMessages, notice: Callable[[str], str]) -> StoredMessages:
    """``messages`` made valid (:func:`~actors.core.messages.repair`), checked on the facts
    saved with them: parsed only when something is to be repaired."""
    plan = repair_plan(messages.facts())
    return StoredMessages(apply_plan(messages, plan, notice).messages) if plan else messages


def _state_text(state: dict[str, Any] | None) -> str | None:
    """A state as the session row stores it (None: no state given)."""
    return None if state is None else _rows.dump_state(state)


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise UsageError(f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")


class Store:
    """Durable sessions (see docs/storage.md): :class:`~actors.store.sqlite.SqliteStore` (the
    default) or :class:`~actors.store.postgres.PostgresStore`, the one type callers annotate.

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds
    it; reads take no lease.

    ``memory_dir`` must exist (:func:`private_memory_dir`); the backend's constructor makes
    it before opening its parts. With ``import_legacy``, older JSON records in
    ``memory_dir/sessions`` are imported on open.
    """

    def __init__(self, memory_dir: Path, backend: Backend, *, import_legacy: bool) -> None:
        self.memory_dir = memory_dir
        self.sessions_dir = memory_dir / "sessions"
        self.db = backend.db
        self.leases = backend.leases
        self.index = backend.index
        self.import_warnings: list[str] = list(backend.warnings)
        self._contexts = ContextCache()
        # Messages this instance left for the indexer since it last found nothing pending
        # (1 at first: look once for what an earlier process left). A hint, not the truth:
        # the database's ``index_pending`` rows are.
        self.unindexed = 1
        if import_legacy:
            _portability.import_legacy_dir(self)

    @property
    def location(self) -> str:
        """Where the sessions are, for people (a file path, or a URL without password)."""
        return self.db.location

    def close(self) -> None:
        """Close the connections (idempotent). Leases held stay held until released."""
        self.db.close()
        self.leases.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the lease ------------------------------------------------------------------------

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block; re-entrant within this process.

        May be entered in one thread and exited in another (the supervisor does). Raises
        :class:`SessionLocked` at once, never after waiting, when another process holds it.
        """
        return self.leases.hold(check_session_id(session_id))

    def _existing_lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """The lease of a session that must exist, for the caller's ``with``: an unknown id is
        :class:`SessionNotFound` here, before any lease (and so any lock file) is taken. A
        lease this process already holds (a running session) costs no extra read."""
        session_id = check_session_id(session_id)
        if not self.leases.is_held_here(session_id):
            with self.db.read() as conn:
                if not _rows.exists(conn, session_id):
                    raise SessionNotFound(session_id)
        return self.leases.hold(session_id)

    def is_leased_here(self, session_id: str) -> bool:
        """True when this process already holds the session's lease."""
        return self.leases.is_held_here(check_session_id(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""
        return self.leases.held_elsewhere(check_session_id(session_id))

    # -- the saved context ----------------------------------------------------------------

    def _saved(self, conn: Conn, row: SessionRow | AppendRow,
               session_id: str | None = None) -> SavedContext:
        sid = row.id if isinstance(row, SessionRow) else session_id
        assert sid is not None

        def read() -> StoredMessages | None:
            texts, shapes, tokens = _rows.context_rows(conn, row.rid)
            if None in texts:
                return None
            return StoredMessages.read(texts, shapes, tokens, self._parser(sid))

        return self._contexts.current(
            sid, rid=row.rid, version=row.context_version, length=row.context_len,
            read=read,
        )

    def _parser(self, session_id: str) -> Callable[[str, int], Message]:
        """How the context of ``session_id`` read back is parsed, message by message, when
        read (:class:`StoredMessages`): damage is :class:`CorruptSession`, as on a load."""
        loads = _rows.json_loader(session_id, self.db.damage_hint)

        def parse(text: str, position: int) -> Message:
            message = loads(text, f"context message {position}")
            if not isinstance(message, dict):
                raise CorruptSession(session_id, f"context message {position} is not an "
                                     f"object; {self.db.damage_hint}")
            return message

        return parse

    def _append(
        self,
        conn: Conn,
        session_id: str,
        row: AppendRow,
        incoming: list[Any],
        *,
        planned_calls: bool,
        state: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> Extension:
        """Write the delta of ``incoming`` over the saved context inside ``conn``'s
        transaction; the caller commits the returned :class:`Extension` after COMMIT."""
        delta = extension(self._saved(conn, row, session_id), incoming, session_id)
        self.unindexed += len(delta.new_texts)
        _appends.write(conn, self.index, row, delta.new_plain, delta.new_texts,
                       planned_calls=planned_calls, state=_state_text(state), status=status)
        return delta

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
        _check_status(status)
        with self.lease(session_id), self.db.write(session_id) as conn:
            if _rows.exists(conn, session_id):
                raise UsageError(f"A session with id '{session_id}' already exists.")
            now = timestamp()
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, status, project_root,"
                " parent_id, title_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, now, now, title, status, project_root, parent_id,
                 "user" if title else ""),
            )
            self._contexts.forget(session_id)
            row = _rows.append_row(conn, session_id)
            self.index.set_session_text(conn, row.rid, session_text(title, "", []))
            delta = self._append(conn, session_id, row, list(messages), planned_calls=False)
        delta.commit()
        self._index_now()
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
        :class:`ContextConflict` (see :mod:`actors.store._extend`). Only the new messages are
        written (to the transcript and the context; the search index follows in a
        transaction of its own, :meth:`index_pending`). With
        ``planned_calls``, the tool calls of new assistant messages are recorded as planned
        (write-ahead: see :meth:`mark_started`). Returns the number of messages appended.
        """
        check_session_id(session_id)
        if status is not None:
            _check_status(status)
        incoming = list(messages)
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.append_row(conn, session_id)
            delta = self._append(conn, session_id, row, incoming, planned_calls=planned_calls,
                                 state=state, status=status)
        return delta.commit()

    def append(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        at: int,
        state: dict[str, Any] | None = None,
        planned_calls: bool = False,
        status: str | None = None,
    ) -> int:
        """Append ``messages`` to a saved context of ``at`` messages: :meth:`checkpoint`
        for the owner of the working context, who knows what it added since its last write.

        Costs what is appended, whatever the context's length: nothing saved is compared or
        copied. :class:`ContextConflict` when the store does not hold exactly ``at``
        messages (the context was replaced or extended by someone else). Returns the number
        the last of them has in the transcript (as ``--info`` numbers messages: the
        transcript's length after the append).
        """
        check_session_id(session_id)
        if status is not None:
            _check_status(status)
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.append_row(conn, session_id)
            _appends.check_at(session_id, row, at)
            saved = self._contexts.cached(session_id, rid=row.rid,
                                          version=row.context_version, length=at)
            delta = appended(saved, messages)
            self.unindexed += len(delta.new_texts)
            _appends.write(conn, self.index, row, delta.new_plain, delta.new_texts,
                           planned_calls=planned_calls, state=_state_text(state),
                           status=status)
        if saved is None:
            self._contexts.forget(session_id)
        return row.transcript_len + delta.commit()

    def mark_started(self, session_id: str, call_ids: Iterable[str]) -> None:
        """Durably record that these tool calls are about to start (write-ahead).

        After a crash, :meth:`recover` answers a started call with "outcome unknown" and a
        call that was only planned with "not executed; safe to retry".
        """
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            _write_ahead.mark_started(conn, _rows.rid_of(conn, session_id), call_ids)

    def mark_process_group(self, session_id: str, call_id: str, pgid: int,
                           leader_start: int | None) -> None:
        """Durably record the process group a started call runs in (its id and its leader's
        start time), so that :meth:`recover` can stop it should it outlive this process."""
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            _write_ahead.mark_process_group(
                conn, _rows.rid_of(conn, session_id), call_id, pgid, leader_start,
                _survivors.this_host(),
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
        added_texts = [encode(m) for m in added]
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            if expect_prefix is not None and not self._saved(conn, row).starts_with(
                expect_prefix
            ):
                raise ContextConflict(
                    f"The context of session '{session_id}' changed while it was compacted."
                )
            rid = row.rid
            mids = _rows.context_mids(conn, rid, set(texts))
            added_mids = _rows.insert_messages(
                conn, rid, row.transcript_len, None, added, added_texts, planned_calls=False,
            )
            self.index.mark_pending(conn, added_mids)
            mids.update(zip(added_texts, added_mids, strict=True))
            conn.execute("DELETE FROM context WHERE session_rid = ?", (rid,))
            _rows.insert_context(conn, rid, texts, mids)
            if compaction is not None:
                event = {**compaction, "at": compaction.get("at") or timestamp()}
                summaries = [c["summary"] for c in _rows.compactions(conn, rid)]
                _rows.insert_compactions(conn, rid, len(summaries), [event])
                summaries.append(str(event["summary"]))
                self.index.set_session_text(
                    conn, rid, session_text(row.title, row.summary, summaries)
                )
            conn.execute(
                "UPDATE sessions SET context_len = ?, transcript_len = ?,"
                " context_version = context_version + 1, updated_at = ? WHERE rid = ?",
                (len(texts), row.transcript_len + len(added), timestamp(), rid),
            )
        self._contexts.replaced(
            session_id, SavedContext(rid, row.context_version + 1, StoredMessages(incoming))
        )
        self._index_now()

    # -- reading --------------------------------------------------------------------------

    def load_session(self, session_id: str) -> dict[str, Any]:
        """The whole record; ``messages`` is the working context as it can be sent now.

        Tool calls still open in the saved context are shown answered with the recovery
        notice (nothing is written: :meth:`recover` persists the repair, under the lease).
        Every message is read and parsed, once (a damaged one is :class:`CorruptSession`
        here, never later): ``messages`` and ``transcript`` share the dicts of the messages
        they have in common, and the saved context is cached as those very objects, so a
        checkpoint extending ``messages`` compares nothing (treat them as immutable). A
        resume reads less: :meth:`recover` and :meth:`load_context` parse nothing.
        """
        check_session_id(session_id)
        loads = _rows.json_loader(session_id, self.db.damage_hint)
        with self.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            by_mid: dict[int, Message] = {}
            transcript = []
            for mid, seq, body in conn.execute(
                "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (row.rid,),
            ):
                message = by_mid[mid] = loads(body, f"transcript message {seq}")
                transcript.append(message)
            context = [
                by_mid.get(mid) if mid is not None else loads(body, f"context {pos}")
                for pos, mid, body in conn.execute(
                    "SELECT pos, mid, body FROM context WHERE session_rid = ? ORDER BY pos",
                    (row.rid,),
                )
            ]
            phases = _write_ahead.phases(conn, row.rid)
            compactions = _rows.compactions(conn, row.rid)
            saved = self._prime(row, context)
        record = self._meta(row)
        record.update(
            messages=repair(saved, _write_ahead.notice_for(phases)).messages,
            transcript=transcript,
            compactions=compactions,
        )
        return {key: record[key] for key in RECORD_FIELDS}

    def load_context(self, session_id: str, *, repaired: bool = True) -> StoredMessages:
        """Only the working context, repaired as in :meth:`load_session` (``repaired=False``:
        exactly as saved, for ``--doctor``).

        Nothing is parsed here: the messages are parsed one by one when read (a damaged one
        is :class:`CorruptSession` then), and the pairing rule is checked on the facts saved
        with each message. Cached: a second load reads nothing."""
        check_session_id(session_id)
        with self.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            messages = self._saved(conn, row).objs.copy()
            phases = _write_ahead.phases(conn, row.rid) if repaired else {}
        if not repaired:
            return messages
        return _repaired(messages, _write_ahead.notice_for(phases))

    def _prime(self, row: SessionRow, context: list[Any]) -> list[Message]:
        """Cache ``context``, just read from ``row``'s snapshot, as its saved context (the
        caller holds the transaction); the context."""
        if len(context) != row.context_len or any(m is None for m in context):
            raise CorruptSession(row.id, "the working context refers to missing messages")
        self._contexts.replaced(
            row.id, SavedContext(row.rid, row.context_version, StoredMessages(context))
        )
        return context

    def info(self, session_id: str) -> SessionInfo:
        """A session's metadata without its messages (one row and the compactions)."""
        check_session_id(session_id)
        with self.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            compactions = _rows.compactions(conn, row.rid)
        return SessionInfo(
            **self._meta(row),
            context_messages=row.context_len,
            transcript_messages=row.transcript_len,
            compactions=compactions,
            preview=row.preview,
            user_messages=row.user_messages,
        )

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self.db.read() as conn:
            return _rows.exists(conn, session_id)

    def _meta(self, row: SessionRow) -> dict[str, Any]:
        """The record's metadata fields of a row."""
        state = _rows.json_loader(row.id, self.db.damage_hint)(row.state, "state")
        if not isinstance(state, dict):
            raise CorruptSession(row.id, "state is not an object")
        return {
            "id": row.id,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "title": row.title,
            "summary": row.summary,
            "archived": bool(row.archived),
            "status": row.status,
            "project_root": row.project_root,
            "parent_id": row.parent_id,
            "fork_point": row.fork_point,
            "title_source": row.title_source,
            "state": state,
        }

    def list_sessions(
        self,
        include_archived: bool = False,
        *,
        project_root: str | None = None,
        include_empty: bool = True,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions, most recently updated first: archived ones only when asked, those of
        ``project_root`` only when given, and without the sessions nobody typed anything in
        unless ``include_empty``. Each entry has the row's metadata, ``preview`` and
        ``messages`` (the transcript's length); one indexed query, no message is read."""
        where = []
        args: list[Any] = []
        if not include_archived:
            where.append("archived = 0")
        if project_root is not None:
            where.append("project_root = ?")
            args.append(project_root)
        if not include_empty:
            where.append("user_messages > 0")
        sql = f"SELECT {_rows.LISTED} FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self.db.read() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [_rows.listed(r) for r in rows]

    def resolve_id(self, prefix: str) -> str:
        """The id of the one session whose id starts with ``prefix`` (an exact id always
        wins; case is ignored when nothing matches as typed). :class:`SessionNotFound` when
        none does, :class:`AmbiguousSessionId` naming them when several do."""
        check_session_id(prefix)
        with self.db.read() as conn:
            if _rows.exists(conn, prefix):
                return prefix
            found = conn.execute(
                "SELECT id, title FROM sessions WHERE substr(id, 1, ?) = ?"
                " ORDER BY updated_at DESC",
                (len(prefix), prefix),
            ).fetchall()
            if not found:
                found = conn.execute(
                    "SELECT id, title FROM sessions WHERE lower(substr(id, 1, ?)) = ?"
                    " ORDER BY updated_at DESC",
                    (len(prefix), prefix.lower()),
                ).fetchall()
        if not found:
            raise SessionNotFound(prefix)
        if len(found) > 1:
            raise AmbiguousSessionId(prefix, [(str(i), str(t)) for i, t in found])
        return str(found[0][0])

    def recent_messages(self, session_id: str, count: int) -> list[tuple[int | None, Message]]:
        """The last ``count`` messages of the working context with their message numbers
        (None for one the context alone holds, a compaction's summary): a preview, a
        resume's replay. Reads only those rows."""
        check_session_id(session_id)
        loads = _rows.json_loader(session_id, self.db.damage_hint)
        with self.db.read(session_id) as conn:
            rid = _rows.rid_of(conn, session_id)
            rows = conn.execute(
                "SELECT c.pos, t.seq, coalesce(c.body, t.body) FROM context c "
                "LEFT JOIN transcript t ON t.mid = c.mid WHERE c.session_rid = ? "
                "ORDER BY c.pos DESC LIMIT ?",
                (rid, count),
            ).fetchall()
        return [
            (None if seq is None else int(seq) + 1, loads(body, f"context {pos}"))
            for pos, seq, body in reversed(rows)
        ]

    def user_messages(self, session_id: str) -> list[_branches.UserMessage]:
        """What the user typed on the current branch (the messages a rewind can go back to
        before), with their message numbers, oldest first."""
        check_session_id(session_id)
        with self.db.read(session_id) as conn:
            rid = _rows.rid_of(conn, session_id)
            end = _branches.context_end(conn, rid)
            if end is None:
                return []
            return _branches.user_messages(conn, rid, _branches.branch(conn, rid, end))

    def search_sessions(
        self,
        query: str,
        *,
        include_archived: bool = False,
        limit: int = 50,
        project_root: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions containing every word of ``query`` (case-insensitive substrings), best first.

        Searches title, summary, compaction summaries, and every transcript message (so text
        that compaction removed from the context is still found). A session ranks higher the
        more of its messages match each word, and higher still when its title or summary
        does; ties go to the most recent. Each result carries a ``snippet`` around a match
        and the ``message`` number it comes from (see :mod:`actors.store._search`); with
        ``project_root``, only that project's sessions.
        """
        self._catch_up_before_reading()
        with self.db.read() as conn:
            return _search.search(
                conn, self.index, query, include_archived=include_archived, limit=limit,
                project_root=project_root,
            )

    # -- the search index, behind the checkpoints -----------------------------------------

    def index_pending(self, limit: int = INDEX_BATCH) -> bool:
        """Index up to ``limit`` transcript messages that are not in the search index yet,
        in one transaction of their own; True when none remain.

        A checkpoint commits its messages with a durable "not yet indexed" mark
        (``index_pending``) and leaves the index to this: the checkpoint writer calls it when
        idle, search before it reads (:meth:`search_sessions`). The transaction is not
        synced on its own (the next durable commit syncs it; a crash loses at most the
        indexing, whose marks are then still there), so it costs CPU, not an ``fsync``.
        Marks are claimed inside the transaction: two indexers never index a message twice.
        """
        with self.db.write(durable=False) as conn:
            rows = self.index.claim_pending(conn, limit)
            texts: dict[int, list[tuple[int, str]]] = {}
            for mid, rid, body in rows:
                if rid is None or body is None:  # its session was deleted since
                    continue
                try:
                    text = indexed_text(json.loads(body))
                except (TypeError, ValueError, AttributeError):
                    continue  # a damaged row: --doctor reports it; nothing to index
                if text:
                    texts.setdefault(rid, []).append((mid, text))
            for rid, items in texts.items():
                self.index.add_messages(conn, rid, items)
        done = len(rows) < limit
        if done:
            self.unindexed = 0
        return done

    def catch_up_index(self) -> None:
        """Index every message not yet indexed (batches of :data:`INDEX_BATCH`)."""
        while not self.index_pending():
            pass

    def _index_now(self) -> None:
        """After a write that is not a checkpoint: one batch of the index, so that a small
        write's messages are indexed when it returns (a bigger backlog, e.g. left by a
        crash, is the indexer's and search's, not this call's). Its data is committed
        already; an index that cannot be written now (a full disk, a busy store) stays
        marked and is caught up later."""
        with contextlib.suppress(StorageError):
            self.index_pending()

    def _catch_up_before_reading(self) -> None:
        """Search sees every committed message: what is still marked is indexed first. A
        store that cannot be written (read-only, busy) is searched as its index stands."""
        with self.db.read() as conn:
            pending = self.index.has_pending(conn)
        if pending:
            self._index_now()

    # -- metadata -------------------------------------------------------------------------

    def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        summary: str | None = None,
        archived: bool | None = None,
        status: str | None = None,
        project_root: str | None = None,
        state: dict[str, Any] | None = None,
        title_source: str | None = None,
        preview: str | None = None,
    ) -> None:
        """Set the given metadata fields (None: unchanged) in one transaction. Archiving,
        renaming and summaries count as updates (``updated_at`` moves).

        A title is the user's unless ``title_source`` says otherwise; a summary becomes the
        listing's preview unless ``preview`` is given (previews follow the latest summary or
        exchange)."""
        if status is not None:
            _check_status(status)
        if title is not None and title_source is None:
            title_source = "user"
        if title_source is not None and title_source not in SOURCES:
            raise UsageError(f"Unknown title source {title_source!r}.")
        if summary is not None and preview is None:
            preview = one_line(summary)
        values: dict[str, Any] = {
            key: value
            for key, value in (
                ("title", title), ("summary", summary), ("status", status),
                ("project_root", project_root),
                ("archived", None if archived is None else int(archived)),
                ("state", None if state is None else _rows.dump_state(state)),
                ("title_source", title_source), ("preview", preview),
            )
            if value is not None
        }
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            if values:
                assignments = ", ".join(f"{k} = ?" for k in values)
                conn.execute(
                    f"UPDATE sessions SET {assignments}, updated_at = ? WHERE rid = ?",
                    (*values.values(), timestamp(), row.rid),
                )
            if title is not None or summary is not None:
                self.index.set_session_text(conn, row.rid, session_text(
                    row.title if title is None else title,
                    row.summary if summary is None else summary,
                    [c["summary"] for c in _rows.compactions(conn, row.rid)],
                ))

    def ensure_summary(self, session_id: str) -> None:
        """Write the notes' fallback summary (the last six user/assistant excerpts, without
        the blocks a compaction placed) if the session has none; the preview stays."""
        with self._existing_lease(session_id):
            info = self.info(session_id)
            if info.summary.strip():
                return
            excerpts = []  # the latest first, read from the end: the rest is never parsed
            for message in reversed(self.load_context(session_id)):
                if message.get("role") in {"user", "assistant"} and message.get("content") and (
                    message["role"] == "assistant" or own_user_text(message) is not None
                ):
                    excerpts.append(f"{message['role']}: {text_of(message)}")
                    if len(excerpts) == FALLBACK_SUMMARY_EXCERPTS:
                        break
            summary = "\n".join(reversed(excerpts))[:FALLBACK_SUMMARY_CHARS]
            self.update(session_id, summary=summary or "Session ended without messages.",
                        preview=info.preview)

    def propose_title(self, session_id: str, title: str) -> bool:
        """Set a title the model proposed, unless the user has set one (checked in the same
        transaction); whether it was set."""
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            if row.title_source == "user":
                return False
            conn.execute(
                "UPDATE sessions SET title = ?, title_source = 'model' WHERE rid = ?",
                (title, row.rid),
            )
            self.index.set_session_text(conn, row.rid, session_text(
                title, row.summary, [c["summary"] for c in _rows.compactions(conn, row.rid)]
            ))
        return True

    def remove_abandoned(self) -> list[str]:
        """Delete the sessions of runs that died before the user typed anything (status
        ``active``, no user message, nobody holding the lease); their ids. A running one
        (its lease held, here or elsewhere) is left alone."""
        with self.db.read() as conn:
            candidates = [
                str(sid) for (sid,) in conn.execute(
                    "SELECT id FROM sessions WHERE user_messages = 0 AND status = 'active'"
                )
            ]
        removed = []
        for sid in candidates:
            if self.leases.is_held_here(sid):
                continue
            try:
                with self.lease(sid):
                    info = self.info(sid)
                    if info.user_messages == 0 and info.status == "active":
                        self.delete(sid)
                        removed.append(sid)
            except (SessionLocked, SessionNotFound):
                continue
        return removed

    # -- recovery -------------------------------------------------------------------------

    def recover(self, session_id: str) -> StoredMessages:
        """Give every unanswered tool call a result and drop results answering no call.

        A call recorded as started (or not recorded at all) is answered "Execution
        interrupted; outcome unknown. Inspect state before retrying."; a call only planned is
        answered "Not executed: ... Safe to retry." A started command whose process group
        was recorded (:meth:`mark_process_group`) and still runs is stopped, and its notice
        says so on a second line ("was still running; stopped" or "had ended"). Nothing is
        ever replayed. The notices go into context and transcript in one transaction.
        Idempotent. Returns the context.
        """
        with self._existing_lease(session_id):
            check_session_id(session_id)
            with self.db.read(session_id) as conn:
                row = _rows.session_row(conn, session_id)
                saved = self._saved(conn, row).objs.copy()
                plan = repair_plan(saved.facts())  # the saved facts: nothing is parsed
                if not plan:
                    return saved
                phases = _write_ahead.phases(conn, row.rid)
                groups = _write_ahead.process_groups(conn, row.rid)
            notice = _write_ahead.notice_for(phases, _StoppedOnAsk(groups))
            if plan.appends_only(len(saved)):  # calls left open at the end: nothing parsed
                added = [tool_result(call_id, notice(call_id)) for _, call_id in plan.inserts]
                self.append(session_id, added, at=len(saved))
                saved.extend(added)
                return saved
            fixed = apply_plan(saved, plan, notice)
            self.replace_context(session_id, fixed.messages, new_in_transcript=fixed.added)
            return StoredMessages(fixed.messages)

    # -- lifecycle ------------------------------------------------------------------------

    def fork(self, session_id: str, at: int | None = None) -> str:
        """Copy a session into a new, independent one and return its id.

        Without ``at`` the whole session is copied; with ``at`` the fork holds the context up
        to message ``at`` (numbered as ``--info`` and ``--export`` show them), never cut
        between a tool call and its results (see :mod:`actors.store._branches`). The fork
        records its lineage (``parent_id``, ``fork_point``), keeps the title, the planning
        state and the pins, starts its own usage counter with the parent's usage kept apart
        as inherited, and is recovered like a resumed session. Its transcript is the
        parent's up to the cut (all of it without ``at``).
        """
        check_session_id(session_id)
        new_id = new_session_id()
        with (
            self._existing_lease(session_id),
            self.lease(new_id),
            self.db.write(session_id, new_id) as conn,
        ):
            row = _rows.session_row(conn, session_id)
            if at is None:
                cut = _branches.Cut(row.transcript_len - 1, row.context_len - 1, ())
            else:
                cut = _branches.cut_at(conn, row.rid, row.transcript_len, at, settle=True)
            self._copy_into(conn, row, new_id, cut, whole=at is None)
        with self.lease(new_id):
            self.recover(new_id)
        return new_id

    def _copy_into(
        self, conn: Conn, row: SessionRow, new_id: str, cut: _branches.Cut, *, whole: bool
    ) -> None:
        """The rows of ``new_id``: the parent ``row`` up to ``cut``, inside the caller's
        transaction."""
        loads = _rows.json_loader(row.id, self.db.damage_hint)
        state = _rows.dump_state(forked_state(loads(row.state, "state")))
        now = timestamp()
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
            " status, project_root, parent_id, state, context_version, context_len,"
            " transcript_len, title_source, preview, user_messages, fork_point)"
            " SELECT ?, ?, ?, title, summary, 0, 'saved', project_root, id, ?, 0, 0, ?,"
            " title_source, preview, user_messages, ? FROM sessions WHERE rid = ?",
            (new_id, now, now, state, cut.end_seq + 1, None if whole else cut.number,
             row.rid),
        )
        new = _rows.session_row(conn, new_id).rid
        conn.execute(
            "INSERT INTO transcript (session_rid, seq, body, parent_seq, shape, tokens) "
            "SELECT ?, seq, body, parent_seq, shape, tokens FROM transcript"
            " WHERE session_rid = ? AND seq <= ?"
            " ORDER BY seq",
            (new, row.rid, cut.end_seq),
        )
        if cut.context_pos is not None:  # the working context up to the cut, as it is
            conn.execute(
                "INSERT INTO context (session_rid, pos, mid, body) "
                "SELECT ?, c.pos, t2.mid, c.body FROM context c "
                "LEFT JOIN transcript t1 ON t1.mid = c.mid "
                "LEFT JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
                "WHERE c.session_rid = ? AND c.pos <= ?",
                (new, new, row.rid, cut.context_pos),
            )
        else:  # compacted away since: the branch, message by message
            mids = dict(conn.execute(
                "SELECT seq, mid FROM transcript WHERE session_rid = ?", (new,)
            ).fetchall())
            conn.executemany(
                "INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
                [(new, pos, mids[seq]) for pos, seq in enumerate(cut.branch)],
            )
        if cut.context_pos is not None:
            conn.execute(
                "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
                " summary) SELECT ?, n, at, before_tokens, after_tokens, summary"
                " FROM compactions WHERE session_rid = ?",
                (new, row.rid),
            )
        context = [loads(t, "context") for t in _rows.context_texts(conn, new) if t is not None]
        calls = sorted({c for m in context for c in call_ids_of(m)})
        if whole:
            conn.execute(
                "INSERT INTO tool_calls (session_rid, call_id, phase) "
                "SELECT ?, call_id, phase FROM tool_calls WHERE session_rid = ?",
                (new, row.rid),
            )
        elif calls:
            conn.execute(
                "INSERT INTO tool_calls (session_rid, call_id, phase) "
                "SELECT ?, call_id, phase FROM tool_calls WHERE session_rid = ?"
                f" AND call_id IN ({','.join('?' * len(calls))})",
                (new, row.rid, *calls),
            )
        self.index.copy_session(conn, row.rid, new)
        sets = ["context_len = ?"]
        args: list[Any] = [len(context)]
        if not whole:
            typed = _branches.user_messages(conn, new, range(cut.end_seq + 1))
            latest = latest_user_text(context)
            sets += ["user_messages = ?", "preview = ?"]
            args += [len(typed), one_line(latest) if latest else ""]
            summaries = [c["summary"] for c in _rows.compactions(conn, new)]
            self.index.set_session_text(conn, new, session_text(row.title, row.summary,
                                                                summaries))
        conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE rid = ?", (*args, new))
        self._contexts.forget(new_id)

    def rewind(self, session_id: str, before: int) -> Rewound:
        """Move the working context back to just before user message ``before`` (a number
        :meth:`user_messages` lists), keeping everything first as a fork.

        One transaction: the whole session is copied as a fork (as :meth:`fork` copies it:
        the part after the rewind point stays resumable there) and the context becomes what
        it was before that message (see :mod:`actors.store._branches`), so a kill -9 leaves
        either both or neither; the next message appended follows the one the context now
        ends with. The transcript is never rewritten: it keeps every message, and the fork's
        id says where the rest went. The fork is then recovered (a kill before that leaves it
        to be recovered at its first open, as any session is).
        """
        fork_id = new_session_id()
        with self._existing_lease(session_id), self.lease(fork_id):
            if before not in {m.number for m in self.user_messages(session_id)}:
                raise UsageError(
                    f"Message {before} is not one you typed in this conversation; "
                    "pick one of the messages \\rewind lists."
                )
            with self.db.write(session_id, fork_id) as conn:
                row = _rows.session_row(conn, session_id)
                self._copy_into(
                    conn, row, fork_id,
                    _branches.Cut(row.transcript_len - 1, row.context_len - 1, ()), whole=True,
                )
                target = _branches.parent_of(conn, row.rid, before - 1)
                position = _branches.context_position(conn, row.rid, target)
                if position is not None:
                    conn.execute(
                        "DELETE FROM context WHERE session_rid = ? AND pos > ?",
                        (row.rid, position),
                    )
                else:
                    mids = dict(conn.execute(
                        "SELECT seq, mid FROM transcript WHERE session_rid = ?", (row.rid,)
                    ).fetchall())
                    conn.execute("DELETE FROM context WHERE session_rid = ?", (row.rid,))
                    conn.executemany(
                        "INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
                        [(row.rid, pos, mids[seq])
                         for pos, seq in enumerate(_branches.branch(conn, row.rid, target))],
                    )
                loads = _rows.json_loader(session_id, self.db.damage_hint)
                texts = [t for t in _rows.context_texts(conn, row.rid) if t is not None]
                messages = [loads(t, "context") for t in texts]
                latest = latest_user_text(messages)
                conn.execute(
                    "UPDATE sessions SET context_len = ?, context_version = context_version + 1,"
                    " branch_seq = ?, preview = ?, updated_at = ? WHERE rid = ?",
                    (len(texts), target, one_line(latest) if latest else "", timestamp(),
                     row.rid),
                )
            self._contexts.replaced(
                session_id,
                SavedContext(row.rid, row.context_version + 1, StoredMessages(messages)),
            )
            self.recover(fork_id)
        return Rewound(messages, fork_id, before)

    def delete(self, session_id: str) -> None:
        """Delete a session's record (not its lock file, nor any project file)."""
        check_session_id(session_id)
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            rid = _rows.rid_of(conn, session_id)
            self.index.remove_session(conn, rid)
            for table in ("transcript", "context", "compactions", "tool_calls"):
                conn.execute(f"DELETE FROM {table} WHERE session_rid = ?", (rid,))
            conn.execute("DELETE FROM sessions WHERE rid = ?", (rid,))
        self._contexts.forget(session_id)

    # -- whole records (export and import build on these) ---------------------------------

    def import_record(self, record: dict[str, Any]) -> bool:
        """Insert a whole record (its own timestamps, transcript, context and compactions;
        missing fields get the notes' defaults) in one transaction.

        False, and nothing written, when a session with its id already exists. Raises
        :class:`InvalidRecord` for a record that cannot be one.
        """
        record = normalise_record(record, f"record {record.get('id')!r}")
        session_id = record["id"]
        with self.lease(session_id), self.db.write(session_id) as conn:
            if _rows.exists(conn, session_id):
                return False
            typed = [t for m in record["transcript"]
                     if isinstance(m, dict) and (t := own_user_text(m)) is not None and t.strip()]
            latest = latest_user_text(record["messages"]) or (typed[-1] if typed else "")
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_len, transcript_len,"
                " title_source, preview, user_messages, fork_point)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, record["created_at"], record["updated_at"], record["title"],
                    record["summary"], int(record["archived"]),
                    "saved" if record["status"] == "active" else record["status"],
                    record["project_root"], record["parent_id"],
                    _rows.dump_state(record["state"]),
                    len(record["messages"]), len(record["transcript"]),
                    record["title_source"], one_line(latest), len(typed), record["fork_point"],
                ),
            )
            rid = _rows.rid_of(conn, session_id)
            transcript = [to_plain(m) for m in record["transcript"]]
            texts = [encode(m) for m in transcript]
            mids = _rows.insert_messages(
                conn, rid, 0, None, transcript, texts, planned_calls=False
            )
            self.index.mark_pending(conn, mids)
            context = [encode(to_plain(m)) for m in record["messages"]]
            _rows.insert_context(conn, rid, context, dict(zip(texts, mids, strict=True)))
            compactions: list[dict[str, Any]] = [
                {
                    "at": str(c.get("at", "")),
                    "before_tokens": int(c.get("before_tokens", 0)),
                    "after_tokens": int(c.get("after_tokens", 0)),
                    "summary": str(c.get("summary", "")),
                }
                for c in record["compactions"]
                if isinstance(c, dict)
            ]
            _rows.insert_compactions(conn, rid, 0, compactions)
            self.index.set_session_text(conn, rid, session_text(
                record["title"], record["summary"], [c["summary"] for c in compactions]
            ))
        self._contexts.forget(session_id)
        self._index_now()
        return True

    def legacy_files(self) -> dict[str, tuple[int, int]]:
        """Older JSON records already looked at: file name -> ``(size, mtime_ns)``."""
        with self.db.read() as conn:
            return {
                name: (size, mtime)
                for name, size, mtime in conn.execute(
                    "SELECT name, size, mtime_ns FROM legacy_files"
                )
            }

    def note_legacy_file(
        self, name: str, size: int, mtime_ns: int, session_id: str | None, error: str | None
    ) -> None:
        """Remember that an older JSON record was imported (or why it could not be)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO legacy_files (name, size, mtime_ns, session_id, error)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                " size = excluded.size, mtime_ns = excluded.mtime_ns,"
                " session_id = excluded.session_id, error = excluded.error",
                (name, size, mtime_ns, session_id, error),
            )
