"""Message numbers, branches and cuts: what a fork at message N or a rewind keeps.

Transcript messages are numbered from 1 (``seq + 1``; the system prompt is message 1), as
``--info``, ``--export`` and search hits show them. The transcript is append-only; a rewind
moves the context back, and the next message appended then *follows* an earlier one rather
than the one before it (``transcript.parent_seq``, NULL meaning "the one before"). The
messages a message follows, back to the first, are its *branch* (:func:`branch`): what the
conversation was when that message was the latest.

A *cut* (:func:`cut_at`) is where a fork or a rewind ends its context: never between a tool
call and its results. A cut at an assistant message with tool calls, or inside its results,
moves forward past the results that exist; calls left without one are answered by recovery.
Where the message cut at is still in the session's working context, the fork takes the
context up to it (a compaction's summary included); where compaction has since summarised it
away, the fork's context is its branch, message by message, from the transcript.

Functions over the connection of the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.core.errors import UsageError
from actors.core.messages import Message, call_ids_of
from actors.core.previews import own_user_text
from actors.store import _rows
from actors.store._parts import Conn
from actors.store._results import UserMessage


@dataclass(frozen=True)
class Cut:
    """Where a context ends: transcript message ``end_seq`` (0-based), found at position
    ``context_pos`` of the current working context, or (None) only in the transcript, whose
    branch up to it is ``branch``."""

    end_seq: int
    context_pos: int | None
    branch: tuple[int, ...]

    @property
    def number(self) -> int:
        """The message number of the cut (the last message kept)."""
        return self.end_seq + 1


def _parents(conn: Conn, rid: int, upto: int) -> dict[int, int]:
    """``seq -> parent_seq`` of the messages up to ``upto`` that follow another than the one
    before them (after a rewind: few rows)."""
    return {
        seq: parent
        for seq, parent in conn.execute(
            "SELECT seq, parent_seq FROM transcript WHERE session_rid = ? AND seq <= ?"
            " AND parent_seq IS NOT NULL",
            (rid, upto),
        )
    }


def branch(conn: Conn, rid: int, end_seq: int) -> tuple[int, ...]:
    """The seqs of the messages ``end_seq`` follows, from the first, and ``end_seq``."""
    parents = _parents(conn, rid, end_seq)
    seqs = []
    seq = end_seq
    while seq >= 0:
        seqs.append(seq)
        seq = parents.get(seq, seq - 1)
    return tuple(reversed(seqs))


def parent_of(conn: Conn, rid: int, seq: int) -> int:
    """The seq message ``seq`` follows (-1 for the first)."""
    row = conn.execute(
        "SELECT parent_seq FROM transcript WHERE session_rid = ? AND seq = ?", (rid, seq)
    ).fetchone()
    return seq - 1 if row is None or row[0] is None else int(row[0])


def _message(conn: Conn, rid: int, seq: int) -> tuple[int | None, Message] | None:
    row = conn.execute(
        "SELECT parent_seq, body FROM transcript WHERE session_rid = ? AND seq = ?", (rid, seq)
    ).fetchone()
    if row is None:
        return None
    try:
        message = json.loads(row[1])
    except (TypeError, ValueError):
        message = {}
    return row[0], message if isinstance(message, dict) else {}


def _settled_end(conn: Conn, rid: int, seq: int, transcript_len: int) -> int:
    """``seq``, or the last result after it of the tool calls open at ``seq``."""
    found = _message(conn, rid, seq)
    assert found is not None
    message = found[1]
    # The open batch: the assistant message at or before seq, over its results.
    answered: set[str] = set()
    at = seq
    while message.get("role") == "tool":
        answered.add(str(message.get("tool_call_id")))
        at = parent_of(conn, rid, at)
        previous = _message(conn, rid, at) if at >= 0 else None
        if previous is None:
            return seq
        message = previous[1]
    open_calls = [c for c in call_ids_of(message) if c not in answered]
    end = seq
    while open_calls and end + 1 < transcript_len:
        following = _message(conn, rid, end + 1)
        if following is None or following[0] is not None:  # another branch starts there
            break
        nxt = following[1]
        if nxt.get("role") != "tool" or nxt.get("tool_call_id") not in open_calls:
            break
        open_calls.remove(str(nxt.get("tool_call_id")))
        end += 1
    return end


def context_position(conn: Conn, rid: int, seq: int) -> int | None:
    """Where transcript message ``seq`` is in the current working context (None: not there):
    among its explicit rows, or in its tail."""
    row = conn.execute(
        "SELECT c.pos FROM context c JOIN transcript t ON t.mid = c.mid "
        "WHERE c.session_rid = ? AND t.session_rid = ? AND t.seq = ?",
        (rid, rid, seq),
    ).fetchone()
    if row is not None:
        return int(row[0])
    explicit, tail_from, transcript_len = _rows.context_shape(conn, rid)
    return explicit + seq - tail_from if tail_from <= seq < transcript_len else None


def cut_at(conn: Conn, rid: int, transcript_len: int, number: int, *, settle: bool) -> Cut:
    """The cut after message ``number``; with ``settle``, moved past the results of the tool
    calls open there. :class:`UsageError` for a number the session does not have."""
    if not 1 <= number <= transcript_len:
        raise UsageError(
            f"There is no message {number}: the session has messages 1 to {transcript_len}."
        )
    end = _settled_end(conn, rid, number - 1, transcript_len) if settle else number - 1
    position = context_position(conn, rid, end)
    return Cut(end, position, () if position is not None else branch(conn, rid, end))


def context_end(conn: Conn, rid: int) -> int | None:
    """The seq of the last transcript message in the working context (None: none is)."""
    _, tail_from, transcript_len = _rows.context_shape(conn, rid)
    if transcript_len > tail_from:  # the tail's last
        return transcript_len - 1
    row = conn.execute(
        "SELECT t.seq FROM context c JOIN transcript t ON t.mid = c.mid "
        "WHERE c.session_rid = ? ORDER BY c.pos DESC LIMIT 1",
        (rid,),
    ).fetchone()
    return None if row is None else int(row[0])


def user_messages(conn: Conn, rid: int, seqs: Sequence[int]) -> list[UserMessage]:
    """The messages the user typed among ``seqs``, in order."""
    wanted = set(seqs)
    found = []
    for seq, body in conn.execute(
        "SELECT seq, body FROM transcript WHERE session_rid = ? AND body LIKE ? ORDER BY seq",
        (rid, '%"role":"user"%'),
    ):
        if seq not in wanted:
            continue
        try:
            message: Any = json.loads(body)
        except (TypeError, ValueError):
            continue
        text = own_user_text(message) if isinstance(message, dict) else None
        if text is not None and text.strip():
            found.append(UserMessage(seq + 1, text))
    return found


# -- copies (a fork, the fork a rewind keeps) and moving a context back --------------------


def copy_session_row(conn: Conn, rid: int, new_id: str, now: str, state: str, *,
                     transcript_len: int, fork_point: int | None) -> int:
    """A copy of session ``rid``'s row as ``new_id`` (its title, summary, project, pins and
    listing text; a fresh status, ``state``, no context yet); the copy's rid."""
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at, listed_at, title, summary,"
        " archived, status, project_root, parent_id, state, context_version, context_len,"
        " transcript_len, title_source, preview, user_messages, fork_point)"
        " SELECT ?, ?, ?, ?, title, summary, 0, 'saved', project_root, id, ?, 0, 0, ?,"
        " title_source, preview, user_messages, ? FROM sessions WHERE rid = ?",
        (new_id, now, now, _rows.listed_at(now), state, transcript_len, fork_point, rid),
    )
    (new,) = conn.execute("SELECT rid FROM sessions WHERE id = ?", (new_id,)).fetchone()
    return int(new)


def copy_rows(conn: Conn, rid: int, new: int, cut: Cut) -> None:
    """The transcript of session ``rid`` up to ``cut`` copied into session ``new``, with its
    working context up to the cut (as it is, a compaction's summary and the compactions
    included, where the cut is in it; else the branch, message by message). The copy's
    transcript has the same seqs, so a cut in the context's tail keeps the tail as it is."""
    conn.execute(
        "INSERT INTO transcript (session_rid, seq, body, parent_seq, shape, tokens) "
        "SELECT ?, seq, body, parent_seq, shape, tokens FROM transcript"
        " WHERE session_rid = ? AND seq <= ? ORDER BY seq",
        (new, rid, cut.end_seq),
    )
    tail_from = cut.end_seq + 1  # the copy's own transcript_len: no tail
    if cut.context_pos is not None:
        explicit, parent_tail, _ = _rows.context_shape(conn, rid)
        if cut.context_pos >= explicit:
            tail_from = parent_tail
        conn.execute(
            "INSERT INTO context (session_rid, pos, mid, body) "
            "SELECT ?, c.pos, t2.mid, c.body FROM context c "
            "LEFT JOIN transcript t1 ON t1.mid = c.mid "
            "LEFT JOIN transcript t2 ON t2.session_rid = ? AND t2.seq = t1.seq "
            "WHERE c.session_rid = ? AND c.pos <= ?",
            (new, new, rid, cut.context_pos),
        )
        conn.execute(
            "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
            " summary) SELECT ?, n, at, before_tokens, after_tokens, summary"
            " FROM compactions WHERE session_rid = ?",
            (new, rid),
        )
    else:
        context_from_branch(conn, new, cut.branch)
    conn.execute("UPDATE sessions SET tail_from = ? WHERE rid = ?", (tail_from, new))


def copy_call_records(conn: Conn, rid: int, new: int, calls: Sequence[str] | None) -> None:
    """The write-ahead records of ``calls`` (None: all of them) of session ``rid`` copied
    into session ``new``."""
    if calls is None:
        conn.execute(
            "INSERT INTO tool_calls (session_rid, call_id, phase) "
            "SELECT ?, call_id, phase FROM tool_calls WHERE session_rid = ?",
            (new, rid),
        )
    elif calls:
        conn.execute(
            "INSERT INTO tool_calls (session_rid, call_id, phase) "
            "SELECT ?, call_id, phase FROM tool_calls WHERE session_rid = ?"
            f" AND call_id IN ({','.join('?' * len(calls))})",
            (new, rid, *calls),
        )


def context_from_branch(conn: Conn, rid: int, branch_seqs: Sequence[int]) -> None:
    """Session ``rid``'s context made the transcript messages ``branch_seqs``, in order
    (all explicit)."""
    mids = dict(conn.execute(
        "SELECT seq, mid FROM transcript WHERE session_rid = ?", (rid,)).fetchall())
    conn.execute("DELETE FROM context WHERE session_rid = ?", (rid,))
    conn.executemany(
        "INSERT INTO context (session_rid, pos, mid) VALUES (?, ?, ?)",
        [(rid, pos, mids[seq]) for pos, seq in enumerate(branch_seqs)],
    )
    _rows.tail_restarted(conn, rid)


def cut_context(conn: Conn, rid: int, last_pos: int) -> None:
    """Session ``rid``'s context cut after position ``last_pos`` (all explicit: what it
    keeps of the tail written as rows)."""
    explicit, tail_from, _ = _rows.context_shape(conn, rid)
    if last_pos < explicit:
        conn.execute("DELETE FROM context WHERE session_rid = ? AND pos > ?", (rid, last_pos))
    else:
        conn.execute(
            "INSERT INTO context (session_rid, pos, mid) SELECT ?, ? + seq - ?, mid"
            " FROM transcript WHERE session_rid = ? AND seq >= ? AND seq <= ?",
            (rid, explicit, tail_from, rid, tail_from, tail_from + last_pos - explicit),
        )
    _rows.tail_restarted(conn, rid)


def set_copy_counters(conn: Conn, rid: int, context_len: int, *, user_messages: int | None,
                      preview: str | None) -> None:
    """A copy's context length, and (a copy cut short) what its listing shows (no summary:
    the parent's told what came after the cut)."""
    sets = "context_len = ?"
    args: list[Any] = [context_len]
    if user_messages is not None:
        sets += ", user_messages = ?, preview = ?, summary = ''"
        args += [user_messages, preview or ""]
    conn.execute(f"UPDATE sessions SET {sets} WHERE rid = ?", (*args, rid))
