"""The harness's one exception hierarchy.

Every error the harness raises on purpose derives from :class:`HarnessError`. The name says who
caused it: a *usage* error is the user's (bad id, unknown session, locked, archived: the CLI
prints one line and exits 2); a *storage* error is the machine's (disk full, I/O error, damaged
file); a *model* error is the endpoint's; an *actor* error is the harness's own (an actor
stopped without answering, or failed with a bug). Errors are translated into this hierarchy at
one boundary each (``actors.store`` for sqlite3/OS errors, ``actors.model.client`` for HTTP,
each actor's loop for its own bugs), and cross between actors as exception objects in their
replies, never as text.

::

    HarnessError
     ├── UsageError                    the user asked for something impossible (exit 2)
     │    ├── InvalidSessionId         id not matching [A-Za-z0-9_-]+
     │    ├── SessionNotFound
     │    ├── SessionArchived          unarchive before resuming
     │    ├── ProjectMismatch          session belongs to another --sandbox-dir
     │    ├── SessionLocked            another process holds the lease
     │    └── InvalidRecord            an import file that is not a session record
     ├── ContextConflict               a checkpoint that does not extend the saved context
     ├── StorageError                  the disk or the database failed (names the cause)
     │    └── CorruptSession           a stored record cannot be read back
     ├── ModelError                    the endpoint failed after retries
     ├── LimitReached                  a --max-* limit stopped the turn
     ├── ToolFailed                    a tool could not do what the model asked (a result)
     ├── ActorGone                     an actor stopped without answering (shut down, cancelled)
     └── ActorCrashed                  an actor failed with a bug (the message names it)

``UsageError`` and ``ContextConflict`` also derive from :class:`ValueError`, so scripts written
against the design notes' store (which raised ``ValueError``) keep working.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = 1


class UsageError(HarnessError, ValueError):
    """The user asked for something that cannot be done; the CLI exits 2 without a traceback."""

    exit_code = 2


class InvalidSessionId(UsageError):
    """A session id that does not match ``[A-Za-z0-9_-]+``; refused before any path or query."""

    def __init__(self, session_id: object) -> None:
        shown = repr(session_id)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        super().__init__(f"Invalid session id {shown}: use only letters, digits, '_' and '-'.")


class SessionNotFound(UsageError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"No saved session with id '{session_id}'.")
        self.session_id = session_id


class SessionArchived(UsageError):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"Session '{session_id}' is archived; --unarchive it before resuming."
        )
        self.session_id = session_id


class ProjectMismatch(UsageError):
    def __init__(self, session_id: str, project_root: str) -> None:
        super().__init__(
            f"Session '{session_id}' belongs to another project ({project_root}); "
            "use its original --sandbox-dir."
        )
        self.session_id = session_id
        self.project_root = project_root


class SessionLocked(UsageError):
    """Another process holds the session's lease. Raised at once, never after waiting."""

    def __init__(self, session_id: str, holder: str | None) -> None:
        who = f" ({holder})" if holder else ""
        super().__init__(f"Session '{session_id}' is in use by another process{who}.")
        self.session_id = session_id
        self.holder = holder


class InvalidRecord(UsageError):
    """A file given to import that is not a session record (named in the message)."""


class ContextConflict(HarnessError, ValueError):
    """A checkpoint whose messages do not extend the saved working context.

    Only compaction (and recovery) may replace the context; an ordinary checkpoint may only
    append to it.
    """


class StorageError(HarnessError):
    """The database or the disk failed. The message names the cause ("No space left on device").

    The last acknowledged checkpoint is intact: a failed transaction is rolled back whole.
    """


class CorruptSession(StorageError):
    """A stored session cannot be read back; it is reported by id and never half-loaded."""

    def __init__(self, session_id: str, detail: str) -> None:
        super().__init__(f"Session '{session_id}' is damaged: {detail}")
        self.session_id = session_id


class ModelError(HarnessError):
    """The model endpoint failed after every retry inside --llm-timeout."""


class LimitReached(HarnessError):
    """A --max-turns, --max-tool-calls or --max-cost-usd limit stopped the turn (the message
    says which and what to do)."""


class ToolFailed(HarnessError):
    """A tool could not do what was asked; its message becomes the tool result (never a crash)."""


class ActorGone(HarnessError):
    """An actor closed its reply stream without answering, or its inbox was closed: it shut
    down or was cancelled. Raised by :func:`actors.core.mailbox.ask` in the caller."""


class ActorCrashed(HarnessError):
    """An actor failed with a bug while serving a request; it answers this instead of a
    result (and goes on serving). The message names the actor and the exception."""
