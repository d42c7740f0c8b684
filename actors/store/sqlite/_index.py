"""The SQLite store's search index: two FTS5 tables with the trigram tokenizer.

``message_text`` (rowid = the message's transcript row) and ``session_text`` (rowid = the
session's row) hold the text of :mod:`actors.store._text`. A word of three letters or more is
an FTS5 phrase over trigrams, which finds it as a case-insensitive substring; a shorter word
has no trigram and scans the index text with ``LIKE`` (rare, still bounded). Matching
messages are counted per session through ``message_session`` (mid -> session), which the
indexer writes with the postings, so a search never touches the pages that hold message
bodies and a checkpoint writes no index of its own for it.

What is not indexed yet is the transcript rows after ``index_state.upto``: a checkpoint
writes no mark at all (SQLite has one writer at a time, so rows commit in mid order), and
the indexer moves the mark in the transaction that writes the postings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from actors.store._parts import Conn
from actors.store._text import like_pattern

_MESSAGE_MATCHES = (
    "SELECT s.session_rid, count(*), max(m.rowid) FROM "
    "(SELECT rowid FROM message_text WHERE {where}) m "
    "JOIN message_session s ON s.mid = m.rowid "
    "GROUP BY s.session_rid"
)


def _match(table: str, term: str) -> tuple[str, str]:
    """The condition on ``table`` and its argument finding ``term`` as a substring."""
    if len(term) >= 3:
        return f"{table} MATCH ?", '"' + term.replace('"', '""') + '"'
    return "text LIKE ? ESCAPE '\\'", like_pattern(term)


class Fts5Index:
    """The :class:`~actors.store._parts.SearchIndex` of the SQLite store."""

    def mark_pending(self, conn: Conn, mids: Sequence[int]) -> None:
        """Nothing to write: the new rows come after ``index_state.upto`` (SQLite has one
        writer at a time, and a new row's mid is above every row's there is)."""

    def has_pending(self, conn: Conn) -> bool:
        row = conn.execute(
            "SELECT (SELECT max(mid) FROM transcript) > (SELECT upto FROM index_state)"
        ).fetchone()
        return bool(row and row[0])

    def claim_pending(self, conn: Conn, limit: int) -> list[tuple[int, int | None, str | None]]:
        """Writers take turns (``BEGIN IMMEDIATE``): the rows after the mark are this one's,
        and the mark moves past them in the same transaction."""
        rows = conn.execute(
            "SELECT mid, session_rid, body FROM transcript "
            "WHERE mid > (SELECT upto FROM index_state) ORDER BY mid LIMIT ?",
            (limit,),
        ).fetchall()
        if rows:
            conn.execute("UPDATE index_state SET upto = ?", (rows[-1][0],))
        return [tuple(row) for row in rows]

    def add_messages(self, conn: Conn, rid: int, rows: Sequence[tuple[int, str]]) -> None:
        # REPLACE: a message indexed already (a rebuild raced it) is indexed once.
        conn.executemany("INSERT OR REPLACE INTO message_text (rowid, text) VALUES (?, ?)",
                         rows)
        conn.executemany(
            "INSERT OR REPLACE INTO message_session (mid, session_rid) VALUES (?, ?)",
            [(mid, rid) for mid, _ in rows],
        )

    def set_session_text(self, conn: Conn, rid: int, text: str) -> None:
        conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))
        conn.execute("INSERT INTO session_text (rowid, text) VALUES (?, ?)", (rid, text))

    def remove_session(self, conn: Conn, rid: int) -> None:
        for table, key in (("message_text", "rowid"), ("message_session", "mid")):
            conn.execute(
                f"DELETE FROM {table} WHERE {key} IN "
                "(SELECT mid FROM transcript WHERE session_rid = ?)",
                (rid,),
            )
        conn.execute("DELETE FROM session_text WHERE rowid = ?", (rid,))
        # The next rows take the mids after the highest left: keep them after the mark.
        conn.execute(
            "UPDATE index_state SET upto = min(upto, coalesce("
            "(SELECT max(mid) FROM transcript WHERE session_rid <> ?), 0))",
            (rid,),
        )

    def copy_session(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        """The copy's messages are new rows, after the mark: the indexer indexes them."""
        conn.execute(
            "INSERT INTO session_text (rowid, text) SELECT ?, text FROM session_text "
            "WHERE rowid = ?",
            (new_rid, old_rid),
        )

    def message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        where, argument = _match("message_text", term)
        return conn.execute(_MESSAGE_MATCHES.format(where=where), (argument,))

    def session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        where, argument = _match("session_text", term)
        return [
            rid
            for (rid,) in conn.execute(f"SELECT rowid FROM session_text WHERE {where}",
                                       (argument,))
        ]

    def texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        """One lookup per key: FTS5 answers ``rowid = ?`` directly but scans for ``IN``."""
        table = "message_text" if kind == "message" else "session_text"
        texts = {}
        for key in keys:
            row = conn.execute(f"SELECT text FROM {table} WHERE rowid = ?", (key,)).fetchone()
            if row is not None:
                texts[key] = row[0]
        return texts

    def rid_among(self, rids: list[int]) -> tuple[str, Sequence[Any]]:
        return f"IN ({','.join('?' * len(rids))})", rids
