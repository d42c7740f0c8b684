"""The terminal in cbreak mode: no echo, no line editing, signals on.

While nothing reads the terminal (the start, a resume's greeting, the ends of a turn) its
cooked mode would echo what is typed into the output and edit it by line, and its line
discipline takes Ctrl-D as end-of-file and drops it: a Ctrl-D pressed while a resumed
session's greeting printed never reached the prompt, which then waited for ever. In cbreak
mode the keys wait, unechoed and as typed, for the next reader (the prompt, or the keys of a
turn). ``ISIG`` stays on, so Ctrl-C is still SIGINT. Used for the whole of the interactive
REPL (:func:`held`) and by :class:`~repl.interactive.keys.TurnKeys` during a turn.

Imports nothing but the standard library: it is entered before the REPL's own imports.
"""

from __future__ import annotations

import contextlib
import termios
from collections.abc import Iterator
from typing import Any


def enter(fd: int) -> list[Any] | None:
    """Put the terminal ``fd`` in cbreak mode; its previous mode (None: not a terminal)."""
    try:
        saved: list[Any] = termios.tcgetattr(fd)
    except termios.error:
        return None
    mode: list[Any] = list(saved)
    mode[3] &= ~(termios.ECHO | termios.ICANON)  # lflag; ISIG stays: Ctrl-C is SIGINT
    cc = list(mode[6])
    cc[termios.VMIN], cc[termios.VTIME] = 1, 0
    mode[6] = cc
    try:
        termios.tcsetattr(fd, termios.TCSANOW, mode)  # TCSANOW: nothing typed is flushed
    except termios.error:
        return None
    return saved


def restore(fd: int, saved: list[Any] | None) -> None:
    """Give the terminal ``fd`` back its mode from before :func:`enter` (keys typed stay)."""
    if saved is not None:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


@contextlib.contextmanager
def held(fd: int) -> Iterator[None]:
    """The terminal ``fd`` in cbreak mode for the block, its mode restored however it ends."""
    saved = enter(fd)
    try:
        yield
    finally:
        restore(fd, saved)
