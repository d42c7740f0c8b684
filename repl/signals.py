"""The process's signals for a whole run, the supervisor's shielded shutdown included.

A run (the REPL, print mode) is wrapped in :func:`run_signals`: SIGINT, SIGTERM, SIGHUP (the
terminal closed, the ssh connection dropped), SIGQUIT and SIGUSR1 are received from before
the session opens until after its shutdown has ended. So no signal can end the harness with
its default action while the shutdown is still stopping a command's process group,
answering open calls and saving the session:

* SIGINT is first offered to :attr:`RunSignals.on_interrupt` (abort the running turn or
  command); when that declines, it stops the run like the others;
* SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 stop the run: :attr:`RunSignals.scope` is cancelled,
  and the supervisor's shutdown runs shielded, as on any exit;
* once the run is stopping, every further signal is ignored (counted in
  :attr:`RunSignals.ignored`) until the shutdown has ended; after it, they stay ignored
  (``SIG_IGN``, set the moment the receiver has let go of them): the process is on its way
  out with the session saved, and a late repeat must not turn its exit status into a death
  by signal.

The REPL draws a new session's first prompt before anyio is imported (docs/decisions.md,
"A new session's first prompt is drawn before anyio is imported"): :func:`held` keeps the
signals that arrive from the moment its event loop runs until :func:`run_signals` takes
them over, so that none has its default action meanwhile. anyio itself is imported by
:func:`run_signals`.

Cancellation: leaving the block stops the signal task; the handlers are restored last.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anyio import CancelScope

STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def _cancel_scope() -> CancelScope:
    import anyio

    return anyio.CancelScope()


class Held:
    """The run's signals, received before :func:`run_signals` runs (:func:`held`)."""

    def __init__(self) -> None:
        self._arrived: list[int] = []
        self._receive: Callable[[int], None] = self._arrived.append

    def deliver(self, signum: int) -> None:
        """A signal came (the loop's handler)."""
        self._receive(signum)

    def hand_over(self, receive: Callable[[int], None]) -> None:
        """From now on ``receive`` gets them, those that came already first. A signal the
        loop had queued for the old handler before its handlers changed still comes here."""
        arrived, self._arrived = self._arrived, []
        self._receive = receive
        for signum in arrived:
            receive(signum)


def held() -> Held:
    """The run's signals received on asyncio's running loop until :func:`run_signals`
    takes them over: give it what this returns."""
    import asyncio

    loop = asyncio.get_running_loop()
    kept = Held()
    for signum in (signal.SIGINT, *STOPPING):
        loop.add_signal_handler(signum, kept.deliver, signum)
    return kept


@dataclass
class RunSignals:
    """What the signals of one run did; the front end sets :attr:`on_interrupt` once its
    supervisor is open."""

    scope: CancelScope = field(default_factory=_cancel_scope)
    on_interrupt: Callable[[], bool] | None = None
    """Called on SIGINT; True when it handled it (a turn aborted), False to stop the run."""
    stopped_by: signal.Signals | None = None
    ignored: int = 0

    @property
    def stopping(self) -> bool:
        return self.stopped_by is not None

    def receive(self, signum: int) -> None:
        """Act on one signal (see the module docstring)."""
        if self.stopping:
            self.ignored += 1
            return
        if signum == signal.SIGINT and self.on_interrupt is not None and self.on_interrupt():
            return
        self.stopped_by = signal.Signals(signum)
        self.scope.cancel()


async def _dispatch(signals: AsyncIterator[int], run: RunSignals) -> None:
    async for signum in signals:
        run.receive(signum)


@asynccontextmanager
async def run_signals(early: Held | None = None) -> AsyncIterator[RunSignals]:
    """Receive the run's signals for the block; run the front end (and the supervisor it
    opens) inside ``with run.scope:`` so that a stopping signal cancels it. ``early``: what
    :func:`held` returned; the signals it received are acted on first (a stopping one
    cancels the scope before the block begins)."""
    import anyio

    run = RunSignals()
    try:
        with anyio.open_signal_receiver(signal.SIGINT, *STOPPING) as signals:
            if early is not None:  # its handlers are replaced by the receiver's now
                early.hand_over(run.receive)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_dispatch, signals, run)
                    try:
                        yield run
                    finally:
                        tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:  # the dispatcher never fails: the block's
                if len(group.exceptions) == 1:  # error, alone
                    raise group.exceptions[0] from None
                raise
    finally:
        if run.stopping:  # from the moment the receiver let go of them (microseconds)
            for signum in (signal.SIGINT, *STOPPING):
                signal.signal(signum, signal.SIG_IGN)
