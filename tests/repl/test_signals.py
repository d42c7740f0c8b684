"""The run's signals before its handlers (repl/signals.py): what comes between the start of
the REPL's event loop and :func:`run_signals` (a new session's first prompt is drawn in
between) is held and acted on by the run, even a signal the loop had queued for the holding
handler when the run's own replaced it. Real signals, sent to this process, on asyncio's
loop (the REPL's: :func:`held` is asyncio's)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import anyio
import pytest

from repl.signals import STOPPING, Held, RunSignals, held, run_signals


@pytest.fixture
def dispositions() -> Iterator[None]:
    """A stopped run leaves its signals ignored (for the process's way out): put them back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, *STOPPING)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def test_what_was_held_is_handed_over_first_and_what_comes_later_follows() -> None:
    kept = Held()
    kept.deliver(signal.SIGHUP)
    kept.deliver(signal.SIGTERM)
    received: list[int] = []
    kept.hand_over(received.append)
    kept.deliver(signal.SIGUSR1)  # the old handler's call, queued before the change
    assert received == [signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1]


async def _run_after(signum: signal.Signals) -> RunSignals:
    """``signum`` sent once the loop runs and held; the run's handlers installed while the
    loop's call of the holding handler is still queued; the run, waiting, stopped by it."""
    kept = held()
    loop = asyncio.get_running_loop()
    woken = loop.create_future()
    os.kill(os.getpid(), signum)  # its byte waits in the loop's wakeup pipe
    loop.call_soon(woken.set_result, None)
    # Next step: this wakes (queued first), the pipe is read, the handler's call queued;
    # the step after: this task goes on (below) before that call is made.
    await woken
    async with run_signals(kept) as run:
        with run.scope, anyio.move_on_after(10):
            await anyio.sleep_forever()
    return run


@pytest.mark.usefixtures("dispositions")
def test_a_signal_that_came_before_the_run_stops_it() -> None:
    run = asyncio.run(_run_after(signal.SIGUSR1))
    assert run.stopped_by == signal.SIGUSR1
    assert run.scope.cancel_called
