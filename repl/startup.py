"""The cyclic garbage collector paused while the harness starts.

Starting the REPL imports some 400 modules and builds their classes, functions and tables:
about a hundred collections of the young generations (20-30 ms on this machine's 2 cores)
that find nothing to free, since all of it lives as long as the process. So the collector
is paused from the top of :func:`repl.cli.main` until the start is over (the REPL: its first
prompt is on the screen; every other command: before it runs), and then what the start
built is frozen (:func:`gc.freeze`: never scanned again) and collection goes on as usual.
:func:`resume` is idempotent, and :func:`repl.cli.main` calls it on every way out, so a
caller in the same process (a test) gets the collector back.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Pause the collector for the start (if it runs)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """The start is over: freeze what it built and collect again (once; no-op otherwise)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
