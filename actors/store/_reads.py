"""Reading sessions: :class:`SessionReader`, the store's read-only face.

Everyone who reads sessions without owning their writes gets this type (the tools, the tool
executor, the workspace keeper, the REPL's commands, the picker, the completer): it has no
method that changes a session, so "the checkpoint writer alone writes" holds by type. A read
takes no lease and never edits a session another process runs; it may prime this store
instance's context cache (the messages it returns are what a later checkpoint compares by
identity) and, before a search, index what is still marked (derived data, never a session's).

Threads and cancellation: every method is synchronous, thread-safe and one read transaction
(async callers run it in a worker thread); nothing is cancellable. Damage is reported for
the session it is found in (:class:`CorruptSession`), never for the store: a listing or a
search shows the other sessions whatever one session's rows hold.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.core.errors import AmbiguousSessionId, CorruptSession, SessionNotFound
from actors.core.ids import check_session_id
from actors.core.messages import Message, apply_plan, repair, repair_plan
from actors.core.stored import StoredMessages
from actors.store import _branches, _indexer, _rows, _search, _write_ahead
from actors.store._extend import SavedContext
from actors.store._parts import Conn, Transactions
from actors.store._records import SessionRecord
from actors.store._results import FoundSession, ListedSession, SessionInfo, UserMessage
from actors.store._rows import AppendRow, SessionRow
from actors.store._shared import Shared


def _repaired(messages: StoredMessages, notice: Callable[[str], str]) -> StoredMessages:
    """``messages`` made valid (:func:`~actors.core.messages.repair`), checked on the facts
    saved with them: parsed only when something is to be repaired."""
    plan = repair_plan(messages.facts())
    return StoredMessages(apply_plan(messages, plan, notice).messages) if plan else messages


class SessionReader:
    """The sessions of one store, read (see the module doc). Built by the store it reads
    (:attr:`actors.store.Store.reader`), not by its callers."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    @property
    def location(self) -> str:
        """Where the sessions are, for people (a file path, or a URL without password)."""
        return self._shared.db.location

    @property
    def memory_dir(self) -> Path:
        """The memory directory (resolved): the harness's own state, never a tool's."""
        return self._shared.memory_dir

    @property
    def read_only(self) -> bool:
        """True when this store can be read but not written (a read-only file system or
        database): every write fails with :class:`StorageError` saying so."""
        return self._shared.read_only

    def companion_database(self) -> Transactions | None:
        """A database of its own beside the sessions' (PostgreSQL: the same server and
        schema) for another part of the harness's tables; None on SQLite (keep a file of
        your own). The caller closes it."""
        return self._shared.db.companion()

    def is_leased_here(self, session_id: str) -> bool:
        """True when this process holds the session's lease."""
        return self._shared.leases.is_held_here(check_session_id(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""
        return self._shared.leases.held_elsewhere(check_session_id(session_id))

    # -- the saved context (shared with the writes) -------------------------------------

    def _saved(self, conn: Conn, row: SessionRow | AppendRow,
               session_id: str | None = None) -> SavedContext:
        """The saved context of ``row``'s session: cached, or read back once."""
        sid = row.id if isinstance(row, SessionRow) else session_id
        assert sid is not None

        def read() -> StoredMessages | None:
            texts, shapes, tokens = _rows.context_rows(conn, row.rid)
            if None in texts:
                return None
            return StoredMessages.read(texts, shapes, tokens, self._parser(sid))

        return self._shared.contexts.current(
            sid, rid=row.rid, version=row.context_version, length=row.context_len,
            read=read,
        )

    def _parser(self, session_id: str) -> Callable[[str, int], Message]:
        """How the context of ``session_id`` read back is parsed, message by message, when
        read (:class:`StoredMessages`): damage is :class:`CorruptSession`, as on a load."""
        loads = _rows.json_loader(session_id, self._shared.db.damage_hint)

        def parse(text: str, position: int) -> Message:
            message = loads(text, f"context message {position}")
            if not isinstance(message, dict):
                raise CorruptSession(session_id, f"context message {position} is not an "
                                     f"object; {self._shared.db.damage_hint}")
            return message

        return parse

    def _prime(self, row: SessionRow, context: list[Any]) -> list[Message]:
        """Cache ``context``, just read from ``row``'s snapshot, as its saved context (the
        caller holds the transaction); the context."""
        if len(context) != row.context_len or any(m is None for m in context):
            raise CorruptSession(row.id, "the working context refers to missing messages")
        self._shared.contexts.replaced(
            row.id, SavedContext(row.rid, row.context_version, StoredMessages(context))
        )
        return context

    def _state(self, row: SessionRow) -> dict[str, Any]:
        """The row's planning/usage state; :class:`CorruptSession` when it is not one."""
        state = _rows.json_loader(row.id, self._shared.db.damage_hint)(row.state, "state")
        if not isinstance(state, dict):
            raise CorruptSession(row.id, "state is not an object")
        return state

    # -- one session --------------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self._shared.db.read() as conn:
            return _rows.exists(conn, session_id)

    def info(self, session_id: str) -> SessionInfo:
        """A session's metadata without its messages (one row and the compactions)."""
        check_session_id(session_id)
        with self._shared.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            compactions = _rows.compactions(conn, row.rid)
        return SessionInfo(
            id=row.id, title=row.title, summary=row.summary, status=row.status,
            archived=bool(row.archived), created_at=row.created_at,
            updated_at=row.updated_at, project_root=row.project_root,
            parent_id=row.parent_id, state=self._state(row),
            context_messages=row.context_len, transcript_messages=row.transcript_len,
            compactions=compactions, fork_point=row.fork_point,
            title_source=row.title_source, preview=row.preview,
            user_messages=row.user_messages,
        )

    def load_session(self, session_id: str) -> SessionRecord:
        """The whole record; ``messages`` is the working context as it can be sent now.

        Tool calls still open in the saved context are shown answered with the recovery
        notice (nothing is written: recovery persists the repair, under the lease). Every
        message is read and parsed, once (a damaged one is :class:`CorruptSession` here,
        never later): ``messages`` and ``transcript`` share the dicts of the messages they
        have in common, and the saved context is cached as those very objects, so a
        checkpoint extending ``messages`` compares nothing (treat them as immutable). A
        resume reads less: :meth:`load_context` parses nothing.
        """
        check_session_id(session_id)
        loads = _rows.json_loader(session_id, self._shared.db.damage_hint)
        with self._shared.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            by_mid: dict[int, Message] = {}
            transcript = []
            for mid, seq, body in _rows.transcript_entries(conn, row.rid):
                message = by_mid[mid] = loads(body, f"transcript message {seq}")
                transcript.append(message)
            context = [
                by_mid.get(mid) if mid is not None else loads(body or "", f"context {pos}")
                for pos, mid, body in _rows.context_entries(conn, row.rid)
            ]
            phases = _write_ahead.phases(conn, row.rid)
            compactions = _rows.compactions(conn, row.rid)
            saved = self._prime(row, context)
        record = SessionRecord(
            id=row.id, created_at=row.created_at, updated_at=row.updated_at,
            title=row.title, summary=row.summary, archived=bool(row.archived),
            status=row.status, project_root=row.project_root, parent_id=row.parent_id,
            fork_point=row.fork_point, title_source=row.title_source, state=self._state(row),
            messages=repair(saved, _write_ahead.notice_for(phases)).messages,
            transcript=transcript, compactions=compactions,
        )
        return record

    def load_context(self, session_id: str, *, repaired: bool = True) -> StoredMessages:
        """Only the working context, repaired as in :meth:`load_session` (``repaired=False``:
        exactly as saved, for ``--doctor``).

        Nothing is parsed here: the messages are parsed one by one when read (a damaged one
        is :class:`CorruptSession` then), and the pairing rule is checked on the facts saved
        with each message. Cached: a second load reads nothing."""
        check_session_id(session_id)
        with self._shared.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            messages = self._saved(conn, row).objs.copy()
            phases = _write_ahead.phases(conn, row.rid) if repaired else {}
        if not repaired:
            return messages
        return _repaired(messages, _write_ahead.notice_for(phases))

    def recent_messages(self, session_id: str, count: int) -> list[tuple[int | None, Message]]:
        """The last ``count`` messages of the working context with their message numbers
        (None for one the context alone holds, a compaction's summary): a preview, a
        resume's replay. Reads only those rows."""
        check_session_id(session_id)
        loads = _rows.json_loader(session_id, self._shared.db.damage_hint)
        with self._shared.db.read(session_id) as conn:
            rows = _rows.recent_context(conn, _rows.rid_of(conn, session_id), count)
        return [(None if seq is None else int(seq) + 1, loads(body, f"context {pos}"))
                for pos, seq, body in rows]

    def user_messages(self, session_id: str) -> list[UserMessage]:
        """What the user typed on the current branch (the messages a rewind can go back to
        before), with their message numbers, oldest first."""
        check_session_id(session_id)
        with self._shared.db.read(session_id) as conn:
            rid = _rows.rid_of(conn, session_id)
            end = _branches.context_end(conn, rid)
            if end is None:
                return []
            return _branches.user_messages(conn, rid, _branches.branch(conn, rid, end))

    # -- many sessions ------------------------------------------------------------------

    def list_sessions(
        self,
        include_archived: bool = False,
        *,
        project_root: str | None = None,
        include_empty: bool = True,
        limit: int | None = None,
    ) -> list[ListedSession]:
        """Sessions, most recently updated first: archived ones only when asked, those of
        ``project_root`` only when given, and without the sessions nobody typed anything in
        unless ``include_empty``. One indexed query, no message is read."""
        with self._shared.db.read() as conn:
            return _rows.listing(conn, include_archived=include_archived,
                                 project_root=project_root, include_empty=include_empty,
                                 limit=limit)

    def resolve_id(self, prefix: str) -> str:
        """The id of the one session whose id starts with ``prefix`` (an exact id always
        wins; case is ignored when nothing matches as typed). :class:`SessionNotFound` when
        none does, :class:`AmbiguousSessionId` naming them when several do."""
        check_session_id(prefix)
        with self._shared.db.read() as conn:
            if _rows.exists(conn, prefix):
                return prefix
            found = (_rows.ids_starting(conn, prefix, any_case=False)
                     or _rows.ids_starting(conn, prefix, any_case=True))
        if not found:
            raise SessionNotFound(prefix)
        if len(found) > 1:
            raise AmbiguousSessionId(prefix, found)
        return found[0][0]

    def search_sessions(
        self,
        query: str,
        *,
        include_archived: bool = False,
        limit: int = 50,
        project_root: str | None = None,
    ) -> list[FoundSession]:
        """Sessions containing every word of ``query`` (case-insensitive substrings), best
        first.

        Searches title, summary, compaction summaries, and every transcript message (so text
        that compaction removed from the context is still found). A session ranks higher the
        more of its messages match each word, and higher still when its title or summary
        does; ties go to the most recent. Each result carries a ``snippet`` around a match
        and the ``message`` number it comes from (see :mod:`actors.store._search`); with
        ``project_root``, only that project's sessions. Messages still waiting for the index
        are indexed first (a store that cannot be written is searched as its index stands).
        """
        _indexer.catch_up_before_reading(self._shared)
        with self._shared.db.read() as conn:
            return _search.search(
                conn, self._shared.index, query, include_archived=include_archived,
                limit=limit, project_root=project_root,
            )


__all__ = ["SessionReader"]
