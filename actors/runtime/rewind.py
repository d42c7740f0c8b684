"""Rewinding the running session: what is asked, the steps in order, and the step that will
restore project files.

A rewind goes back to just before a message the user typed. Its steps, run by
:meth:`actors.runtime.supervisor.Supervisor.rewind`:

1. **save**: the working context is checkpointed, so nothing in memory is lost;
2. **check** (:func:`check`): what is asked can be done, before anything changes;
3. **conversation** (``Store.rewind``): the session is forked first (everything after the
   rewind point stays resumable in the fork), then its working context moves back; the
   transcript is never rewritten;
4. **files** (:func:`restore_files`): the project's files as they were before that message.
   The workspace keeper can do it (``Supervisor.plan_files_rewind`` and ``rewind_files``,
   as ``harness --rewind ID --to N --files|--both`` does without a model), but the REPL's
   ``\\rewind`` does not ask for it yet, so :func:`check` refuses a request for files before
   step 3 runs; this is where the files half plugs in;
5. **apply**: the supervisor takes the new context (its token estimate starts again) and
   tells the front end.

Cancellation: each store step is one write through the checkpoint writer, which finishes a
write it has started; a cancel between steps 3 and 5 leaves the store rewound and the
context in memory stale, so the supervisor runs steps 3 to 5 shielded.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.core.errors import UsageError
from actors.core.messages import Message

FILES_UNAVAILABLE = (
    "\\rewind in the REPL rewinds the conversation only; to bring the project's files back "
    "too, leave and run harness --rewind ID --to N --both (or --files)."
)


@dataclass(frozen=True)
class RewindRequest:
    """Go back to just before user message ``before`` (numbered as ``\\rewind`` lists)."""

    before: int
    conversation: bool = True
    files: bool = False


@dataclass(frozen=True)
class RewindOutcome:
    """What a rewind did: the context it left, the fork holding what came after."""

    before: int
    messages: list[Message]
    fork_id: str | None
    files_restored: bool = False


def check(request: RewindRequest) -> None:
    """Refuse, before anything changes, what cannot be done."""
    if not (request.conversation or request.files):
        raise UsageError("Nothing to rewind: ask for the conversation, the files, or both.")
    if request.files:
        raise UsageError(FILES_UNAVAILABLE)


async def restore_files(request: RewindRequest) -> bool:
    """Step 4: put the project's files back as they were before ``request.before``.

    Whether files were restored. Never reached today (:func:`check` refuses file requests);
    the workspace keeper's snapshot taken when that message was sent is restored here.
    """
    if request.files:
        raise UsageError(FILES_UNAVAILABLE)
    return False
