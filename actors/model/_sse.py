"""Server-sent events, decoded line by line, as the chat-completions servers really send them.

Besides the standard ``data:`` / ``event:`` / ``id:`` / ``retry:`` fields and ``:`` comments,
older llama.cpp servers report a failure after streaming began as a field of its own,
``error: {...}`` (then ``data: [DONE]``); it is kept as :attr:`SSEEvent.error` instead of
being dropped as an unknown field. A line that is no SSE field at all (HTML, a bare JSON
document) makes the body "not an event stream", which the caller reports.

:class:`SSELines` cuts the body's bytes into lines as they arrive (``\n``, ``\r\n`` or
``\r``, as the SSE format allows; UTF-8, an invalid byte shown as U+FFFD), so that a read
of the network, however many lines it holds, is handled in one step.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_KNOWN = {"data", "event", "id", "retry", "error"}
_LINE_END = re.compile(r"\r\n|\r|\n")


class SSELines:
    """The lines of an event stream's body, fed its bytes as they are read."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._rest = ""  # the start of a line not ended yet
        self._after_cr = False  # the last read ended with \r: a \n starting the next is its

    @property
    def pending(self) -> int:
        """Characters of a line not ended yet (held until its end comes)."""
        return len(self._rest)

    def feed(self, data: bytes) -> list[str]:
        """The lines completed by ``data`` (without their line endings)."""
        return self._split(self._decoder.decode(data))

    def close(self) -> list[str]:
        """The body ended: the last line, if it had no line ending."""
        lines = self._split(self._decoder.decode(b"", True))
        rest, self._rest = self._rest, ""
        return [*lines, rest] if rest else lines

    def _split(self, text: str) -> list[str]:
        if self._after_cr and text.startswith("\n"):
            text, self._after_cr = text[1:], False
        if not text:
            return []
        self._after_cr = text.endswith("\r")
        text = self._rest + text
        lines = _LINE_END.split(text) if "\r" in text else text.split("\n")
        self._rest = lines.pop()
        return lines


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its ``data`` lines joined by newlines, or an ``error`` field."""

    data: str = ""
    event: str = ""
    error: str | None = None


class NotAnEventStream(ValueError):
    """A line that is not an SSE field: the body is something else (shown in the message)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class SSEDecoder:
    """Feed lines (without their line ending); complete events come back from :meth:`feed`."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._size = 0  # characters in _data
        self._event = ""
        self._error: str | None = None

    @property
    def pending(self) -> int:
        """Characters of the ``data`` lines of an event not dispatched yet."""
        return self._size

    def feed(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(":")
        if not _FIELD.match(name) or (not colon and name not in _KNOWN):
            raise NotAnEventStream(line)  # HTML, bare JSON, plain text
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._size += len(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            self._error = value
        return None  # id, retry and unknown fields carry nothing for chat completions

    def close(self) -> SSEEvent | None:
        """The body ended: an event still being collected is dispatched (servers that omit
        the blank line after the last event)."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data and self._error is None:
            self._event = ""
            return None
        event = SSEEvent("\n".join(self._data), self._event, self._error)
        self._data, self._size, self._event, self._error = [], 0, "", None
        return event
