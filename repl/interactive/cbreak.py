"""The terminal in cbreak mode: no echo, no line editing, signals on.

While nothing reads the terminal (the start, a resume's greeting, the ends of a turn) its
cooked mode would echo what is typed into the output and edit it by line, and its line
discipline takes Ctrl-D as end-of-file and drops it: a Ctrl-D pressed while a resumed
session's greeting printed never reached the prompt, which then waited for ever. In cbreak
mode the keys wait, unechoed and as typed, for the next reader (the prompt, or the keys of a
turn). ``ISIG`` stays on, so Ctrl-C is still SIGINT. Used for the whole of the interactive
REPL (:func:`held`) and by :class:`~repl.interactive.keys.TurnKeys` during a turn.

The end-of-file character is switched off too (``VEOF``, restored with the rest): prompt_toolkit
prints a line above its prompt (a notice, such as a new session's, which arrives after the
prompt is drawn) with the terminal in cooked mode for the moment of the print, and a Ctrl-D
typed in that moment was end-of-file to the line discipline, lost; now it is a key like any
other, read by the prompt once the print is done.

Imports nothing but the standard library: it is entered before the REPL's own imports.
"""

from __future__ import annotations

import contextlib
import os
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
    if termios.VEOF not in (termios.VMIN, termios.VTIME):  # its own slot (Linux, the BSDs)
        cc[termios.VEOF] = bytes([_disabled(fd)])  # Ctrl-D: a key, even in cooked mode
    mode[6] = cc
    try:
        termios.tcsetattr(fd, termios.TCSANOW, mode)  # TCSANOW: nothing typed is flushed
    except termios.error:
        return None
    return saved


def _disabled(fd: int) -> int:
    """The value that switches a control character off (``_POSIX_VDISABLE``: 0 on Linux)."""
    try:
        value = os.fpathconf(fd, "PC_VDISABLE")
    except (OSError, ValueError):
        return 0
    return value if 0 <= value <= 255 else 0


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
