"""The PostgreSQL store's search index: pg_trgm over text lowercased once, when written.

``message_text (mid, session_rid, text)`` and ``session_text (rid, text, lowered)`` hold the
text of :mod:`actors.store._text`, lowercased by Python (so case folding does not depend on
the server's locale) and ``COLLATE "C"``, with trigram GIN indexes: ``LIKE '%word%'`` finds a
substring as SQLite's trigram FTS5 does, and rechecking a candidate row compares bytes
(``ILIKE`` would lowercase every candidate again on every query). Snippets of messages are
cut from the transcript, so the original text is not stored twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from actors.store._parts import Conn
from actors.store._text import indexed_text, like_pattern


def _storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL characters; the index drops them."""
    return text.replace("\x00", "") if "\x00" in text else text


def _snippet_source(body: str) -> str:
    """The indexed text of a transcript message, as written (what SQLite's index holds)."""
    try:
        return _storable(indexed_text(json.loads(body)))
    except (TypeError, ValueError, AttributeError):
        return ""


def _prefer_index(conn: Conn, term: str) -> None:
    """Use the trigram index whenever the word has trigrams (until the transaction ends).

    The planner charges a ``LIKE`` on long text like any cheap operator and would rather scan
    a few hundred pages than use the index: 2-3 ms per word for 2,000 session texts, where
    the index takes 0.1 ms. Pipelined: no round trip of its own.
    """
    conn.execute(
        "SELECT set_config('enable_seqscan', ?, true)", ("off" if len(term) >= 3 else "on",)
    )


class TrigramIndex:
    """The :class:`~actors.store._parts.SearchIndex` of the PostgreSQL store."""

    def mark_pending(self, conn: Conn, mids: Sequence[int]) -> None:
        """One ``index_pending`` row per message: writers commit concurrently, so the order
        of mids is not the order of commits and no single mark could say what is left."""
        conn.executemany(
            "INSERT INTO index_pending (mid) VALUES (?) ON CONFLICT DO NOTHING",
            [(mid,) for mid in mids],
        )

    def has_pending(self, conn: Conn) -> bool:
        return conn.execute("SELECT 1 FROM index_pending LIMIT 1").fetchone() is not None

    def claim_pending(self, conn: Conn, limit: int) -> list[tuple[int, int | None, str | None]]:
        """Writers run concurrently: marks another transaction holds are skipped."""
        mids = [mid for (mid,) in conn.execute(
            "DELETE FROM index_pending WHERE mid IN (SELECT mid FROM index_pending ORDER BY mid"
            " LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING mid",
            (limit,),
        ).fetchall()]
        if not mids:
            return []
        found = {
            mid: (rid, body)
            for mid, rid, body in conn.execute(
                "SELECT mid, session_rid, body FROM transcript WHERE mid = ANY(?)", (mids,)
            ).fetchall()
        }
        return [(mid, *found.get(mid, (None, None))) for mid in sorted(mids)]

    def add_messages(self, conn: Conn, rid: int, rows: Sequence[tuple[int, str]]) -> None:
        conn.executemany(
            "INSERT INTO message_text (mid, session_rid, text) VALUES (?, ?, ?)"
            " ON CONFLICT (mid) DO UPDATE SET text = excluded.text",
            [(mid, rid, _storable(text).lower()) for mid, text in rows],
        )

    def set_session_text(self, conn: Conn, rid: int, text: str) -> None:
        text = _storable(text)
        conn.execute(
            "INSERT INTO session_text (rid, text, lowered) VALUES (?, ?, ?) ON CONFLICT (rid) "
            "DO UPDATE SET text = excluded.text, lowered = excluded.lowered",
            (rid, text, text.lower()),
        )

    def remove_session(self, conn: Conn, rid: int) -> None:
        conn.execute("DELETE FROM message_text WHERE session_rid = ?", (rid,))
        conn.execute(
            "DELETE FROM index_pending WHERE mid IN "
            "(SELECT mid FROM transcript WHERE session_rid = ?)",
            (rid,),
        )
        conn.execute("DELETE FROM session_text WHERE rid = ?", (rid,))

    def copy_session(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        conn.execute(
            "INSERT INTO index_pending (mid) SELECT mid FROM transcript WHERE session_rid = ?"
            " ON CONFLICT DO NOTHING",
            (new_rid,),
        )
        conn.execute(
            "INSERT INTO session_text (rid, text, lowered) SELECT ?, text, lowered "
            "FROM session_text WHERE rid = ?",
            (new_rid, old_rid),
        )

    def message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        """Grouped by ``session_rid`` with no join (the column is in the index table); words
        shorter than three letters scan the table."""
        _prefer_index(conn, term)
        return conn.execute(
            "SELECT session_rid, count(*), max(mid) FROM message_text WHERE text LIKE ? "
            "GROUP BY session_rid",
            (like_pattern(term),),
        ).fetchall()  # at once: row by row costs psycopg ~2 µs each in pipeline mode

    def session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        _prefer_index(conn, term)
        return [rid for (rid,) in conn.execute(
            "SELECT rid FROM session_text WHERE lowered LIKE ?", (like_pattern(term),)
        )]

    def texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        if kind == "session":
            rows: Any = conn.execute(
                f"SELECT rid, text FROM session_text WHERE rid IN ({marks})", list(keys)
            )
            return dict(rows)
        return {
            mid: _snippet_source(body)
            for mid, body in conn.execute(
                f"SELECT mid, body FROM transcript WHERE mid IN ({marks})", list(keys)
            )
        }

    def rid_among(self, rids: list[int]) -> tuple[str, Sequence[Any]]:
        """One array parameter instead of thousands of placeholders (a common word matches
        every session: psycopg would parse 2,000 of them per search)."""
        return "= ANY(?)", [rids]
