"""Rewinding a session's files: the protocol, in one place.

:func:`plan_rewind` says what a rewind to a user message would do, :func:`plan_undo` what
undoing the session's latest rewind would (nothing is written but the undo snapshot's
objects); :func:`apply_rewind` carries a plan out. Every write a restore makes to the
project can be undone, and none overwrites what changed since the restore looked. The
steps, each durable before the next begins:

1. **undo point**: the project is locked (exclusively: no snapshot or restore of another
   process runs meanwhile) and snapshotted again: the files as they are, content and
   permissions, every path the restore will touch included (ignored ones too). Its objects
   are stored. A plan gone stale (the files changed since it was shown) stops here.
2. **journal**: the project's journal file names the undo point and the target (written,
   fsynced, renamed, the directory fsynced: :mod:`._journal`).
3. **record** (the commit point): the session's ``rewind`` mark, naming the target and the
   undo point, committed durably (``synchronous=FULL``, which also makes the undo point's
   objects durable; every PostgreSQL commit is). From here the rewind is done, and
   ``--undo`` has something to go back to.
4. **apply**: each path is written (or removed) only if it is still as the undo point has
   it; a signal (``stop``) ends the restore between two paths.
5. **end**: the journal is removed.

A journal left behind (a kill -9, a power cut, a signal, a failure) is found at the next
command that opens the workspace of the project (:func:`interrupted`). Before step 3 nothing
was written: the journal goes, said in one line. After it, a fresh snapshot tells where each
path stands: still as the undo point had it (to do), as the target has it (done), or
changed since (by the user, another session, a run without snapshots). With no path changed
since, the rewind is finished and said in one line (:func:`settle`); otherwise it is left as
it is, and the user decides: :func:`finish` writes the paths still to do and leaves the
changed ones as they are (the undo point holds what they were, so ``--undo`` still goes
back); :func:`put_back` is a restore of its own, with the same steps (its undo point is the
files as they are), that brings only the paths the rewind wrote, and that are still as it
left them, back to the rewind's undo point. A restore that fails at a path (a file that
cannot be written) is put back the same way, and says so.

An undo (:func:`plan_undo`) is a rewind to the undo point of the session's latest rewind,
recorded the same way, so it can be undone in turn.

A rewind of both the files and the conversation has the same commit point: the files'
``rewind`` mark, which says the conversation follows (``conversation`` in its detail). The
conversation is in another database (SQLite) or another connection (PostgreSQL), so it
cannot join that transaction; instead it is rolled forward: when a kill -9 cuts the rewind
before the conversation is rewound (and a ``conversation`` mark written), the next open of
the session finishes it first (:func:`roll_forward`, idempotent), before anything reads the
session's context, and says so.

Snapshots belong to a project: a mark records the project it was taken in, and a plan
refuses to restore a mark of another project into this one.

Blocking; call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from actors.core.errors import HarnessError, RestoreFailed, StorageError, ToolFailed, UsageError
from actors.workspace._crashpoints import reached
from actors.workspace._marks import Mark
from actors.workspace._objects import ObjectStore
from actors.workspace._restore import Applied, RestorePlan
from actors.workspace._tree import Change
from actors.workspace._workspace import Pending, Workspace

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
    fork: str | None = None  # an undo of a rewind of both: the fork holding the
    # conversation as it was before it
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
    """A rewind recorded: its mark (the commit point), its undo point, what it wrote."""

    plan: RewindPlan | None  # None: a put-back of an interrupted rewind
    mark: Mark
    undo_root: bytes
    changed: int  # paths written or removed
    total: int = 0  # paths it had to change
    left: tuple[str, ...] = ()  # changed since it looked, when their turn came: left alone
    stopped: bool = False  # a signal stopped it: it is pending (see :func:`interrupted`)

    @property
    def session_id(self) -> str:
        return self.mark.session_id


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
    _same_project(workspace, found[to], session_id)
    return RewindPlan(session_id, to, found[to],
                      workspace.plan_restore(found[to].root, since=since), since)


def _same_project(workspace: Workspace, mark: Mark, session_id: str) -> None:
    """A mark taken in another project is never restored into this one."""
    project = mark.detail.get("project")
    if project and project != workspace.project:
        raise UsageError(f"The snapshots of session {session_id} belong to the project "
                         f"{project}; run the rewind there (this is {workspace.project}).")


def plan_undo(workspace: Workspace, session_id: str,
              ancestors: Sequence[Ancestor] = ()) -> RewindPlan:
    """The plan to undo the session's latest rewind of files."""
    marks = marks_of(workspace, ancestors or [Ancestor(session_id)])
    rewinds = [m for m in marks if m.kind == "rewind"]
    if not rewinds:
        raise UsageError(f"Session {session_id} has no rewind of files to undo.")
    last = rewinds[-1]
    _same_project(workspace, last, session_id)
    undo = bytes.fromhex(str(last.detail["undo"]))
    since = marks[-1].root
    fork = next((str(m.detail["fork"]) for m in marks if m.kind == "conversation"
                 and m.detail.get("files_rewind") == last.seq and m.detail.get("fork")), None)
    return RewindPlan(session_id, 0, last, workspace.plan_restore(undo, since=since), since,
                      fork)


def apply_rewind(workspace: Workspace, plan: RewindPlan, *,
                 with_conversation: bool = False,
                 stop: threading.Event | None = None) -> Rewound:
    """Carry ``plan`` out (see the module doc). :class:`UsageError` when the files changed
    since it was planned, or another rewind of the project's files is pending (nothing
    written); :class:`RestoreFailed` when a path could not be written (it says whether what
    was written was put back). ``with_conversation``: the conversation is rewound next (a
    ``conversation`` mark then says it was). ``stop`` set (a signal): the restore ends
    between two paths, pending (``Rewound.stopped``)."""
    entry, fresh = workspace.begin_restore(plan.restore, session=plan.session_id,
                                           label=plan.label, since=plan.since)
    reached("rewind-journaled")
    detail: dict[str, object] = {"undo": fresh.undo.root.hex(), "project": workspace.project}
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
        workspace.cancel_restore(entry)
        raise StorageError(f"The rewind could not be recorded ({exc}); nothing was "
                           "restored.") from None
    reached("rewind-recorded")
    done = _carry(workspace, plan, mark, fresh.undo.root, fresh.changes, stop)
    if with_conversation:
        reached("rewind-between")
    return done


def _carry(workspace: Workspace, plan: RewindPlan | None, mark: Mark, undo_root: bytes,
           changes: Sequence[Change], stop: threading.Event | None) -> Rewound:
    """Steps 4 and 5 of a recorded restore (its journal's id is ``mark.call_id``)."""
    entry = workspace.restoring
    assert entry is not None and entry.id == mark.call_id
    try:
        applied = workspace.apply_restore(entry, changes, stop=stop)
    except (ToolFailed, OSError, StorageError) as exc:
        workspace.leave_restore(entry)  # pending: what was written is put back next
        _failed(workspace, mark.session_id, _cause(exc))
    done = Rewound(plan, mark, undo_root, applied.changed, len(changes), tuple(applied.left),
                   applied.stopped)
    if applied.stopped:
        workspace.leave_restore(entry)
    else:
        reached("rewind-applied")
        workspace.end_restore(entry)
    return done


def _failed(workspace: Workspace, session_id: str, reason: str) -> None:
    """A restore failed at a path: put back what it wrote; raise :class:`RestoreFailed`."""
    try:
        back = put_back(workspace, session_id=session_id)
    except (HarnessError, OSError) as exc:
        raise RestoreFailed(
            f"Restoring the project's files failed ({reason}), and so did putting back what "
            f"it wrote ({_cause(exc)}). The rewind is pending: {commands(session_id)}.",
            rolled_back=False,
        ) from None
    written = back.changed if back is not None else 0
    raise RestoreFailed(
        f"Restoring the project's files failed ({reason}); what it had written was put back "
        f"({written} paths), so the rewind did not happen.",
        rolled_back=True,
    )


def commands(session_id: str, *, repl: bool = False) -> str:
    """How to finish a pending rewind or put back what it wrote, for people."""
    if repl:
        return ("\\rewind finish finishes it (leaving what changed since as it is), "
                "\\rewind undo puts back what it wrote")
    return (f"`harness --rewind {session_id} --finish` finishes it (leaving what changed since "
            f"as it is), `harness --rewind {session_id} --undo` puts back what it wrote")


# -- a rewind that was cut short ------------------------------------------------------------


@dataclass(frozen=True)
class Interrupted:
    """A rewind of the project's files that was cut short, and where its paths stand."""

    pending: Pending
    mark: Mark | None  # its record (None: it was never recorded)

    @property
    def session_id(self) -> str:
        return self.pending.entry.session

    @property
    def what(self) -> str:
        label = f" {self.pending.entry.label}" if self.pending.entry.label else ""
        return f"A rewind of the files of session {self.session_id}{label}"

    @property
    def changed(self) -> list[str]:
        return self.pending.changed

    def refusal(self, *, repl: bool = False) -> str:
        """One line: it is pending, what changed since, and the commands that end it."""
        shown = ", ".join(self.changed[:SHOWN])
        more = f" and {len(self.changed) - SHOWN} more" if len(self.changed) > SHOWN else ""
        return (f"{self.what} was interrupted, and {len(self.changed)} of its files changed "
                f"since ({shown}{more}); {commands(self.session_id, repl=repl)}.")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


SHOWN = 5  # paths named in a line


def interrupted(workspace: Workspace) -> Interrupted | None:
    """The rewind of this project's files that was cut short, if any (reads only)."""
    marks = workspace.objects.marks
    found = workspace.pending(marks.rewind_recorded)
    if found is None:
        return None
    return Interrupted(found, marks.rewind_of(found.entry.id) if found.recorded else None)


@dataclass(frozen=True)
class Finished:
    """An interrupted rewind taken up again: what it wrote now, what it left alone."""

    interrupted: Interrupted
    applied: Applied

    def __str__(self) -> str:
        what = self.interrupted.what
        if not self.interrupted.pending.recorded:
            return f"{what} was interrupted before it started; nothing was changed."
        session = self.interrupted.session_id
        left = self.interrupted.changed + [p for p in self.applied.left
                                           if p not in self.interrupted.changed]
        said = (f"{what} was interrupted; it has been finished "
                f"({_count(self.applied.changed, 'more path')})")
        if left:
            shown = ", ".join(left[:SHOWN]) + (f" and {len(left) - SHOWN} more"
                                               if len(left) > SHOWN else "")
            said += (f", leaving {_count(len(left), 'file')} changed since as they are "
                     f"({shown})")
        if self.applied.stopped:
            return (f"{what} was interrupted; taking it up again was stopped too "
                    f"({self.applied.changed} more paths written); {commands(session)}.")
        return f"{said}. `harness --rewind {session} --undo` puts the files back as they were."


def finish(workspace: Workspace, *, stop: threading.Event | None = None) -> Finished | None:
    """Carry on with the rewind that was cut short (see the module doc); None: there is
    none (any more)."""
    marks = workspace.objects.marks
    done = workspace.finish_pending(marks.rewind_recorded, stop=stop)
    if done is None:
        return None
    found, applied = done
    mark = marks.rewind_of(found.entry.id) if found.recorded else None
    return Finished(Interrupted(found, mark), applied)


def settle(workspace: Workspace) -> tuple[str | None, Interrupted | None]:
    """At an open: a rewind cut short with no path changed since is finished (or, never
    recorded, forgotten), said in one line; one with paths changed since is left as it is
    and answered, for the caller to refuse or ask (see the module doc)."""
    found = interrupted(workspace)
    if found is None:
        return None, None
    if found.pending.recorded and found.changed:
        return None, found
    if not found.pending.recorded and found.pending.standing.done:  # a journal of an older
        back = put_back(workspace)  # harness, which wrote files before it recorded them
        written = back.changed if back is not None else 0
        return (f"{found.what} was interrupted before it was recorded; what it wrote was put "
                f"back ({_count(written, 'path')})."), None
    done = finish(workspace)
    return (str(done) if done is not None else None), None


def put_back(workspace: Workspace, *, session_id: str = "",
             stop: threading.Event | None = None) -> Rewound | None:
    """Put back what the rewind that was cut short wrote (see the module doc): recorded as
    a rewind of its own, so it can be undone. None: there is none (any more)."""
    marks = workspace.objects.marks
    begun = workspace.begin_put_back(marks.rewind_recorded, session=session_id,
                                     label="put back as they were before its rewind")
    if begun is None:
        return None
    entry, changes, found = begun
    first = marks.rewind_of(found.entry.id) if found.recorded else None
    detail: dict[str, object] = {"undo": entry.undo, "project": workspace.project,
                                 "put_back": True}
    if first is not None:
        detail["undoes"] = first.seq
    session = entry.session or session_id
    try:
        mark = marks.add(session, "rewind", first.message if first else 0,
                         bytes.fromhex(entry.target), call_id=entry.id, changes=changes,
                         detail=detail)
    except StorageError as exc:
        workspace.cancel_restore(entry)
        raise StorageError(f"Putting the files back could not be recorded ({exc}); nothing "
                           "was changed.") from None
    reached("put-back-recorded")
    return _carry(workspace, None, mark, bytes.fromhex(entry.undo), changes, stop)


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return str(exc)


def record_conversation(workspace: Workspace, files: Rewound, fork_id: str) -> None:
    """The conversation half of a rewind of both is done too."""
    workspace.objects.marks.add(
        files.session_id, "conversation", files.mark.message, files.mark.root,
        detail={"files_rewind": files.mark.seq, "fork": fork_id}, durable=True,
    )


def pending_roll_forward(objects: ObjectStore, session_id: str) -> Mark | None:
    """The files' mark of a rewind of both whose conversation did not follow yet (what
    :func:`roll_forward` would finish), if any."""
    return _pending(objects.marks.of_session(session_id))


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


__all__ = ["Ancestor", "Finished", "Interrupted", "RewindPlan", "Rewound", "RolledForward",
           "apply_rewind", "commands", "finish", "interrupted", "lineage", "marks_of",
           "message_marks", "pending_roll_forward", "plan_rewind", "plan_undo", "put_back",
           "record_conversation",
           "roll_forward", "settle"]
