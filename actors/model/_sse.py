"""Server-sent events, decoded line by line, as the chat-completions servers really send them.

Besides the standard ``data:`` / ``event:`` / ``id:`` / ``retry:`` fields and ``:`` comments,
older llama.cpp servers report a failure after streaming began as a field of its own,
``error: {...}`` (then ``data: [DONE]``); it is kept as :attr:`SSEEvent.error` instead of
being dropped as an unknown field. A line that is no SSE field at all (HTML, a bare JSON
document) makes the body "not an event stream", which the caller reports.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_KNOWN = {"data", "event", "id", "retry", "error"}


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
        self._event = ""
        self._error: str | None = None

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
        self._data, self._event, self._error = [], "", None
        return event
