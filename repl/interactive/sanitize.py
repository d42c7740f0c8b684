"""The one boundary between text and the terminal: what is written to a terminal passes
through :func:`sanitize`, and what is written as JSON through :func:`json_text`.

Text the harness did not write (file content, command output, the model's answers and
reasoning, session titles, file names the agent made, error messages from servers) could
carry terminal control sequences: clear the screen, set the window title, move the cursor
back over a line and print a fake ``You:`` prompt, hide text, or reorder it with
bidirectional overrides. Every renderer (the REPL, print mode on a terminal) passes such text
through :func:`sanitize` before writing it, and adds its own escape sequences (colour, the
status line) afterwards. The commands that write no escape sequence of their own (the
session commands, ``--rewind``, ``--doctor``, exports) write through :func:`terminal`, which
sanitises everything written to a terminal and nothing written to a pipe or a file.

What is replaced, by a visible stand-in:

- C0 control characters except newline and tab (``ESC`` becomes ``␛``, ``BEL`` ``␇``, a
  carriage return not followed by a newline ``␍``; each by its Unicode control picture);
- ``DEL`` (``␡``) and the C1 controls U+0080..U+009F (``\\x9b`` is a CSI on some
  terminals), written as ``\\x9b``;
- the bidirectional embedding, override and isolate characters (U+202A..U+202E,
  U+2066..U+2069), written as ``\\u202e``.

``\\r\\n`` becomes ``\\n``. Everything else, including all other Unicode, is kept.

JSON keeps the data exact: :func:`json_text` writes those characters as JSON escapes
(``\\u001b``, ``\\u009b``, ``\\u202e``), which a JSON reader turns back into them and a
terminal shows as text, wherever the JSON goes.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from actors.core.controls import TERMINAL_CONTROLS

_UNSAFE = re.compile(f"\r\n|[{TERMINAL_CONTROLS}]")
_UNSAFE_IN_JSON = re.compile(f"[{TERMINAL_CONTROLS}]")  # JSON escapes C0 itself


def _stand_in(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def sanitize(text: str) -> str:
    """``text`` with every terminal control character replaced (see the module doc)."""
    if text.isprintable():  # the common case: nothing to replace (newlines and tabs aren't)
        return text
    return _UNSAFE.sub(_stand_in, text)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def safe_for(stream: TextIO, text: str) -> str:
    """``text`` as it may be written to ``stream``: sanitised for a terminal, else exact."""
    return sanitize(text) if is_terminal(stream) else text


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON (non-ASCII text kept as it is) with every terminal control
    character escaped (``\\u009b``): the same data, safe on a terminal."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if text.isprintable() or not _UNSAFE_IN_JSON.search(text):
        return text
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Sanitising(io.TextIOBase):
    """A terminal's text stream whose writes pass through :func:`sanitize`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(sanitize(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding


def terminal(stream: TextIO) -> TextIO:
    """``stream`` itself, or, when it is a terminal, a stream that sanitises what is
    written to it."""
    if isinstance(stream, _Sanitising) or not is_terminal(stream):
        return stream
    return _Sanitising(stream)  # type: ignore[return-value]


@contextlib.contextmanager
def through_the_boundary() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` sanitised while they are terminals (a command that
    writes no escape sequence of its own runs inside)."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = terminal(stdout), terminal(stderr)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        sys.stdout, sys.stderr = stdout, stderr
