"""The steps of a scripted conversation: what the scripted server answers to each request.

A step says *what* to answer (a reply, an HTTP error, a cut or hung stream, garbage); the server's
flavour (``actors.testing.flavours``) says *how* a real server puts it on the wire. Both the
server and the flavours import these, and nothing here imports either of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
Expectation = Callable[[JSON], object]

__all__ = [
    "JSON",
    "STEP_TYPES",
    "Drop",
    "EndEarly",
    "Expectation",
    "Fail",
    "Flood",
    "Garbage",
    "Hang",
    "Reply",
    "Responder",
    "Step",
    "StreamError",
    "ToolCall",
]


@dataclass
class ToolCall:
    """A tool call in a scripted reply. ``arguments`` is sent verbatim (may be invalid JSON)."""

    name: str
    arguments: str | JSON = "{}"
    id: str | int | None = None  # None: the flavour's own; an int reproduces servers sending one

    @property
    def arguments_text(self) -> str:
        """The arguments as the string that goes on the wire."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class _Step:
    """Fields shared by all steps: an optional request check and who consumed the step."""

    expect: Expectation | None = field(default=None, kw_only=True, repr=False)
    """Called with the request body; an AssertionError it raises is recorded in server.errors."""
    request_index: int | None = field(default=None, init=False, compare=False)
    """Index into ``server.requests`` of the request that consumed this step (set by server)."""


@dataclass
class Reply(_Step):
    """A successful completion: text and/or tool calls, streamed in several chunks.

    ``usage`` is ``(prompt_tokens, completion_tokens)``; None computes a rough estimate.
    ``chunk_delay`` is slept between streamed chunks. ``finish_reason`` overrides the
    default ("tool_calls" when there are tool calls, else "stop"), e.g. "length".
    ``reasoning`` is the model's thinking, sent the way the flavour's server sends it (a
    field of its own, or ``<think>`` tags in the content).
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    chunk_delay: float = 0.0
    finish_reason: str | None = None
    reasoning: str = ""


@dataclass
class Fail(_Step):
    """An HTTP error with an OpenAI-style JSON error body (and optional Retry-After header)."""

    status: int = 500
    message: str = "scripted failure"
    retry_after: float | None = None


@dataclass
class Drop(_Step):
    """Close the connection abruptly after ``after_chunks`` SSE events (0: before any bytes).

    For a non-streaming request any ``after_chunks > 0`` sends headers and half the body.
    """

    after_chunks: int = 0
    reply: Reply = field(default_factory=lambda: Reply("this reply is cut off before it ends"))


@dataclass
class Hang(_Step):
    """Stop responding until the server is closed.

    With ``after_headers`` the status line, headers and ``after_chunks`` SSE events are sent
    first; otherwise nothing is sent at all.
    """

    after_headers: bool = True
    after_chunks: int = 0
    reply: Reply = field(default_factory=lambda: Reply("this reply never finishes"))


@dataclass
class StreamError(_Step):
    """Fail after ``after_chunks`` events of ``reply``, the way the flavour's server reports an
    error once streaming began (ollama: an empty chunk and the end of the body; llama.cpp:
    ``data: {"error": ...}``; vLLM: the same, then ``[DONE]``)."""

    after_chunks: int = 2
    status: int = 500
    message: str = "scripted failure mid-stream"
    reply: Reply = field(default_factory=lambda: Reply("This answer will be cut off here"))


@dataclass
class EndEarly(_Step):
    """End the body cleanly after ``after_chunks`` events: no finish chunk, no ``[DONE]``."""

    after_chunks: int = 2
    reply: Reply = field(default_factory=lambda: Reply("This answer will be cut off here"))


@dataclass
class Garbage(_Step):
    """Answer with ``body`` as it is (an HTML page, a proxy's message, broken SSE)."""

    body: str = "<html><body><h1>It works!</h1></body></html>"
    content_type: str = "text/html; charset=utf-8"
    status: int = 200


@dataclass
class Flood(_Step):
    """A hostile answer: ``size`` bytes of ``kind`` (``text``, ``reasoning`` or
    ``arguments`` of one tool call), streamed in pieces of ``piece`` bytes as fast as the
    connection takes them, each made as it is sent (the server holds one at a time). With
    ``one_line`` the whole answer is a single ``data:`` line that never ends."""

    size: int = 200 * 1024 * 1024
    kind: str = "text"
    piece: int = 64 * 1024
    one_line: bool = False


Step = Reply | Fail | Drop | Hang | StreamError | EndEarly | Garbage | Flood
STEP_TYPES = (Reply, Fail, Drop, Hang, StreamError, EndEarly, Garbage, Flood)
Responder = Callable[[JSON], Step]
