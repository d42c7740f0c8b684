"""Writing one session: create, checkpoint and append, write-ahead records, replacing the
context, recovery, metadata, delete (docs/storage.md).

Each method is one durable transaction under the session's lease (re-entrant in this
process; another process holding it is :class:`SessionLocked` at once). A checkpoint is
:mod:`actors.store._appends`'s one write path: what it costs is what it appends. The context
cache is updated only after COMMIT returned, so it is never ahead of the database.

Threads and cancellation: synchronous and thread-safe (the transactions hold the
database's lock); async callers run a method in a worker thread. Nothing is cancellable: a
call that has started runs to its end in its thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from actors.core.errors import (
    ContextConflict,
    CorruptSession,
    SessionLocked,
    SessionNotFound,
    StorageError,
    UsageError,
)
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import (
    apply_plan,
    encode,
    repair_plan,
    text_of,
    to_plain,
    tool_result,
)
from actors.core.previews import one_line, own_user_text, typed_with_labels
from actors.core.stored import StoredMessages
from actors.core.titles import SOURCES
from actors.store import _appends, _indexer, _rows, _survivors, _write_ahead
from actors.store._extend import Extension, SavedContext, appended, extension
from actors.store._parts import Conn
from actors.store._reads import SessionReader
from actors.store._records import STATUSES, timestamp
from actors.store._results import Compaction
from actors.store._rows import AppendRow
from actors.store._text import session_text

FALLBACK_SUMMARY_EXCERPTS = 6  # the notes' fallback summary: the last six excerpts
FALLBACK_SUMMARY_CHARS = 2000


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


def _state_text(state: dict[str, Any] | None) -> str | None:
    """A state as the session row stores it (None: no state given)."""
    return None if state is None else _rows.dump_state(state)


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise UsageError(f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")


class Writes(SessionReader):
    """The writes of one session (see the module doc); :class:`~actors.store.Store` is
    built on them."""

    # -- the lease ----------------------------------------------------------------------

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block; re-entrant within this process.

        May be entered in one thread and exited in another (the supervisor does). Raises
        :class:`SessionLocked` at once, never after waiting, when another process holds it.
        """
        self._writable()
        return self._shared.leases.hold(check_session_id(session_id))

    def _writable(self) -> None:
        """:class:`StorageError` at once for a write of a store that is read-only here."""
        if self._shared.read_only:
            raise StorageError(f"The session store is read-only ({self.location}): nothing "
                               "can be saved.")

    def _existing_lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """The lease of a session that must exist, for the caller's ``with``: an unknown id is
        :class:`SessionNotFound` here, before any lease (and so any lock file) is taken. A
        lease this process already holds (a running session) costs no extra read."""
        session_id = check_session_id(session_id)
        self._writable()
        leases = self._shared.leases
        if not leases.is_held_here(session_id):
            with self._shared.db.read() as conn:
                if not _rows.exists(conn, session_id):
                    raise SessionNotFound(session_id)
        return leases.hold(session_id)

    # -- creating and checkpointing -----------------------------------------------------

    def _append(self, conn: Conn, session_id: str, row: AppendRow, incoming: list[Any], *,
                planned_calls: bool, state: dict[str, Any] | None = None,
                status: str | None = None) -> Extension:
        """Write the delta of ``incoming`` over the saved context inside ``conn``'s
        transaction; the caller commits the returned :class:`Extension` after COMMIT."""
        delta = extension(self._saved(conn, row, session_id), incoming, session_id)
        self._shared.unindexed += len(delta.new_texts)
        _appends.write(conn, self._shared.index, row, delta.new_plain, delta.new_texts,
                       planned_calls=planned_calls, state=_state_text(state), status=status)
        return delta

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
        check_status(status)
        shared = self._shared
        with self.lease(session_id), shared.db.write(session_id) as conn:
            if _rows.exists(conn, session_id):
                raise UsageError(f"A session with id '{session_id}' already exists.")
            rid = _rows.insert_session(conn, session_id, timestamp(), title=title,
                                       status=status, project_root=project_root,
                                       parent_id=parent_id)
            shared.contexts.forget(session_id)
            shared.index.set_session_text(conn, rid, session_text(title, "", []))
            delta = self._append(conn, session_id, _rows.append_row(conn, session_id),
                                 list(messages), planned_calls=False)
        delta.commit()
        _indexer.index_now(shared)
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
        transaction of its own). With ``planned_calls``, the tool calls of new assistant
        messages are recorded as planned (write-ahead: see :meth:`mark_started`). Returns
        the number of messages appended.
        """
        check_session_id(session_id)
        if status is not None:
            check_status(status)
        incoming = list(messages)
        with self._existing_lease(session_id), self._shared.db.write(session_id) as conn:
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
            check_status(status)
        shared = self._shared
        with self._existing_lease(session_id), shared.db.write(session_id) as conn:
            row = _rows.append_row(conn, session_id)
            _appends.check_at(session_id, row, at)
            saved = shared.contexts.cached(session_id, rid=row.rid,
                                           version=row.context_version, length=at)
            delta = appended(saved, messages)
            shared.unindexed += len(delta.new_texts)
            _appends.write(conn, shared.index, row, delta.new_plain, delta.new_texts,
                           planned_calls=planned_calls, state=_state_text(state),
                           status=status)
        if saved is None:
            shared.contexts.forget(session_id)
        return row.transcript_len + delta.commit()

    # -- write-ahead records ------------------------------------------------------------

    def mark_started(self, session_id: str, call_ids: Iterable[str]) -> None:
        """Durably record that these tool calls are about to start (write-ahead).

        After a crash, :meth:`recover` answers a started call with "outcome unknown" and a
        call that was only planned with "not executed; safe to retry".
        """
        with self._existing_lease(session_id), self._shared.db.write(session_id) as conn:
            _write_ahead.mark_started(conn, _rows.rid_of(conn, session_id), call_ids)

    def mark_process_group(self, session_id: str, call_id: str, pgid: int,
                           leader_start: int | None) -> None:
        """Durably record the process group a started call runs in (its id and its leader's
        start time), so that :meth:`recover` can stop it should it outlive this process."""
        with self._existing_lease(session_id), self._shared.db.write(session_id) as conn:
            _write_ahead.mark_process_group(
                conn, _rows.rid_of(conn, session_id), call_id, pgid, leader_start,
                _survivors.this_host(),
            )

    # -- replacing the context, recovery ------------------------------------------------

    def replace_context(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        compaction: Compaction | None = None,
        expect_prefix: Sequence[Any] | None = None,
        new_in_transcript: Sequence[Any] = (),
    ) -> None:
        """Replace the working context (compaction and repair only; the transcript is kept).

        Messages already in the saved context keep pointing at their transcript rows; messages
        in ``new_in_transcript`` are appended to the transcript first; any other new message
        (a compaction summary) is stored in the context alone. With ``compaction`` the event
        is recorded in the same transaction (its ``at`` empty: now). With ``expect_prefix``,
        the saved context must still start with those messages, else
        :class:`ContextConflict` (a compaction computed on an older context).
        """
        incoming = [to_plain(m) for m in messages]
        texts = [encode(m) for m in incoming]
        added = [to_plain(m) for m in new_in_transcript]
        added_texts = [encode(m) for m in added]
        shared = self._shared
        with self._existing_lease(session_id), shared.db.write(session_id) as conn:
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
                conn, rid, row.transcript_len, added, added_texts, planned_calls=False,
            )
            shared.index.mark_pending(conn, added_mids)
            mids.update(zip(added_texts, added_mids, strict=True))
            _rows.replace_context_rows(conn, rid, texts, mids)
            if compaction is not None:
                event = Compaction(at=compaction.get("at") or timestamp(),
                                   before_tokens=compaction["before_tokens"],
                                   after_tokens=compaction["after_tokens"],
                                   summary=compaction["summary"])
                summaries = [c["summary"] for c in _rows.compactions(conn, rid)]
                _rows.insert_compactions(conn, rid, len(summaries), [event])
                shared.index.set_session_text(
                    conn, rid, session_text(row.title, row.summary, [*summaries,
                                                                     event["summary"]])
                )
            _rows.after_replace(conn, rid, len(texts), row.transcript_len + len(added),
                                timestamp())
        shared.contexts.replaced(
            session_id, SavedContext(rid, row.context_version + 1, StoredMessages(incoming))
        )
        _indexer.index_now(shared)

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
            with self._shared.db.read(session_id) as conn:
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

    # -- metadata -----------------------------------------------------------------------

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
        touch: bool | None = None,
    ) -> None:
        """Set the given metadata fields (None: unchanged) in one transaction. Archiving,
        renaming and summaries count as updates (``updated_at`` moves; ``touch`` says
        otherwise); the status, the state, the project and the preview alone do not: opening
        and closing a session leaves when it was last used as it was.

        A title is the user's unless ``title_source`` says otherwise; a summary becomes the
        listing's preview unless ``preview`` is given (previews follow the latest summary or
        exchange)."""
        if status is not None:
            check_status(status)
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
                ("state", _state_text(state)), ("title_source", title_source),
                ("preview", preview),
            )
            if value is not None
        }
        shared = self._shared
        with self._existing_lease(session_id), shared.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            if touch is None:
                touch = title is not None or summary is not None or archived is not None
            if values or touch:
                _rows.update_session(conn, row.rid, values, timestamp() if touch else None)
            if title is not None or summary is not None:
                shared.index.set_session_text(conn, row.rid, session_text(
                    row.title if title is None else title,
                    row.summary if summary is None else summary,
                    [c["summary"] for c in _rows.compactions(conn, row.rid)],
                ))

    def propose_title(self, session_id: str, title: str) -> bool:
        """Set a title the model proposed, unless the user has set one (checked in the same
        transaction); whether it was set."""
        shared = self._shared
        with self._existing_lease(session_id), shared.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            if row.title_source == "user":
                return False
            _rows.set_model_title(conn, row.rid, title)
            shared.index.set_session_text(conn, row.rid, session_text(
                title, row.summary, [c["summary"] for c in _rows.compactions(conn, row.rid)]
            ))
        return True

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
                    typed = typed_with_labels(message)  # never the files it sent
                    excerpts.append(f"{message['role']}: {typed or text_of(message)}")
                    if len(excerpts) == FALLBACK_SUMMARY_EXCERPTS:
                        break
            summary = "\n".join(reversed(excerpts))[:FALLBACK_SUMMARY_CHARS]
            self.update(session_id, summary=summary or "Session ended without messages.",
                        preview=info.preview, touch=False)

    # -- removing -----------------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Delete a session's record (not its lock file, nor any project file)."""
        check_session_id(session_id)
        shared = self._shared
        with self._existing_lease(session_id), shared.db.write(session_id) as conn:
            rid = _rows.rid_of(conn, session_id)
            shared.index.remove_session(conn, rid)
            _rows.delete_session(conn, rid)
        shared.contexts.forget(session_id)

    def remove_abandoned(self) -> list[str]:
        """Delete the sessions of runs that died before the user typed anything (status
        ``active``, no user message, nobody holding the lease); their ids. A running one
        (its lease held, here or elsewhere) is left alone, and so is a damaged one
        (``--doctor`` names it)."""
        with self._shared.db.read() as conn:
            candidates = _rows.abandoned(conn)
        removed = []
        for sid in candidates:
            if self._shared.leases.is_held_here(sid):
                continue
            try:
                with self.lease(sid):
                    info = self.info(sid)
                    if info.user_messages == 0 and info.status == "active":
                        self.delete(sid)
                        removed.append(sid)
            except (SessionLocked, SessionNotFound, CorruptSession, ValueError):
                continue
        return removed

    # -- the search index, behind the checkpoints ---------------------------------------

    @property
    def unindexed(self) -> int:
        """Messages this instance left for the indexer (a hint: 0 when it found none)."""
        return self._shared.unindexed

    @unindexed.setter
    def unindexed(self, value: int) -> None:
        self._shared.unindexed = value

    def index_pending(self, limit: int = _indexer.INDEX_BATCH) -> bool:
        """One batch of the search index (:func:`actors.store._indexer.index_pending`): the
        checkpoint writer calls it when idle. True when nothing is left."""
        return _indexer.index_pending(self._shared, limit)

    def catch_up_index(self) -> None:
        """Index every message not yet indexed."""
        _indexer.catch_up(self._shared)


__all__ = ["Writes", "check_status"]
