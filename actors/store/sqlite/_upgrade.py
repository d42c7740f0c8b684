"""Schema 10: the checkpoint journal of schema 8 applied to the tables, and dropped.

Schema 8 committed an append as one row of ``journal`` first and wrote its tables in a later
transaction; a writer killed between the two left rows there. Schema 10 has one write path
(:mod:`actors.store._appends`), so the migration to it applies what it finds, oldest first,
exactly as that later transaction would have (the entry's counters must still be its
session's; its commit time becomes ``updated_at``), and drops the table. An entry that
cannot be applied (unreadable, or not following its session as saved: damage) is left out
and said in one line naming its session; other sessions are not held up by it.

Runs inside the migration's transaction (:func:`actors.store.sqlite._schema.migrate`).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from actors.store import _appends, _rows
from actors.store.sqlite._index import Fts5Index


def apply_journal(conn: sqlite3.Connection) -> list[str]:
    """Apply and drop schema 8's ``journal``; a line for each entry left out."""
    if conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'journal'"
                    ).fetchone() is None:
        return []
    left_out: list[str] = []
    index = Fts5Index()
    for text, session in conn.execute(
        "SELECT j.entry, s.id FROM journal j LEFT JOIN sessions s ON s.rid = j.session_rid"
        " ORDER BY j.jid"
    ).fetchall():
        if session is None:
            continue  # deleted since: its checkpoints went with it
        try:
            header, state, *texts = str(text).split("\n")
            # [session, rid, version, context_len, transcript_len, branch, title source,
            #  user messages, status before, status, planned calls, commit time]
            _, *counters, _, status, planned, at = json.loads(header)
            before = tuple(counters[:4])  # rid, context version and length, transcript length
            plain = [json.loads(body) for body in texts]
            row = _rows.append_row(conn, str(session))
        except (TypeError, ValueError) as exc:
            left_out.append(f"A checkpoint of session {session} left by an earlier version "
                            f"could not be read ({exc}); its messages are not in the session.")
            continue
        if tuple(row[:4]) != before:
            left_out.append(f"A checkpoint of session {session} left by an earlier version "
                            "does not follow the session as saved; its messages are not in it.")
            continue
        when = datetime.fromtimestamp(float(at), UTC).isoformat(timespec="microseconds")
        _appends.write(conn, index, row, plain, texts, planned_calls=bool(planned),
                       state=state or None, status=status, at=when)
    conn.execute("DROP TABLE journal")
    return left_out
