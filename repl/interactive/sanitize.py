"""The one function that makes text safe to show on a terminal.

Text the harness did not write (file content, command output, the model's answers and
reasoning, session titles, error messages from servers) could carry terminal control
sequences: clear the screen, set the window title, move the cursor back over a line and
print a fake ``You:`` prompt, hide text, or reorder it with bidirectional overrides. Every
renderer (the REPL, print mode on a terminal) passes such text through :func:`sanitize`
before writing it, and adds its own escape sequences (colour, the status line) afterwards.

What is replaced, by a visible stand-in:

- C0 control characters except newline and tab (``ESC`` becomes ``␛``, ``BEL`` ``␇``, a
  carriage return not followed by a newline ``␍``; each by its Unicode control picture);
- ``DEL`` (``␡``) and the C1 controls U+0080..U+009F (``\\x9b`` is a CSI on some
  terminals), written as ``\\x9b``;
- the bidirectional embedding, override and isolate characters (U+202A..U+202E,
  U+2066..U+2069), written as ``\\u202e``.

``\\r\\n`` becomes ``\\n``. Everything else, including all other Unicode, is kept.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


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
