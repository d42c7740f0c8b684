"""What the output can do: a terminal or not, colour or not, its size; and the few styles
the REPL writes itself.

Colour follows the conventions: none when the output is not a terminal, when ``NO_COLOR`` is
set to anything non-empty (https://no-color.org) or when ``TERM`` is ``dumb``. Without colour
no SGR escape sequence is written at all (no bold, no dim either). The status line and the
other cursor movements need a terminal, not colour.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import TextIO

RESET = "\x1b[0m"
STYLES = {
    "dim": "\x1b[2m",
    "bold": "\x1b[1m",
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "cyan": "\x1b[36m",
}
DIM, UNDIM = STYLES["dim"], "\x1b[22m"


def wants_colour(out: TextIO) -> bool:
    """Whether escape sequences for colour and emphasis may be written to ``out``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


@dataclass
class Capabilities:
    """What the REPL's output is (decided once at start)."""

    tty: bool
    colour: bool

    @classmethod
    def of(cls, out: TextIO) -> Capabilities:
        try:
            tty = out.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(tty=tty and os.environ.get("TERM") != "dumb", colour=wants_colour(out))

    def style(self, name: str, text: str) -> str:
        """``text`` in a style (see :data:`STYLES`), or as it is without colour."""
        if not self.colour or not text:
            return text
        return STYLES[name] + text + RESET


def size() -> os.terminal_size:
    """The terminal's columns and lines (80x24 when unknown)."""
    return shutil.get_terminal_size((80, 24))
