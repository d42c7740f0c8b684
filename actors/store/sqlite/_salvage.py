"""Salvage: every readable row of a damaged SQLite store, copied into a new database file.

When SQLite's integrity check finds damaged pages (a bad sector, a file cut short and padded
back, a page overwritten), writing into the damaged b-trees again (``REINDEX``, ``DELETE``)
could spread the damage: a bad interior page may point into another tree. So the rows are
*read* out of the damaged file and written into a fresh one, whose indexes and search index
are built anew:

* rowid tables (``sessions``, ``transcript``, ``legacy_files``) are read through their own
  b-tree in rowid order (``NOT INDEXED``: a damaged index is never consulted); where a page
  cannot be read, the scan skips ahead (probing rowids at doubling distances) and reads the
  rows of the gap one by one, so one bad page loses only the rows on it;
* each session's ``context``, ``compactions`` and write-ahead ``tool_calls`` (tables keyed by
  the session) are read per session, position by position when a range fails;
* every row is checked (types, JSON, a chat message) before it is kept.

Each session keeps its id and metadata. A session that lost rows gets what remains: its
transcript rows in order, its context from the readable positions (or, if none is readable,
from the transcript), tool calls paired by recovery's notices, so it can be resumed. Messages
whose session row was lost are kept as new sessions. :class:`Salvage` lists what was saved.

The SQLite command-line shell's ``.recover`` is not used: the shell shipped by common
distributions (Debian's 3.40) is built without the ``sqlite_dbpage`` table it needs and fails
with "SQL logic error" even on a healthy file, and it does not know what a session is.

Synchronous and blocking (reads a whole file): run it in a worker thread from async code.
Nothing here is cancellable; the damaged file is never written.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.core.errors import InvalidRecord
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import Message, repair
from actors.store._hostile import importable
from actors.store._records import timestamp
from actors.store._write_ahead import notice_for
from actors.store.sqlite._store import SqliteStore

LOST_RECORD_TITLE = "Salvaged messages of a lost session"
_BATCH = 256
_GAP_READ_ONE_BY_ONE = 4096  # rowids of a skipped gap read one by one (bigger: probed only)


@dataclass
class SavedSession:
    """One session as saved into the new file."""

    id: str
    title: str
    messages: int  # transcript messages saved
    expected: int  # transcript messages the session had (0 when its record was lost)
    context_whole: bool
    new: bool = False  # its own record was lost: a new session holds its messages

    @property
    def whole(self) -> bool:
        return not self.new and self.context_whole and self.messages == self.expected


@dataclass
class Salvage:
    """What a salvage saved, and what it could not read."""

    path: Path  # the new database file
    sessions: list[SavedSession] = field(default_factory=list)
    unreadable_rows: int = 0  # rows (or pages of rows) that could not be read or made sense of
    failed: list[str] = field(default_factory=list)  # sessions read but refused, and why

    @property
    def messages(self) -> int:
        return sum(s.messages for s in self.sessions)


def _scan(conn: sqlite3.Connection, table: str, columns: str, key: str,
          salvage: Salvage) -> Iterator[tuple[Any, ...]]:
    """Every readable row of a rowid table, in rowid order (``key`` first in each row).

    Each step moves strictly forward, so the scan ends however the file is damaged: a batch
    that fails is read again row by row; a row whose key can be read but not its content is
    skipped; where not even keys can be read, rowids are probed at doubling distances until
    reading works again, and the gap is read one rowid at a time.
    """
    rows_after = (f"SELECT {key}, {columns} FROM {table} NOT INDEXED "
                  f"WHERE {key} > ? ORDER BY {key} LIMIT ?")
    key_from = f"SELECT {key} FROM {table} NOT INDEXED WHERE {key} >= ? ORDER BY {key} LIMIT 1"
    row_at = f"SELECT {key}, {columns} FROM {table} NOT INDEXED WHERE {key} = ?"

    def attempt(sql: str, *args: Any) -> list[tuple[Any, ...]] | None:
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError:
            return None

    after = -(1 << 62)
    while True:
        rows = attempt(rows_after, after, _BATCH) or attempt(rows_after, after, 1)
        if rows:
            yield from rows
            after = rows[-1][0]
            continue
        if rows == []:
            return  # the end of the table
        salvage.unreadable_rows += 1
        nearest = attempt(key_from, after + 1)
        if nearest:  # the key is readable, the row is not: skip that row
            after = nearest[0][0]
            continue
        if nearest == []:
            return
        step = 2  # ``>= after + 1`` just failed
        while True:
            probe = after + step
            if probe > (1 << 62):
                return
            found = attempt(key_from, probe)
            if found is not None:
                break
            step *= 2
        if step <= _GAP_READ_ONE_BY_ONE:
            for rowid in range(after + 1, probe):
                row = attempt(row_at, rowid)
                if row:
                    yield row[0]
        if not found:
            return
        after = probe - 1


def _per_session(conn: sqlite3.Connection, sql: str, rid: int,
                 one_by_one: str | None, keys: range) -> list[tuple[Any, ...]] | None:
    """Rows of a table keyed by session; position by position when the range fails; None
    when nothing could be read."""
    try:
        return conn.execute(sql, (rid,)).fetchall()
    except sqlite3.DatabaseError:
        pass
    if one_by_one is None:
        return None
    rows = []
    for key in keys:
        try:
            row = conn.execute(one_by_one, (rid, key)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            rows.append(row)
    return rows or None


def _message(body: Any) -> Message | None:
    if not isinstance(body, str):
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and isinstance(message.get("role"), str):
        return message
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _Session:
    rid: int
    row: dict[str, Any]
    transcript: dict[int, tuple[int, Message]] = field(default_factory=dict)  # seq -> (mid, m)


def _read_sessions(conn: sqlite3.Connection, salvage: Salvage) -> dict[int, _Session]:
    columns = ("id, created_at, updated_at, title, summary, archived, status, project_root, "
               "parent_id, state, context_len, transcript_len, ")
    try:
        present = {str(r[1]) for r in conn.execute("PRAGMA table_info(sessions)")}
    except sqlite3.DatabaseError:
        present = set()
    # Before schema 10 every context was explicit: its tail starts after the transcript.
    columns += "tail_from" if "tail_from" in present else "transcript_len AS tail_from"
    names = [c.split()[-1] for c in columns.split(",")]
    sessions: dict[int, _Session] = {}
    seen_ids: set[str] = set()
    for rid, *values in _scan(conn, "sessions", columns, "rid", salvage):
        row = dict(zip(names, values, strict=True))
        try:
            check_session_id(row["id"])
        except ValueError:
            salvage.unreadable_rows += 1
            continue
        if row["id"] in seen_ids or not isinstance(rid, int):
            salvage.unreadable_rows += 1
            continue
        seen_ids.add(row["id"])
        sessions[rid] = _Session(rid, row)
    return sessions


def _read_transcripts(conn: sqlite3.Connection, sessions: dict[int, _Session],
                      orphans: dict[int, _Session], salvage: Salvage) -> None:
    for mid, rid, seq, body in _scan(conn, "transcript", "session_rid, seq, body", "mid",
                                     salvage):
        message = _message(body)
        if message is None or not isinstance(rid, int) or not isinstance(seq, int):
            salvage.unreadable_rows += 1
            continue
        owner = sessions.get(rid) or orphans.setdefault(rid, _Session(rid, {}))
        owner.transcript.setdefault(seq, (mid, message))


def _context(conn: sqlite3.Connection, session: _Session, length: int
             ) -> tuple[list[Message], bool]:
    """The readable context of a session (its explicit rows, then its tail: the transcript
    from ``tail_from`` on) and whether it is whole."""
    row = session.row
    tail_from, transcript_len = row.get("tail_from"), row.get("transcript_len")
    if not isinstance(tail_from, int) or not isinstance(transcript_len, int):
        tail_from = transcript_len = 0
    explicit = length - (transcript_len - tail_from)
    rows = _per_session(
        conn, "SELECT pos, mid, body FROM context WHERE session_rid = ? ORDER BY pos",
        session.rid, "SELECT pos, mid, body FROM context WHERE session_rid = ? AND pos = ?",
        range(max(explicit, 0)),
    ) or []
    ordered = sorted(session.transcript.items())
    if not rows and explicit > 0:  # its explicit rows lost: the transcript, as it is
        return [m for _, (_, m) in ordered], False
    by_mid = {mid: message for mid, message in session.transcript.values()}
    context = []
    for _pos, mid, body in rows:
        message = by_mid.get(mid) if mid is not None else _message(body)
        if message is not None:
            context.append(message)
    context += [m for seq, (_, m) in ordered if seq >= tail_from]
    positions = [pos for pos, _, _ in rows]
    whole = len(context) == length and positions == list(range(max(explicit, 0)))
    return context, whole


def _phases(conn: sqlite3.Connection, rid: int) -> dict[str, str]:
    rows = _per_session(conn, "SELECT call_id, phase FROM tool_calls WHERE session_rid = ?",
                        rid, None, range(0)) or []
    return {str(c): str(p) for c, p in rows if p in ("planned", "started")}


def _compactions(conn: sqlite3.Connection, rid: int) -> list[dict[str, Any]]:
    rows = _per_session(
        conn, "SELECT at, before_tokens, after_tokens, summary FROM compactions "
        "WHERE session_rid = ? ORDER BY n", rid,
        "SELECT at, before_tokens, after_tokens, summary FROM compactions "
        "WHERE session_rid = ? AND n = ?", range(256),
    ) or []
    return [
        {"at": _text(at), "before_tokens": before, "after_tokens": after, "summary": summary}
        for at, before, after, summary in rows
        if isinstance(before, int) and isinstance(after, int) and isinstance(summary, str)
    ]


def _record(conn: sqlite3.Connection, session: _Session) -> tuple[dict[str, Any], bool]:
    row = session.row
    length = row["context_len"] if isinstance(row["context_len"], int) else 0
    context, whole = _context(conn, session, length)
    fixed = repair(importable(context), notice_for(_phases(conn, session.rid)))
    try:
        state = json.loads(row["state"])
    except (TypeError, ValueError):
        state = None
    transcript = importable([m for _, (_, m) in sorted(session.transcript.items())])
    return {
        "id": row["id"],
        "created_at": _text(row["created_at"]) or timestamp(),
        "updated_at": _text(row["updated_at"]) or timestamp(),
        "title": _text(row["title"]),
        "summary": _text(row["summary"]),
        "archived": bool(row["archived"]),
        "status": row["status"] if row["status"] in ("saved", "aborted") else "saved",
        "project_root": _text(row["project_root"]),
        "parent_id": row["parent_id"] if isinstance(row["parent_id"], str) else None,
        "state": state if isinstance(state, dict) else {},
        "messages": fixed.messages,
        "transcript": transcript + fixed.added,
        "compactions": _compactions(conn, session.rid),
    }, whole


def salvage(damaged: Path, into: Path) -> Salvage:
    """Copy every readable session of the database file ``damaged`` into a new store in the
    directory ``into`` (created; its database is ``into/sessions.sqlite3``). ``damaged`` is
    only read."""
    conn = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True, isolation_level=None)
    target = SqliteStore(into, import_legacy=False)
    result = Salvage(target.db_path)
    try:
        sessions = _read_sessions(conn, result)
        orphans: dict[int, _Session] = {}
        _read_transcripts(conn, sessions, orphans, result)
        for session in sessions.values():
            record, whole = _record(conn, session)
            try:
                target.import_record(record)
            except InvalidRecord as exc:
                result.failed.append(f"{record['id']}: {exc}")
                continue
            expected = session.row["transcript_len"]
            expected = expected if isinstance(expected, int) else 0
            result.sessions.append(SavedSession(
                record["id"], record["title"], len(session.transcript), expected, whole))
        for orphan in orphans.values():
            transcript = importable([m for _, (_, m) in sorted(orphan.transcript.items())])
            fixed = repair(transcript)
            now = timestamp()
            record = {
                "id": new_session_id(), "created_at": now, "updated_at": now,
                "title": LOST_RECORD_TITLE, "messages": fixed.messages,
                "transcript": transcript + fixed.added,
            }
            target.import_record(record)
            result.sessions.append(SavedSession(
                record["id"], LOST_RECORD_TITLE, len(transcript), 0, False, new=True))
        for _rowid, name, size, mtime_ns, session_id, error in _scan(
            conn, "legacy_files", "name, size, mtime_ns, session_id, error", "rowid", result
        ):
            if isinstance(name, str) and isinstance(size, int) and isinstance(mtime_ns, int):
                target.note_legacy_file(name, size, mtime_ns, session_id, error)
        with target.db.lock:
            target.db.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        target.close()
        conn.close()
    return result
