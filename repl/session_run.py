"""A session opened for a front end that is driven rather than typed into: print mode and the
ACP agent (``harness --acp``).

:func:`open_session` opens the supervisor (new, resumed or the latest of the project) and
hands its events, one at a time and in order, to the front end's ``handle`` in a task of
their own, so that a turn never waits for the front end unless the events' buffer is full.
:meth:`OpenSession.drain` waits until every event sent so far has been handled (what a turn
showed is out before its result is reported). Leaving the block closes the events' stream;
the events already sent are still handled (at most :data:`DRAIN_SECONDS`), then the
supervisor's shielded shutdown runs.

Errors: opening fails with the supervisor's :class:`~actors.core.errors.HarnessError` (an
unknown, locked or archived session, another project's); ``handle`` must not raise.

Cancellation: cancelling the block cancels the turn running in it and the handler's task;
the supervisor's shutdown runs shielded and bounded as on any exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.config import Settings
from actors.core.events import Event
from actors.runtime.supervisor import Supervisor
from actors.store import Store

DRAIN_SECONDS = 1
EVENTS_BUFFER = 256

Handler = Callable[[Event], Awaitable[None]]


@dataclass
class _Barrier:
    """Passed through the events' stream: set once every event before it was handled."""

    reached: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class OpenSession:
    """The open session: its supervisor (the front end's commands) and the events' stream."""

    sup: Supervisor
    _events: MemoryObjectSendStream[Event | _Barrier]

    async def drain(self) -> None:
        """Wait until every event sent so far has been handled (at once when the stream is
        closed: nothing more will be)."""
        barrier = _Barrier()
        try:
            await self._events.send(barrier)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        await barrier.reached.wait()


async def _pump(
    events: MemoryObjectReceiveStream[Event | _Barrier], handle: Handler, drained: anyio.Event
) -> None:
    try:
        async with events:
            async for event in events:
                if isinstance(event, _Barrier):
                    event.reached.set()
                else:
                    await handle(event)
    finally:
        drained.set()


@asynccontextmanager
async def open_session(
    settings: Settings,
    store: Store,
    handle: Handler,
    *,
    resume: str | None = None,
    continue_latest: bool = False,
    new_id: str | None = None,
) -> AsyncIterator[OpenSession]:
    """Open the session (see the module doc) and yield it; ``new_id``: the id of a new
    session (None: a fresh one)."""
    send, receive = anyio.create_memory_object_stream[Event | _Barrier](EVENTS_BUFFER)
    drained = anyio.Event()
    with send, receive:  # closed however the open ends (the pump closes its end first)
        async with Supervisor.open(settings, store, events=send, resume=resume,
                                   continue_latest=continue_latest, new_id=new_id) as sup, \
                anyio.create_task_group() as tg:
            tg.start_soon(_pump, receive, handle, drained)
            try:
                yield OpenSession(sup, send)
            finally:
                send.close()  # the events sent so far are still handled (a notice of the end)
                with anyio.move_on_after(DRAIN_SECONDS, shield=True):
                    await drained.wait()
                tg.cancel_scope.cancel()
