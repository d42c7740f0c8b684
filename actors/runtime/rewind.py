"""Rewinding the running session: what is asked, and the steps in order.

A rewind goes back to just before a message the user typed: the conversation, the
project's files, or both. Its steps, run by
:meth:`actors.runtime.supervisor.Supervisor.rewind`:

1. **save**: the working context is checkpointed, so nothing in memory is lost;
2. **check** (:func:`check`): what is asked can be done, before anything changes; for the
   files, the plan (``Supervisor.plan_files_rewind``: the diffstat the front end showed)
   must be the one for that message;
3. **files** (the workspace keeper): the project's files as they were when that message was
   sent, journaled (done or not started), the files as they are kept first so the rewind can
   be undone (``\\rewind undo``);
4. **conversation** (``Store.rewind``): the session is forked first (everything after the
   rewind point stays resumable in the fork), then its working context moves back; the
   transcript is never rewritten. If it fails after the files were rewound, the files are
   put back, so nothing was rewound;
5. **apply**: the supervisor takes the new context (its token estimate starts again) and
   tells the front end.

Files first: their restore is the part that can fail half-way, and it is undoable; the
conversation is one store operation. Done or not started, even against kill -9: the files'
record (step 3) is the commit point of both, and a kill between 3 and 4 is rolled forward
at the next open of the session (:func:`finish_interrupted`: the conversation is rewound
then, before anything reads it, and the front end is told in one line).

Cancellation: each step is one request to the actor that owns it (the keeper, the checkpoint
writer), which finishes what it has started; the supervisor runs steps 3 to 5 shielded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.errors import HarnessError, RestoreFailed, UsageError
from actors.core.messages import Message

if TYPE_CHECKING:
    from actors.store import Store
    from actors.workspace import ObjectStore, RewindPlan


@dataclass(frozen=True)
class RewindRequest:
    """Go back to just before user message ``before`` (numbered as ``\\rewind`` lists):
    the conversation, and with ``files`` the files too, by ``files_plan`` (what
    ``plan_files_rewind(before)`` showed)."""

    before: int
    conversation: bool = True
    files: bool = False
    files_plan: RewindPlan | None = None


@dataclass(frozen=True)
class RewindOutcome:
    """What a rewind did: the context it left, the fork holding what came after, the files
    it restored."""

    before: int
    messages: list[Message]
    fork_id: str | None
    files_restored: int | None = None  # paths changed (None: the files were not asked for)


def check(request: RewindRequest) -> None:
    """Refuse, before anything changes, what cannot be done."""
    if not (request.conversation or request.files):
        raise UsageError("Nothing to rewind: ask for the conversation, the files, or both.")
    if request.files and (request.files_plan is None or request.files_plan.undo
                          or request.files_plan.to != request.before):
        raise UsageError(f"Plan the files' rewind to message {request.before} first "
                         "(plan_files_rewind), so that what changes is shown before it does.")


def finish_interrupted(store: Store, memory_dir: Path,
                       session_id: str) -> tuple[ObjectStore | None, str | None]:
    """At the open of a session (its lease held, before its context is read): finish a
    rewind of both that a kill -9 cut between its files and its conversation (see
    :func:`actors.workspace.roll_forward`). Answers the object store it opened (for the
    workspace keeper to use: no second connection), or None when it cannot be opened (the
    keeper then says snapshots are off), and the line to show (None: nothing to say)."""
    from actors.workspace import open_objects, roll_forward

    try:
        objects = open_objects(memory_dir, store)
    except HarnessError:
        return None, None
    try:
        rolled = roll_forward(objects, store, session_id)
    except RestoreFailed as exc:
        return objects, str(exc)
    except BaseException:
        objects.close()
        raise
    return objects, str(rolled) if rolled is not None else None
