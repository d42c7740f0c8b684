"""Rewinding a session: what is asked, the steps in order, and what the next open does.

A rewind goes back to just before a message the user typed: the conversation, the
project's files, or both; or it undoes the last rewind of files. The steps are one
function, :func:`carry_out`, whoever asks: the supervisor (``Supervisor.rewind``: ``\\rewind``
in the REPL), whose steps are requests to its actors, and ``harness --rewind`` (headless,
:mod:`repl.rewind`), whose steps are direct calls on the store and the workspace. Either
way:

1. **check** (:func:`check`): what is asked can be done, before anything changes; for the
   files, the plan (the diffstat the front end showed) must be the one for that message;
2. **files**: the project's files as they were when that message was sent, by the
   workspace's protocol (:mod:`actors.workspace._rewind`: the files as they are kept first,
   durably, as the undo point; recorded before any is written; a path changed since is
   never overwritten);
3. **conversation** (``Store.rewind``): the session is forked first (everything after the
   rewind point stays resumable in the fork), then its working context moves back; the
   transcript is never rewritten. If it fails after the files were rewound, the files are
   put back, so nothing was rewound;
4. **record**: that the conversation followed (a ``conversation`` mark naming the fork).

Files first: their restore is the part that can fail half-way, and it is undoable; the
conversation is one store operation. The files' record (step 2) is the commit point of
both: a kill between 2 and 4 is rolled forward at the next open of the session.

An undo (``RewindRequest(undo=True)``) is a rewind of the files to the undo point of the
last one; when that rewind took the conversation too, the outcome names the fork that
holds the conversation as it was (``resume``): the REPL continues there, so ``\\rewind
undo`` undoes the whole rewind.

At the open of a session (:func:`at_open`: a resume, a new session, ``--rewind``), before
its context is read: a rewind of both cut between its files and its conversation is
finished, and a rewind of the project's files that was cut short is taken up (finished
when no path changed since, said in one line; otherwise left for the user: print mode and
headless commands refuse with one line naming the commands that end it, the REPL says so
and ``\\rewind`` asks).

Cancellation: the steps run in one worker thread (the supervisor's are requests to the
actors that own each part, each finishing what it has started); the supervisor runs the
whole shielded. Blocking.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from actors.core.errors import HarnessError, RestoreFailed, StorageError, UsageError
from actors.core.messages import Message

if TYPE_CHECKING:
    from actors.store import Rewound as ConversationRewound
    from actors.store import Store
    from actors.workspace import Finished, Interrupted, ObjectStore, RewindPlan, Rewound


@dataclass(frozen=True)
class RewindRequest:
    """Go back to just before user message ``before`` (numbered as ``\\rewind`` lists):
    the conversation, and with ``files`` the files too, by ``files_plan`` (what the plan of
    that rewind showed); or, ``undo``, undo the last rewind of files by ``files_plan`` (its
    undo plan); or take up the rewind of the project's files that was cut short:
    ``interrupted="finish"`` or ``"put_back"`` (see :mod:`actors.workspace._rewind`)."""

    before: int = 0
    conversation: bool = True
    files: bool = False
    files_plan: RewindPlan | None = None
    undo: bool = False
    interrupted: Literal["finish", "put_back"] | None = None


@dataclass(frozen=True)
class RewindOutcome:
    """What a rewind did: the context it left (None: the conversation was not touched), the
    fork holding what came after, the files' restore; for an undo, the session that holds
    the conversation as it was before the rewind undone (None: it did not take it)."""

    before: int
    messages: list[Message] | None
    fork_id: str | None
    files: Rewound | None = None
    resume: str | None = None
    finished: Finished | None = None  # an interrupted rewind finished

    @property
    def files_restored(self) -> int | None:
        """Paths the files' restore changed (None: the files were not asked for)."""
        return self.files.changed if self.files is not None else None


class RewindSteps(Protocol):
    """Where each step goes (the supervisor's actors, or the store and workspace headless).
    Blocking calls, made from the worker thread :func:`carry_out` runs in."""

    def files(self, plan: RewindPlan, *, with_conversation: bool) -> Rewound:
        """Carry out the files' restore (the workspace's protocol)."""

    def files_back(self) -> Rewound:
        """Undo the files' rewind just done (the conversation could not follow)."""

    def conversation(self, before: int) -> ConversationRewound:
        """Rewind the conversation (``Store.rewind``) and take its context."""

    def conversation_done(self, files: Rewound, fork_id: str) -> None:
        """Record that the conversation followed the files."""

    def finish_interrupted(self) -> Finished | None:
        """Carry on with the rewind of the files that was cut short (None: none)."""

    def put_back_interrupted(self) -> Rewound | None:
        """Put back what the rewind of the files that was cut short wrote (None: none)."""


NOTHING_INTERRUPTED = "No rewind of this project's files was interrupted: nothing to take up."


def check(request: RewindRequest) -> None:
    """Refuse, before anything changes, what cannot be done."""
    if request.interrupted is not None:
        return
    if request.undo:
        if request.files_plan is None or not request.files_plan.undo:
            raise UsageError("Plan the undo first (the plan of message 0), so that what "
                             "changes is shown before it does.")
        return
    if not (request.conversation or request.files):
        raise UsageError("Nothing to rewind: ask for the conversation, the files, or both.")
    if request.files and (request.files_plan is None or request.files_plan.undo
                          or request.files_plan.to != request.before):
        raise UsageError(f"Plan the files' rewind to message {request.before} first, so "
                         "that what changes is shown before it does.")


def carry_out(request: RewindRequest, steps: RewindSteps) -> RewindOutcome:
    """The steps of the module doc, in order."""
    check(request)
    plan = request.files_plan
    if request.interrupted is not None:
        if request.interrupted == "finish":
            finished = steps.finish_interrupted()
            if finished is None:
                raise UsageError(NOTHING_INTERRUPTED)
            return RewindOutcome(0, None, None, finished=finished)
        back = steps.put_back_interrupted()
        if back is None:
            raise UsageError(NOTHING_INTERRUPTED)
        return RewindOutcome(0, None, None, back)
    if request.undo:
        assert plan is not None
        files = steps.files(plan, with_conversation=False)
        return RewindOutcome(0, None, None, files, None if files.stopped else plan.fork)
    files_done: Rewound | None = None
    if request.files:
        assert plan is not None
        files_done = steps.files(plan, with_conversation=request.conversation)
        if files_done.stopped or not request.conversation:
            return RewindOutcome(request.before, None, None, files_done)
    try:
        rewound = steps.conversation(request.before)
    except HarnessError as exc:
        if files_done is None:
            raise
        back = steps.files_back()  # nothing is rewound, then: the files go back
        raise RestoreFailed(
            f"The conversation could not be rewound ({exc}); the files were put back as "
            f"they were ({back.changed} paths), so nothing was rewound.",
            rolled_back=True,
        ) from None
    if files_done is not None:
        steps.conversation_done(files_done, rewound.fork_id)
    return RewindOutcome(request.before, list(rewound.messages), rewound.fork_id, files_done)


@dataclass
class Opened:
    """What :func:`at_open` found: the object store it opened (for the workspace keeper:
    no second connection; None when it could not be opened), the lines to show, and a
    rewind of the files left for the user (paths changed since)."""

    objects: ObjectStore | None = None
    said: tuple[str, ...] = ()
    interrupted: Interrupted | None = None


def at_open(store: Store, memory_dir: Path, session_id: str, project: Path, *,
            resumed: bool, interactive: bool) -> Opened:
    """At the open of a session (its lease held, before its context is read): see the
    module doc. ``resumed``: an existing session (a new one has no conversation to roll
    forward, and opens nothing when no rewind of the project's files is pending).
    ``interactive`` (the REPL): a rewind of the files left for the user is answered (and
    said); otherwise it is refused, :class:`UsageError` naming the commands that end it."""
    from actors.workspace import journal_path

    pending_files = journal_path(memory_dir, project).exists()
    if not (resumed or pending_files):
        return Opened()
    from actors.workspace import open_objects, roll_forward

    try:
        objects = open_objects(memory_dir, store)
    except HarnessError:
        return Opened()
    said: list[str] = []
    found: Interrupted | None = None
    try:
        if resumed:
            try:
                rolled = roll_forward(objects, store, session_id)
            except RestoreFailed as exc:
                said.append(str(exc))
            else:
                if rolled is not None:
                    said.append(str(rolled))
        if pending_files:
            try:
                line, found = _files_at_open(objects, store, memory_dir, project)
            except (RestoreFailed, StorageError, OSError) as exc:
                said.append(f"A rewind of the project's files was interrupted, and it could "
                            f"not be taken up now ({exc}); it is tried again at the next "
                            "start.")
            else:
                if line:
                    said.append(line)
            if found is not None:
                if not interactive:
                    raise UsageError(found.refusal())
                said.append(found.refusal(repl=True))
    except BaseException:
        objects.close()
        raise
    return Opened(objects, tuple(said), found)


def _files_at_open(objects: ObjectStore, store: Store, memory_dir: Path,
                   project: Path) -> tuple[str | None, Interrupted | None]:
    """A rewind of the project's files cut short: finished when no path changed since."""
    from actors.workspace import Workspace, settle

    workspace = Workspace(project, memory_dir, objects, protected=[store.memory_dir])
    try:
        return settle(workspace)
    finally:
        workspace.close()

