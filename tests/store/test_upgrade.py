"""Opening a store an earlier version wrote: schema 8's checkpoint journal is applied, then
dropped (actors/store/sqlite/_upgrade.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from actors.store import SessionStore
from tests.support.stores import without_tails

SYSTEM = {"role": "system", "content": "s"}


def _entry(session_id: str, counters: tuple[Any, ...], state: dict[str, Any] | None,
           messages: list[dict[str, Any]], at: float, status: str | None = None) -> str:
    """A journal row as schema 8 wrote it: a header line (the session, the counters the
    append was made against, the flags, its commit time), the state's JSON, the messages'."""
    header = json.dumps([session_id, *counters, status, False, at])
    lines = [header, "" if state is None else json.dumps(state, sort_keys=True)]
    return "\n".join(lines + [json.dumps(m, separators=(",", ":")) for m in messages])


def _as_schema_8(path: Path, rows: list[tuple[str, str]]) -> None:
    """Make the store at ``path`` a schema-8 store with ``rows`` (session id, entry text)
    left in its journal, as a writer killed between its two commits left them."""
    without_tails(path, 8)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE journal (jid INTEGER PRIMARY KEY, session_rid INTEGER NOT NULL,"
                 " entry TEXT NOT NULL)")
    for session_id, text in rows:
        (rid,) = conn.execute("SELECT rid FROM sessions WHERE id = ?", (session_id,)).fetchone()
        conn.execute("INSERT INTO journal (session_rid, entry) VALUES (?, ?)", (rid, text))
    conn.close()


def _counters(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    with store.db.lock:
        row = store.db.connection.execute(
            "SELECT rid, context_version, context_len, transcript_len, branch_seq,"
            " title_source, user_messages, status FROM sessions WHERE id = ?",
            (session_id,)).fetchone()
    return tuple(row)


def test_a_journal_left_by_schema_8_is_applied_once_then_dropped(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    kept = store.create_session(messages=[SYSTEM])
    damaged = store.create_session(messages=[SYSTEM])
    counters = _counters(store, kept)
    other = _counters(store, damaged)
    store.close()
    first = [{"role": "user", "content": "left in the journal"}]
    second = [{"role": "assistant", "content": "and its answer"}]
    after_first = (counters[0], 0, 2, 2, None, "provisional", 1, "saved")
    _as_schema_8(memory_dir / "sessions.sqlite3", [
        (kept, _entry(kept, counters, {"n": 1}, first, 1_700_000_000.0)),
        (damaged, _entry(damaged, other, None, [], 1_700_000_001.0).replace("[", "{", 1)),
        (kept, _entry(kept, after_first, {"n": 2}, second, 1_700_000_002.5)),
    ])

    upgraded = SessionStore(memory_dir)
    [said] = upgraded.import_warnings  # the unreadable entry, naming its session only
    assert damaged in said and kept not in said
    record = upgraded.load_session(kept)
    assert record["messages"] == [SYSTEM, *first, *second]
    assert record["transcript"] == [SYSTEM, *first, *second]
    assert record["state"] == {"n": 2}
    assert record["title"] == "left in the journal"  # the listing follows, as an append's
    assert record["updated_at"] == "2023-11-14T22:13:22.500000+00:00"  # the entry's commit
    assert [r["id"] for r in upgraded.search_sessions("journal")] == [kept]
    with upgraded.lease(damaged):  # the other session writes on as ever
        upgraded.append(damaged, [{"role": "user", "content": "still fine"}], at=1)
    with upgraded.db.lock:
        conn = upgraded.db.connection
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 10  # both steps
        assert conn.execute("SELECT name FROM sqlite_schema WHERE name = 'journal'"
                            ).fetchone() is None
    upgraded.close()

    again = SessionStore(memory_dir)  # applied once: nothing is appended twice
    assert again.import_warnings == []
    assert again.load_session(kept)["messages"] == [SYSTEM, *first, *second]
    again.close()
