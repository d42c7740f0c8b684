"""What an append writes: the one write path of a checkpoint (docs/storage.md, "What one
checkpoint writes").

New messages go after the saved ones in one durable transaction: their transcript rows
(which the context's tail takes in: :mod:`actors.store._rows`), the write-ahead records they
change, and one ``UPDATE`` of the session row (its counters, ``updated_at``, the listing's
metadata and, when given, the state). What it costs is what was appended: the statements are
the same whatever the session's length.

Functions over the connection of the caller's transaction; no I/O of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from actors.core.errors import ContextConflict
from actors.core.messages import Message
from actors.core.previews import own_user_text
from actors.core.titles import provisional_title
from actors.store import _rows
from actors.store._parts import Conn, SearchIndex
from actors.store._records import timestamp
from actors.store._rows import AppendRow
from actors.store._text import session_text


def typed(plain: Iterable[Message]) -> list[str]:
    """What the user typed in these messages (not blank), in order: the listing's counts,
    its preview and the provisional title follow it."""
    return [t for m in plain if (t := own_user_text(m)) is not None and t.strip()]


def check_at(session_id: str, row: AppendRow, at: int) -> None:
    """:class:`ContextConflict` unless the store holds exactly ``at`` messages."""
    if row.context_len != at:
        raise ContextConflict(
            f"Context changed unexpectedly for session '{session_id}' ({at} messages "
            f"known saved, {row.context_len} saved); only compaction may replace it."
        )


def write(
    conn: Conn,
    index: SearchIndex,
    row: AppendRow,
    plain: Sequence[Message],
    texts: Sequence[str],
    *,
    planned_calls: bool,
    state: str | None = None,
    status: str | None = None,
    at: str | None = None,
) -> None:
    """The rows of the messages ``plain`` (stored as ``texts``), appended after the
    ``row.context_len`` saved messages, inside ``conn``'s transaction: the transcript rows
    (the context's tail; marked for the search index) and the write-ahead records they
    change, then one ``UPDATE`` of the
    session row (its counters, ``updated_at`` (``at``, else now), the state's stored JSON
    when given: written whether or not it changed, since the row is rewritten for the
    counters anyway)."""
    index.mark_pending(conn, _rows.insert_messages(
        conn, row.rid, row.transcript_len, plain, texts, planned_calls=planned_calls,
        follows=row.branch_seq,
    ))
    said = typed(plain)
    title = None
    if said and not row.title_source:
        title = provisional_title(said[0])
    _rows.update_after_append(conn, row, len(texts), at or timestamp(), said, title,
                              state, status)
    if title is not None:
        summary, compactions = _rows.session_texts(conn, row.rid)
        index.set_session_text(conn, row.rid, session_text(title, summary, compactions))


__all__ = ["check_at", "typed", "write"]
