"""Marks: which snapshot was taken for which point of which session, and what each tool call
changed.

A mark is one row of ``workspace_marks``, beside the objects (the same database: the objects
file for SQLite, the session database for PostgreSQL), so a mark never names an object that
is not stored: the snapshot's objects are committed before its mark. Kinds::

    message  the files when user message ``message`` was sent (a rewind goes back to this)
    before   just before tool call ``call_id`` (of assistant message ``message``) ran
    after    just after it; its changes (since ``before``) are rows of ``workspace_paths``
    rewind   a rewind of the files to ``root``; ``detail`` holds the undo snapshot (the
             files as they were just before), so the rewind can itself be undone, and the
             project. It is the commit point of the restore journaled under ``call_id``
             (see ``_journal``), written before any file is
    conversation  the conversation half of a rewind of both, done (``detail``: the files'
             rewind mark and the fork that keeps what came after)

Message numbers are the session's (transcript messages numbered from 1, as ``--info`` and
``--export`` show them). ``workspace_paths`` lets ``--search`` find the sessions that changed
a path. Marks of a session that no longer exists are dropped by the collection, and the
objects only they reached go with them.

Synchronous and thread-safe (the transactions hold their connection's lock).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.store import Conn

if TYPE_CHECKING:
    from actors.workspace._database import Database
    from actors.workspace._tree import Change

_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workspace_marks ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " message INTEGER NOT NULL, call_id TEXT NOT NULL, root BLOB NOT NULL,"
    " created_at REAL NOT NULL, detail TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS workspace_marks_session ON workspace_marks (session_id, seq)",
    "CREATE TABLE IF NOT EXISTS workspace_paths ("
    " mark INTEGER NOT NULL, session_id TEXT NOT NULL, path TEXT NOT NULL,"
    " status TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS workspace_paths_path ON workspace_paths (path)",
    "CREATE INDEX IF NOT EXISTS workspace_paths_mark ON workspace_paths (mark)",
)
_PG_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workspace_marks ("
    " seq BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " message BIGINT NOT NULL, call_id TEXT NOT NULL, root BYTEA NOT NULL,"
    " created_at DOUBLE PRECISION NOT NULL, detail TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS workspace_marks_session ON workspace_marks (session_id, seq)",
    "CREATE TABLE IF NOT EXISTS workspace_paths ("
    " mark BIGINT NOT NULL, session_id TEXT NOT NULL, path TEXT NOT NULL,"
    " status TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS workspace_paths_path ON workspace_paths (path)",
    "CREATE INDEX IF NOT EXISTS workspace_paths_mark ON workspace_paths (mark)",
)
SCHEMA = {"sqlite": _SQLITE_SCHEMA, "postgres": _PG_SCHEMA}
_COLUMNS = "seq, session_id, kind, message, call_id, root, created_at, detail"
MAX_PATHS_PER_CALL = 2000  # paths recorded for one call (a note says how many more)


@dataclass(frozen=True)
class Mark:
    seq: int
    session_id: str
    kind: str
    message: int
    call_id: str
    root: bytes
    created_at: float
    detail: dict[str, Any] = field(default_factory=dict)


def _mark(row: Sequence[Any]) -> Mark:
    seq, session_id, kind, message, call_id, root, created_at, detail = row
    return Mark(int(seq), str(session_id), str(kind), int(message), str(call_id), bytes(root),
                float(created_at), json.loads(detail) if detail else {})


class Marks:
    """The marks of every session in one workspace database (see the module doc)."""

    def __init__(self, db: Database) -> None:
        self.db = db  # its tables are made with the objects' (see ObjectStore)

    def add(
        self, session_id: str, kind: str, message: int, root: bytes, *, call_id: str = "",
        changes: Sequence[Change] = (), detail: dict[str, Any] | None = None,
        durable: bool = False,
    ) -> Mark:
        """Record a mark (and the paths ``changes`` touched) in one transaction."""
        now = time.time()
        files = [c for c in changes if not c.is_dir]
        text = json.dumps({**(detail or {}), **(
            {"more_paths": len(files) - MAX_PATHS_PER_CALL}
            if len(files) > MAX_PATHS_PER_CALL else {})})
        with self.db.write(durable=durable or kind == "rewind") as conn:
            row = conn.execute(
                "INSERT INTO workspace_marks (session_id, kind, message, call_id, root,"
                " created_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (session_id, kind, message, call_id, root, now, text),
            ).fetchone()
            seq = int(row[0])
            if files:
                conn.executemany(
                    "INSERT INTO workspace_paths (mark, session_id, path, status)"
                    " VALUES (?, ?, ?, ?)",
                    [(seq, session_id, c.path, c.status) for c in files[:MAX_PATHS_PER_CALL]],
                )
        return Mark(seq, session_id, kind, message, call_id, root, now, detail or {})

    def of_session(self, session_id: str) -> list[Mark]:
        """Every mark of the session, oldest first."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM workspace_marks WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        return [_mark(r) for r in rows]

    def latest(self, session_id: str) -> Mark | None:
        """The session's last mark: the files as the session last saw them."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM workspace_marks WHERE session_id = ?"
                " ORDER BY seq DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else _mark(row)

    def rewind_recorded(self, journal_id: str) -> bool:
        """Whether the rewind journaled as ``journal_id`` was recorded (its commit point)."""
        return self.rewind_of(journal_id) is not None

    def rewind_of(self, journal_id: str) -> Mark | None:
        """The ``rewind`` mark recorded for the restore journaled as ``journal_id``."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM workspace_marks WHERE kind = 'rewind' AND call_id = ?",
                (journal_id,),
            ).fetchone()
        return None if row is None else _mark(row)

    def paths(self, marks: Iterable[int]) -> dict[int, list[tuple[str, str]]]:
        """``mark seq -> [(path, status)]`` for the given ``after`` marks."""
        wanted = list(marks)
        found: dict[int, list[tuple[str, str]]] = {}
        if not wanted:
            return found
        with self.db.read() as conn:
            for start in range(0, len(wanted), 400):
                chunk = wanted[start : start + 400]
                for mark, path, status in conn.execute(
                    "SELECT mark, path, status FROM workspace_paths WHERE mark IN "
                    f"({', '.join('?' * len(chunk))}) ORDER BY path",
                    tuple(chunk),
                ).fetchall():
                    found.setdefault(int(mark), []).append((str(path), str(status)))
        return found

    def sessions_changing(self, path: str) -> dict[str, int]:
        """``session id -> calls`` of the sessions whose tool calls changed ``path`` (a file,
        or any file below it when it is a directory); rewinds do not count."""
        path = path.strip("/")
        like = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT p.session_id, count(DISTINCT p.mark) FROM workspace_paths p"
                " JOIN workspace_marks m ON m.seq = p.mark AND m.kind = 'after'"
                " WHERE p.path = ? OR p.path LIKE ? ESCAPE '\\' GROUP BY p.session_id",
                (path, like),
            ).fetchall()
        return {str(sid): int(n) for sid, n in rows}

    def roots(self, conn: Conn | None = None) -> dict[str, list[bytes]]:
        """``session id -> roots`` its marks keep (undo snapshots of rewinds included)."""
        sql = "SELECT session_id, root, detail FROM workspace_marks"
        if conn is None:
            with self.db.read() as own:
                rows = own.execute(sql).fetchall()
        else:
            rows = conn.execute(sql).fetchall()
        found: dict[str, list[bytes]] = {}
        for sid, root, detail in rows:
            kept = found.setdefault(str(sid), [])
            kept.append(bytes(root))
            undo = json.loads(detail).get("undo") if detail else None
            if undo:
                kept.append(bytes.fromhex(undo))
        return found

    def forget_sessions(self, session_ids: Iterable[str]) -> int:
        """Drop the marks (and paths) of sessions that no longer exist; how many marks."""
        ids = list(session_ids)
        dropped = 0
        with self.db.write() as conn:
            for start in range(0, len(ids), 400):
                chunk = tuple(ids[start : start + 400])
                marks = ", ".join("?" * len(chunk))
                conn.execute(f"DELETE FROM workspace_paths WHERE session_id IN ({marks})", chunk)
                row = conn.execute(
                    f"SELECT count(*) FROM workspace_marks WHERE session_id IN ({marks})", chunk
                ).fetchone()
                dropped += int(row[0])
                conn.execute(f"DELETE FROM workspace_marks WHERE session_id IN ({marks})", chunk)
        return dropped

    def expire(self, before: float) -> int:
        """Drop the marks made before ``before`` (time.time()), but each session's newest;
        how many."""
        with self.db.write() as conn:
            keep = "SELECT max(seq) FROM workspace_marks GROUP BY session_id"
            row = conn.execute(
                f"SELECT count(*) FROM workspace_marks WHERE created_at < ? AND seq NOT IN "
                f"({keep})", (before,),
            ).fetchone()
            dropped = int(row[0])
            if dropped:
                conn.execute(
                    f"DELETE FROM workspace_marks WHERE created_at < ? AND seq NOT IN ({keep})",
                    (before,),
                )
                conn.execute(
                    "DELETE FROM workspace_paths WHERE mark NOT IN "
                    "(SELECT seq FROM workspace_marks)"
                )
        return dropped

    def oldest(self, session_id: str, *, own: bool, limit: int) -> list[int]:
        """Up to ``limit`` marks to drop to make room, oldest first: of the sessions but
        ``session_id`` (``own``: of that session), never a session's newest mark nor its
        newest rewind (the undo point ``--undo`` goes back to, the record of a rewind that
        may be pending)."""
        kept = ("SELECT max(seq) FROM workspace_marks GROUP BY session_id UNION "
                "SELECT max(seq) FROM workspace_marks WHERE kind = 'rewind' GROUP BY session_id")
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT seq FROM workspace_marks WHERE session_id {'=' if own else '<>'} ?"
                f" AND seq NOT IN ({kept}) ORDER BY created_at, seq LIMIT ?",
                (session_id, limit),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def forget(self, seqs: Sequence[int]) -> int:
        """Drop the marks ``seqs`` (and their paths); how many."""
        dropped = 0
        with self.db.write() as conn:
            for start in range(0, len(seqs), 400):
                chunk = tuple(seqs[start : start + 400])
                marks = ", ".join("?" * len(chunk))
                conn.execute(f"DELETE FROM workspace_paths WHERE mark IN ({marks})", chunk)
                row = conn.execute(
                    f"SELECT count(*) FROM workspace_marks WHERE seq IN ({marks})", chunk
                ).fetchone()
                dropped += int(row[0])
                conn.execute(f"DELETE FROM workspace_marks WHERE seq IN ({marks})", chunk)
        return dropped

    def sizes(self) -> dict[str, int]:
        """``session id -> marks`` of every session that has any."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT session_id, count(*) FROM workspace_marks GROUP BY session_id"
            ).fetchall()
        return {str(sid): int(n) for sid, n in rows}
