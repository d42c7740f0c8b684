"""The shared SQL of the store's tables, for both backends (see docs/storage.md).

``sessions`` (one row per session, with the counters that let a checkpoint append without
reading what is stored), ``transcript`` (every message ever saved), ``context`` (the working
context's explicit part: positions pointing at transcript rows, or holding a message of their
own), ``compactions``, ``tool_calls`` (:mod:`actors.store._write_ahead`) and
``legacy_files``. The SQL is the dialect SQLite and PostgreSQL share, with ``?`` placeholders.

**The working context is its explicit rows, then a tail.** A session's context is the rows
of ``context`` in position order, followed by every transcript message from
``sessions.tail_from`` on, in order: what checkpoints appended since the context was last
replaced, moved back or copied. So an append writes transcript rows only (one b-tree page
and one statement less per checkpoint than a context row each); replacing the context (a
compaction, a repair), moving it back (a rewind) or copying it (a fork) writes it explicitly
and starts the tail at the end of the transcript again. Invariant: every transcript row from
``tail_from`` on is in the context, after its explicit rows; the explicit part holds
``context_len - (transcript_len - tail_from)`` rows. The functions below are the only
readers and writers of that layout.

Functions over the connection of the caller's transaction; statements are batched, so how
many a write issues does not depend on how long the session is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from actors.core.budget import estimate_message
from actors.core.errors import CorruptSession, SessionNotFound
from actors.core.messages import Message, dumps_fast, shape_of
from actors.core.previews import one_line
from actors.store import _write_ahead
from actors.store._parts import Conn
from actors.store._records import SessionRecord
from actors.store._results import Compaction, ListedSession

_SESSION_COLUMNS = (
    "rid, id, created_at, updated_at, title, summary, archived, status, project_root, "
    "parent_id, state, context_version, context_len, transcript_len, title_source, preview, "
    "user_messages, fork_point, branch_seq, tail_from"
)
#: The columns of a listing entry, and the keys it has (``transcript_len`` as ``messages``).
LISTED_COLUMNS = (
    "id", "title", "status", "created_at", "updated_at", "summary", "archived", "project_root",
    "parent_id", "title_source", "preview", "transcript_len", "user_messages", "fork_point",
)
LISTED = ", ".join(LISTED_COLUMNS)


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
    tail_from: int  # the context continues with the transcript from this seq on


class AppendRow(NamedTuple):
    """What appending to a session needs of its row: the counters, the branch point, what the
    listing metadata moves from (``title_source``, ``user_messages``, ``listed_at``) and the
    status. Nine small columns: the whole :class:`SessionRow` (its state above all) costs
    several times as much to read, on every checkpoint."""

    rid: int
    context_version: int
    context_len: int
    transcript_len: int
    branch_seq: int | None
    title_source: str
    user_messages: int
    status: str
    listed_at: str  # updated_at to the second: what the listing's index follows


_APPEND_COLUMNS = ", ".join(AppendRow._fields)


def listed_at(updated_at: str) -> str:
    """``updated_at`` to the second (its first 19 characters): the key of the listing's index,
    which orders as ``updated_at`` does (a prefix of a text orders as the text) and moves
    once a second at most, however often the session is saved."""
    return updated_at[:19]


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
    """The session's row; :class:`SessionNotFound` when there is none. Its metadata text
    as text whatever a damaged row holds (its counters and state are checked by the
    reads that use them)."""
    (rid, sid, created, updated, title, summary, archived, status, project, parent, state,
     *counters) = _session_columns(conn, _SESSION_COLUMNS, session_id)
    (version, context_len, transcript_len, source, preview, typed, fork_point, branch,
     tail_from) = counters
    return SessionRow(
        rid, _text(sid), _text(created), _text(updated), _text(title), _text(summary),
        archived, _text(status), _text(project), None if parent is None else _text(parent),
        state, version, context_len, transcript_len, _text(source), _text(preview),
        _count(typed), _number(fork_point), branch, tail_from,
    )


def exists(conn: Conn, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def _text(value: Any) -> str:
    """A text column as text, whatever a damaged row holds there (bytes, a number, NULL)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _count(value: Any) -> int:
    """A counter column as a count (0 for what a damaged row holds there)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _number(value: Any) -> int | None:
    """A message number column (None for what a damaged row holds there)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def _lenient(data: bytes) -> str:
    """Text a damaged row holds that is not UTF-8, with replacement characters."""
    return data.decode("utf-8", "replace")


def fetch_all(conn: Conn, sql: str, args: Sequence[Any] = ()) -> list[Any]:
    """Every row of a query over many sessions' rows (a listing, search's results). Text a
    damaged row holds that is not UTF-8 (SQLite stores what it is given) is read with
    replacement characters, so one session's damage never stops a listing of the others;
    that session's own reads report it (:class:`CorruptSession`). Costs nothing more when
    every row is whole: the lenient decoding is a second try."""
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if not isinstance(conn, sqlite3.Connection) or not is_undecodable(exc):
            raise
    conn.text_factory = _lenient
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.text_factory = str


def is_undecodable(exc: BaseException) -> bool:
    """Whether ``exc`` is sqlite3 refusing to read text that is not UTF-8."""
    return isinstance(exc, sqlite3.OperationalError) and "decode to UTF-8" in str(exc)


def listed(row: Sequence[Any]) -> ListedSession:
    """A listing entry from the :data:`LISTED` columns of a row. A damaged row's values are
    shown as text and counts (a blob as its text, a wrong type as nothing), so one session's
    damage never stops a listing of the others (``--doctor`` names it)."""
    (sid, title, status, created, updated, summary, archived, project, parent, source,
     preview, transcript_len, typed, fork_point) = row
    return ListedSession(
        id=_text(sid), title=_text(title), status=_text(status), created_at=_text(created),
        updated_at=_text(updated), summary=_text(summary), archived=bool(archived),
        project_root=_text(project), parent_id=None if parent is None else _text(parent),
        title_source=_text(source), preview=_text(preview), messages=_count(transcript_len),
        user_messages=_count(typed), fork_point=_number(fork_point),
    )


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


_EXPLICIT = (
    "SELECT coalesce(c.body, t.body), CASE WHEN c.body IS NULL THEN t.shape END,"
    " CASE WHEN c.body IS NULL THEN t.tokens END, c.mid FROM context c "
    "LEFT JOIN transcript t ON t.mid = c.mid WHERE c.session_rid = ? ORDER BY c.pos"
)
_TAIL = (
    "SELECT body, shape, tokens, mid FROM transcript WHERE session_rid = ?"
    " AND seq >= (SELECT tail_from FROM sessions WHERE rid = ?) ORDER BY seq"
)


def _context(conn: Conn, rid: int) -> Iterator[tuple[str | None, str | None, int | None,
                                                       int | None]]:
    """``(JSON, shape, tokens, mid)`` of each message of session ``rid``'s context in order:
    the explicit rows (JSON None where a row points nowhere; shape and tokens None for a
    message the context alone holds), then the tail. Plain tuples, row by row."""
    for sql, args in ((_EXPLICIT, (rid,)), (_TAIL, (rid, rid))):
        cursor = conn.execute(sql, args)
        if isinstance(cursor, sqlite3.Cursor):  # plain tuples: a quarter of the read's time
            cursor.row_factory = None
        yield from cursor


def context_rows(
    conn: Conn, rid: int
) -> tuple[list[str | None], list[str | None], list[int | None]]:
    """The stored context of session ``rid`` in order, as three columns: each message's JSON
    (None where a row points nowhere), and the pairing facts and token estimate saved with its
    transcript row (None for a message the context alone holds, or one saved before they were
    kept). Read row by row into plain lists: tens of thousands of rows leave no object
    behind but their strings."""
    texts: list[str | None] = []
    shapes: list[str | None] = []
    tokens: list[int | None] = []
    for text, shape, estimate, _ in _context(conn, rid):
        texts.append(text)
        shapes.append(shape)
        tokens.append(estimate)
    return texts, shapes, tokens


def context_texts(conn: Conn, rid: int) -> list[str | None]:
    """The stored context of session ``rid`` in order (None where a row points nowhere)."""
    return [text for text, _, _, _ in _context(conn, rid)]


def context_mids(conn: Conn, rid: int, texts: Collection[str]) -> dict[str, int]:
    """Canonical JSON -> transcript row, for those of ``texts`` that messages of the stored
    context with a transcript row have. Read row by row, keeping only those: a compaction
    keeps a few messages of tens of thousands, and every row's text held at once was the
    whole context again."""
    wanted = texts if isinstance(texts, (set, frozenset)) else set(texts)
    return {text: mid for text, _, _, mid in _context(conn, rid)
            if mid is not None and text is not None and text in wanted}


def context_shape(conn: Conn, rid: int) -> tuple[int, int, int]:
    """``(explicit rows, tail_from, transcript_len)`` of session ``rid``'s context."""
    context_len, transcript_len, tail_from = conn.execute(
        "SELECT context_len, transcript_len, tail_from FROM sessions WHERE rid = ?", (rid,)
    ).fetchone()
    return context_len - (transcript_len - tail_from), tail_from, transcript_len


def tail_restarted(conn: Conn, rid: int) -> None:
    """Session ``rid``'s context is all explicit now: its tail starts after the transcript."""
    conn.execute("UPDATE sessions SET tail_from = transcript_len WHERE rid = ?", (rid,))


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
    plain: Sequence[Message],
    texts: Sequence[str],
    *,
    planned_calls: bool,
    follows: int | None = None,
) -> list[int]:
    """Append messages to the transcript at ``first_seq`` and update the write-ahead records;
    appended after the context's tail, they are in the context too (see the module doc),
    unless the caller writes the context explicitly. Their transcript row ids (mids), in
    order, for the caller to mark for the search index
    (:meth:`~actors.store._parts.SearchIndex.mark_pending`). ``follows``: the seq the first of
    them follows when it is not the one before it (the first message after a rewind).

    A checkpoint's few messages cost two statements whatever their number: the transcript
    rows, the write-ahead records (:data:`MULTI_ROW`). The index itself is
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


def compactions(conn: Conn, rid: int) -> list[Compaction]:
    """Session ``rid``'s compaction events, oldest first."""
    return [
        Compaction(at=_text(at), before_tokens=_count(before), after_tokens=_count(after),
                   summary=_text(summary))
        for at, before, after, summary in conn.execute(
            "SELECT at, before_tokens, after_tokens, summary FROM compactions "
            "WHERE session_rid = ? ORDER BY n",
            (rid,),
        )
    ]


def insert_compactions(conn: Conn, rid: int, first: int, events: Sequence[Compaction]) -> None:
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
    the counters and ``updated_at`` (``listed_at`` only when the second changed: the
    listing's index is not written by a burst of checkpoints); the branch point cleared;
    with ``typed`` (what the user typed in them), the count and the preview; ``title``
    (provisional) when given; the state's stored JSON and the status when given."""
    sets = "context_len = ?, transcript_len = ?, updated_at = ?"
    args: list[Any] = [row.context_len + added, row.transcript_len + added, now]
    if listed_at(now) != row.listed_at:
        sets += ", listed_at = ?"
        args.append(listed_at(now))
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


# -- reads ---------------------------------------------------------------------------------


def transcript_entries(conn: Conn, rid: int) -> Iterable[tuple[int, int, str]]:
    """``(mid, seq, body)`` of session ``rid``'s transcript, in order."""
    return conn.execute(
        "SELECT mid, seq, body FROM transcript WHERE session_rid = ? ORDER BY seq", (rid,))


def context_entries(conn: Conn, rid: int) -> Iterator[tuple[int, int | None, str | None]]:
    """``(pos, mid, body)`` of each message of session ``rid``'s context, in order: a
    message with a transcript row by its ``mid`` (``body`` None), one the context alone holds
    by its ``body``."""
    pos = 0
    for sql in ("SELECT mid, body FROM context WHERE session_rid = ? ORDER BY pos",
                "SELECT mid, NULL FROM transcript WHERE session_rid = ? AND seq >= "
                "(SELECT tail_from FROM sessions WHERE rid = ?) ORDER BY seq"):
        for mid, body in conn.execute(sql, (rid,) if "context" in sql else (rid, rid)):
            yield pos, mid, body
            pos += 1


def recent_context(conn: Conn, rid: int, count: int) -> list[tuple[int, int | None, str]]:
    """``(pos, seq, body)`` of the last ``count`` messages of session ``rid``'s context, in
    order (``seq`` None for a message the context alone holds). Reads only those rows."""
    explicit, tail_from, _ = context_shape(conn, rid)
    tail = conn.execute(
        "SELECT seq, body FROM transcript WHERE session_rid = ? AND seq >= ?"
        " ORDER BY seq DESC LIMIT ?", (rid, tail_from, count)).fetchall()
    rows = [(explicit + seq - tail_from, seq, body) for seq, body in tail]
    if len(rows) < count:
        rows += conn.execute(
            "SELECT c.pos, t.seq, coalesce(c.body, t.body) FROM context c "
            "LEFT JOIN transcript t ON t.mid = c.mid WHERE c.session_rid = ? "
            "ORDER BY c.pos DESC LIMIT ?",
            (rid, count - len(rows)),
        ).fetchall()
    return [(pos, seq, body) for pos, seq, body in reversed(rows)]


def listing(conn: Conn, *, include_archived: bool, project_root: str | None,
            include_empty: bool, limit: int | None) -> list[ListedSession]:
    """Sessions, most recently updated first (see ``SessionReader.list_sessions``): one
    indexed query, no message read."""
    where = []
    args: list[Any] = []
    if not include_archived:
        where.append("archived = 0")
    if project_root is not None:
        where.append("project_root = ?")
        args.append(project_root)
    if not include_empty:
        where.append("user_messages > 0")
    sql = f"SELECT {LISTED} FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY listed_at DESC, updated_at DESC"  # the index, then within its second
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [listed(r) for r in fetch_all(conn, sql, args)]


def ids_starting(conn: Conn, prefix: str, *, any_case: bool) -> list[tuple[str, str]]:
    """``(id, title)`` of the sessions whose id starts with ``prefix`` (``any_case``: case
    ignored), most recently updated first."""
    where = "lower(substr(id, 1, ?)) = ?" if any_case else "substr(id, 1, ?) = ?"
    return [
        (_text(sid), _text(title))
        for sid, title in fetch_all(
            conn, f"SELECT id, title FROM sessions WHERE {where} ORDER BY updated_at DESC",
            (len(prefix), prefix.lower() if any_case else prefix),
        )
    ]


def abandoned(conn: Conn) -> list[str]:
    """Ids of the sessions of runs that died before the user typed anything (status
    ``active``, no user message)."""
    return [
        _text(sid) for (sid,) in fetch_all(
            conn, "SELECT id FROM sessions WHERE user_messages = 0 AND status = 'active'")
    ]


# -- whole sessions ------------------------------------------------------------------------


def insert_session(conn: Conn, session_id: str, now: str, *, title: str, status: str,
                   project_root: str, parent_id: str | None) -> int:
    """A new, empty session's row (a user's title when ``title`` is given); its rid."""
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at, listed_at, title, status,"
        " project_root, parent_id, title_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, now, now, listed_at(now), title, status, project_root, parent_id,
         "user" if title else ""),
    )
    return rid_of(conn, session_id)


def insert_record(conn: Conn, record: SessionRecord, *, typed: int, preview: str) -> int:
    """The session row of an imported ``record`` (its own timestamps and counters); its
    rid. ``typed``: how many messages of its transcript the user typed."""
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at, listed_at, title, summary,"
        " archived, status, project_root, parent_id, state, context_len, transcript_len,"
        " title_source, preview, user_messages, fork_point, tail_from)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record["id"], record["created_at"], record["updated_at"],
            listed_at(record["updated_at"]), record["title"],
            record["summary"], int(record["archived"]),
            "saved" if record["status"] == "active" else record["status"],
            record["project_root"], record["parent_id"], dump_state(record["state"]),
            len(record["messages"]), len(record["transcript"]), record["title_source"],
            preview, typed, record["fork_point"], len(record["transcript"]),
        ),
    )
    return rid_of(conn, record["id"])


def update_session(conn: Conn, rid: int, values: dict[str, Any], now: str | None) -> None:
    """Set the metadata columns ``values`` of session ``rid``, and ``updated_at`` (and the
    listing's ``listed_at``) to ``now`` unless it is None."""
    if now is not None:
        values = {**values, "updated_at": now, "listed_at": listed_at(now)}
    assignments = ", ".join(f"{column} = ?" for column in values)
    conn.execute(f"UPDATE sessions SET {assignments} WHERE rid = ?", (*values.values(), rid))


def set_model_title(conn: Conn, rid: int, title: str) -> None:
    """A title the model proposed (``updated_at`` stays: nobody changed the session)."""
    conn.execute("UPDATE sessions SET title = ?, title_source = 'model' WHERE rid = ?",
                 (title, rid))


def delete_session(conn: Conn, rid: int) -> None:
    """Every row of session ``rid`` (the search index's are the index's to remove)."""
    for table in ("transcript", "context", "compactions", "tool_calls"):
        conn.execute(f"DELETE FROM {table} WHERE session_rid = ?", (rid,))
    conn.execute("DELETE FROM sessions WHERE rid = ?", (rid,))


def replace_context_rows(conn: Conn, rid: int, texts: Sequence[str], mids: dict[str, int]
                         ) -> None:
    """The context of session ``rid`` replaced by ``texts``, all explicit (see
    :func:`insert_context`); :func:`after_replace` ends its tail."""
    conn.execute("DELETE FROM context WHERE session_rid = ?", (rid,))
    insert_context(conn, rid, texts, mids)


def after_replace(conn: Conn, rid: int, context_len: int, transcript_len: int, now: str
                  ) -> None:
    """Session ``rid``'s row once its context was replaced (all explicit): its counters,
    its tail after the transcript, a new context version (every cache of it is stale) and
    ``updated_at``."""
    conn.execute(
        "UPDATE sessions SET context_len = ?, transcript_len = ?, tail_from = ?,"
        " context_version = context_version + 1, updated_at = ?, listed_at = ? WHERE rid = ?",
        (context_len, transcript_len, transcript_len, now, listed_at(now), rid),
    )


def after_rewind(conn: Conn, rid: int, context_len: int, follows: int, preview: str,
                 now: str) -> None:
    """Session ``rid``'s row once its context moved back (all explicit: see
    :func:`tail_restarted`): its length, a new context version, the transcript message the
    next one follows (``branch_seq``), the preview."""
    conn.execute(
        "UPDATE sessions SET context_len = ?, context_version = context_version + 1,"
        " branch_seq = ?, preview = ?, updated_at = ?, listed_at = ? WHERE rid = ?",
        (context_len, follows, preview, now, listed_at(now), rid),
    )


# -- the older JSON layout's files ---------------------------------------------------------


def legacy_files(conn: Conn) -> dict[str, tuple[int, int]]:
    """Older JSON records already looked at: file name -> ``(size, mtime_ns)``."""
    return {
        _text(name): (size, mtime)
        for name, size, mtime in fetch_all(conn, "SELECT name, size, mtime_ns FROM legacy_files")
    }


def note_legacy_file(conn: Conn, name: str, size: int, mtime_ns: int, session_id: str | None,
                     error: str | None) -> None:
    """Remember that an older JSON record was imported (or why it could not be)."""
    conn.execute(
        "INSERT INTO legacy_files (name, size, mtime_ns, session_id, error)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
        " size = excluded.size, mtime_ns = excluded.mtime_ns,"
        " session_id = excluded.session_id, error = excluded.error",
        (name, size, mtime_ns, session_id, error),
    )
