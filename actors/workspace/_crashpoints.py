"""Crash points: the moments of a snapshot or a rewind where a test's kill -9 lands.

A test that must kill the harness at a known moment (half-way through a rewind's files,
between its files and its conversation, ...) starts it with ``AGENT_HARNESS_TEST_PAUSE_AT=NAME``
(or ``NAME#N``: the N-th time that point is reached). When the process reaches that point it
writes ``at point NAME`` on stderr and blocks for good; the test then sends SIGKILL to the real
process and checks what the next command finds. ``NAME#N~`` blocks only until a SIGINT or
SIGTERM comes (the main thread), has it handled, then goes on: a test's signal lands there.
Without the variable a point costs one environment look-up.

The points: ``snapshot`` (a snapshot's objects are stored, nothing names them yet); the steps
of a rewind of the files (see :mod:`._rewind`): ``rewind-journaled`` (its undo point taken
and its journal written, not recorded yet), ``rewind-recorded`` (recorded, no file written
yet), ``restore`` (after each path a restore has changed: a rewind's, a finish's, a
put-back's), ``rewind-applied`` (every path written, the journal not removed yet),
``put-back-recorded`` (a put-back recorded, no file written yet); ``rewind-between`` (a
rewind of both: its files are rewound and recorded, its conversation not yet),
``roll-forward`` and ``roll-forward-rewound`` (finishing an interrupted rewind of both:
before, and after, its conversation is rewound; its record not yet written).
"""

from __future__ import annotations

import os
import signal
import time

ENV = "AGENT_HARNESS_TEST_PAUSE_AT"
_reached: dict[str, int] = {}


def reached(name: str) -> None:
    """Block here for good, saying so on stderr, when the test asks for this point."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition("#")
    if point != name:
        return
    count = _reached[name] = _reached.get(name, 0) + 1
    until_signal = nth.endswith("~")
    if count != int(nth.rstrip("~") or 1):
        return
    if until_signal:
        # Blocked from before the line until it is taken: a signal that came between the
        # line and a pause would be handled before the pause, which would then wait for good.
        stopping = {signal.SIGINT, signal.SIGTERM}
        before = signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
        try:
            os.write(2, f"at point {name}\n".encode())
            came = signal.sigwaitinfo(stopping)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
        signal.raise_signal(came.si_signo)  # its handler runs now
        return
    os.write(2, f"at point {name}\n".encode())
    while True:  # until the test's SIGKILL
        time.sleep(3600)
