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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from actors.core.errors import (
    ContextConflict,
    CorruptSession,
    SessionNotFound,
    StorageError,
    UsageError,
)
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import Message, encode, repair, text_of, to_plain
from actors.store import _portability, _rows, _search, _survivors, _write_ahead
from actors.store._extend import ContextCache, Extension, SavedContext, extension
from actors.store._parts import Backend, Conn
from actors.store._records import (
    RECORD_FIELDS,
    STATUSES,
    SessionInfo,
    normalise_record,
    timestamp,
)
from actors.store._rows import SessionRow
from actors.store._text import session_text

FALLBACK_SUMMARY_EXCERPTS = 6  # the notes' fallback summary: the last six excerpts
FALLBACK_SUMMARY_CHARS = 2000


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

    @contextlib.contextmanager
    def _existing_lease(self, session_id: str) -> Iterator[None]:
        """The lease of a session that must exist: an unknown id is :class:`SessionNotFound`
        before any lease (and so any lock file) is taken. A lease this process already holds
        (a running session) costs no extra read."""
        session_id = check_session_id(session_id)
        if not self.leases.is_held_here(session_id):
            with self.db.read() as conn:
                if not _rows.exists(conn, session_id):
                    raise SessionNotFound(session_id)
        with self.leases.hold(session_id):
            yield

    def is_leased_here(self, session_id: str) -> bool:
        """True when this process already holds the session's lease."""
        return self.leases.is_held_here(check_session_id(session_id))

    def is_running_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""
        return self.leases.held_elsewhere(check_session_id(session_id))

    # -- the saved context ----------------------------------------------------------------

    def _saved(self, conn: Conn, row: SessionRow) -> SavedContext:
        return self._contexts.current(
            row.id, rid=row.rid, version=row.context_version, length=row.context_len,
            read=lambda: _rows.context_texts(conn, row.rid),
        )

    def _append(
        self,
        conn: Conn,
        row: SessionRow,
        incoming: list[Any],
        *,
        planned_calls: bool,
        state: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> Extension:
        """Write the delta of ``incoming`` over the saved context inside ``conn``'s
        transaction; the caller commits the returned :class:`Extension` after COMMIT."""
        delta = extension(self._saved(conn, row), incoming, row.id)
        n = len(delta.saved.texts)
        added = len(delta.new_texts)
        _rows.insert_messages(
            conn, self.index, row.rid, row.transcript_len, n, delta.new_plain, delta.new_texts,
            planned_calls=planned_calls,
        )
        sets = ["context_len = ?", "transcript_len = ?", "updated_at = ?"]
        args: list[Any] = [n + added, row.transcript_len + added, timestamp()]
        if state is not None:
            state_text = _rows.dump_state(state)
            if state_text != row.state:
                sets.append("state = ?")
                args.append(state_text)
        if status is not None and status != row.status:
            sets.append("status = ?")
            args.append(status)
        conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE rid = ?", (*args, row.rid))
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
                " parent_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, now, now, title, status, project_root, parent_id),
            )
            self._contexts.forget(session_id)
            row = _rows.session_row(conn, session_id)
            self.index.set_session_text(conn, row.rid, session_text(title, "", []))
            delta = self._append(conn, row, list(messages), planned_calls=False)
        delta.commit()
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
        written (to the transcript, the context and the search index). With
        ``planned_calls``, the tool calls of new assistant messages are recorded as planned
        (write-ahead: see :meth:`mark_started`). Returns the number of messages appended.
        """
        check_session_id(session_id)
        if status is not None:
            _check_status(status)
        incoming = list(messages)
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            delta = self._append(
                conn, row, incoming, planned_calls=planned_calls, state=state, status=status
            )
        return delta.commit()

    def mark_started(self, session_id: str, call_ids: Iterable[str]) -> None:
        """Durably record that these tool calls are about to start (write-ahead).

        After a crash, :meth:`recover` answers a started call with "outcome unknown" and a
        call that was only planned with "not executed; safe to retry".
        """
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            _write_ahead.mark_started(conn, _rows.session_row(conn, session_id).rid, call_ids)

    def mark_process_group(self, session_id: str, call_id: str, pgid: int,
                           leader_start: int | None) -> None:
        """Durably record the process group a started call runs in (its id and its leader's
        start time), so that :meth:`recover` can stop it should it outlive this process."""
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            _write_ahead.mark_process_group(
                conn, _rows.session_row(conn, session_id).rid, call_id, pgid, leader_start,
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
            saved = self._saved(conn, row)
            if expect_prefix is not None:
                expected = [encode(to_plain(m)) for m in expect_prefix]
                if saved.texts[: len(expected)] != expected:
                    raise ContextConflict(
                        f"The context of session '{session_id}' changed while it was compacted."
                    )
            rid = row.rid
            mids = _rows.context_mids(conn, rid)
            added_mids = _rows.insert_messages(
                conn, self.index, rid, row.transcript_len, None, added, added_texts,
                planned_calls=False,
            )
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
            session_id, SavedContext(rid, row.context_version + 1, list(incoming), texts)
        )

    # -- reading --------------------------------------------------------------------------

    def load_session(self, session_id: str) -> dict[str, Any]:
        """The whole record; ``messages`` is the working context as it can be sent now.

        Tool calls still open in the saved context are shown answered with the recovery
        notice (nothing is written: :meth:`recover` persists the repair, under the lease).
        Each message is parsed once: ``messages`` and ``transcript`` share the dicts of the
        messages they have in common.
        """
        check_session_id(session_id)
        loads = _rows.json_loader(session_id, self.db.damage_hint)
        with self.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            self._saved(conn, row)  # validates (and caches) the context
            by_mid: dict[int, Message] = {}
            transcript = []
            for mid, seq, body in conn.execute(
                "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (row.rid,),
            ):
                message = by_mid[mid] = loads(body, f"transcript message {seq}")
                transcript.append(message)
            context = [
                by_mid[mid] if mid is not None else loads(body, f"context {pos}")
                for pos, mid, body in conn.execute(
                    "SELECT pos, mid, body FROM context WHERE session_rid = ? ORDER BY pos",
                    (row.rid,),
                )
            ]
            phases = _write_ahead.phases(conn, row.rid)
            compactions = _rows.compactions(conn, row.rid)
        record = self._meta(row)
        record.update(
            messages=repair(context, _write_ahead.notice_for(phases)).messages,
            transcript=transcript,
            compactions=compactions,
        )
        return {key: record[key] for key in RECORD_FIELDS}

    def load_context(self, session_id: str, *, repaired: bool = True) -> list[Message]:
        """Only the working context, repaired as in :meth:`load_session` (``repaired=False``:
        exactly as saved, for ``--doctor``)."""
        check_session_id(session_id)
        with self.db.read(session_id) as conn:
            row = _rows.session_row(conn, session_id)
            saved = self._saved(conn, row)
            phases = _write_ahead.phases(conn, row.rid)
        messages = [json.loads(t) for t in saved.texts]
        if not repaired:
            return messages
        return repair(messages, _write_ahead.notice_for(phases)).messages

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
            "state": state,
        }

    def list_sessions(self, include_archived: bool = False) -> list[dict[str, Any]]:
        """Sessions, most recently updated first (archived ones only when asked)."""
        where = "" if include_archived else "WHERE archived = 0"
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_rows.LISTED} FROM sessions {where} ORDER BY updated_at DESC"
            ).fetchall()
        return [_rows.listed(r) for r in rows]

    def search_sessions(
        self, query: str, *, include_archived: bool = False, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Sessions containing every word of ``query`` (case-insensitive substrings), best first.

        Searches title, summary, compaction summaries, and every transcript message (so text
        that compaction removed from the context is still found). A session ranks higher the
        more of its messages match each word, and higher still when its title or summary
        does; ties go to the most recent. Each result carries a ``snippet`` around a match
        (see :mod:`actors.store._search`).
        """
        with self.db.read() as conn:
            return _search.search(
                conn, self.index, query, include_archived=include_archived, limit=limit
            )

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
    ) -> None:
        """Set the given metadata fields (None: unchanged) in one transaction. Archiving,
        renaming and summaries count as updates (``updated_at`` moves)."""
        if status is not None:
            _check_status(status)
        values: dict[str, Any] = {
            key: value
            for key, value in (
                ("title", title), ("summary", summary), ("status", status),
                ("project_root", project_root),
                ("archived", None if archived is None else int(archived)),
                ("state", None if state is None else _rows.dump_state(state)),
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
        """Write the notes' fallback summary (the last six user/assistant excerpts) if the
        session has none."""
        with self._existing_lease(session_id):
            if self.info(session_id).summary.strip():
                return
            excerpts = [
                f"{message['role']}: {text_of(message)}"
                for message in self.load_context(session_id)
                if message.get("role") in {"user", "assistant"} and message.get("content")
            ]
            summary = "\n".join(excerpts[-FALLBACK_SUMMARY_EXCERPTS:])[:FALLBACK_SUMMARY_CHARS]
            self.update(session_id, summary=summary or "Session ended without messages.")

    # -- recovery -------------------------------------------------------------------------

    def recover(self, session_id: str) -> list[Message]:
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
                saved = self._saved(conn, row)
                phases = _write_ahead.phases(conn, row.rid)
                groups = _write_ahead.process_groups(conn, row.rid)
                loads = _rows.json_loader(session_id, self.db.damage_hint)
                objs = list(saved.parsed(loads))
            open_calls = {m["tool_call_id"] for m in repair(objs).added}
            survivors = {
                call_id: line
                for call_id, group in groups.items()
                if call_id in open_calls and (line := _survivors.stop_survivor(
                    group.pgid, group.leader_start, group.host)) is not None
            }
            fixed = repair(objs, _write_ahead.notice_for(phases, survivors))
            if not fixed.changed:
                return objs
            if fixed.appends_only(objs):
                self.checkpoint(session_id, fixed.messages)
            else:
                self.replace_context(session_id, fixed.messages, new_in_transcript=fixed.added)
            return fixed.messages

    # -- lifecycle ------------------------------------------------------------------------

    def fork(self, session_id: str) -> str:
        """Copy a session into a new, independent one (``parent_id`` = the source), copied
        in SQL and then recovered; the new id."""
        check_session_id(session_id)
        new_id = new_session_id()
        with (
            self._existing_lease(session_id),
            self.lease(new_id),
            self.db.write(session_id, new_id) as conn,
        ):
            old = _rows.session_row(conn, session_id).rid
            now = timestamp()
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_version, context_len,"
                " transcript_len) SELECT ?, ?, ?, title, summary, 0, 'saved', project_root, id,"
                " state, 0, context_len, transcript_len FROM sessions WHERE rid = ?",
                (new_id, now, now, old),
            )
            new = _rows.session_row(conn, new_id).rid
            conn.execute(
                "INSERT INTO transcript (session_rid, seq, body) "
                "SELECT ?, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
                (new, old),
            )
            conn.execute(
                "INSERT INTO context (session_rid, pos, mid, body) "
                "SELECT ?, c.pos, t2.mid, c.body FROM context c "
                "LEFT JOIN transcript t1 ON t1.mid = c.mid "
                "LEFT JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
                "WHERE c.session_rid = ?",
                (new, new, old),
            )
            for table, columns in (
                ("compactions", "n, at, before_tokens, after_tokens, summary"),
                ("tool_calls", "call_id, phase"),
            ):
                conn.execute(
                    f"INSERT INTO {table} (session_rid, {columns}) "
                    f"SELECT ?, {columns} FROM {table} WHERE session_rid = ?",
                    (new, old),
                )
            self.index.copy_session(conn, old, new)
        with self.lease(new_id):
            self.recover(new_id)
        return new_id

    def delete(self, session_id: str) -> None:
        """Delete a session's record (not its lock file, nor any project file)."""
        check_session_id(session_id)
        with self._existing_lease(session_id), self.db.write(session_id) as conn:
            rid = _rows.session_row(conn, session_id).rid
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
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_len, transcript_len)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, record["created_at"], record["updated_at"], record["title"],
                    record["summary"], int(record["archived"]),
                    "saved" if record["status"] == "active" else record["status"],
                    record["project_root"], record["parent_id"],
                    _rows.dump_state(record["state"]),
                    len(record["messages"]), len(record["transcript"]),
                ),
            )
            rid = _rows.session_row(conn, session_id).rid
            transcript = [to_plain(m) for m in record["transcript"]]
            texts = [encode(m) for m in transcript]
            mids = _rows.insert_messages(
                conn, self.index, rid, 0, None, transcript, texts, planned_calls=False
            )
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
