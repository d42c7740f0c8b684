"""A scripted OpenAI-compatible chat-completions server for tests (real HTTP on loopback).

The server runs a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 in a daemon thread, so it works
the same under trio, asyncio, plain threads or a harness running in another process::

    with ScriptedServer([Reply("hi"), Fail(429), Reply(tool_calls=[ToolCall("ls", "{}")])]) as s:
        client = openai.AsyncOpenAI(base_url=s.base_url, api_key="test", max_retries=0)
        ...
        s.assert_done()

Each chat request consumes one step, in order. Instead of a list, pass ``responder(body) -> step``
for long generated conversations. Streaming responses use chunked transfer encoding, so a
``Drop`` mid-stream is a detectable protocol error on the client (not a clean end of body).

A session's title call (``actors.core.titles``, recognised by its system prompt) never
consumes a step: ``titles=`` answers it (a list of steps or a responder; by default the reply
``Scripted session title``), and it is recorded in ``server.title_requests``, not in
``server.requests``, so a script describes the conversation alone.

``flavour=`` picks the wire format of a real server (``actors.testing.flavours``: ``Ollama()``,
``LlamaCpp()``, ``VLLM()``, each with its quirks as options); the default is OpenAI's own.
A flavour also decides how errors look, which requests the server refuses (an unknown model,
tools without ``--jinja``) and what its other endpoints answer.

Run as a program: ``python -m actors.testing.scripted_server --port 0 --script steps.json
[--flavour ollama]`` prints the base URL as its first stdout line and serves until killed (no
``--script``: echo every prompt).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from actors.core.titles import is_title_request
from actors.testing.flavours import FLAVOURS, Flavour
from actors.testing.steps import (
    JSON,
    STEP_TYPES,
    Drop,
    EndEarly,
    Fail,
    Flood,
    Garbage,
    Hang,
    Reply,
    Responder,
    Step,
    StreamError,
    ToolCall,
)

__all__ = [
    "Drop",
    "EndEarly",
    "Fail",
    "Flood",
    "Garbage",
    "Hang",
    "Reply",
    "ScriptedServer",
    "Step",
    "StreamError",
    "ToolCall",
    "echo_responder",
    "load_script",
    "tool_pairing_errors",
]


DEFAULT_TITLE = "Scripted session title"  # the answer to a title call, unless told


# ------------------------------------------------------------------------------ conversation check


def tool_pairing_errors(messages: Sequence[JSON]) -> list[str]:
    """Check tool-call/result pairing in a chat request's ``messages``; return problems found.

    Every assistant tool call must get exactly one ``tool`` message before the next non-tool
    message, and every ``tool`` message must answer a call that is still open.
    """
    errors: list[str] = []
    pending: dict[str, int] = {}  # open call id -> index of the assistant message
    answered: set[str] = set()
    closed: set[str] = set()

    def close_pending(where: str) -> None:
        for call_id, at in pending.items():
            errors.append(f"tool call {call_id!r} (message {at}) has no tool result {where}")
            closed.add(call_id)
        pending.clear()

    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                del pending[call_id]
                answered.add(call_id)
            elif call_id in answered:
                errors.append(f"duplicate tool result for {call_id!r} at message {i}")
            elif call_id in closed:
                errors.append(f"tool result for {call_id!r} at message {i} comes too late")
            else:
                errors.append(f"orphan tool result {call_id!r} at message {i}: no open call")
            continue
        close_pending(f"before message {i} ({role})")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                call_id = call.get("id")
                if not call_id:
                    errors.append(f"tool call without id in message {i}")
                elif call_id in pending or call_id in answered or call_id in closed:
                    errors.append(f"tool call id {call_id!r} reused in message {i}")
                else:
                    pending[call_id] = i
    close_pending("at end of conversation")
    return errors


# ------------------------------------------------------------------------------- wire formatting

_OPENAI = Flavour()


def _chunks(step: Reply, body: JSON) -> Iterator[JSON]:
    """The ``chat.completion.chunk`` objects of a streamed reply in OpenAI's format."""
    for payload in _OPENAI.payloads(step, body):
        if isinstance(payload, dict):
            yield payload


def _completion(step: Reply, body: JSON) -> JSON:
    """A whole ``chat.completion`` object for a non-streaming request (OpenAI's format)."""
    return _OPENAI.completion(step, body)


# --------------------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.1 keep-alive connection; all state lives on ``self.server.owner``."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""

    def setup(self) -> None:
        super().setup()
        # Small SSE writes + Nagle + delayed ACK would stall each request by ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, add=False)
        with contextlib.suppress(OSError):
            super().finish()

    # -- plumbing

    @property
    def flavour(self) -> Flavour:
        return self.server.owner.flavour

    def _send_json(
        self, status: int, payload: JSON | str, headers: dict[str, str] | None = None
    ) -> None:
        if isinstance(payload, str):  # a plain-text answer (gin's "404 page not found")
            data, content_type = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, content_type = self.flavour.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, self.flavour.error_payload(status, message))

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _write_event(self, payload: JSON | str | bytes) -> None:
        self._write_chunk(payload if isinstance(payload, bytes) else self.flavour.sse(payload))

    def _abort(self) -> None:
        """Close the connection now, without finishing the response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- endpoints

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self) -> None:
        owner = self.server.owner
        path = self._route()
        if path == "/v1/models":
            if owner.models_gate is not None:  # held until the test opens it (or closing)
                while not owner.models_gate.wait(0.05) and not owner._closing.is_set():
                    pass
            self._send_json(200, self.flavour.models_payload(owner.models))
            return
        answer = self.flavour.get(path, owner.models)
        self._send_json(*(answer or self.flavour.not_found("GET", self.path)))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self._route()
        if path != "/v1/chat/completions":
            try:
                other = json.loads(raw or b"{}")
            except ValueError:
                other = {}
            answer = self.flavour.post(path, other if isinstance(other, dict) else {},
                                       self.server.owner.models)
            self._send_json(*(answer or self.flavour.not_found("POST", self.path)))
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            self.server.owner._record_error(f"invalid request body: {exc}")
            self._send_error(400, f"invalid JSON body: {exc}")
            return
        step, problem = self.server.owner._next_step(body, raw)
        if step is None:
            self._send_json(problem[0], problem[1])
        else:
            self._play(step, body, streaming=bool(body.get("stream")))

    def _play(self, step: Step, body: JSON, streaming: bool) -> None:
        closing = self.server.owner._closing
        flavour = self.flavour
        if isinstance(step, Fail):
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            self._send_json(step.status, flavour.error_payload(step.status, step.message),
                            headers)
        elif isinstance(step, Garbage):
            data = step.body.encode()
            self.send_response(step.status)
            self.send_header("Content-Type", step.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif isinstance(step, Reply) and not streaming:
            self._send_json(200, flavour.completion(step, body))
        elif isinstance(step, Reply):
            self._start_stream()
            for n, event in enumerate(flavour.events(step, body)):
                if n and step.chunk_delay and closing.wait(step.chunk_delay):
                    self._abort()
                    return
                self._write_event(event)
            done = flavour.done()
            if done is not None:
                self._write_event(done)
            self._write_chunk(b"")  # the empty chunk terminates the chunked body
        elif isinstance(step, Flood):
            self._flood(step, body)
        elif isinstance(step, StreamError | EndEarly):
            step.reply.request_index = step.request_index
            self._start_stream()
            for event in itertools.islice(flavour.events(step.reply, body), step.after_chunks):
                self._write_event(event)
            if isinstance(step, StreamError):
                for event in flavour.stream_failure(step.status, step.message):
                    self._write_event(event)
            self._write_chunk(b"")
        else:  # Drop or Hang: send a prefix of the reply, then cut off or wait
            prefix = step.after_headers if isinstance(step, Hang) else step.after_chunks > 0
            if prefix:
                step.reply.request_index = step.request_index
                self._send_prefix(step.reply, body, streaming, step.after_chunks)
            if isinstance(step, Hang):
                closing.wait()
            self._abort()

    def _flood(self, step: Flood, body: JSON) -> None:
        """Stream ``step.size`` bytes of one kind, a piece at a time, until the client stops
        reading (then the connection is closed)."""
        reply = Reply(tool_calls=[ToolCall("write_file", "")] if step.kind == "arguments"
                      else [])
        reply.request_index = step.request_index
        flavour = self.flavour
        self._start_stream()
        try:
            if step.one_line:
                self._write_chunk(b"data: ")
                for _ in range(step.size // step.piece):
                    self._write_chunk(b"x" * step.piece)
            else:
                if step.kind == "arguments":  # the call's name and id; its arguments follow
                    opening = next(iter(flavour.tool_call_deltas(reply)))
                    self._write_event(flavour.chunk(reply, body, opening))
                piece = "x" * step.piece
                field = {"text": "content", "reasoning": flavour.reasoning_field}.get(step.kind)
                for _ in range(step.size // step.piece):
                    delta: JSON = ({field: piece} if field is not None else {"tool_calls": [
                        {"index": 0, "function": {"arguments": piece}}]})
                    self._write_event(flavour.chunk(reply, body, delta))
                for event in flavour.finish(reply, body):
                    self._write_event(event)
                done = flavour.done()
                if done is not None:
                    self._write_event(done)
            self._write_chunk(b"")
        except OSError:  # the client stopped reading and closed the connection
            self._abort()

    def _send_prefix(self, reply: Reply, body: JSON, streaming: bool, chunks: int) -> None:
        """Headers plus ``chunks`` SSE events (streaming) or half the body if ``chunks``."""
        if streaming:
            self._start_stream()
            for event in itertools.islice(self.flavour.events(reply, body), chunks):
                self._write_event(event)
            return
        data = json.dumps(self.flavour.completion(reply, body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if chunks:
            self.wfile.write(data[: len(data) // 2])


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Swallow client disconnects; record anything else as a server error."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError) or self.owner._closing.is_set():
            return
        self.owner._record_error(f"server exception: {exc!r}")
        super().handle_error(request, client_address)


class ScriptedServer:
    """A loopback OpenAI-compatible server that answers chat requests from a script.

    ``script`` is a list of steps consumed one per chat request, or ``responder(body) -> step``.
    With ``check_tool_pairing`` a request whose messages fail :func:`tool_pairing_errors` is
    recorded as an error and answered 400, as the real API does. ``flavour`` is the server's
    wire format (default: OpenAI's); ``models`` default to the flavour's.

    A request the flavour's server would refuse before running the model (an unknown model,
    tools without ``--jinja``) is answered as that server does and consumes no step.
    ``models_gate``: ``GET /v1/models`` waits until this event is set (a slow endpoint).
    ``titles``: the answers to title calls, apart from the script (see the module doc).
    """

    def __init__(
        self,
        script: Sequence[Step] | Responder,
        *,
        models: Sequence[str] | None = None,
        check_tool_pairing: bool = False,
        port: int = 0,
        flavour: Flavour | None = None,
        models_gate: threading.Event | None = None,
        titles: Sequence[Step] | Responder | None = None,
    ) -> None:
        self.flavour = flavour or Flavour()
        self._titles: Sequence[Step] | Responder = (
            titles if titles is not None else (lambda _body: Reply(DEFAULT_TITLE))
        )
        self.title_requests: list[JSON] = []
        self.models_gate = models_gate
        self.models = list(models) if models is not None else self.flavour.default_models()
        self.refusals: list[JSON] = []
        self.check_tool_pairing = check_tool_pairing
        self._responder: Responder | None = script if callable(script) else None
        self.steps: list[Step] = [] if callable(script) else list(script)
        self.errors: list[str] = []
        self._requests: list[JSON] = []
        self.raw_requests: list[bytes] = []  # the bytes of each chat request (not titles)
        self._consumed = 0
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._opened = 0  # connections accepted so far
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-openai-server",
            daemon=True,
        )
        self._thread.start()

    # -- lifecycle

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop serving, release hanging handlers and close open connections. Idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._cond:
            connections = list(self._connections)
        for conn in connections:  # wake handler threads blocked on idle keep-alive reads
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- inspection

    @property
    def requests(self) -> list[JSON]:
        """A snapshot list of the JSON bodies of all chat requests received, in arrival order."""
        with self._cond:
            return list(self._requests)

    @property
    def connections_opened(self) -> int:
        """How many connections clients have opened (a client that reuses its connection,
        as HTTP/1.1 keep-alive allows, opens one for many requests)."""
        with self._cond:
            return self._opened

    @property
    def last_request(self) -> JSON:
        """The most recent chat request body; AssertionError if there is none yet."""
        with self._cond:
            if not self._requests:
                raise AssertionError("the scripted server has received no chat request")
            return self._requests[-1]

    @property
    def remaining(self) -> list[Step]:
        """Scripted steps not consumed yet (always empty in responder mode)."""
        with self._cond:
            return self.steps[self._consumed :]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[JSON]:
        """Block until at least ``n`` chat requests arrived; return them. TimeoutError if not.

        Blocking: call from sync code, a worker thread, or ``anyio.to_thread.run_sync``.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"expected {n} requests, got {len(self._requests)}")
            return list(self._requests)

    def wait_for_title_requests(self, n: int, timeout: float = 5.0) -> list[JSON]:
        """Block until at least ``n`` title calls arrived; return them. TimeoutError if not."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.title_requests) >= n, timeout):
                raise TimeoutError(f"expected {n} title requests, got {len(self.title_requests)}")
            return list(self.title_requests)

    def assert_done(self) -> None:
        """Raise AssertionError if steps remain or any error/expectation failure was recorded."""
        with self._cond:
            problems = list(self.errors)
            problems += [
                f"unconsumed step {self._consumed + i}: {step!r}"
                for i, step in enumerate(self.steps[self._consumed :])
            ]
        if problems:
            raise AssertionError("scripted server:\n  " + "\n  ".join(problems))

    # -- called from handler threads

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._cond:
            (self._connections.add if add else self._connections.discard)(conn)
            self._opened += add

    def _record_error(self, message: str) -> None:
        with self._cond:
            self.errors.append(message)

    def _title_step(self, body: JSON) -> tuple[Step | None, tuple[int, JSON | str]]:
        """The answer to a title call (recorded apart from the conversation's requests)."""
        with self._cond:
            index = len(self.title_requests)
            self.title_requests.append(body)
            self._cond.notify_all()
        titles = self._titles
        if callable(titles):
            step: Step = titles(body)
        elif index < len(titles):
            step = titles[index]
        else:
            message = f"unexpected title request {index} (no title step left)"
            self._record_error(message)
            return None, (500, self.flavour.error_payload(500, message))
        return step, (200, {})

    def _next_step(self, body: JSON, raw: bytes) -> tuple[Step | None, tuple[int, JSON | str]]:
        """Record the request and pick its step, or return (None, (status, payload))."""
        if is_title_request(body.get("messages")):
            return self._title_step(body)
        with self._cond:
            index = len(self._requests)
            self._requests.append(body)
            self.raw_requests.append(raw)
            self._cond.notify_all()
            refused = self.flavour.refuse(body, self.models)
            if refused is not None:
                self.refusals.append(body)
                return None, refused
            step: Step | None = None
            if self._responder is None:
                if self._consumed >= len(self.steps):
                    message = f"script exhausted: unexpected request {index} (no step left)"
                    self.errors.append(message)
                    return None, (500, self.flavour.error_payload(500, message))
                step = self.steps[self._consumed]
                self._consumed += 1
        if step is None:
            try:
                step = self._responder(body) if self._responder else None
                if not isinstance(step, STEP_TYPES):
                    raise TypeError(f"responder returned {step!r}, not a step")
            except Exception as exc:
                message = f"responder failed on request {index}: {exc!r}"
                self._record_error(message)
                return None, (500, self.flavour.error_payload(500, message))
        step.request_index = index
        if self.check_tool_pairing and (problems := tool_pairing_errors(body.get("messages", []))):
            message = f"request {index}: invalid conversation: " + "; ".join(problems)
            self._record_error(message)
            return None, (400, self.flavour.error_payload(400, message))
        if step.expect is not None:
            try:
                step.expect(body)
            except Exception as exc:  # AssertionError, or a bug in the check itself
                self._record_error(f"request {index}: expectation failed: {exc!r}")
        return step, (200, {})


# -------------------------------------------------------------------------------------- program


def _step_from_json(item: JSON) -> Step:
    """One step from its JSON form (see :func:`load_script`)."""
    if "fail" in item:
        return Fail(
            int(item["fail"]), item.get("message", "scripted failure"), item.get("retry_after")
        )
    if "drop" in item:
        return Drop(int(item["drop"]))
    if "hang" in item:
        return Hang(after_headers=bool(item["hang"]), after_chunks=int(item.get("after_chunks", 0)))
    if "stream_error" in item:
        return StreamError(int(item["stream_error"]), int(item.get("status", 500)),
                           item.get("message", "scripted failure mid-stream"))
    if "end_early" in item:
        return EndEarly(int(item["end_early"]))
    if "garbage" in item:
        return Garbage(str(item["garbage"]), item.get("content_type", "text/html"))
    calls = [
        ToolCall(c["name"], c.get("arguments", "{}"), c.get("id"))
        for c in item.get("tool_calls", [])
    ]
    usage = (int(item["usage"][0]), int(item["usage"][1])) if item.get("usage") else None
    return Reply(
        item.get("reply", ""),
        calls,
        usage,
        float(item.get("chunk_delay", 0.0)),
        item.get("finish_reason"),
        item.get("reasoning", ""),
    )


def load_script(data: Sequence[JSON]) -> list[Step]:
    """Steps from JSON objects: {"reply": text, "tool_calls": [{"name", "arguments"}],
    "reasoning": text}, {"fail": 500}, {"drop": 2}, {"hang": true}, {"stream_error": 2},
    {"end_early": 2}, {"garbage": "<html>"}."""
    return [_step_from_json(item) for item in data]


def echo_responder(body: JSON) -> Step:
    """Reply with the last user message, for manual poking and load generation."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    return Reply(f"echo: {content if isinstance(content, str) else json.dumps(content)}")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a script (or echo) until killed; print the base URL as the first stdout line."""
    parser = argparse.ArgumentParser(
        prog="python -m actors.testing.scripted_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file with a list of steps (default: echo)")
    parser.add_argument("--flavour", choices=sorted(FLAVOURS), default="openai",
                        help="the server whose wire format to speak (default: openai)")
    args = parser.parse_args(argv)
    script: Sequence[Step] | Responder = echo_responder
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = load_script(json.load(f))
    with ScriptedServer(script, port=args.port, flavour=FLAVOURS[args.flavour]()) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
