"""What the checkpoint writer is asked to do: one frozen request type per store write.

A request names the session it writes and carries plain data (messages, a state, ids),
never code: the writer (:mod:`actors.runtime.checkpoint_writer`) matches on its type and
runs the one store method it stands for. The answer each gets is said beside it. Pure
data, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.core.messages import Message
from actors.store import Compaction


@dataclass(frozen=True, slots=True)
class Append:
    """Append ``messages`` to the ``at`` saved ones, with the state (``Store.append``).
    Answer: the number the last of them has in the transcript."""

    session_id: str
    messages: tuple[Message, ...]
    at: int
    state: dict[str, Any] | None = None
    planned_calls: bool = False
    status: str | None = None


@dataclass(frozen=True, slots=True)
class MarkStarted:
    """Record that these tool calls are about to start (write-ahead). Answer: None."""

    session_id: str
    call_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MarkProcessGroup:
    """Record the process group a started call runs in (write-ahead). Answer: None."""

    session_id: str
    call_id: str
    pgid: int
    leader_start: int | None


@dataclass(frozen=True, slots=True)
class ReplaceContext:
    """Replace the working context by a compacted one, recording the compaction; refused
    (:class:`ContextConflict`) unless the saved context still starts with
    ``expect_prefix``. Answer: None."""

    session_id: str
    messages: tuple[Message, ...]
    compaction: Compaction
    expect_prefix: Sequence[Message]


@dataclass(frozen=True, slots=True)
class SetMetadata:
    """Set the fields given (None: unchanged): a title (the user's), a summary, archived or
    not, the planning/usage state. Answer: None."""

    session_id: str
    title: str | None = None
    summary: str | None = None
    archived: bool | None = None
    state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ProposeTitle:
    """A title the model proposed, unless the user set one. Answer: whether it was set."""

    session_id: str
    title: str


@dataclass(frozen=True, slots=True)
class Recover:
    """Answer every open tool call, drop stray results. Answer: the context
    (:class:`~actors.core.stored.StoredMessages`)."""

    session_id: str


@dataclass(frozen=True, slots=True)
class Fork:
    """Copy the session (up to message ``at``; None: whole) into a new one. Answer: the
    new session's id."""

    session_id: str
    at: int | None = None


@dataclass(frozen=True, slots=True)
class Rewind:
    """Move the context back to just before user message ``before``, the rest kept as a
    fork. Answer: :class:`~actors.store.Rewound`."""

    session_id: str
    before: int


WriteRequest = (Append | MarkStarted | MarkProcessGroup | ReplaceContext | SetMetadata
                | ProposeTitle | Recover | Fork | Rewind)
"""Every request the checkpoint writer serves."""

__all__ = ["Append", "Fork", "MarkProcessGroup", "MarkStarted", "ProposeTitle", "Recover",
           "ReplaceContext", "Rewind", "SetMetadata", "WriteRequest"]
