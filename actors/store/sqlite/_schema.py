"""The SQLite schema and its versioned, idempotent migrations.

Tables (one database file, ``<memory-dir>/sessions.sqlite3``):

``sessions``      one row per session: metadata, planning/usage ``state`` (JSON), and the
                  counters ``context_len``/``transcript_len``/``context_version`` that let a
                  checkpoint append without reading what is already stored; ``tail_from``,
                  where the context's tail begins in the transcript; ``listed_at``,
                  ``updated_at`` to the second, which the listing's index follows.
``transcript``    every message ever persisted, one row each, append-only (``seq`` = order),
                  with its pairing facts (``shape``) and token estimate, read by a resume
                  instead of the message itself.
``context``       the working context's explicit part: one row per position, pointing at a
                  transcript row (``mid``) or, for messages that exist only in the context (a
                  compaction summary), holding the message itself (``body``); the transcript
                  from ``sessions.tail_from`` on follows it (actors.store._rows).
``compactions``   one row per compaction event.
``tool_calls``    the write-ahead record of tool calls not yet answered: ``planned`` when the
                  assistant message that asked for them was checkpointed, ``started`` just
                  before the tool began (with its process group once it runs: ``pgid``,
                  ``leader_start``, ``host``). A result deletes the row.
``legacy_files``  which JSON records of the older layout were imported (never modified).
``message_text``  FTS5 (trigram) over each transcript message's text, rowid = transcript.mid.
``session_text``  FTS5 (trigram) over title, summary and compaction summaries, rowid = rid.
``index_pending`` unused since version 7 (a harness of an older version still running
                  may write it).
``index_state``   one row: ``upto``, the last transcript row (mid) the search index holds;
                  the rows after it are the indexer's to do (a checkpoint writes no mark).
``message_session`` the session of each indexed message (mid -> session rid), written by
                  the indexer, read by search to count matches per session.

Schema 8 had a ``journal`` of checkpoints not applied to the tables yet; the migration to 10
applies what it holds and drops it (:mod:`actors.store.sqlite._upgrade`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from actors.store.sqlite._upgrade import apply_journal

SCHEMA_VERSION = 10

MIGRATION_LISTINGS = """
    ALTER TABLE sessions ADD COLUMN title_source TEXT NOT NULL DEFAULT '';
    ALTER TABLE sessions ADD COLUMN preview TEXT NOT NULL DEFAULT '';
    ALTER TABLE sessions ADD COLUMN user_messages INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN fork_point INTEGER;
    ALTER TABLE sessions ADD COLUMN branch_seq INTEGER;
    ALTER TABLE transcript ADD COLUMN parent_seq INTEGER;
    UPDATE sessions SET title_source = 'user' WHERE title <> '';
    UPDATE sessions SET user_messages = (
        SELECT count(*) FROM transcript t
        WHERE t.session_rid = sessions.rid AND instr(t.body, '"role":"user"') > 0
          AND instr(t.body, '<session_context_data>') = 0
    );
    CREATE INDEX IF NOT EXISTS sessions_project ON sessions (project_root, updated_at);
"""

_MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], list[str]]] = {
    1: """
    CREATE TABLE IF NOT EXISTS sessions (
        rid             INTEGER PRIMARY KEY,
        id              TEXT    NOT NULL UNIQUE,
        created_at      TEXT    NOT NULL,
        updated_at      TEXT    NOT NULL,
        title           TEXT    NOT NULL DEFAULT '',
        summary         TEXT    NOT NULL DEFAULT '',
        archived        INTEGER NOT NULL DEFAULT 0,
        status          TEXT    NOT NULL DEFAULT 'saved',
        project_root    TEXT    NOT NULL DEFAULT '',
        parent_id       TEXT,
        state           TEXT    NOT NULL DEFAULT '{}',
        context_version INTEGER NOT NULL DEFAULT 0,
        context_len     INTEGER NOT NULL DEFAULT 0,
        transcript_len  INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS sessions_recent ON sessions (archived, updated_at DESC);
    CREATE TABLE IF NOT EXISTS transcript (
        mid         INTEGER PRIMARY KEY,
        session_rid INTEGER NOT NULL,
        seq         INTEGER NOT NULL,
        body        TEXT    NOT NULL,
        UNIQUE (session_rid, seq)
    );
    CREATE TABLE IF NOT EXISTS context (
        session_rid INTEGER NOT NULL,
        pos         INTEGER NOT NULL,
        mid         INTEGER,
        body        TEXT,
        PRIMARY KEY (session_rid, pos)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS compactions (
        session_rid   INTEGER NOT NULL,
        n             INTEGER NOT NULL,
        at            TEXT    NOT NULL,
        before_tokens INTEGER NOT NULL,
        after_tokens  INTEGER NOT NULL,
        summary       TEXT    NOT NULL,
        PRIMARY KEY (session_rid, n)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS tool_calls (
        session_rid INTEGER NOT NULL,
        call_id     TEXT    NOT NULL,
        phase       TEXT    NOT NULL CHECK (phase IN ('planned', 'started')),
        PRIMARY KEY (session_rid, call_id)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS legacy_files (
        name       TEXT PRIMARY KEY,
        size       INTEGER NOT NULL,
        mtime_ns   INTEGER NOT NULL,
        session_id TEXT,
        error      TEXT
    );
    CREATE VIRTUAL TABLE IF NOT EXISTS message_text USING fts5 (text, tokenize = 'trigram');
    CREATE VIRTUAL TABLE IF NOT EXISTS session_text USING fts5 (text, tokenize = 'trigram');
    """,
    # Search maps matching messages to their sessions through this covering index, without
    # touching the table pages that hold the message bodies.
    2: """
    CREATE INDEX IF NOT EXISTS transcript_session_of ON transcript (mid, session_rid);
    """,
    # A started run_bash call records its process group (id, leader's start time, and the
    # host/boot it runs on), so recovery after a kill -9 can stop a survivor and say so.
    3: """
    ALTER TABLE tool_calls ADD COLUMN pgid INTEGER;
    ALTER TABLE tool_calls ADD COLUMN leader_start INTEGER;
    ALTER TABLE tool_calls ADD COLUMN host TEXT;
    """,
    # Listings people can scan, titles by source, lineage and branches (see _rows.py):
    # where a title came from, the latest thing the user typed, how many messages the user
    # typed (a session without any is not listed), the parent's message a fork was cut at,
    # and, after a rewind, which transcript message the next one follows.
    4: MIGRATION_LISTINGS,
    # The search index leaves the checkpoint's transaction: a checkpoint marks its messages
    # here, durably, and the indexer writes their postings later, in transactions of its own.
    5: """
    CREATE TABLE IF NOT EXISTS index_pending (mid INTEGER PRIMARY KEY);
    """,
    # A resume reads the context without parsing it: each transcript row keeps what the
    # pairing rule needs (``shape``: actors.core.messages.shape_of) and its token estimate.
    # NULL in rows written before: those are parsed when read.
    6: """
    ALTER TABLE transcript ADD COLUMN shape TEXT;
    ALTER TABLE transcript ADD COLUMN tokens INTEGER;
    """,
    # A checkpoint writes no mark for the search index, touches one index of the transcript,
    # not two, and one listing index, not two. The messages not yet indexed are those after
    # ``index_state.upto`` (SQLite has one writer at a time, so transcript rows commit in the
    # order of their mids); the indexer writes which session each indexed message belongs to
    # (``message_session``, what search counts matches by) with its postings; a project's
    # listing walks the recent sessions and skips the other projects' (the index by project
    # moved with updated_at on every checkpoint). ``index_pending`` stays, unused: a harness
    # of the previous version still running writes its marks there.
    7: """
    CREATE TABLE IF NOT EXISTS index_state (upto INTEGER NOT NULL);
    INSERT INTO index_state (upto) SELECT coalesce(
        (SELECT min(mid) - 1 FROM index_pending), (SELECT max(mid) FROM transcript), 0);
    CREATE TABLE IF NOT EXISTS message_session (
        mid         INTEGER PRIMARY KEY,
        session_rid INTEGER NOT NULL
    );
    INSERT INTO message_session (mid, session_rid) SELECT mid, session_rid FROM transcript
        WHERE mid <= (SELECT upto FROM index_state);
    DELETE FROM index_pending;
    DROP INDEX IF EXISTS transcript_session_of;
    DROP INDEX IF EXISTS sessions_project;
    """,
    # (Schema 8 only: a checkpoint that appended was one row here first, the tables
    # following in a transaction of its own that deleted it.)
    8: """
    CREATE TABLE IF NOT EXISTS journal (
        jid         INTEGER PRIMARY KEY,
        session_rid INTEGER NOT NULL,
        entry       TEXT    NOT NULL
    );
    """,
    # A checkpoint writes four pages: no context row (the context is its explicit rows,
    # then the transcript from tail_from on: actors.store._rows; every context written so
    # far is explicit), and the listing's index follows listed_at, updated_at to the second,
    # which a burst of checkpoints leaves as it is (the listing orders by both).
    9: """
    ALTER TABLE sessions ADD COLUMN tail_from INTEGER NOT NULL DEFAULT 0;
    UPDATE sessions SET tail_from = transcript_len;
    ALTER TABLE sessions ADD COLUMN listed_at TEXT NOT NULL DEFAULT '';
    UPDATE sessions SET listed_at = substr(updated_at, 1, 19);
    DROP INDEX IF EXISTS sessions_recent;
    CREATE INDEX IF NOT EXISTS sessions_listed ON sessions (archived, listed_at DESC);
    """,
    # One write path: what schema 8's journal still holds is applied, and the table dropped.
    10: apply_journal,
}


OLDEST_READABLE = 7  # schema 8 only added the journal, which a reader does without


def check_readable(conn: sqlite3.Connection) -> None:
    """Raise :class:`StorageError` unless this version can read the database as it is,
    without migrating it (a read-only store): schema :data:`OLDEST_READABLE` or newer, and
    not newer than :data:`SCHEMA_VERSION`. A schema before 9 is read through a temporary
    view of its sessions with every context explicit (``tail_from`` at the transcript's
    end) and ``listed_at``, as the migration to 9 would make them; temporary objects need no
    write."""
    from actors.core.errors import StorageError

    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StorageError(
            f"The session store was written by a newer agent-harness (schema {version}); "
            "upgrade agent-harness to open it."
        )
    if version < OLDEST_READABLE:
        raise StorageError(
            f"The session store is read-only and was written by an older agent-harness "
            f"(schema {version}); open it once where it can be written to upgrade it."
        )
    if version < 9:
        conn.execute("CREATE TEMP VIEW sessions AS SELECT *, transcript_len AS tail_from,"
                     " substr(updated_at, 1, 19) AS listed_at FROM main.sessions")


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Bring the database to :data:`SCHEMA_VERSION`; safe to run on every open, by many
    processes at once (the version is read and raised inside one write transaction). What a
    migration had to say (a line each)."""
    from actors.core.errors import StorageError

    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return []
    said: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise StorageError(
                f"The session store was written by a newer agent-harness (schema {current}); "
                "upgrade agent-harness to open it."
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            step = _MIGRATIONS[version]
            if callable(step):
                said += step(conn)
            else:
                for statement in step.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return said
