"""What the runtime tells the front end, through one memory channel, as things happen.

The front end (REPL, print mode, tests) owns the receiving end. Every event is a small frozen
dataclass, except :class:`ApprovalRequest`, which carries the reply stream for the answer.
Each kind of event has one producer:

- the supervisor: :class:`SessionOpened` (first), :class:`ContextGauge`,
  :class:`CompactionState`, :class:`TitleChanged`, :class:`PlanningChanged`,
  :class:`ApprovalsChanged`, :class:`SettingsChanged`, and the
  :class:`Notice` lines of the session (recovered, compacted, waiting);
- the model client: :class:`TextDelta`, :class:`StreamRestarted` and its retry notices;
- the tool executor: :class:`ToolCallStarted`, :class:`ToolCallFinished` (exactly one per
  call of a batch, whatever its outcome), :class:`ApprovalRequest`.

The front end shows what it learns from them and never reads the supervisor's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream


@dataclass(frozen=True)
class SessionOpened:
    """The session is open: the first event of a run."""

    session_id: str
    title: str
    resumed: bool
    context_messages: int  # messages in the working context now
    recovered_calls: int = 0  # interrupted tool calls answered by recovery on resume
    crashed_before: bool = False  # the last run did not close the session cleanly
    saved_approvals: tuple[str, ...] = ()  # standing approvals of the last run (not in force)
    recent: tuple[tuple[int | None, dict[str, Any]], ...] = ()  # on resume: the end of the
    # context, (message number, message), for the front end to show where the user was
    parent_id: str | None = None  # a fork's parent
    fork_point: int | None = None  # the parent's message it was cut after
    mode: str = ""  # the permission mode in force (the session's, or the command line's)
    model: str = ""  # the model asked


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's answer, as it streams in."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning (thinking), as it streams in: shown dimmed by the
    REPL, never printed by print mode, never sent back to the model as content."""

    text: str


@dataclass(frozen=True)
class ReasoningRevealed:
    """The answer text streamed so far turned out to be reasoning (the server closed a
    thinking block it never opened, ``…</think>``); the real answer follows."""

    text: str  # the reasoning that came with the closing tag, not shown before


@dataclass(frozen=True)
class StreamRestarted:
    """The stream broke and the request is being retried: text shown so far is void."""

    reason: str


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    name: str
    preview: str  # the first line of the result, short
    ok: bool
    output: str = ""  # the whole result as the model gets it (capped), without the data tags
    status: str = ""  # done, failed, denied, interrupted, timed_out, not_started, over_limit


@dataclass(frozen=True)
class Notice:
    """A diagnostic line for the user (retrying, recovered, compacted, limit...)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


@dataclass(frozen=True)
class CompactionState:
    """The background compactor started (``running``) or stopped."""

    running: bool


@dataclass(frozen=True)
class ContextGauge:
    """Estimated context size and the session's cost, after every checkpoint and compaction."""

    tokens: int
    budget: int
    cost_usd: float


@dataclass(frozen=True)
class TitleChanged:
    """The session's title changed: at the first message (``provisional``), when the title
    call answered (``model``), or by ``\\title`` (``user``)."""

    title: str
    source: str = "user"


@dataclass(frozen=True)
class ApprovalsChanged:
    """The standing approvals of this run ("yes, and don't ask again"), as saved."""

    rules: tuple[str, ...]


@dataclass(frozen=True)
class SettingsChanged:
    """``\\mode`` or ``\\model`` changed what is in force for the rest of the session (and
    saved with it)."""

    mode: str
    model: str


@dataclass(frozen=True)
class PlanningChanged:
    """The to-do list changed (and at the start of a run): ``todos`` as ``\\todos`` shows it."""

    todos: str


@dataclass(frozen=True)
class Denied:
    """An approval answered no, with the user's reason, which the model is told."""

    reason: str


@dataclass
class ApprovalRequest:
    """The tool executor asks the user before an edit or a shell command.

    The front end answers ``True`` (approve), ``False`` (deny) or :class:`Denied` (deny, with
    a reason for the model) on ``reply``. If the front end closes ``reply`` without answering,
    the call is denied. If the turn is aborted while the question is open, the executor stops
    waiting and the call is reported as not executed. ``arguments`` are the call's validated
    arguments (for showing a diff or the full command); ``asks`` is the tool's own reason to
    be asked whatever the mode, if it gave one (such a call is never approved in advance).
    ``call_id`` is the call's id, as its :class:`ToolCallStarted` gave it.

    ``approved``: the mode approved the call already (an edit in acceptEdits): nothing is
    asked; the front end shows the change and answers anything once it is shown (the call
    runs whatever the answer), so an edit it approved is never out of sight.
    """

    tool: str
    description: str
    reply: MemoryObjectSendStream[bool | Denied]
    arguments: dict[str, Any] = field(default_factory=dict)
    asks: str = ""
    call_id: str = ""
    approved: bool = False


Event = (
    SessionOpened
    | TextDelta
    | ReasoningDelta
    | ReasoningRevealed
    | StreamRestarted
    | ToolCallStarted
    | ToolCallFinished
    | Notice
    | CompactionState
    | ContextGauge
    | TitleChanged
    | PlanningChanged
    | ApprovalsChanged
    | SettingsChanged
    | ApprovalRequest
)


class EventSink:
    """Where the actors send events: the front end's stream, shared by all of them.

    Once the front end stops listening (its receiving end closed), events are dropped for
    everyone instead of failing the actor that sent them. Sending waits while the stream's
    buffer is full (back-pressure) and is cancellable like any send.
    """

    def __init__(self, stream: MemoryObjectSendStream[Any] | None) -> None:
        self._stream = stream

    @property
    def listening(self) -> bool:
        return self._stream is not None

    async def send(self, event: Event) -> bool:
        """Send ``event``; False when nobody listens (then or any more). An event the
        buffer has room for is handed over without a trip through the event loop (a turn
        sends dozens); a full buffer is waited for, cancellably."""
        if self._stream is None:
            return False
        try:
            try:
                self._stream.send_nowait(event)
            except anyio.WouldBlock:
                await self._stream.send(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._stream = None
            return False
        return True
