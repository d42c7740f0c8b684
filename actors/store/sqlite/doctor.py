"""``harness --doctor [--repair]``: check the SQLite store and repair what can be repaired.

Checks (:func:`examine`, read-only): SQLite's integrity check; the search indexes against the
transcript; every session's rows (valid JSON, counts) and its saved context as the endpoint
would get it (every tool call with a string id, no id twice in one message, every call with
exactly one result, no result without its call); sessions left ``active`` by a crash; lock
files; older JSON records that could not be imported.

Repairs (:func:`repair_in_place`, then :func:`salvage_and_swap` when needed) never edit a
session in place and never hide a healthy store:

* indexes whose pages are sound but whose entries disagree with their table are rebuilt
  (``REINDEX``), and the search index is rebuilt from the transcripts, inside ordinary write
  transactions, safe beside running harnesses;
* a session whose rows are damaged, or whose context is not valid, is copied, with what can
  be read and its tool-call ids made unique strings and paired, into a new session whose
  ``parent_id`` is the damaged one; the original stays for the user to inspect and delete;
* damaged pages (the integrity check fails and ``REINDEX`` cannot or may not help) are never
  written to: every readable row is salvaged into a new file (:mod:`._salvage`), which takes
  the old file's place, and the old file is kept beside it. Replacing the file needs the
  store to be unused: the users lock (:mod:`._users`) taken exclusively and no lease held by
  another process; otherwise nothing is moved and the doctor says who uses it;
* a busy or locked database, one written by a newer harness, a read-only one: reported,
  never moved.

Synchronous and blocking (whole-file reads): run it in a worker thread from async code.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.core.errors import HarnessError, StorageError
from actors.core.ids import new_session_id
from actors.core.messages import Message, repair, text_of
from actors.store._hostile import (
    call_id_problems,
    importable,
    only_open_at_crash,
    unsendable,
)
from actors.store._records import timestamp
from actors.store._rows import fetch_all, is_undecodable
from actors.store._text import indexed_text, session_text
from actors.store.sqlite._database import DB_NAME, is_busy
from actors.store.sqlite._lease import held_elsewhere
from actors.store.sqlite._salvage import Salvage, salvage
from actors.store.sqlite._store import SqliteStore
from actors.store.sqlite._users import StoreUsers

REPAIRED_TITLE = "Repaired copy of "
BUSY_TIMEOUT = 3.0  # the doctor reports a busy store instead of waiting the harness's 10 s
_INDEX_ONLY = re.compile(
    r"(missing from index|wrong # of entries in index|non-unique entry in UNIQUE index)"
)
_FTS_TABLES = ("message_text", "session_text")


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
    index_only: bool = False  # the integrity check complains about index entries only
    findings: list[Finding] = field(default_factory=list)
    damaged: dict[str, _SessionRows] = field(default_factory=dict)
    index_stale: bool = False

    @property
    def serious(self) -> list[Finding]:
        return [f for f in self.findings if f.serious]

    @property
    def pages_damaged(self) -> bool:
        return self.integrity != "ok" and not self.index_only


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


_TEXT, _INT, _MAYBE_TEXT, _MAYBE_INT = (str,), (int,), (str, type(None)), (int, type(None))
_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "id": _TEXT, "created_at": _TEXT, "updated_at": _TEXT, "title": _TEXT, "summary": _TEXT,
    "archived": _INT, "status": _TEXT, "project_root": _TEXT, "parent_id": _MAYBE_TEXT,
    "state": _TEXT, "context_version": _INT, "context_len": _INT, "transcript_len": _INT,
    "title_source": _TEXT, "preview": _TEXT, "user_messages": _INT, "fork_point": _MAYBE_INT,
    "branch_seq": _MAYBE_INT, "tail_from": _INT, "listed_at": _TEXT,
}  # what each column of a session's row holds (SQLite keeps whatever it is given)


def _read_session(conn: sqlite3.Connection, row: sqlite3.Row) -> _SessionRows:
    rows = _SessionRows(row["rid"], dict(row))
    try:
        conn.execute("SELECT * FROM sessions WHERE rid = ?", (row["rid"],)).fetchone()
    except sqlite3.OperationalError as exc:
        if not is_undecodable(exc):
            raise
        rows.problems.append("its metadata holds text that is not UTF-8")
    wrong = [column for column, kinds in _COLUMN_TYPES.items()
             if not isinstance(rows.meta.get(column), kinds)
             or isinstance(rows.meta.get(column), bool)]
    if wrong:
        rows.problems.append(f"its row holds values of the wrong type ({', '.join(wrong)})")
    try:
        by_mid: dict[int, Message | None] = {}
        by_seq: dict[int, int] = {}
        for mid, seq, body in conn.execute(
            "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq",
            (row["rid"],),
        ):
            message = by_mid[mid] = _parse(body, f"transcript message {seq}", rows.problems)
            by_seq[seq] = mid
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
        tail_from = row["tail_from"] if isinstance(row["tail_from"], int) else len(by_seq)
        for seq in range(tail_from, max(by_seq, default=-1) + 1):  # the context's tail
            tail_message = by_mid.get(by_seq.get(seq, -1))
            if tail_message is not None:
                rows.context.append(tail_message)
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
    """Check everything; write nothing."""
    report = Report()
    conn = store.db.connection
    with store.db.lock:
        try:
            lines = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
        except sqlite3.DatabaseError as exc:
            lines = [str(exc)]
        if lines != ["ok"]:
            report.integrity = "; ".join(lines[:3])
            report.index_only = all(_INDEX_ONLY.search(line) for line in lines)
            report.findings.append(Finding("database", f"integrity check: {report.integrity}"))
        _examine_index(conn, report)
        try:  # one session's text that is not UTF-8 is that session's finding (below)
            sessions = fetch_all(conn, "SELECT * FROM sessions ORDER BY updated_at DESC")
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
    for table in _FTS_TABLES:
        try:
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            report.index_stale = True
            report.findings.append(Finding("search index", f"{table} is damaged ({exc})"))
    try:
        missing = 0
        indexed = {r for (r,) in conn.execute("SELECT rowid FROM message_text")}
        (upto,) = conn.execute("SELECT upto FROM index_state").fetchone()
        for mid, body in conn.execute("SELECT mid, body FROM transcript"):
            if mid > upto:  # the indexer has yet to catch up: not missing
                indexed.discard(mid)
                continue
            try:
                needs_entry = bool(text_of(json.loads(body)))
            except (TypeError, ValueError, AttributeError):
                indexed.discard(mid)  # a damaged message: its session's finding, not the index's
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
    crashed = rows.meta["status"] == "active"
    if crashed:
        report.findings.append(Finding(
            session_id, "was not closed cleanly (a crash); it is recovered on resume", False))
    problems = call_id_problems(rows.context)
    if not problems:
        return
    if crashed and only_open_at_crash(rows.context):
        report.findings.append(Finding(
            session_id, f"{len(problems)} tool calls were running at the crash; recovery "
            "answers them on resume", False))
        return
    report.damaged[session_id] = rows
    report.findings.append(Finding(session_id, unsendable(problems)))


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
        report.findings.append(Finding(
            f"sessions/{name}", f"older record not imported: {error}", False))


# -- repairs that run beside live harnesses -------------------------------------------------


@dataclass
class Repairs:
    """What the repairs did, and whether the file still needs salvaging."""

    done: list[str] = field(default_factory=list)
    needs_salvage: bool = False
    failed: bool = False


def repair_in_place(store: SqliteStore, report: Report) -> Repairs:
    """Rebuild indexes whose pages are sound and copy damaged sessions into new ones.

    When pages are damaged, nothing is written: :attr:`Repairs.needs_salvage` is set and the
    caller salvages the file (:func:`salvage_and_swap`) once this store is closed.
    """
    repairs = Repairs()
    if report.pages_damaged:
        repairs.needs_salvage = True
        return repairs
    if report.index_only:
        try:
            with store.db.write() as conn:
                conn.execute("REINDEX")
            with store.db.read() as conn:
                integrity = [r[0] for r in conn.execute("PRAGMA integrity_check(5)")]
        except (StorageError, sqlite3.DatabaseError):
            integrity = ["REINDEX failed"]
        if integrity != ["ok"]:
            repairs.needs_salvage = True
            return repairs
        repairs.done.append("Rebuilt the database's indexes (REINDEX); the integrity check "
                            "is ok again.")
    if report.index_stale:
        _rebuild_search_index(store)
        repairs.done.append("Rebuilt the search index from the transcripts.")
    existing = {
        (s["parent_id"], s["title"]) for s in store.list_sessions(include_archived=True)
    }
    for session_id, rows in report.damaged.items():
        title = REPAIRED_TITLE + (rows.meta["title"] or session_id)
        if (session_id, title) in existing:
            repairs.done.append(f"{session_id}: a repaired copy exists already.")
            continue
        try:
            new_id = _copy_readable(store, session_id, rows, title)
        except HarnessError as exc:
            repairs.done.append(f"{session_id}: could not be copied ({exc}).")
            repairs.failed = True
            continue
        repairs.done.append(
            f"{session_id}: readable part copied to new session {new_id} "
            f"({len(rows.context)} messages in context, {len(rows.transcript)} in transcript, "
            f"tool calls paired). Check it, then delete the original with "
            f"--delete {session_id} --yes."
        )
    return repairs


def _rebuild_search_index(store: SqliteStore) -> None:
    """Drop and recreate the FTS5 tables (their pages are sound: the integrity check passed)
    and fill them from the transcripts, in one write transaction."""
    with store.db.write() as conn:
        for table in _FTS_TABLES:
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).fetchone()
            conn.execute(f"DROP TABLE {table}")
            conn.execute(sql)
        # every message is indexed below
        conn.execute("UPDATE index_state SET upto = coalesce((SELECT max(mid) FROM transcript),"
                     " 0)")
        conn.execute("DELETE FROM message_session")
        rows = []
        for mid, rid, body in conn.execute("SELECT mid, session_rid, body FROM transcript"):
            try:
                text = indexed_text(json.loads(body))
            except (TypeError, ValueError, AttributeError):
                continue
            if text:
                rows.append((mid, rid, text))
        conn.executemany("INSERT INTO message_text (rowid, text) VALUES (?, ?)",
                         [(mid, text) for mid, _, text in rows])
        conn.executemany("INSERT INTO message_session (mid, session_rid) VALUES (?, ?)",
                         [(mid, rid) for mid, rid, _ in rows])
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
        "messages": repair(importable(rows.context)).messages,
        "transcript": importable(rows.transcript),
        "compactions": [],
    }
    store.import_record(record)
    return str(record["id"])


# -- repairs that replace the file ----------------------------------------------------------


def users_elsewhere(memory_dir: Path) -> list[str]:
    """The sessions (with their holder's pid) that other processes are running now."""
    running = []
    sessions_dir = memory_dir / "sessions"
    for lock in sorted(sessions_dir.glob("*.lock")):
        if held_elsewhere(lock):
            holder = ""
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                holder = f" (pid {int(json.loads(lock.read_text())['pid'])})"
            running.append(f"{lock.stem}{holder}")
    return running


def set_aside(memory_dir: Path) -> Path:
    """Rename the database (and its WAL files) aside; the new name. Only with the users
    lock held exclusively."""
    suffix = f".damaged-{timestamp().replace(':', '')}"
    database = memory_dir / DB_NAME
    target = database.with_name(DB_NAME + suffix)
    database.rename(target)
    for extra in ("-wal", "-shm"):
        side = memory_dir / (DB_NAME + extra)
        if side.exists():
            side.rename(side.with_name(DB_NAME + suffix + extra))
    return target


@dataclass
class Swapped:
    """The outcome of :func:`salvage_and_swap`."""

    lines: list[str]
    ok: bool
    salvage: Salvage | None = None


def salvage_and_swap(memory_dir: Path) -> Swapped:
    """Salvage every readable session of ``memory_dir``'s database into a new file and put
    it in the old one's place (kept beside it as ``sessions.sqlite3.damaged-…``).

    Refused, with nothing moved, while another process has the store open or holds a lease.
    """
    memory_dir = memory_dir.expanduser().resolve()
    users = StoreUsers(memory_dir)
    if not users.exclusive():
        return Swapped([
            "The store is in use by another process (a harness or a session command), so "
            "the damaged file was not replaced and nothing was moved. Close the other "
            "harnesses and run `harness --doctor --repair` again."
        ], ok=False)
    try:
        running = users_elsewhere(memory_dir)
        if running:
            return Swapped([
                "Sessions are running in other processes: " + ", ".join(running) + ". "
                "Nothing was moved; close them and run `harness --doctor --repair` again."
            ], ok=False)
        database = memory_dir / DB_NAME
        work = memory_dir / f".salvage-{timestamp().replace(':', '')}"
        try:
            saved = salvage(database, work)
            aside = set_aside(memory_dir)
            saved.path.rename(database)
            _fsync_dir(memory_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    finally:
        users.close()
    return Swapped(_describe(saved, aside), ok=True, salvage=saved)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _describe(saved: Salvage, aside: Path) -> list[str]:
    whole = [s for s in saved.sessions if s.whole]
    partial = [s for s in saved.sessions if not s.whole and not s.new]
    found = [s for s in saved.sessions if s.new]
    lines = [
        f"Salvaged the readable rows into a new database file; the damaged one is kept at "
        f"{aside}.",
        f"Saved {len(saved.sessions)} sessions ({saved.messages} messages): {len(whole)} "
        f"whole, {len(partial)} in part, {len(found)} found without their session record.",
    ]
    for s in partial:
        lost = s.expected - s.messages
        what = f"{s.messages} of {s.expected} messages" if lost > 0 else "every message"
        context = "" if s.context_whole else ", context rebuilt from what was readable"
        lines.append(f"  {s.id} {s.title!r}: {what} saved{context}.")
    for s in found:
        lines.append(f"  {s.id} (new): {s.messages} messages whose session record was lost.")
    if not saved.sessions:
        lines.append("Nothing could be read; the new store is empty. Import exports with "
                     "--import.")
    lines += [f"  Not saved: {line}" for line in saved.failed]
    if saved.unreadable_rows:
        lines.append(f"{saved.unreadable_rows} rows or pages could not be read.")
    return lines


def open_for_doctor(memory_dir: Path) -> SqliteStore:
    """The store as the doctor opens it (reports a busy store after :data:`BUSY_TIMEOUT`)."""
    return SqliteStore(memory_dir, busy_timeout=BUSY_TIMEOUT)


def cannot_open(exc: StorageError) -> str | None:
    """Why an unopenable store must be left alone (busy, newer, read-only …), or None when
    it is damaged and may be salvaged."""
    if is_busy(exc):
        return ("The store is busy: another process holds its lock. Nothing was changed; "
                "try again when it is done.")
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error) and (
        getattr(cause, "sqlite_errorcode", 0) & 0xFF
    ) in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return None
    return "This is not damage that a repair can fix; nothing was changed."


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
