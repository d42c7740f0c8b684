"""The real llama.cpp server for tests: found, started on a free port, stopped; and a proxy
that records what the harness sends it.

The server and its model live outside the repository: ``$AGENT_HARNESS_LLAMA_SERVER`` (the
``llama-server`` binary, or the directory holding it) and ``$AGENT_HARNESS_LLAMA_MODEL``
(default: ``model.gguf`` beside the binary); without them, ``../shared/llamacpp/`` beside
the repository (beside the main worktree, for a git worktree elsewhere). A server that
cannot be found or started is a skip with its reason, a failure under
``AGENT_HARNESS_TEST_STRICT=1`` (:mod:`tests.support.strict`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.clitools import REPO
from tests.support.ports import free_port
from tests.support.strict import unavailable

SERVER_ENV = "AGENT_HARNESS_LLAMA_SERVER"
MODEL_ENV = "AGENT_HARNESS_LLAMA_MODEL"
START_SECONDS = 60


def _beside_the_repository() -> Path:
    """``../shared/llamacpp`` from the repository, or from the main worktree when this one
    is a git worktree (whose ``.git`` is a file naming ``…/.git/worktrees/NAME``)."""
    here = REPO.parent / "shared" / "llamacpp"
    git = REPO / ".git"
    if here.exists() or not git.is_file():
        return here
    pointer = git.read_text().strip().removeprefix("gitdir:").strip()
    main = Path(pointer).resolve().parent.parent.parent  # .git/worktrees/NAME -> the tree
    return main.parent / "shared" / "llamacpp"


def locate() -> tuple[Path, Path]:
    """The server binary and the model, or a skip (a failure when strict) saying why not."""
    given = os.environ.get(SERVER_ENV)
    binary = Path(given) if given else _beside_the_repository()
    if binary.is_dir():
        binary = binary / "llama-server"
    model = Path(os.environ.get(MODEL_ENV) or binary.parent / "model.gguf")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        unavailable(f"no llama-server at {binary} (set ${SERVER_ENV})")
    if not model.is_file():
        unavailable(f"no model at {model} (set ${MODEL_ENV})")
    return binary, model


class LlamaServer:
    """A running ``llama-server``; :attr:`url` is its root (``/v1`` under it)."""

    def __init__(self, *args: str, log: Path) -> None:
        binary, model = locate()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("wb") as out:
            try:
                self._process = subprocess.Popen(
                    [str(binary), "-m", str(model), "--alias", "tiny-gemma4", "--host",
                     "127.0.0.1", "--port", str(self.port), "--threads", "1", *args],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            except OSError as exc:
                unavailable(f"llama-server cannot run here: {exc}")
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                lines = self.log.read_text(errors="replace").strip().splitlines()
                unavailable(f"llama-server exited ({self._process.returncode}): "
                            f"{lines[-1] if lines else 'no output'}")
            with (contextlib.suppress(OSError),
                  urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer):
                if answer.status == 200:
                    return
            time.sleep(0.05)
        self.stop()
        unavailable(f"llama-server did not answer /health within {START_SECONDS} s")

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def special_pieces(self, text: str, specials: frozenset[str]) -> list[str]:
        """The special tokens the server finds in ``text`` (parsed as a prompt is), in order."""
        pieces = self.post("/tokenize", {"content": text, "parse_special": True,
                                         "with_pieces": True})["tokens"]
        return [p["piece"] for p in pieces
                if isinstance(p["piece"], str) and p["piece"] in specials]

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@contextlib.contextmanager
def llama_server(*args: str, log: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(*args, log=log)
    try:
        yield server
    finally:
        server.stop()


class RecordingProxy:
    """A TCP proxy in front of ``upstream`` (a port on 127.0.0.1) that keeps every byte its
    clients send; :meth:`chat_requests` are the chat requests among them, in order."""

    def __init__(self, upstream: int) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._sent: list[list[tuple[int, bytes]]] = []  # per connection: (order, bytes)
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []  # closed with the proxy
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self._upstream))
            record: list[tuple[int, bytes]] = []
            with self._lock:
                self._sent.append(record)
                self._sockets += [client, upstream]
            for pump in (threading.Thread(target=self._pump, args=(client, upstream, record),
                                          daemon=True),
                         threading.Thread(target=self._pump, args=(upstream, client, None),
                                          daemon=True)):
                self._threads.append(pump)
                pump.start()

    def _pump(self, source: socket.socket, sink: socket.socket,
              record: list[tuple[int, bytes]] | None) -> None:
        try:
            while data := source.recv(65536):
                if record is not None:
                    with self._lock:
                        record.append((next(self._order), data))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the ``POST …/chat/completions`` requests, in the order sent."""
        found: list[tuple[int, dict[str, Any]]] = []
        with self._lock:
            streams = [list(record) for record in self._sent]
        for record in streams:
            data = b"".join(chunk for _, chunk in record)
            starts = list(itertools.accumulate(len(chunk) for _, chunk in record))
            at = 0
            while (end := data.find(b"\r\n\r\n", at)) >= 0:
                head = data[at:end].decode("latin-1").split("\r\n")
                fields = dict(line.split(":", 1) for line in head[1:] if ":" in line)
                length = int({k.lower(): v for k, v in fields.items()}.get(
                    "content-length", "0"))
                body = data[end + 4 : end + 4 + length]
                order = record[next(i for i, s in enumerate(starts) if s > at)][0]
                if head[0].startswith("POST ") and "/chat/completions" in head[0]:
                    found.append((order, json.loads(body)))
                at = end + 4 + length
        return [body for _, body in sorted(found, key=lambda item: item[0])]

    def close(self) -> None:
        """Close the listener and every connection, and wait for the threads."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() waiting on it
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(5)
        for sock in sockets:
            sock.close()
