"""Blocking work in a worker thread that a cancellation abandons at once.

``anyio.to_thread.run_sync`` waits for the thread to finish even when the caller is cancelled,
so a long directory walk or a read of a huge file would hold up Ctrl-C, Esc, SIGTERM and
``--tool-timeout``. :func:`run_stoppable` runs ``function(stop)`` with
``abandon_on_cancel=True``: the caller's cancellation returns at once, and ``stop`` is set, so
the function, which calls ``stop.check()`` between bounded pieces of work, ends soon after on
its own (its ``finally`` blocks close what it opened). Its result is then dropped.

Pure-Python work holds the GIL only in short slices, so it never freezes the event loop. A
regular-expression match does not release it: matching runs in the grep worker process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

T = TypeVar("T")


class Abandoned(Exception):
    """Raised by :meth:`Stop.check` in a thread whose caller has gone."""


class Stop:
    """Set when the caller of :func:`run_stoppable` was cancelled."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def check(self) -> None:
        """Raise :class:`Abandoned` if the caller has gone (call between pieces of work)."""
        if self._event.is_set():
            raise Abandoned


async def run_stoppable(function: Callable[[Stop], T]) -> T:
    """``function(stop)`` in a worker thread; see the module doc for what cancellation does."""
    stop = Stop()
    try:
        return await anyio.to_thread.run_sync(function, stop, abandon_on_cancel=True)
    finally:
        stop.set()
