"""Running a real supervisor in tests: settings against a scripted server, and an event
recorder that can act on events (answer approvals, abort at a chosen moment)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from actors.core.config import Settings
from actors.core.events import ApprovalRequest, Event
from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.settings import settings_for

E = TypeVar("E")
__all__ = ["Recorder", "pid_alive", "running", "settings_for", "wait_for"]


@dataclass
class Recorder:
    """Collects events; ``on_event`` may react (it runs in the consumer task)."""

    approve: bool = True
    on_event: Callable[[Event, Supervisor], Any] | None = None
    events: list[Event] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def record(self, event: Event) -> None:
        self.events.append(event)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_for(self, kind: type[E], match: Callable[[E], bool] = lambda _: True,
                       *, after: int = 0) -> E:
        """The first event of ``kind`` matching ``match`` among ``events[after:]``, waiting
        for it if it has not arrived yet (bound the wait with a timeout in the test)."""
        while True:
            for event in self.events[after:]:
                if isinstance(event, kind) and match(event):
                    return event
            after = len(self.events)
            await self._arrived.wait()


@contextlib.asynccontextmanager
async def running(
    settings: Settings,
    store: SessionStore | None = None,
    recorder: Recorder | None = None,
    **open_kwargs: Any,
) -> AsyncIterator[tuple[Supervisor, Recorder]]:
    """Open a supervisor with a consumer task draining (and reacting to) its events."""
    store = store or SessionStore(settings.memory_dir)
    recorder = recorder or Recorder()
    send, receive = anyio.create_memory_object_stream[Event](1000)
    async with Supervisor.open(settings, store, events=send, **open_kwargs) as supervisor:

        async def consume() -> None:
            async with receive:
                async for event in receive:
                    recorder.record(event)
                    if isinstance(event, ApprovalRequest):
                        if not event.approved:  # a question (else shown only: its answer
                            recorder.approvals.append(event.description)  # is no decision)
                        async with event.reply:
                            await event.reply.send(recorder.approve)
                    if recorder.on_event is not None:
                        recorder.on_event(event, supervisor)

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            try:
                yield supervisor, recorder
            finally:
                send.close()


def wait_for(path: Path, timeout: float = 15) -> str:
    """Block until ``path`` has some content (written by a subprocess); return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False
