"""The protocol's stream: newline-delimited JSON-RPC on the process's stdin and stdout.

:func:`claim_stdio` takes file descriptors 0 and 1 for the protocol alone before anything
runs: the protocol reads and writes duplicates of them, and 0 and 1 themselves become
``/dev/null`` and stderr, so that nothing else (a stray ``print``, a tool's child process,
a library's warning) can put a byte on the protocol's stdout or take one from its stdin.

:class:`StdioTransport` is the SDK's message-level transport (``acp._transport.Transport``:
``send``, ``receive``, ``close``) over them. Everything that comes in is hostile until
checked, with the rules of an imported record (``actors.store._hostile``: bounded integers,
finite numbers, at most 100 levels, valid Unicode) and the shape of a JSON-RPC 2.0 message;
what fails is answered with a JSON-RPC error (``-32700`` parse error, ``-32600`` invalid
request, with the request's id when it had a valid one, else null) and the next line is
read: a bad line never ends the agent. A line longer than :data:`LINE_LIMIT` is skipped the
same way. A response to nothing, or a notification that is not valid, is dropped with a
line in the log. Writes wait while the pipe is full (the client reads slowly); once the
client has gone, what is sent is dropped (the sessions are saved all the same).

At the end of the input the running turns are aborted (:attr:`StdioTransport.at_end`) and
every request already read is answered before the end is reported (a prompt: ``cancelled``).

Cancellation: ``receive`` and ``send`` are cancellable awaits; a message is written whole or
not at all (one ``write`` of its line).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any

from actors.core.errors import InvalidRecord
from actors.store import check_values, decode_record

log = logging.getLogger("harness.acp")

LINE_LIMIT = 16 * 1024 * 1024
ANSWER_SECONDS = 30  # at the end of the input, for the requests still running to answer
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_NO_ID = object()  # a notification or a response: nothing to answer
_OVERLONG = b"(a line over the limit)"  # compared by identity


def claim_stdio() -> tuple[int, int]:
    """(the protocol's input, its output): duplicates of fds 0 and 1, which then read
    ``/dev/null`` and write to stderr. The duplicates are not inherited by children.
    :class:`OSError` when the process started without one of them (its number may have been
    given to another file since: the store's, which must not be taken)."""
    if sys.__stdin__ is None or sys.__stdout__ is None:
        raise OSError(errno.EBADF, "it was started without stdin or stdout")
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return protocol_in, protocol_out


class _Writing(asyncio.BaseProtocol):
    """A pipe's flow control: :meth:`drained` waits while the pipe is full."""

    def __init__(self) -> None:
        self._paused = False
        self._waiting: list[asyncio.Future[None]] = []
        self.lost = False

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    async def drained(self) -> None:
        while self._paused and not self.lost:
            future = asyncio.get_running_loop().create_future()
            self._waiting.append(future)
            await future


class _PipeOut:
    """Writing to a pipe (or a socket, a terminal) on the event loop."""

    def __init__(self, transport: asyncio.WriteTransport, writing: _Writing) -> None:
        self._transport = transport
        self._writing = writing

    @property
    def gone(self) -> bool:
        return self._writing.lost or self._transport.is_closing()

    async def write(self, data: bytes) -> None:
        self._transport.write(data)
        await self._writing.drained()

    async def close(self) -> None:
        """Close once what was written has left (the last answers reach the client)."""
        self._transport.set_write_buffer_limits(high=0)  # paused until the buffer is empty
        await self._writing.drained()
        self._transport.close()


class _FileOut:
    """Writing to a regular file (``harness --acp > log``), in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = asyncio.Lock()
        self.gone = False

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    async def write(self, data: bytes) -> None:
        async with self._lock:
            try:
                await asyncio.to_thread(self._write_all, data)
            except OSError:
                self.gone = True

    async def close(self) -> None:
        async with self._lock:  # after the write in progress
            if not self.gone:
                self.gone = True
                os.close(self._fd)


def _feed_from_thread(fd: int, reader: asyncio.StreamReader) -> None:
    """Feed ``reader`` from a file that is not a pipe (``harness --acp < requests``), read in
    a daemon thread until its end."""
    loop = asyncio.get_running_loop()

    def read() -> None:
        try:
            while data := os.read(fd, 65536):
                loop.call_soon_threadsafe(reader.feed_data, data)
        except OSError:
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=read, name="acp-input", daemon=True).start()


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _problem(message: Any) -> tuple[str | None, Any]:
    """(what is wrong with ``message`` as JSON-RPC 2.0, or None; the id to answer with,
    :data:`_NO_ID` for a notification or a response, which are never answered)."""
    if not isinstance(message, dict):
        return "a message must be a JSON object", None
    has_id = "id" in message
    request_id = message.get("id") if has_id and _valid_id(message.get("id")) else None
    if "method" not in message:  # a response to one of ours
        if not has_id or not _valid_id(message["id"]):
            return "a response without a valid id", _NO_ID
        if ("result" in message) == ("error" in message):
            return "a response needs a result or an error, not both", _NO_ID
        return None, _NO_ID
    answer_to = request_id if has_id else _NO_ID
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"', answer_to
    if not isinstance(message["method"], str):
        return "method must be a string", answer_to
    if has_id and not _valid_id(message["id"]) and message["id"] is not None:
        return "id must be a string or an integer", answer_to
    if "params" in message and not isinstance(message["params"], dict | list):
        return "params must be an object", answer_to
    return None, answer_to


class StdioTransport:
    """Checked JSON-RPC messages over the protocol's file descriptors (see the module doc)."""

    def __init__(self, reader: asyncio.StreamReader, out: _PipeOut | _FileOut) -> None:
        self._reader = reader
        self._out = out
        self._unanswered: set[tuple[type, Any]] = set()  # the requests given out, by id
        self._all_answered = asyncio.Event()
        self.at_end: Callable[[], None] | None = None
        """Called when the input ends, before the requests still running are waited for
        (the agent aborts its turns)."""

    @classmethod
    async def open(cls, protocol_in: int, protocol_out: int) -> StdioTransport:
        """Over pipes (an editor's) on the event loop; over regular files, through a
        thread."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        if stat.S_ISREG(os.fstat(protocol_in).st_mode):
            _feed_from_thread(protocol_in, reader)
        else:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                         os.fdopen(protocol_in, "rb", buffering=0))
        out: _PipeOut | _FileOut
        if stat.S_ISREG(os.fstat(protocol_out).st_mode):
            out = _FileOut(protocol_out)
        else:
            transport, writing = await loop.connect_write_pipe(
                _Writing, os.fdopen(protocol_out, "wb", buffering=0))
            out = _PipeOut(transport, writing)
        return cls(reader, out)

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message (dropped once the client has gone)."""
        if self._out.gone:
            return
        line = json.dumps(message, separators=(",", ":"), default=str) + "\n"
        await self._out.write(line.encode("utf-8", "backslashreplace"))
        if "method" not in message and _valid_id(message.get("id")):
            self._unanswered.discard((type(message["id"]), message["id"]))
            if not self._unanswered:
                self._all_answered.set()

    async def receive(self) -> dict[str, Any] | None:
        """The next valid message; None at the end of the input."""
        while True:
            line = await self._line()
            if line is None:
                await self._finish()
                return None
            if not line.strip():
                continue
            message: Any = None
            try:
                if line is _OVERLONG:
                    raise InvalidRecord(f"message: longer than {LINE_LIMIT} bytes")
                message = decode_record(line.decode("utf-8", "surrogateescape"), "message")
                check_values(message, "message")
                problem, answer_to = _problem(message)
            except InvalidRecord as exc:  # answered as a request when it looks like one
                problem = str(exc)
                answer_to = None if message is None else _problem(message)[1]
            if problem is None:
                if answer_to is not _NO_ID and answer_to is not None:  # a request
                    self._unanswered.add((type(answer_to), answer_to))
                    self._all_answered.clear()
                return message  # type: ignore[no-any-return]
            if answer_to is _NO_ID:  # a notification or a response: nobody to answer
                log.warning("a message was dropped: %s", problem)
                continue
            code = PARSE_ERROR if message is None and line is not _OVERLONG else INVALID_REQUEST
            await self._refuse(answer_to, code, problem)

    async def _finish(self) -> None:
        """The input ended: every request read is answered before the end is reported
        (at most :data:`ANSWER_SECONDS`), the running turns aborted first."""
        if self.at_end is not None:
            self.at_end()
        if self._unanswered:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_answered.wait(), ANSWER_SECONDS)

    async def _refuse(self, request_id: Any, code: int, why: str) -> None:
        log.warning("a request was refused: %s", why)
        name = "Parse error" if code == PARSE_ERROR else "Invalid request"
        await self.send({"jsonrpc": "2.0", "id": request_id,
                         "error": {"code": code, "message": f"{name}: {why}"}})

    async def _line(self) -> bytes | None:
        """The next line (a last one without a newline included); a line over the limit
        is read to its end and stands as :data:`_OVERLONG`; None at the end."""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError:
            pass
        while True:  # past the limit: skip to the end of the line
            try:
                await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
                continue
            except asyncio.IncompleteReadError:
                pass
            return _OVERLONG

    async def close(self) -> None:
        """Close the output once what was sent has been written."""
        await self._out.close()
