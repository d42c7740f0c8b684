"""The harness's one exception hierarchy.

Every error the harness raises on purpose derives from :class:`HarnessError`. The name says who
caused it: a *usage* error is the user's (bad id, unknown session, locked, archived: the CLI
prints one line and exits 2); a *storage* error is the machine's (disk full, I/O error, damaged
file); a *model* error is the endpoint's; an *actor* error is the harness's own (an actor
stopped without answering, or failed with a bug). Errors are translated into this hierarchy at
one boundary each (``actors.store`` for sqlite3/OS errors, ``actors.model`` for HTTP,
each actor's loop for its own bugs), and cross between actors as exception objects in their
replies, never as text.

::

    HarnessError
     ├── UsageError                    the user asked for something impossible (exit 2)
     │    ├── InvalidSessionId         id not matching [A-Za-z0-9_-]+
     │    ├── SessionNotFound
     │    ├── AmbiguousSessionId       a prefix that more than one session id starts with
     │    ├── SessionArchived          unarchive before resuming
     │    ├── ProjectMismatch          session belongs to another --sandbox-dir
     │    ├── SessionLocked            another process holds the lease
     │    └── InvalidRecord            an import file that is not a session record
     ├── ContextConflict               a checkpoint that does not extend the saved context
     ├── StorageError                  the disk or the database failed (names the cause)
     │    └── CorruptSession           a stored record cannot be read back
     ├── ModelError                    the model endpoint failed (one line, with a hint)
     │    ├── EndpointUnreachable      connection refused, DNS failure, bad URL or scheme
     │    ├── EndpointTimeout          no answer within --llm-timeout
     │    ├── RequestRefused           HTTP 4xx: the request is wrong for this server
     │    │    ├── ModelNotFound       the model is not on the server (names those that are)
     │    │    └── ContextExceeded     longer than the context the server gives a request
     │    ├── ServerMisconfigured      a known permanent server setting (llama.cpp --jinja, ...)
     │    ├── ServerFailed             HTTP 5xx or 429 after the retries
     │    ├── StreamBroken             the stream was cut or ended without a finish_reason
     │    └── InvalidResponse          an HTTP 200 body that is not a chat-completions answer
     ├── LimitReached                  a --max-* limit stopped the turn
     ├── ToolFailed                    a tool could not do what the model asked (a result)
 ├── RestoreFailed                 a rewind could not restore the project's files (says what
 │                                 became of them: put back as they were, or still pending)
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


class AmbiguousSessionId(UsageError):
    """A prefix several session ids start with; the message names them (and their titles)."""

    SHOWN = 8

    def __init__(self, prefix: str, candidates: list[tuple[str, str]]) -> None:
        named = [f"{sid} ({title})" if title else sid for sid, title in candidates[: self.SHOWN]]
        more = len(candidates) - len(named)
        listed = ", ".join(named) + (f" and {more} more" if more > 0 else "")
        super().__init__(
            f"'{prefix}' matches {len(candidates)} sessions: {listed}; type more of the id."
        )
        self.prefix = prefix
        self.candidates = [sid for sid, _ in candidates]


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
    """The model endpoint failed. ``str()`` is the one line the user sees, hint included.

    The parts stay apart for code and tests: ``what`` (``HTTP 500``, ``connection refused``),
    ``detail`` (the server's own message), ``hint`` (what to do), ``attempts`` (how many
    times it happened before the harness gave up), ``status`` (the HTTP status, if any).
    ``retryable`` says whether another attempt may succeed.
    """

    kind = "failed"
    retryable = False
    retry_after: float | None = None  # seconds the server asked to wait (HTTP 429)
    lead = "The model endpoint {endpoint} failed"

    def __init__(
        self,
        what: str,
        detail: str = "",
        *,
        hint: str = "",
        endpoint: str = "",
        status: int | None = None,
        attempts: int = 1,
    ) -> None:
        self.what = what
        self.detail = detail
        self.hint = hint
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts
        super().__init__(self._compose())

    def _compose(self) -> str:
        lead = self.lead.format(endpoint=self.endpoint or "(unknown)") if self.endpoint else ""
        what = self.what + _times(self.attempts)
        text = f"{lead}: {what}" if lead else what[:1].upper() + what[1:]
        if self.detail:
            text += f": {self.detail}"
        text = text.rstrip(". ") + "."
        return f"{text} {self.hint}" if self.hint else text

    def again(self, attempts: int) -> ModelError:
        """The same failure, said to have happened ``attempts`` times."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.attempts = attempts
        HarnessError.__init__(twin, twin._compose())
        return twin


def _times(n: int) -> str:
    if n <= 1:
        return ""
    words = {2: "twice", 3: "three times", 4: "four times", 5: "five times", 6: "six times"}
    return " " + words.get(n, f"{n} times")


class EndpointUnreachable(ModelError):
    """Nothing answers at the endpoint: connection refused, unknown host, a bad URL."""

    kind = "unreachable"
    lead = "Cannot reach the model endpoint {endpoint}"


class EndpointTimeout(ModelError):
    """The endpoint gave no (complete) answer within --llm-timeout."""

    kind = "timeout"
    lead = "The model endpoint {endpoint} gave no answer in time"


class RequestRefused(ModelError):
    """HTTP 4xx: retrying the same request would get the same answer."""

    kind = "refused"
    lead = "The model endpoint {endpoint} refused the request"


class ModelNotFound(RequestRefused):
    """The server does not have the model; ``available`` lists what it has (may be empty)."""

    kind = "unknown model"

    def __init__(
        self,
        model: str,
        what: str,
        detail: str = "",
        *,
        available: list[str] | None = None,
        hint: str = "",
        endpoint: str = "",
        status: int | None = None,
    ) -> None:
        self.model = model
        self.available = list(available or [])
        super().__init__(what, detail, hint=hint, endpoint=endpoint, status=status)

    def with_available(self, available: list[str], hint: str | None = None) -> ModelNotFound:
        """The same error, naming the models the server has (and a better hint)."""
        return ModelNotFound(self.model, self.what, self.detail, available=available,
                             hint=self.hint if hint is None else hint,
                             endpoint=self.endpoint, status=self.status)

    def _compose(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        detail = f": {self.detail}" if self.detail else ""
        text = f"Model '{self.model}' is not available{where} ({self.what}{detail})."
        if self.hint:
            text += f" {self.hint}"
        if self.available:
            shown = ", ".join(self.available[:12])
            more = f" and {len(self.available) - 12} more" if len(self.available) > 12 else ""
            text += f" Models there: {shown}{more}."
        return text


class ContextExceeded(RequestRefused):
    """The request is longer than the context the server gives it; ``prompt_tokens`` and
    ``context`` are the server's figures when it says them (llama.cpp, vLLM)."""

    kind = "context exceeded"

    def __init__(
        self,
        what: str,
        detail: str = "",
        *,
        prompt_tokens: int | None = None,
        context: int | None = None,
        hint: str = "",
        endpoint: str = "",
        status: int | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.context = context
        super().__init__(what, detail, hint=hint, endpoint=endpoint, status=status)

    def with_hint(self, hint: str) -> ContextExceeded:
        """The same error with another hint (one that knows the request)."""
        return ContextExceeded(self.what, self.detail, prompt_tokens=self.prompt_tokens,
                               context=self.context, hint=hint, endpoint=self.endpoint,
                               status=self.status)


class ServerMisconfigured(ModelError):
    """The server says it is not set up for this request (a known, permanent message)."""

    kind = "configuration"
    lead = "The model endpoint {endpoint} is not set up for tool calls"


class ServerFailed(ModelError):
    """HTTP 5xx (or 429) on every attempt."""

    kind = "server error"
    retryable = True


class StreamBroken(ModelError):
    """The answer was cut: the connection dropped or the stream ended before it finished."""

    kind = "broken stream"
    retryable = True
    lead = "The model endpoint {endpoint} broke off its answer"


class InvalidResponse(ModelError):
    """An answer that is not chat completions: a garbage body, a malformed ``data:`` line."""

    kind = "invalid response"
    lead = "The model endpoint {endpoint} sent something that is not a chat-completions answer"


class LimitReached(HarnessError):
    """A --max-turns, --max-tool-calls or --max-cost-usd limit stopped the turn (the message
    says which and what to do)."""


class ToolFailed(HarnessError):
    """A tool could not do what was asked; its message becomes the tool result (never a crash)."""


class RestoreFailed(HarnessError):
    """Restoring the project's files to a snapshot failed (a file that cannot be written, a
    full disk). The message names the path and the cause and says whether the files were
    put back as they were before (``rolled_back``) or the rewind is still pending, to be
    finished at the next start."""

    def __init__(self, message: str, *, rolled_back: bool) -> None:
        super().__init__(message)
        self.rolled_back = rolled_back


class ActorGone(HarnessError):
    """An actor closed its reply stream without answering, or its inbox was closed: it shut
    down or was cancelled. Raised by :func:`actors.core.mailbox.ask` in the caller."""


class ActorCrashed(HarnessError):
    """An actor failed with a bug while serving a request; it answers this instead of a
    result (and goes on serving). The message names the actor and the exception."""
