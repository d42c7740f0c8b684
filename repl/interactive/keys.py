"""Keys while a turn runs: Esc interrupts, and text typed ahead is kept for the next prompt.

There is no prompt during a turn, so the terminal would be in cooked mode: keys echoed into
the output, Esc not delivered before Enter. :class:`TurnKeys` puts it in cbreak mode for the
turn (no echo, no line editing; signals stay on, so Ctrl-C still raises SIGINT and takes the
measured path) and reads the keys itself:

- **Esc** alone interrupts the turn, exactly like Ctrl-C (the same ``abort``). A terminal
  sends an Alt-key or an arrow as one burst starting with Esc, so an Esc followed by more bytes
  within :data:`ESC_WAIT` is such a sequence: Alt-Enter adds a new line to the text typed
  ahead, the others are ignored.
- **Text** is kept in :attr:`TurnKeys.draft` (Enter adds a new line, Backspace, Ctrl-U and
  Ctrl-W edit it) and becomes the next prompt's text; it is never sent by itself.
- **Before a question** (an approval), :meth:`TurnKeys.paused` reads whatever was typed ahead
  into the draft and flushes the terminal's input queue, then gives the terminal back to the
  question: nothing typed before the question appeared can answer it.

Cancellation: the reader stops when its task is cancelled; the terminal's mode is restored
in a ``finally`` (without flushing input, so keys typed at the very end reach the prompt).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import termios
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.abc

from repl.interactive import cbreak

ESC_WAIT = 0.05  # seconds: an Esc followed by more within this is a key sequence
_ESC = "\x1b"


class TurnKeys:
    """The keys of one turn on the terminal ``fd``; ``on_escape`` interrupts the turn."""

    def __init__(self, fd: int, on_escape: Callable[[], object],
                 on_draft: Callable[[str], None] = lambda _: None) -> None:
        self._fd = fd
        self._on_escape = on_escape
        self._on_draft = on_draft
        self.draft = ""
        self._saved: list[Any] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._reading: anyio.CancelScope | None = None
        self._resume = anyio.Event()
        self._resume.set()
        self._idle = anyio.Event()  # set while nothing watches the terminal
        self._idle.set()

    # -- the terminal's mode --------------------------------------------------------------

    def _cbreak(self) -> None:
        self._saved = cbreak.enter(self._fd)

    def _restore(self) -> None:
        cbreak.restore(self._fd, self._saved)
        self._saved = None

    # -- reading --------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Read keys until cancelled (paused while a question is asked)."""
        try:
            task_status.started()
            while True:
                await self._resume.wait()
                self._idle = anyio.Event()
                with anyio.CancelScope() as self._reading:
                    self._cbreak()
                    while True:
                        await anyio.wait_readable(self._fd)
                        await self._take(self._read())
                # Only now is the terminal no longer watched: a question's own reader (the
                # event loop has one per descriptor) may be set up.
                self._reading = None
                self._idle.set()
        finally:
            self._reading = None
            self._restore()
            self._idle.set()

    def _read(self) -> str:
        try:
            data = os.read(self._fd, 4096)
        except (BlockingIOError, InterruptedError):
            return ""
        except OSError:  # the terminal went away: nothing more to read
            data = b""
        return self._decoder.decode(data)

    def _pending(self) -> bool:
        return bool(select.select([self._fd], [], [], 0)[0])

    async def _take(self, text: str) -> None:
        """Apply the keys in ``text``; a lone Esc at the end waits for what may follow."""
        while text:
            if text == _ESC:
                with anyio.move_on_after(ESC_WAIT):
                    await anyio.wait_readable(self._fd)
                    text += self._read()
                if text == _ESC:
                    self._on_escape()
                    return
            text = self._key(text)

    def _key(self, text: str) -> str:
        """Apply the first key of ``text``; return the rest."""
        char = text[0]
        if char == _ESC:
            follower = text[1:2]
            if follower in ("\r", "\n"):  # Alt-Enter
                self._edit(self.draft + "\n")
                return text[2:]
            if follower in ("[", "O"):  # CSI or SS3: skip to the final byte
                for index in range(2, len(text)):
                    if "\x40" <= text[index] <= "\x7e":
                        return text[index + 1:]
                return ""
            return text[2:]  # Alt-something: ignored
        if char in ("\r", "\n"):
            self._edit(self.draft + "\n")
        elif char in ("\x7f", "\x08"):
            self._edit(self.draft[:-1])
        elif char == "\x15":  # Ctrl-U
            self._edit("")
        elif char == "\x17":  # Ctrl-W
            kept = self.draft.rstrip(" \t")
            self._edit(kept[: max(kept.rfind(c) for c in " \t\n") + 1])
        elif char == "\t" or char.isprintable():
            self._edit(self.draft + char)
        return text[1:]

    def _edit(self, draft: str) -> None:
        self.draft = draft
        self._on_draft(draft)

    # -- questions ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Give the terminal to a question: keys typed so far are kept in the draft and the
        input queue is flushed, so none of them answers it."""
        self._resume = anyio.Event()
        if self._reading is not None:
            self._reading.cancel()
        await self._idle.wait()
        with contextlib.suppress(OSError):
            while self._pending():
                rest = self._read()
                if not rest:
                    break
                while rest and rest != _ESC:
                    rest = self._key(rest)
                if rest == _ESC:
                    self._on_escape()
        with contextlib.suppress(termios.error):
            termios.tcflush(self._fd, termios.TCIFLUSH)
        self._restore()
        try:
            yield
        finally:
            with contextlib.suppress(termios.error):
                termios.tcflush(self._fd, termios.TCIFLUSH)  # the answer's own leftovers
            self._resume.set()
