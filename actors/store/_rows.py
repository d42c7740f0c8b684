"""The shared SQL of the store's tables, for both backends (see docs/storage.md).

``sessions`` (one row per session, with the counters that let a checkpoint append without
reading what is stored), ``transcript`` (every message ever saved), ``context`` (the working
context: positions pointing at transcript rows, or holding a message of their own),
``compactions``, ``tool_calls`` (:mod:`actors.store._write_ahead`) and ``legacy_files``. The
SQL is the dialect SQLite and PostgreSQL share, with ``?`` placeholders.

Functions over the connection of the caller's transaction; statements are batched, so how
many a write issues does not depend on how long the session is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from actors.core.budget import estimate_message
from actors.core.errors import CorruptSession, SessionNotFound
from actors.core.messages import Message, dumps_fast, shape_of
from actors.core.previews import one_line
from actors.store import _write_ahead
from actors.store._parts import Conn

_SESSION_COLUMNS = (
    "rid, id, created_at, updated_at, title, summary, archived, status, project_root, "
    "parent_id, state, context_version, context_len, transcript_len, title_source, preview, "
    "user_messages, fork_point, branch_seq"
)
#: The columns of a listing entry, and the keys it has (``transcript_len`` as ``messages``).
LISTED_COLUMNS = (
    "id", "title", "status", "created_at", "updated_at", "summary", "archived", "project_root",
    "parent_id", "title_source", "preview", "transcript_len", "user_messages", "fork_point",
)
LISTED_KEYS = tuple("messages" if c == "transcript_len" else c for c in LISTED_COLUMNS)
LISTED = ", ".join(LISTED_COLUMNS)
_COMPACTION_COLUMNS = ("at", "before_tokens", "after_tokens", "summary")


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One row of ``sessions`` (``state`` still JSON text, ``archived`` 0 or 1)."""

    rid: int
    id: str
    created_at: str
    updated_at: str
    title: str
    summary: str
    archived: int
    status: str
    project_root: str
    parent_id: str | None
    state: str
    context_version: int
    context_len: int
    transcript_len: int
    title_source: str  # see actors.core.titles
    preview: str  # the latest thing the user typed (or the summary written since), one line
    user_messages: int  # messages the user typed (a session without any is not listed)
    fork_point: int | None  # the parent's message number this fork was cut after
    branch_seq: int | None  # after a rewind: the transcript seq the next message follows


class AppendRow(NamedTuple):
    """What appending to a session needs of its row: the counters, the branch point, what the
    listing metadata moves from (``title_source``, ``user_messages``) and the status. Eight
    small columns: the whole :class:`SessionRow` (its state above all) costs several times
    as much to read, on every checkpoint."""

    rid: int
    context_version: int
    context_len: int
    transcript_len: int
    branch_seq: int | None
    title_source: str
    user_messages: int
    status: str


_APPEND_COLUMNS = ", ".join(AppendRow._fields)


def _session_columns(conn: Conn, columns: str, session_id: str) -> Sequence[Any]:
    """``columns`` of the session's row; :class:`SessionNotFound` when there is none."""
    row: Sequence[Any] | None = conn.execute(
        f"SELECT {columns} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return row


def append_row(conn: Conn, session_id: str) -> AppendRow:
    """The :class:`AppendRow` of the session; :class:`SessionNotFound` when there is none."""
    return AppendRow._make(_session_columns(conn, _APPEND_COLUMNS, session_id))


def rid_of(conn: Conn, session_id: str) -> int:
    """The session's row id; :class:`SessionNotFound` when there is none."""
    return int(_session_columns(conn, "rid", session_id)[0])


def session_row(conn: Conn, session_id: str) -> SessionRow:
    """The session's row; :class:`SessionNotFound` when there is none."""
    return SessionRow(*_session_columns(conn, _SESSION_COLUMNS, session_id))


def exists(conn: Conn, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def listed(row: Sequence[Any]) -> dict[str, Any]:
    """A listing entry from the :data:`LISTED` columns of a row."""
    item = dict(zip(LISTED_KEYS, row, strict=True))
    item["archived"] = bool(item["archived"])
    return item


def json_loader(session_id: str, damage_hint: str) -> Callable[[str, str], Any]:
    """A JSON parser that reports a bad row as damage of ``session_id``."""

    def loads(body: str, what: str) -> Any:
        try:
            return json.loads(body)
        except (TypeError, ValueError) as exc:
            raise CorruptSession(
                session_id, f"{what} is not valid JSON ({exc}); {damage_hint}"
            ) from None

    return loads


dump_state = dumps_fast((", ", ": "), sort_keys=True)
"""The stored form of a planning/usage state (sorted keys: equal states, equal text)."""


def context_rows(
    conn: Conn, rid: int
) -> tuple[list[str | None], list[str | None], list[int | None]]:
    """The stored context of session ``rid`` in order, as three columns: each message's JSON
    (None where a row points nowhere), and the pairing facts and token estimate saved with its
    transcript row (None for a message the context alone holds, or one saved before they were
    kept). Read row by row into plain lists: tens of thousands of rows leave no object
    behind but their strings."""
    cursor = conn.execute(
        "SELECT coalesce(c.body, t.body), CASE WHEN c.body IS NULL THEN t.shape END,"
        " CASE WHEN c.body IS NULL THEN t.tokens END FROM context c "
        "LEFT JOIN transcript t ON t.mid = c.mid "
        "WHERE c.session_rid = ? ORDER BY c.pos",
        (rid,),
    )
    if isinstance(cursor, sqlite3.Cursor):  # plain tuples: a quarter of the read's time
        cursor.row_factory = None
    texts: list[str | None] = []
    shapes: list[str | None] = []
    tokens: list[int | None] = []
    for text, shape, estimate in cursor:
        texts.append(text)
        shapes.append(shape)
        tokens.append(estimate)
    return texts, shapes, tokens


def context_texts(conn: Conn, rid: int) -> list[str | None]:
    """The stored context of session ``rid`` in order (None where a row points nowhere)."""
    return [
        body
        for (body,) in conn.execute(
            "SELECT coalesce(c.body, t.body) FROM context c "
            "LEFT JOIN transcript t ON t.mid = c.mid "
            "WHERE c.session_rid = ? ORDER BY c.pos",
            (rid,),
        )
    ]


def context_mids(conn: Conn, rid: int, texts: Collection[str]) -> dict[str, int]:
    """Canonical JSON -> transcript row, for those of ``texts`` that messages of the stored
    context with a transcript row have. Read row by row, keeping only those: a compaction
    keeps a few messages of tens of thousands, and every row's text held at once was the
    whole context again."""
    wanted = texts if isinstance(texts, (set, frozenset)) else set(texts)
    mids: dict[str, int] = {}
    for body, mid in conn.execute(
        "SELECT t.body, c.mid FROM context c JOIN transcript t ON t.mid = c.mid "
        "WHERE c.session_rid = ?",
        (rid,),
    ):
        if body in wanted:
            mids[body] = mid
    return mids


MULTI_ROW = 16
"""Rows written by one multi-row ``INSERT`` (a checkpoint's few messages: one statement, not
one per row); larger batches (an import, a first save) go through ``executemany``."""


@cache
def _values(columns: int, rows: int) -> str:
    """``(?, …), (?, …)``: ``rows`` rows of ``columns`` placeholders."""
    row = "(" + ", ".join("?" * columns) + ")"
    return ", ".join([row] * rows)


_INSERT_TRANSCRIPT = (
    "INSERT INTO transcript (session_rid, seq, body, parent_seq, shape, tokens) VALUES "
)
_SQLITE_LAST_SAFE_ROWID = 2**62  # below it, SQLite numbers new rows max(rowid) + 1, in order


def _insert_transcript(conn: Conn, rid: int, first_seq: int,
                       rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert transcript ``rows`` (seqs from ``first_seq``); their mids, in order.

    A few rows go in one statement: on SQLite the mids are the ``max(rowid) + 1, …`` it
    gives rows without one (the last is the cursor's ``lastrowid``; the transaction holds the
    only write lock), on PostgreSQL ``RETURNING`` says; more rows, and a SQLite table whose
    rowids approach the end of their range, read them back by seq."""
    k = len(rows)
    if k <= MULTI_ROW:
        flat = [value for row in rows for value in row]
        if isinstance(conn, sqlite3.Connection):
            last = conn.execute(_INSERT_TRANSCRIPT + _values(6, k), flat).lastrowid
            if last is not None and k <= last < _SQLITE_LAST_SAFE_ROWID:
                return list(range(last - k + 1, last + 1))
        else:
            returned = conn.execute(
                _INSERT_TRANSCRIPT + _values(6, k) + " RETURNING seq, mid", flat).fetchall()
            return [mid for _, mid in sorted(returned)]
    else:
        conn.executemany(_INSERT_TRANSCRIPT + _values(6, 1), rows)
    return [
        mid
        for (mid,) in conn.execute(
            "SELECT mid FROM transcript WHERE session_rid = ? AND seq >= ? ORDER BY seq",
            (rid, first_seq),
        )
    ]


def insert_messages(
    conn: Conn,
    rid: int,
    first_seq: int,
    first_pos: int | None,
    plain: Sequence[Message],
    texts: Sequence[str],
    *,
    planned_calls: bool,
    follows: int | None = None,
) -> list[int]:
    """Append messages to the transcript at ``first_seq`` (and to the context at
    ``first_pos`` unless None) and update the write-ahead records. Their transcript row ids
    (mids), in order, for the caller to mark for the search index
    (:meth:`~actors.store._parts.SearchIndex.mark_pending`). ``follows``: the seq the first of
    them follows when it is not the one before it (the first message after a rewind).

    A checkpoint's few messages cost three statements whatever their number: the transcript
    rows, the context rows, the write-ahead records (:data:`MULTI_ROW`). The index itself is
    written later, in a transaction of its own
    (:meth:`actors.store._store.Store.index_pending`): a checkpoint commits the messages and
    at most a small mark each, never their trigram postings."""
    if not plain:
        return []
    mids = _insert_transcript(conn, rid, first_seq, [
        (rid, first_seq + i, text, follows if i == 0 else None, shape_of(m),
         estimate_message(m))
        for i, (m, text) in enumerate(zip(plain, texts, strict=True))
    ])
    if first_pos is not None:
        rows = [(rid, first_pos + i, mid) for i, mid in enumerate(mids)]
        if len(rows) <= MULTI_ROW:
            conn.execute("INSERT INTO context (session_rid, pos, mid) VALUES "
                         + _values(3, len(rows)), [v for row in rows for v in row])
        else:
            conn.executemany("INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
                             rows)
    _write_ahead.apply(conn, rid, _write_ahead.changes_of(plain, planned_calls=planned_calls))
    return mids


def insert_context(conn: Conn, rid: int, texts: Sequence[str], mids: dict[str, int]) -> None:
    """Write the context of session ``rid`` (empty before): each message points at its
    transcript row when ``mids`` has one, else is stored in the context row itself."""
    if texts:
        conn.executemany(
            "INSERT INTO context (session_rid, pos, mid, body) VALUES (?, ?, ?, ?)",
            [
                (rid, pos, mids.get(text), None if text in mids else text)
                for pos, text in enumerate(texts)
            ],
        )


def compactions(conn: Conn, rid: int) -> list[dict[str, Any]]:
    """Session ``rid``'s compaction events, oldest first."""
    return [
        dict(zip(_COMPACTION_COLUMNS, r, strict=True))
        for r in conn.execute(
            f"SELECT {', '.join(_COMPACTION_COLUMNS)} FROM compactions "
            "WHERE session_rid = ? ORDER BY n",
            (rid,),
        )
    ]


def insert_compactions(
    conn: Conn, rid: int, first: int, events: Sequence[dict[str, Any]]
) -> None:
    """Record compaction events ``first``, ``first + 1``, … of session ``rid``."""
    if events:
        conn.executemany(
            "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
            " summary) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (rid, first + i, str(c["at"]), int(c["before_tokens"]),
                 int(c["after_tokens"]), str(c["summary"]))
                for i, c in enumerate(events)
            ],
        )


def update_after_append(
    conn: Conn, row: AppendRow, added: int, now: str, typed: Sequence[str],
    title: str | None, state: str | None, status: str | None,
) -> None:
    """One ``UPDATE`` of the session row after ``added`` messages were appended to ``row``'s:
    the counters and ``updated_at``; the branch point cleared; with ``typed`` (what the user
    typed in them), the count and the preview; ``title`` (provisional) when given; the
    state's stored JSON and the status when given."""
    sets = "context_len = ?, transcript_len = ?, updated_at = ?"
    args: list[Any] = [row.context_len + added, row.transcript_len + added, now]
    if added and row.branch_seq is not None:
        sets += ", branch_seq = NULL"
    if typed:
        sets += ", user_messages = ?, preview = ?"
        args += [row.user_messages + len(typed), one_line(typed[-1])]
    if title is not None:
        sets += ", title = ?, title_source = 'provisional'"
        args.append(title)
    if state is not None:
        sets += ", state = ?"
        args.append(state)
    if status is not None and status != row.status:
        sets += ", status = ?"
        args.append(status)
    args.append(row.rid)
    conn.execute(f"UPDATE sessions SET {sets} WHERE rid = ?", args)


def session_texts(conn: Conn, rid: int) -> tuple[str, list[str]]:
    """What the search index holds of session ``rid`` besides its title: its summary and its
    compactions' summaries."""
    (summary,) = conn.execute("SELECT summary FROM sessions WHERE rid = ?", (rid,)).fetchone()
    return str(summary), [str(c["summary"]) for c in compactions(conn, rid)]
