"""Rewinding a session's files: to the snapshot of a user message, or undoing the last rewind.

:func:`plan_rewind` says what a rewind would do (nothing is written but the undo snapshot's
objects); :func:`apply_rewind` does it, done or not started:

1. the project is locked and planned again (a plan gone stale restores nothing), the
   journal is written and fsynced (:mod:`._journal`);
2. the files are restored through the sandbox;
3. the rewind is recorded: a ``rewind`` mark naming the target and the undo snapshot, written
   durably. This is the commit point;
4. the journal is removed.

A failure in 2 puts the files back (the undo snapshot) and says so; a failure in 3 too. A
kill -9 anywhere leaves the journal, and the next start (:meth:`Workspace.recover`, asked
whether the mark exists) finishes a recorded rewind or puts the files back, and says which.

An undo (:func:`plan_undo`) is a rewind to the undo snapshot of the session's latest rewind,
recorded the same way, so it can be undone in turn.

A rewind of both the files and the conversation has the same commit point: the files'
``rewind`` mark, which says the conversation follows (``conversation`` in its detail). The
conversation is in another database (SQLite) or another connection (PostgreSQL), so it
cannot join that transaction; instead it is rolled forward. Once the mark is written the
rewind counts as done, and when a kill -9 cuts it before the conversation is rewound (and a
``conversation`` mark written), the next open of the session finishes it first
(:func:`roll_forward`, idempotent), before anything reads the session's context, and says so.
Before the mark it did not happen (the journal puts the files back). Done or not started.

Blocking; call it from a worker thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from actors.core.errors import HarnessError, RestoreFailed, StorageError, UsageError
from actors.workspace._crashpoints import reached
from actors.workspace._marks import Mark
from actors.workspace._objects import ObjectStore
from actors.workspace._restore import RestorePlan
from actors.workspace._workspace import Workspace

if TYPE_CHECKING:
    from actors.store import Store


@dataclass(frozen=True)
class RewindPlan:
    """What a rewind of ``session_id``'s files would do."""

    session_id: str
    to: int  # the message number the files go back to (0: an undo)
    target: Mark  # the mark whose snapshot is restored (for an undo: the rewind undone)
    restore: RestorePlan
    since: bytes | None  # the session's latest snapshot, against which hand edits are told

    @property
    def undo(self) -> bool:
        return self.target.kind == "rewind"

    @property
    def label(self) -> str:
        if self.undo:
            return f"back to before its rewind to message {self.target.message}"
        return f"to message {self.to}"


@dataclass(frozen=True)
class Rewound:
    """A rewind done: the journal id it was recorded under and the undo snapshot."""

    plan: RewindPlan
    mark: Mark
    undo_root: bytes
    changed: int  # files (and links) written or removed


@dataclass(frozen=True)
class Ancestor:
    """A session whose marks a fork inherits: those made before ``before`` (time.time()) at
    messages up to ``upto`` (None: any)."""

    session_id: str
    before: float = float("inf")
    upto: int | None = None


def lineage(info: Callable[[str], Any], session_id: str, depth: int = 16) -> list[Ancestor]:
    """The session and the sessions it was forked from (``info(id)``: the store's
    :meth:`~actors.store.Store.info`): a fork is a copy, so the snapshots its parent took
    before the fork are its own too. Stops at a parent that is gone."""
    found = [Ancestor(session_id)]
    current = session_id
    before, upto = float("inf"), None
    for _ in range(depth):
        try:
            meta = info(current)
        except HarnessError:
            break
        parent = getattr(meta, "parent_id", None)
        if not parent:
            break
        with contextlib.suppress(ValueError, TypeError):
            before = min(before, datetime.fromisoformat(str(meta.created_at)).timestamp())
        point = getattr(meta, "fork_point", None)
        if isinstance(point, int):
            upto = point if upto is None else min(upto, point)
        found.append(Ancestor(str(parent), before, upto))
        current = str(parent)
    return found


def marks_of(workspace: Workspace, ancestors: Sequence[Ancestor]) -> list[Mark]:
    """The marks a session can rewind to: its own, then what it inherits, oldest first."""
    marks: list[Mark] = []
    for ancestor in reversed(ancestors):
        marks.extend(m for m in workspace.objects.marks.of_session(ancestor.session_id)
                     if m.created_at < ancestor.before
                     and (ancestor.upto is None or m.message <= ancestor.upto))
    return marks


def message_marks(workspace: Workspace, session_id: str,
                  ancestors: Sequence[Ancestor] = ()) -> dict[int, Mark]:
    """``message number -> mark`` of the user messages with a snapshot (the session's own
    win over inherited ones)."""
    return {m.message: m for m in marks_of(workspace, ancestors or [Ancestor(session_id)])
            if m.kind == "message"}


def plan_rewind(workspace: Workspace, session_id: str, to: int,
                ancestors: Sequence[Ancestor] = ()) -> RewindPlan:
    """The plan to bring the files back to what they were when user message ``to`` was
    sent; :class:`UsageError` when that message has no snapshot. ``ancestors`` (see
    :func:`lineage`): where a fork's earlier snapshots are."""
    marks = marks_of(workspace, ancestors or [Ancestor(session_id)])
    found = {m.message: m for m in marks if m.kind == "message"}
    if to not in found:
        known = ", ".join(str(n) for n in sorted(found)) or "none"
        raise UsageError(
            f"No snapshot of the files was taken at message {to} of session {session_id}; "
            f"messages with one (what you typed): {known}."
        )
    since = marks[-1].root if marks else None
    return RewindPlan(session_id, to, found[to],
                      workspace.plan_restore(found[to].root, since=since), since)


def plan_undo(workspace: Workspace, session_id: str,
              ancestors: Sequence[Ancestor] = ()) -> RewindPlan:
    """The plan to undo the session's latest rewind of files."""
    marks = marks_of(workspace, ancestors or [Ancestor(session_id)])
    rewinds = [m for m in marks if m.kind == "rewind"]
    if not rewinds:
        raise UsageError(f"Session {session_id} has no rewind of files to undo.")
    last = rewinds[-1]
    undo = bytes.fromhex(str(last.detail["undo"]))
    since = marks[-1].root
    return RewindPlan(session_id, 0, last, workspace.plan_restore(undo, since=since), since)


def apply_rewind(workspace: Workspace, plan: RewindPlan, *,
                 with_conversation: bool = False) -> Rewound:
    """Carry ``plan`` out (see the module doc). :class:`UsageError` when the files changed
    since it was planned (nothing written); :class:`RestoreFailed` when it could not be done
    (it says whether the files were put back). ``with_conversation``: the conversation is
    rewound next (a ``conversation`` mark then says it was; see :func:`unfinished`)."""
    entry, fresh = workspace.begin_restore(plan.restore, session=plan.session_id,
                                           label=plan.label, since=plan.since)
    detail: dict[str, object] = {"undo": fresh.undo.root.hex()}
    if with_conversation:
        detail["conversation"] = True
    if plan.undo:
        detail["undoes"] = plan.target.seq
    try:
        mark = workspace.objects.marks.add(
            plan.session_id, "rewind", plan.to or plan.target.message, fresh.target,
            call_id=entry.id, changes=fresh.changes, detail=detail,
        )
    except StorageError as exc:
        workspace.abort_restore(entry, f"the rewind could not be recorded: {exc}")
        raise AssertionError("abort_restore raises") from None  # pragma: no cover
    with contextlib.suppress(OSError):  # recorded: a journal left behind is finished
        workspace.finish_restore(entry)  # (idempotently) at the next start
    if with_conversation:
        reached("rewind-between")
    return Rewound(plan, mark, fresh.undo.root, len(fresh.files()))


def record_conversation(workspace: Workspace, files: Rewound, fork_id: str) -> None:
    """The conversation half of a rewind of both is done too."""
    workspace.objects.marks.add(
        files.plan.session_id, "conversation", files.mark.message, files.mark.root,
        detail={"files_rewind": files.mark.seq, "fork": fork_id}, durable=True,
    )


def _pending(marks: Sequence[Mark]) -> Mark | None:
    done = {m.detail.get("files_rewind") for m in marks if m.kind == "conversation"}
    for mark in reversed(marks):
        if mark.kind == "rewind":
            if mark.detail.get("conversation") and mark.seq not in done:
                return mark
            return None
    return None


@dataclass(frozen=True)
class RolledForward:
    """An interrupted rewind of both, finished: its conversation rewound after its files."""

    session_id: str
    to: int
    fork_id: str | None  # None: the conversation had been rewound, only its record was missing

    def __str__(self) -> str:
        kept = f" (what came after is kept in session {self.fork_id})" if self.fork_id else ""
        return (f"A rewind of session {self.session_id} to message {self.to} was interrupted "
                "after its files were rewound; it has been finished: the conversation now "
                f"ends before message {self.to} too{kept}.")


def roll_forward(objects: ObjectStore, store: Store, session_id: str) -> RolledForward | None:
    """Finish a rewind of both that a kill -9 cut after its files' commit point (their
    ``rewind`` mark): rewind the conversation too, and record it (None: nothing to finish).

    Idempotent, whatever kill lands in it: the conversation is rewound only while the
    message is still on the session's current branch (a rewind takes it off), and the
    ``conversation`` mark that ends it is written last, durably. The caller holds the
    session's lease. :class:`RestoreFailed` when the conversation cannot be rewound (it is
    tried again at the next open; an undo of the files ends it instead)."""
    mark = _pending(objects.marks.of_session(session_id))
    if mark is None:
        return None
    to = mark.message
    reached("roll-forward")
    fork_id: str | None = None
    try:
        if to in {m.number for m in store.user_messages(session_id)}:
            fork_id = store.rewind(session_id, to).fork_id
            reached("roll-forward-rewound")
        objects.marks.add(session_id, "conversation", to, mark.root,
                          detail={"files_rewind": mark.seq, "fork": fork_id,
                                  "rolled_forward": True}, durable=True)
    except HarnessError as exc:
        raise RestoreFailed(
            f"A rewind of session {session_id} to message {to} was interrupted after its "
            f"files were rewound, and its conversation could not be rewound now ({exc}). It "
            f"is tried again at the next open; `harness --rewind {session_id} --undo` puts "
            "the files back instead.",
            rolled_back=False,
        ) from None
    return RolledForward(session_id, to, fork_id)


__all__ = ["Ancestor", "RestoreFailed", "RewindPlan", "Rewound", "RolledForward",
           "apply_rewind", "lineage", "marks_of", "message_marks", "plan_rewind", "plan_undo",
           "record_conversation", "roll_forward"]
