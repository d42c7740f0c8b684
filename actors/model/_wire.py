"""One streamed chat-completions request on the wire, read as the servers really send it.

The request goes through the HTTP client of the connection, with its headers
(:mod:`actors.model._connection`); an HTTP error status is translated here, and the body is
read here, line by line, as server-sent events (:mod:`actors.model._sse`), so that nothing
a server sends can surprise the reader:

- ``data: [DONE]`` ends the stream; so does the end of the body. Either way, a stream without
  a ``finish_reason`` was cut (ollama ends its body that way when it fails midway; older
  llama.cpp sends an ``error:`` field and then ``[DONE]``): :class:`StreamBroken`.
- ``data: {"error": ...}`` (llama.cpp, vLLM), the ``error:`` field (older llama.cpp) and
  ``{"object": "error"}`` (older vLLM) are the server's errors, classified by their code.
- A ``data:`` line that is not JSON, or a 200 body that is neither an event stream nor a JSON
  completion (an HTML page, a proxy's message), is :class:`InvalidResponse`, never an answer.
- A JSON body (a server that ignores ``stream``) is taken as the whole completion.
- An answer larger than the assembly's ``limit`` (``--max-answer-bytes`` of text, reasoning
  and tool-call arguments) is cut as the bytes arrive: reading stops, the connection is
  closed, and the answer ends as if at the model's output limit, marked ``over_limit``. So
  does a line, or an event's data, longer than twice that (a server that never ends one):
  nothing a server sends makes the harness hold more than a few times the limit.

Every exception becomes a :class:`~actors.core.errors.ModelError` (see
:mod:`actors.model._classify`). Cancellation: the response is closed in a shielded, bounded
cleanup; nothing is left reading.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

from actors.core.errors import ModelError
from actors.model._assembly import Assembly
from actors.model._body import Body
from actors.model._classify import (
    broken,
    from_exception,
    from_status,
    invalid,
    redirected,
    retry_after_of,
    snippet,
    stream_error,
)
from actors.model._connection import Connection
from actors.model._endpoint import Endpoint
from actors.model._http import http
from actors.model._reasoning import Piece
from actors.model._sse import NotAnEventStream, SSEDecoder, SSEEvent, SSELines
from actors.model._timeouts import Timeouts, Watch

OnPiece = Callable[[Piece], Awaitable[None]]
CLOSE_SECONDS = 2
DRAIN_SECONDS = 0.25  # what reading the body's end after [DONE] may take ...
DRAIN_READS = 16  # ... and how many reads it may make
MAX_JSON_BODY = 16 * 1024 * 1024
JOINED_BODY = 1024 * 1024  # bytes: a request body up to this size is sent joined
LINE_SLACK = 64 * 1024  # what a line may hold beyond twice the answer's limit (its JSON)


async def stream_chat(
    connection: Connection,
    body: Body,
    endpoint: Endpoint,
    assembly: Assembly,
    on_piece: OnPiece,
    timeouts: Timeouts,
) -> None:
    """Send ``body`` (the request's JSON, :mod:`actors.model._body`) and fold the answer
    into ``assembly``; raise ModelError if it fails, :class:`EndpointTimeout` if the server
    kept it waiting longer than ``timeouts`` allow (:mod:`actors.model._timeouts`)."""
    watch = Watch(timeouts)
    with watch.scope:
        await _exchange(connection, body, endpoint, assembly, on_piece, watch)
    if watch.scope.cancelled_caught:
        raise watch.error(endpoint.base_url, assembly.chunks)


async def _exchange(
    connection: Connection,
    body: Body,
    endpoint: Endpoint,
    assembly: Assembly,
    on_piece: OnPiece,
    watch: Watch,
) -> None:
    # Not chat.completions.create(), which would first walk every message and tool schema
    # against its type definitions (~0.16 ms per message, on the event loop), then encode
    # the whole body again: the body arrives encoded, from its pieces, and is sent as its
    # chunks, never joined (a resumed context's body is tens of MB). The length is given, so
    # it goes with Content-Length, not chunked (the HTTP client sends an iterable chunked
    # unless told the length), as every server reads a body. Nothing here retries; a retry
    # of ours sends the body again, and it iterates from its start.
    client = connection.client
    # A body up to JOINED_BODY goes joined, in one write (~0.1 ms to join 500 KB; each
    # chunk sent is a trip through the HTTP stack); a longer one as its chunks.
    content: Body | bytes = bytes(body) if len(body) <= JOINED_BODY else body
    request = client.build_request(
        "POST", connection.chat_url, content=content,
        headers={**connection.headers, "Content-Length": str(len(body))},
    )
    try:
        response = await client.send(request, stream=True)
    except Exception as exc:
        raise from_exception(exc, endpoint, streaming=False) from None
    try:
        if response.status_code >= 400:
            await response.aread()
            raise from_status(response.status_code, response.content, endpoint,
                              retry_after=retry_after_of(response))
        if 300 <= response.status_code < 400:  # an http:// endpoint follows no redirect
            raise redirected(response.status_code, response.headers.get("location", ""),
                             endpoint)
        await _read(response, endpoint, assembly, on_piece, watch)
    except ModelError:
        raise
    except Exception as exc:
        raise from_exception(exc, endpoint, streaming=True) from None
    finally:
        with anyio.move_on_after(CLOSE_SECONDS, shield=True):
            await response.aclose()


async def _read(
    response: http.Response, endpoint: Endpoint, assembly: Assembly, on_piece: OnPiece,
    watch: Watch,
) -> None:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type.endswith("json"):
        await _read_json(response, content_type, endpoint, assembly, on_piece)
        return
    decoder = SSEDecoder()
    lines = SSELines()
    done = cut = False
    reads = response.aiter_bytes()
    try:
        while True:
            watch.waiting()
            try:
                data = await anext(reads)
            except StopAsyncIteration:
                break
            # Every line of one read is handled at once, and what it shows is passed on as
            # one piece of each kind: a server's burst of small chunks is one event for the
            # front end, not one each (and one trip through the event loop each).
            pieces: list[Piece] = []
            failure: ModelError | None = None
            try:
                done = any(_line(line, decoder, content_type, endpoint, assembly, pieces)
                           for line in lines.feed(data))
            except ModelError as exc:  # what came before a server's error is shown first
                failure = exc
            watch.heard(assembly.chunks > 0)
            for piece in _joined(pieces):
                await on_piece(piece)
            if failure is not None:
                raise failure
            if done:
                break
            cut = assembly.over_limit or _overlong(assembly, lines, decoder)
            if cut:
                break
        if done:
            await _drain(reads)
    finally:
        aclose = getattr(reads, "aclose", None)
        if aclose is not None:
            with anyio.move_on_after(CLOSE_SECONDS, shield=True):
                await aclose()
    if cut:  # the rest is not read: the answer ends here, as at an output limit
        assembly.cut()
        for piece in assembly.finish():
            await on_piece(piece)
        return
    if not done:
        pieces = []
        for line in lines.close():
            if _line(line, decoder, content_type, endpoint, assembly, pieces):
                break
        else:
            last = decoder.close()
            if last is not None:
                _take(last, endpoint, assembly, pieces)
        for piece in _joined([*pieces, *assembly.finish()]):
            await on_piece(piece)
    else:
        for piece in assembly.finish():
            await on_piece(piece)
    if assembly.finish_reason is None:
        where = f"after {assembly.chunks} chunk{'s' if assembly.chunks != 1 else ''}"
        how = "with [DONE]" if done else "when the body ended"
        raise broken("the stream ended without a finish_reason", f"{how}, {where}", endpoint)


def _overlong(assembly: Assembly, lines: SSELines, decoder: SSEDecoder) -> bool:
    """A line, or an event's data, held unfinished longer than the answer may be."""
    if assembly.limit is None:
        return False
    return max(lines.pending, decoder.pending) > 2 * assembly.limit + LINE_SLACK


def _line(line: str, decoder: SSEDecoder, content_type: str, endpoint: Endpoint,
          assembly: Assembly, pieces: list[Piece]) -> bool:
    """Feed one line of the body; True at ``[DONE]``."""
    try:
        event = decoder.feed(line)
    except NotAnEventStream as exc:
        shown = content_type or "no content type"
        raise invalid("HTTP 200 with a body that is not an event stream",
                      f"{shown}: {snippet(exc.line)!r}", endpoint) from None
    return event is not None and _take(event, endpoint, assembly, pieces)


def _joined(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` with each run of one kind of text joined (``revealed`` stays apart)."""
    if len(pieces) < 2:
        return pieces
    out: list[Piece] = []
    run: list[str] = []
    for piece in pieces:
        if out and piece.kind == out[-1].kind and piece.kind != "revealed":
            run.append(piece.text)
            continue
        if len(run) > 1:
            out[-1] = Piece(out[-1].kind, "".join(run))
        out.append(piece)
        run = [piece.text]
    if len(run) > 1:
        out[-1] = Piece(out[-1].kind, "".join(run))
    return out


async def _drain(reads: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body), so that the connection
    goes back to the pool: a response closed before its body ended takes its connection
    with it, and every request would open a new one (a TLS handshake, for a remote
    endpoint). Bounded in time and reads: a server that keeps the body open after
    ``[DONE]``, or breaks it off, only loses its connection; the answer is complete either
    way, so nothing here is an error."""
    with anyio.move_on_after(DRAIN_SECONDS):
        for _ in range(DRAIN_READS):
            try:
                await anext(reads)
            except Exception:  # its end (StopAsyncIteration), or cut off after [DONE]
                return


def _take(event: SSEEvent, endpoint: Endpoint, assembly: Assembly,
          pieces: list[Piece]) -> bool:
    """Handle one event (what it shows is added to ``pieces``); True at ``[DONE]``."""
    if event.error is not None:  # llama.cpp: "error: {...}"
        raise stream_error(_json_or_text(event.error), endpoint)
    data = event.data.strip()
    if not data:
        return False
    if data == "[DONE]":
        return True
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):
        raise invalid("a malformed data line", repr(snippet(data)), endpoint) from None
    if not isinstance(chunk, dict):
        raise invalid("a data line that is not a JSON object", repr(snippet(data)), endpoint)
    if _is_error(chunk):
        raise stream_error(chunk, endpoint)
    pieces += assembly.add(chunk)
    return False


def _is_error(chunk: dict[str, Any]) -> bool:
    if chunk.get("error") not in (None, "", {}) and not chunk.get("choices"):
        return True
    return chunk.get("object") == "error"


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _read_json(
    response: http.Response, content_type: str, endpoint: Endpoint, assembly: Assembly,
    on_piece: OnPiece,
) -> None:
    raw = b""
    async for part in response.aiter_bytes():
        raw += part
        if len(raw) > MAX_JSON_BODY:
            raise invalid("a JSON body too large for an answer", f"over {MAX_JSON_BODY} bytes",
                          endpoint)
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        raise invalid("HTTP 200 with a body that is not JSON",
                      f"{content_type}: {snippet(raw.decode('utf-8', 'replace'))!r}",
                      endpoint) from None
    if isinstance(payload, dict) and _is_error(payload):
        raise stream_error(payload, endpoint, body=True)
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        raise invalid("HTTP 200 with JSON that is not a chat completion",
                      repr(snippet(json.dumps(payload))), endpoint)
    for piece in assembly.add(payload):
        await on_piece(piece)
    if assembly.over_limit:
        assembly.cut()
    for piece in assembly.finish():
        await on_piece(piece)
    if assembly.finish_reason is None:
        raise broken("a completion without a finish_reason", "", endpoint)
