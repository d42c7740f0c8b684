"""Tests on the event loop's clock: trio's MockClock, and the same idea for asyncio.

``on_virtual_time(backend)`` is what an ``anyio_backend`` fixture returns to run a test on a
virtual clock that jumps to the next deadline whenever every task is waiting (trio's
``MockClock(autojump_threshold=0)``; :class:`VirtualTimeLoop` for asyncio). A ``sleep(30)``
then takes no real time, a hang guard (``anyio.fail_after``) fires at once instead of after
its real duration, and ``anyio.current_time()`` tells exactly how long something waited.

The clock jumps while a worker thread runs, too (the loop only sees tasks waiting): a test
that waits for threads must not rely on a deadline of the virtual clock meanwhile.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

import trio.testing

BACKENDS = ("asyncio", "trio")


class _JumpingSelector(selectors.BaseSelector):
    """The loop's selector: when nothing is ready and a timer is due later, the clock jumps
    to it instead of waiting. Without a timer it waits for real (for a thread, a socket)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout <= 0:
            return self._real.select(timeout)
        ready = self._real.select(0)
        if not ready:
            self._loop.advance(timeout)
        return ready

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``time()`` is virtual and jumps over idle waits."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


def on_virtual_time(backend: str) -> tuple[str, dict[str, Any]]:
    """The ``anyio_backend`` value that runs a test on ``backend`` with a virtual clock."""
    if backend == "trio":
        return "trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}
    return "asyncio", {"loop_factory": VirtualTimeLoop}
