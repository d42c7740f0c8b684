"""The checkpoint writer: the only writer of the running session.

Every write of the session (checkpoints, write-ahead records, context replacement, metadata,
forks and rewinds; and, from the REPL, the other sessions it forks, renames or archives) goes
through this actor's inbox as a typed request (:mod:`actors.runtime.write_requests`) and
runs, in arrival order, in a worker thread. Blocking store calls never run on the event
loop, and two writes never interleave. The writable store is this actor's alone: everyone
else reads through its read-only face (:class:`~actors.store.SessionReader`).

Cancellation: a write that has started always finishes (the worker thread is not abandoned),
so a checkpoint is never half-applied by an abort; the caller may stop waiting, the write still
lands. When the writer is cancelled, writes still queued are refused (their callers get
:class:`ActorGone`), never run; a batch of indexing under way finishes in its thread.

The search index follows the checkpoints: a checkpoint commits its messages marked "not yet
indexed", and the writer indexes them between writes (see :func:`run_checkpoint_writer`).

Errors: the store translates its own failures into the hierarchy (a :class:`StorageError` for a
full disk, a :class:`ContextConflict`...); the writer answers with that exception object and
:func:`~actors.core.mailbox.ask` raises it in the caller. Anything else a store operation
raises is a bug, answered as :class:`ActorCrashed`. The writer keeps serving either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.errors import ActorCrashed, HarnessError
from actors.core.mailbox import answer, ask
from actors.core.messages import Message
from actors.core.stored import StoredMessages
from actors.runtime.write_requests import (
    Append,
    Fork,
    MarkProcessGroup,
    MarkStarted,
    ProposeTitle,
    Recover,
    ReplaceContext,
    Rewind,
    SetMetadata,
    WriteRequest,
)
from actors.store import Compaction, Rewound, Store


@dataclass(frozen=True, slots=True)
class Write:
    """A request for the writer, with the stream for its answer. ``taken`` is set as the
    write goes to the worker thread (a caller may go on with other work then)."""

    request: WriteRequest
    reply: MemoryObjectSendStream[Any]  # the answer, or the HarnessError that stopped it
    taken: anyio.Event | None = None


def perform(store: Store, request: WriteRequest) -> object:
    """Run ``request`` on ``store`` (blocking: in the writer's worker thread); its answer."""
    match request:
        case Append():
            return store.append(request.session_id, request.messages, at=request.at,
                                state=request.state, planned_calls=request.planned_calls,
                                status=request.status)
        case MarkStarted():
            store.mark_started(request.session_id, request.call_ids)
        case MarkProcessGroup():
            store.mark_process_group(request.session_id, request.call_id, request.pgid,
                                     request.leader_start)
        case ReplaceContext():
            store.replace_context(request.session_id, request.messages,
                                  compaction=request.compaction,
                                  expect_prefix=request.expect_prefix)
        case SetMetadata():
            store.update(request.session_id, title=request.title, summary=request.summary,
                         archived=request.archived, state=request.state)
        case ProposeTitle():
            return store.propose_title(request.session_id, request.title)
        case Recover():
            return store.recover(request.session_id)
        case Fork():
            return store.fork(request.session_id, request.at)
        case Rewind():
            return store.rewind(request.session_id, request.before)
        case _:
            assert_never(request)
    return None


INDEX_IDLE_SECONDS = 0.05  # the search index catches up after this long without a write
INDEX_BACKLOG = 64  # ... or at once after a write, when this many messages wait for it
FINAL_INDEX_SECONDS = 1.0  # what catching up may add to a clean exit (the rest waits)


async def run_checkpoint_writer(
    store: Store,
    inbox: MemoryObjectReceiveStream[Write],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve writes until every sender of ``inbox`` is closed.

    Between writes it keeps the search index caught up (:meth:`Store.index_pending`, one
    batch per worker-thread call): once the inbox has been idle for
    :data:`INDEX_IDLE_SECONDS`, or right after a write that left :data:`INDEX_BACKLOG`
    messages unindexed, so a checkpoint never waits for more than one batch. When the
    inbox closes it catches up for at most :data:`FINAL_INDEX_SECONDS`; what is left stays
    marked and is indexed by the next search or run.
    """
    async with inbox:
        task_status.started()
        try:
            while True:
                write = await _next_write(store, inbox)
                if write is None:
                    break
                result: Any
                if write.taken is not None:
                    write.taken.set()
                try:
                    result = await anyio.to_thread.run_sync(perform, store, write.request)
                except HarnessError as exc:  # raised in the caller
                    result = exc
                except Exception as exc:  # a bug in a store operation
                    result = ActorCrashed(
                        f"The checkpoint writer failed ({type(exc).__name__}: {exc})."
                    )
                await answer(write.reply, result)
            with anyio.move_on_after(FINAL_INDEX_SECONDS):
                while store.unindexed and not await _index_some(store):
                    pass
        finally:  # cancelled: writes still queued are refused, so nobody waits for them
            while True:
                try:
                    inbox.receive_nowait().reply.close()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break


async def _next_write(store: Store, inbox: MemoryObjectReceiveStream[Write]) -> Write | None:
    """The next write (None once every sender closed), doing the background work while none
    comes: the search index's batches (:meth:`Store.index_pending`).

    They start once the inbox has been idle :data:`INDEX_IDLE_SECONDS` since the last write
    was answered (while a turn is writing, its writes go first), or at once after a write
    that left :data:`INDEX_BACKLOG` messages unindexed; between the batches of a backlog, a
    write waiting goes first. A write that comes during a batch waits for that batch only."""
    idle_from = anyio.current_time()
    first = True
    while store.unindexed:
        if store.unindexed >= INDEX_BACKLOG:
            if not first:
                taken, write = _waiting(inbox)
                if taken:
                    return write
        elif anyio.current_time() < idle_from + INDEX_IDLE_SECONDS:
            with anyio.move_on_at(idle_from + INDEX_IDLE_SECONDS):
                try:
                    return await inbox.receive()
                except anyio.EndOfStream:
                    return None
            continue  # idle long enough: look again at what is left (a reader may have done it)
        first = False
        await _index_some(store)
        idle_from = anyio.current_time()
    try:
        return await inbox.receive()
    except anyio.EndOfStream:
        return None


def _waiting(inbox: MemoryObjectReceiveStream[Write]) -> tuple[bool, Write | None]:
    """``(True, the write waiting)``, ``(True, None)`` once every sender closed, or
    ``(False, None)`` when no write waits."""
    try:
        return True, inbox.receive_nowait()
    except anyio.WouldBlock:
        return False, None
    except anyio.EndOfStream:
        return True, None


async def _index_some(store: Store) -> bool:
    """One batch of the search index (True: nothing left). A failure (a full disk) leaves
    the marks for later and stops trying until the next write."""
    try:
        return await anyio.to_thread.run_sync(store.index_pending)
    except HarnessError:
        store.unindexed = 0
        return True


class CheckpointClient:
    """How the supervisor and the other actors ask the writer for a write: of the running
    session ``session_id`` unless a method names another."""

    def __init__(self, inbox: MemoryObjectSendStream[Write], session_id: str) -> None:
        self._inbox = inbox
        self.session_id = session_id

    def close(self) -> None:
        """This client will write no more (the writer stops when every client closed)."""
        self._inbox.close()

    async def _ask(self, request: WriteRequest, taken: anyio.Event | None = None) -> Any:
        return await ask(self._inbox, lambda reply: Write(request, reply, taken),
                         "checkpoint writer")

    async def append(
        self,
        messages: Sequence[Message],
        *,
        at: int,
        state: dict[str, Any] | None = None,
        planned_calls: bool = False,
        status: str | None = None,
        taken: anyio.Event | None = None,
    ) -> int:
        """Append ``messages`` to the ``at`` saved ones (:meth:`Store.append`); the number the
        last of them has in the transcript. ``taken``: see :class:`Write`."""
        number: int = await self._ask(
            Append(self.session_id, tuple(messages), at, state, planned_calls, status), taken)
        return number

    async def mark_started(self, call_ids: Sequence[str]) -> None:
        await self._ask(MarkStarted(self.session_id, tuple(call_ids)))

    async def mark_process_group(self, call_id: str, pgid: int,
                                 leader_start: int | None) -> None:
        await self._ask(MarkProcessGroup(self.session_id, call_id, pgid, leader_start))

    async def replace_context(self, messages: Sequence[Message], *, compaction: Compaction,
                              expect_prefix: Sequence[Message]) -> None:
        prefix = (expect_prefix.copy() if isinstance(expect_prefix, StoredMessages)
                  else tuple(expect_prefix))  # a copy: a stored one parses nothing
        await self._ask(ReplaceContext(self.session_id, tuple(messages), compaction, prefix))

    async def set_metadata(self, *, title: str | None = None, summary: str | None = None,
                           archived: bool | None = None, state: dict[str, Any] | None = None,
                           session_id: str | None = None) -> None:
        """Set a title (the user's), a summary, archived or not, the state (of
        ``session_id``, else the running session)."""
        await self._ask(SetMetadata(session_id or self.session_id, title, summary, archived,
                                    state))

    async def propose_title(self, title: str) -> bool:
        applied: bool = await self._ask(ProposeTitle(self.session_id, title))
        return applied

    async def recover(self) -> StoredMessages:
        recovered: StoredMessages = await self._ask(Recover(self.session_id))
        return recovered

    async def fork(self, at: int | None = None, *, session_id: str | None = None) -> str:
        """Copy the session (``session_id``, else the running one) up to message ``at``
        (None: whole); the new id."""
        new_id: str = await self._ask(Fork(session_id or self.session_id, at))
        return new_id

    async def rewind(self, before: int) -> Rewound:
        rewound: Rewound = await self._ask(Rewind(self.session_id, before))
        return rewound
