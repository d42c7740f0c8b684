"""Branching sessions: a fork (a copy, whole or cut at a message) and a rewind (the context
moved back, what came after kept as a fork). What a cut keeps, and the rows of the copy, are
:mod:`actors.store._branches`'.

Each is one transaction under the leases of the sessions it writes; the copy is then
recovered like a resumed session. Threads and cancellation as for every write
(:mod:`actors.store._writes`).
"""

from __future__ import annotations

from actors.core.budget import forked_state
from actors.core.errors import UsageError
from actors.core.ids import check_session_id, new_session_id
from actors.core.messages import call_ids_of
from actors.core.previews import latest_user_text, one_line
from actors.core.stored import StoredMessages
from actors.store import _branches, _rows
from actors.store._extend import SavedContext
from actors.store._parts import Conn
from actors.store._records import timestamp
from actors.store._results import Rewound
from actors.store._rows import SessionRow
from actors.store._text import session_text
from actors.store._writes import Writes


class Branching(Writes):
    """Fork and rewind (see the module doc); :class:`~actors.store.Store` is built on them."""

    def fork(self, session_id: str, at: int | None = None) -> str:
        """Copy a session into a new, independent one and return its id.

        Without ``at`` the whole session is copied; with ``at`` the fork holds the context up
        to message ``at`` (numbered as ``--info`` and ``--export`` show them), never cut
        between a tool call and its results (see :mod:`actors.store._branches`). The fork
        records its lineage (``parent_id``, ``fork_point``), keeps the title, the planning
        state and the pins, starts its own usage counter with the parent's usage kept apart
        as inherited, and is recovered like a resumed session. Its transcript is the
        parent's up to the cut (all of it without ``at``).
        """
        check_session_id(session_id)
        new_id = new_session_id()
        with (
            self._existing_lease(session_id),
            self.lease(new_id),
            self._shared.db.write(session_id, new_id) as conn,
        ):
            row = _rows.session_row(conn, session_id)
            if at is None:
                cut = _branches.Cut(row.transcript_len - 1, row.context_len - 1, ())
            else:
                cut = _branches.cut_at(conn, row.rid, row.transcript_len, at, settle=True)
            self._copy_into(conn, row, new_id, cut, whole=at is None)
        with self.lease(new_id):
            self.recover(new_id)
        return new_id

    def _copy_into(self, conn: Conn, row: SessionRow, new_id: str, cut: _branches.Cut, *,
                   whole: bool) -> None:
        """The rows of ``new_id``: the parent ``row`` up to ``cut``, inside the caller's
        transaction."""
        shared = self._shared
        state = _rows.dump_state(forked_state(self._state(row)))
        new = _branches.copy_session_row(conn, row.rid, new_id, timestamp(), state,
                                         transcript_len=cut.end_seq + 1,
                                         fork_point=None if whole else cut.number)
        _branches.copy_rows(conn, row.rid, new, cut)
        shared.index.copy_session(conn, row.rid, new)
        loads = _rows.json_loader(row.id, shared.db.damage_hint)
        context = [loads(t, "context") for t in _rows.context_texts(conn, new) if t is not None]
        if whole:
            _branches.copy_call_records(conn, row.rid, new, None)
            _branches.set_copy_counters(conn, new, len(context), user_messages=None,
                                        preview=None)
        else:
            _branches.copy_call_records(conn, row.rid, new,
                                        sorted({c for m in context for c in call_ids_of(m)}))
            # the parent's summary tells what came after the cut: not the fork's
            typed = _branches.user_messages(conn, new, range(cut.end_seq + 1))
            latest = latest_user_text(context)
            _branches.set_copy_counters(conn, new, len(context), user_messages=len(typed),
                                        preview=one_line(latest) if latest else "")
            summaries = [c["summary"] for c in _rows.compactions(conn, new)]
            shared.index.set_session_text(conn, new, session_text(row.title, "", summaries))
        shared.contexts.forget(new_id)

    def rewind(self, session_id: str, before: int) -> Rewound:
        """Move the working context back to just before user message ``before`` (a number
        :meth:`user_messages` lists), keeping everything first as a fork.

        One transaction: the whole session is copied as a fork (as :meth:`fork` copies it:
        the part after the rewind point stays resumable there) and the context becomes what
        it was before that message (see :mod:`actors.store._branches`), so a kill -9 leaves
        either both or neither; the next message appended follows the one the context now
        ends with. The transcript is never rewritten: it keeps every message, and the fork's
        id says where the rest went. The fork is then recovered (a kill before that leaves it
        to be recovered at its first open, as any session is).
        """
        fork_id = new_session_id()
        shared = self._shared
        with self._existing_lease(session_id), self.lease(fork_id):
            if before not in {m.number for m in self.user_messages(session_id)}:
                raise UsageError(
                    f"Message {before} is not one you typed in this conversation; "
                    "pick one of the messages \\rewind lists."
                )
            with shared.db.write(session_id, fork_id) as conn:
                row = _rows.session_row(conn, session_id)
                self._copy_into(
                    conn, row, fork_id,
                    _branches.Cut(row.transcript_len - 1, row.context_len - 1, ()), whole=True,
                )
                target = _branches.parent_of(conn, row.rid, before - 1)
                position = _branches.context_position(conn, row.rid, target)
                if position is not None:
                    _branches.cut_context(conn, row.rid, position)
                else:
                    _branches.context_from_branch(conn, row.rid,
                                                  _branches.branch(conn, row.rid, target))
                loads = _rows.json_loader(session_id, shared.db.damage_hint)
                texts = [t for t in _rows.context_texts(conn, row.rid) if t is not None]
                messages = [loads(t, "context") for t in texts]
                latest = latest_user_text(messages)
                _rows.after_rewind(conn, row.rid, len(texts), target,
                                   one_line(latest) if latest else "", timestamp())
            shared.contexts.replaced(
                session_id,
                SavedContext(row.rid, row.context_version + 1, StoredMessages(messages)),
            )
            self.recover(fork_id)
        return Rewound(messages, fork_id, before)


__all__ = ["Branching"]
