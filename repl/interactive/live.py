"""The bottom of the screen while a turn runs: the lines not final yet, and the status line.

Output that is final (rendered answer blocks, tool lines, notices) is written above the live
region, which is then drawn again below it: erase the region (carriage return, cursor up
over the lines it took, erase to the end of the screen), write the final text, draw the
region. The region is the raw text of the block still streaming (at most the screen's height
less a few lines, so it can always be erased) and one status line, cut to the width. The
cursor stays at the end of the status line, so nothing typed (echo is off during a turn) or
printed by accident lands inside the answer.

Lines are counted by their width in cells (wide characters count two), as the terminal wraps
them; a terminal resized during a turn may leave a stray line, never lose output. Not
thread-safe: one event loop writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from prompt_toolkit.utils import get_cwidth

from repl.interactive.terminal import size


def cells(text: str) -> int:
    """Width of ``text`` on a terminal, in cells."""
    return sum(get_cwidth(c) for c in text) if not text.isascii() else len(text)


def rows_of(line: str, columns: int) -> int:
    """Rows a line without newlines takes on a terminal ``columns`` wide (at least 1)."""
    width = cells(line)
    return max(1, -(-width // columns))


def fit(text: str, columns: int) -> str:
    """``text`` cut to ``columns`` cells, with ``…`` when cut."""
    if cells(text) <= columns:
        return text
    out, used = [], 0
    for char in text:
        width = get_cwidth(char)
        if used + width > columns - 1:
            break
        out.append(char)
        used += width
    return "".join(out) + "…"


def tail_rows(text: str, columns: int, rows: int) -> str:
    """The end of ``text`` that fits in ``rows`` rows ``columns`` wide (what the live region
    shows of a block taller than the screen; the block is written whole once final)."""
    lines = text.split("\n")
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        need = rows_of(line, columns)
        if used + need > rows:
            room = rows - used
            if room > 0:
                kept.append(line[len(line) - room * columns:] if line.isascii() else
                            line[-(room * columns) // 2:])
            break
        kept.append(line)
        used += need
    return "\n".join(reversed(kept))


class LiveRegion:
    """See the module doc. ``out`` is looked up at each write (it may be patched)."""

    def __init__(self, out: Callable[[], TextIO], columns: Callable[[], int] | None = None
                 ) -> None:
        self._out = out
        self._columns = columns or (lambda: size().columns)
        self.pending = ""  # raw text of the block still arriving (already sanitised)
        self.status = ""  # the status line, "" for none
        self._drawn_rows = 0  # rows above the status line's row that the region took
        self._drawn = False

    def _erase_code(self) -> str:
        if not self._drawn:
            return ""
        self._drawn = False
        up = f"\x1b[{self._drawn_rows}A" if self._drawn_rows else ""
        return "\r" + up + "\x1b[J"

    def _draw_code(self) -> str:
        if not self.pending and not self.status:
            return ""
        columns = max(self._columns(), 10)
        rows = sum(rows_of(line, columns) for line in self.pending.split("\n")) \
            if self.pending else 0
        self._drawn_rows = rows
        self._drawn = True
        above = self.pending + "\n" if self.pending else ""
        return above + fit(self.status, columns - 1)

    def write(self, text: str) -> None:
        """Write final ``text`` (whole lines) above the region, and draw the region again."""
        out = self._out()
        out.write(self._erase_code() + text + self._draw_code())
        out.flush()

    def draw(self) -> None:
        """Draw the region again (the status or the pending text changed)."""
        out = self._out()
        out.write(self._erase_code() + self._draw_code())
        out.flush()

    def erase(self) -> None:
        """Take the region off the screen (before a question, at the end of a turn)."""
        code = self._erase_code()
        if code:
            out = self._out()
            out.write(code)
            out.flush()
