"""``harness --doctor [--repair]``: check the SQLite store and repair what can be repaired.

Checks: SQLite's integrity check; the search indexes against the transcript; every session's
rows (valid JSON, counts, pairing of tool calls); sessions left ``active`` by a crash; lock
files; older JSON records that could not be imported.

Repairs never edit a session in place: the search indexes are rebuilt from the transcript, and
a damaged session is copied, with what can still be read and its tool calls paired, into a new
session whose ``parent_id`` is the damaged one. The original stays for the user to inspect and
delete.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from actors.core.errors import HarnessError
from actors.core.messages import Message, pairing_problems, repair, text_of
from actors.store._records import timestamp
from actors.store._text import indexed_text, session_text
from actors.store.sqlite._store import SqliteStore

REPAIRED_TITLE = "Repaired copy of "


@dataclass
class Finding:
    subject: str  # "database", "search index", a session id, "lock files", a legacy file
    problem: str
    serious: bool = True  # False: a note (nothing lost, handled on resume)


@dataclass
class _SessionRows:
    """What could be read of one session, and what could not."""

    rid: int
    meta: dict[str, Any]
    context: list[Message] = field(default_factory=list)
    transcript: list[Message] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Report:
    sessions: int = 0
    messages: int = 0
    integrity: str = "ok"
    findings: list[Finding] = field(default_factory=list)
    damaged: dict[str, _SessionRows] = field(default_factory=dict)
    index_stale: bool = False

    @property
    def serious(self) -> list[Finding]:
        return [f for f in self.findings if f.serious]


def _parse(body: Any, what: str, problems: list[str]) -> Message | None:
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        problems.append(f"{what} is not valid JSON")
        return None
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        problems.append(f"{what} is not a chat message")
        return None
    return message


def _read_session(conn: sqlite3.Connection, row: sqlite3.Row) -> _SessionRows:
    rows = _SessionRows(row["rid"], dict(row))
    try:
        by_mid: dict[int, Message | None] = {}
        for mid, seq, body in conn.execute(
            "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
            (row["rid"],),
        ):
            message = by_mid[mid] = _parse(body, f"transcript message {seq}", rows.problems)
            if message is not None:
                rows.transcript.append(message)
        for pos, mid, body in conn.execute(
            "SELECT pos, mid, body FROM context WHERE session_rid = ? ORDER BY pos",
            (row["rid"],),
        ):
            if mid is not None and mid not in by_mid:
                rows.problems.append(f"context message {pos} refers to a missing message")
                continue
            message = by_mid[mid] if mid is not None else _parse(
                body, f"context message {pos}", rows.problems
            )
            if message is not None:
                rows.context.append(message)
        if len(by_mid) != row["transcript_len"]:
            rows.problems.append(
                f"{len(by_mid)} transcript messages stored, {row['transcript_len']} expected"
            )
        json.loads(row["state"])
    except sqlite3.DatabaseError as exc:
        rows.problems.append(f"its rows cannot be read ({exc})")
    except ValueError:
        rows.problems.append("its planning state is not valid JSON")
    return rows


def examine(store: SqliteStore) -> Report:
    """Check everything; read-only."""
    report = Report()
    conn = store.db.connection
    with store.db.lock:
        try:
            lines = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
        except sqlite3.DatabaseError as exc:
            lines = [str(exc)]
        if lines != ["ok"]:
            report.integrity = "; ".join(lines[:3])
            report.findings.append(Finding("database", f"integrity check: {report.integrity}"))
        _examine_index(conn, report)
        try:
            sessions = conn.execute("SELECT * FROM sessions ORDER BY updated_at DESC").fetchall()
        except sqlite3.DatabaseError as exc:
            report.findings.append(Finding("database", f"the session table is unreadable ({exc})"))
            sessions = []
        for row in sessions:
            report.sessions += 1
            rows = _read_session(conn, row)
            report.messages += len(rows.transcript)
            _examine_session(store, row["id"], rows, report)
        _examine_files(store, conn, {row["id"] for row in sessions}, report)
    return report


def _examine_index(conn: sqlite3.Connection, report: Report) -> None:
    for table in ("message_text", "session_text"):
        try:
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            report.index_stale = True
            report.findings.append(Finding("search index", f"{table} is damaged ({exc})"))
    try:
        missing = 0
        indexed = {r for (r,) in conn.execute("SELECT rowid FROM message_text")}
        for mid, body in conn.execute("SELECT mid, body FROM transcript"):
            try:
                needs_entry = bool(text_of(json.loads(body)))
            except (TypeError, ValueError, AttributeError):
                continue
            if needs_entry and mid not in indexed:
                missing += 1
            indexed.discard(mid)
    except sqlite3.DatabaseError:
        return  # the integrity check already reported it
    if missing or indexed:
        report.index_stale = True
        report.findings.append(Finding(
            "search index",
            f"{missing} messages missing from the search index, {len(indexed)} stale entries",
        ))


def _examine_session(store: SqliteStore, session_id: str, rows: _SessionRows,
                     report: Report) -> None:
    if rows.problems:
        report.damaged[session_id] = rows
        for problem in rows.problems:
            report.findings.append(Finding(session_id, problem))
        return
    running = store.is_running_elsewhere(session_id)
    if running:
        report.findings.append(Finding(session_id, "running in another process", False))
        return
    if rows.meta["status"] == "active":
        report.findings.append(Finding(
            session_id, "was not closed cleanly (a crash); it is recovered on resume", False))
    problems = pairing_problems(rows.context)
    if problems:
        report.findings.append(Finding(
            session_id, f"{len(problems)} tool-call pairing problems ({problems[0]}); "
            "repaired on resume", False))


def _examine_files(store: SqliteStore, conn: sqlite3.Connection, ids: set[str],
                   report: Report) -> None:
    stale = [p for p in store.sessions_dir.glob("*.lock") if p.stem not in ids]
    if stale:
        report.findings.append(Finding(
            "lock files", f"{len(stale)} lock files of deleted sessions (kept on purpose)", False))
    try:
        failed = conn.execute(
            "SELECT name, error FROM legacy_files WHERE error IS NOT NULL").fetchall()
    except sqlite3.DatabaseError:
        failed = []
    for name, error in failed:
        report.findings.append(Finding(f"sessions/{name}", f"older record not imported: {error}"))


def repair_store(store: SqliteStore, report: Report) -> list[str]:
    """Rebuild the search index and copy damaged sessions into new ones; what was done."""
    done = []
    if report.index_stale:
        _rebuild_index(store)
        done.append("Rebuilt the search index from the transcripts.")
    existing = {
        (s["parent_id"], s["title"]) for s in store.list_sessions(include_archived=True)
    }
    for session_id, rows in report.damaged.items():
        title = REPAIRED_TITLE + (rows.meta["title"] or session_id)
        if (session_id, title) in existing:
            done.append(f"{session_id}: a repaired copy exists already.")
            continue
        try:
            new_id = _copy_readable(store, session_id, rows, title)
        except HarnessError as exc:
            done.append(f"{session_id}: could not be copied ({exc}).")
            continue
        done.append(
            f"{session_id}: readable part copied to new session {new_id} "
            f"({len(rows.context)} messages in context, {len(rows.transcript)} in transcript). "
            f"Check it, then delete the original with --delete {session_id} --yes."
        )
    return done


def _rebuild_index(store: SqliteStore) -> None:
    with store.db.write() as conn:
        conn.execute("DELETE FROM message_text")
        conn.execute("DELETE FROM session_text")
        rows = []
        for mid, body in conn.execute("SELECT mid, body FROM transcript"):
            try:
                text = indexed_text(json.loads(body))
            except (TypeError, ValueError, AttributeError):
                continue
            if text:
                rows.append((mid, text))
        conn.executemany("INSERT INTO message_text (rowid, text) VALUES (?, ?)", rows)
        summaries: dict[int, list[str]] = {}
        for rid, summary in conn.execute(
            "SELECT session_rid, summary FROM compactions ORDER BY session_rid, n"
        ):
            summaries.setdefault(rid, []).append(summary)
        conn.executemany(
            "INSERT INTO session_text (rowid, text) VALUES (?, ?)",
            [
                (rid, session_text(title, summary, summaries.get(rid, [])))
                for rid, title, summary in conn.execute(
                    "SELECT rid, title, summary FROM sessions"
                ).fetchall()
            ],
        )


def _copy_readable(store: SqliteStore, session_id: str, rows: _SessionRows, title: str) -> str:
    from actors.core.ids import new_session_id

    try:
        state = json.loads(rows.meta["state"])
    except ValueError:
        state = {}
    now = timestamp()
    record = {
        "id": new_session_id(),
        "created_at": now,
        "updated_at": now,
        "title": title,
        "summary": rows.meta["summary"],
        "archived": False,
        "status": "saved",
        "project_root": rows.meta["project_root"],
        "parent_id": session_id,
        "state": state if isinstance(state, dict) else {},
        "messages": repair(rows.context).messages,
        "transcript": rows.transcript,
        "compactions": [],
    }
    store.import_record(record)
    return str(record["id"])


def render(store: SqliteStore, report: Report) -> list[str]:
    lines = [
        f"Database:     {store.db_path}",
        f"Sessions:     {report.sessions} ({report.messages} messages)",
        f"Integrity:    {report.integrity}",
    ]
    serious = report.serious
    notes = [f for f in report.findings if not f.serious]
    if serious:
        lines.append("Problems:")
        lines += [f"  {f.subject}: {f.problem}" for f in serious]
    if notes:
        lines.append("Notes:")
        lines += [f"  {f.subject}: {f.problem}" for f in notes]
    if not serious:
        lines.append("No problems found.")
    return lines
