"""Every way a request can fail, translated into one :class:`~actors.core.errors.ModelError`.

This is the one boundary where HTTP, transport and stream failures become the harness's
errors. The server's own message is extracted from whatever shape its error body has (OpenAI's
``{"error": {"message"}}``, llama.cpp's with a numeric ``code``, vLLM's older top-level
``{"object": "error", "message"}``, FastAPI's ``{"detail"}``, ollama's native
``{"error": "..."}``, plain text), so the status is said once, not twice. Known permanent
messages (llama.cpp without ``--jinja``, vLLM without ``--enable-auto-tool-choice``, an ollama
model without tool support) are configuration errors that no retry can fix.

Pure: no I/O (the caller fetches the list of models for a :class:`ModelNotFound`).
"""

from __future__ import annotations

import errno
import json
import re
import socket
from typing import Any

from actors.core.errors import (
    ContextExceeded,
    EndpointTimeout,
    EndpointUnreachable,
    InvalidResponse,
    ModelError,
    ModelNotFound,
    RequestRefused,
    ServerFailed,
    ServerMisconfigured,
    StreamBroken,
)
from actors.model._endpoint import Endpoint
from actors.model._http import http

SNIPPET = 160


def snippet(text: str, limit: int = SNIPPET) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_message(payload: Any) -> str:
    """The human message inside an error body of any known shape ('' if there is none)."""
    if isinstance(payload, bytes | bytearray):
        payload = payload.decode("utf-8", errors="replace")
    if isinstance(payload, str):
        text = payload.strip()
        if not text:
            return ""
        try:
            payload = json.loads(text)
        except ValueError:
            return snippet(text)
    if isinstance(payload, dict):
        inner = payload.get("error")
        if isinstance(inner, dict):
            return error_message(inner) or snippet(json.dumps(inner))
        if isinstance(inner, str) and inner.strip():
            return snippet(inner)
        for key in ("message", "detail", "msg"):
            value = payload.get(key)
            if isinstance(value, str) and value.strip():
                return snippet(value)
            if isinstance(value, list) and value:
                return error_message(value[0]) or snippet(json.dumps(value))
        return snippet(json.dumps(payload))
    if payload is None:
        return ""
    return snippet(json.dumps(payload))


def error_status(payload: Any) -> int | None:
    """A numeric ``code`` in an error body (llama.cpp and vLLM put the HTTP status there)."""
    if isinstance(payload, dict):
        inner = payload.get("error")
        for source in (inner, payload):
            if isinstance(source, dict):
                code = source.get("code")
                if isinstance(code, int) and 100 <= code < 600:
                    return code
    return None


# -- known messages ----------------------------------------------------------------------

_CONFIGURATION = [
    (re.compile(r"requires --jinja", re.I),
     "Restart llama-server without --no-jinja (older builds: with --jinja); tool calls "
     "need its Jinja chat templates."),
    (re.compile(r"cannot use tools with stream", re.I),
     "This llama.cpp build cannot stream tool calls: update it and start llama-server "
     "with --jinja."),
    (re.compile(r"enable-auto-tool-choice", re.I),
     "Restart vLLM with --enable-auto-tool-choice --tool-call-parser PARSER (the parser "
     "for your model, e.g. hermes or llama3_json)."),
    (re.compile(r"does not support tools", re.I),
     "Pick a model that supports tool calls (ollama's library marks them 'tools')."),
]
_CONTEXT = re.compile(r"context (size|length|window)|maximum context|too many tokens|"
                      r"exceed_context_size", re.I)
_VLLM_FIGURES = re.compile(r"maximum context length is (\d+) tokens\D+?(\d+) tokens")
# llama.cpp's error to every request in flight when its KV cache, shared by its slots, is full
_KV_CACHE_FULL = re.compile(r"context size has been exceeded", re.I)
KV_CACHE_FULL_HINT = ("llama-server's context (its KV cache, -c) is shared by the requests it "
                      "serves at once, and they filled it: start it with -np 1 (one request "
                      "at a time gets all of it) or a larger -c.")
_MODEL_MISSING = re.compile(r"model .*(not found|does not exist|not loaded)|"
                            r"(no such|unknown) model|model_not_found|try pulling", re.I)


def _configuration_hint(message: str) -> str | None:
    for pattern, hint in _CONFIGURATION:
        if pattern.search(message):
            return hint
    return None


def from_status(
    status: int, body: Any, endpoint: Endpoint, *, retry_after: float | None = None,
    what: str = "",
) -> ModelError:
    """An HTTP error status (or an error sent inside the stream with this status; ``what``
    then says so)."""
    message = error_message(body) or f"no message (HTTP {status})"
    what = what or f"HTTP {status}"
    url = endpoint.base_url
    hint = _configuration_hint(message)
    if hint is not None:
        return ServerMisconfigured(what, message, hint=hint, endpoint=url, status=status)
    if status == 404 and _MODEL_MISSING.search(message) and endpoint.model in message:
        return ModelNotFound(endpoint.model, what, message, hint=endpoint.pull_hint(),
                             endpoint=url, status=status)
    if status == 404:
        hint = endpoint.missing_v1_hint() or ("" if not _MODEL_MISSING.search(message)
                                              else endpoint.pull_hint())
        if _MODEL_MISSING.search(message):
            return ModelNotFound(endpoint.model, what, message, hint=hint, endpoint=url,
                                 status=status)
        return RequestRefused(what, message, hint=hint, endpoint=url, status=status)
    if status in (401, 403):
        return RequestRefused(what, message, endpoint=url, status=status,
                              hint="Check the key in $OPENAI_API_KEY.")
    if status == 429:
        error = ServerFailed(what, message, endpoint=url, status=status)
        error.retry_after = retry_after
        return error
    if status >= 500:
        hint = KV_CACHE_FULL_HINT if _KV_CACHE_FULL.search(message) else ""
        return ServerFailed(what, message, endpoint=url, status=status, hint=hint)
    if _CONTEXT.search(message):
        prompt, context = context_figures(body, message)
        return ContextExceeded(
            what, message, prompt_tokens=prompt, context=context, endpoint=url, status=status,
            hint="The conversation is longer than the server's context: lower "
                 "--max-context-tokens or raise the server's context length.")
    return RequestRefused(what, message, endpoint=url, status=status)


def context_figures(body: Any, message: str) -> tuple[int | None, int | None]:
    """The prompt's tokens and the context's, as the server said them: llama.cpp's
    ``n_prompt_tokens`` and ``n_ctx`` fields, or vLLM's sentence ("maximum context length is
    8192 tokens. However, you requested 9000 tokens")."""
    if isinstance(body, bytes | bytearray | str):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    inner = body.get("error") if isinstance(body, dict) else None
    fields = inner if isinstance(inner, dict) else body if isinstance(body, dict) else {}
    prompt, context = fields.get("n_prompt_tokens"), fields.get("n_ctx")
    if isinstance(prompt, int) and isinstance(context, int):
        return prompt, context
    match = _VLLM_FIGURES.search(message)
    if match:
        return int(match.group(2)), int(match.group(1))
    return None, None


def retry_after_of(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, exception groups opened."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return seen


def from_exception(exc: BaseException, endpoint: Endpoint, *, streaming: bool) -> ModelError:
    """Any exception raised while sending a request or reading its answer.

    ``streaming``: the answer had begun (a transport error then cuts the stream).
    """
    if isinstance(exc, ModelError):
        return exc
    url = endpoint.base_url
    chain = _chain(exc)
    for link in chain:
        if isinstance(link, ConnectionRefusedError) or (
            isinstance(link, OSError) and link.errno == errno.ECONNREFUSED
        ):
            return EndpointUnreachable("connection refused", endpoint=url,
                                       hint=endpoint.unreachable_hint())
        if isinstance(link, socket.gaierror):
            return EndpointUnreachable("unknown host", snippet(str(link.strerror or link)),
                                       endpoint=url, hint="Check the host in --base-url.")
    # Nothing listening (above) is told without importing the HTTP library: the model
    # client asks before it makes its connection (actors.model._connection.listening).
    for link in chain:
        if isinstance(link, http.UnsupportedProtocol | http.InvalidURL):
            return EndpointUnreachable("the URL is not usable", snippet(str(link)),
                                       endpoint=url, hint="Check --base-url.")
        if isinstance(link, http.ConnectTimeout):
            return EndpointUnreachable("no connection", "the server did not accept one in time",
                                       endpoint=url, hint=endpoint.unreachable_hint())
    if isinstance(exc, http.HTTPStatusError):
        response = exc.response
        return from_status(response.status_code, response.content, endpoint,
                           retry_after=retry_after_of(response))
    for link in chain:
        if isinstance(link, http.TimeoutException | TimeoutError):
            return EndpointTimeout("no answer", "the server stopped sending", endpoint=url)
        if isinstance(link, http.TransportError | OSError):
            detail = snippet(str(link)) or type(link).__name__
            if streaming or isinstance(link, http.RemoteProtocolError | http.ReadError):
                return StreamBroken("the connection dropped", detail, endpoint=url)
            return StreamBroken("the connection failed", detail, endpoint=url)
    name = type(exc).__name__
    return ModelError(f"unexpected error ({name})", snippet(str(exc)), endpoint=url)


def stream_error(payload: Any, endpoint: Endpoint, *, body: bool = False) -> ModelError:
    """An error sent inside the stream: ``data: {"error": ...}`` (llama.cpp, vLLM), the
    ``error:`` field (older llama.cpp) or ``{"object": "error"}`` (older vLLM); with ``body``,
    a whole HTTP 200 JSON body that is an error (LM Studio's unknown routes).

    The status is the error's own ``code`` when it has one; an error without one in the
    stream counts as a server error (retried), in a whole body as a refusal (not retried).
    """
    code = error_status(payload)
    where = "in an HTTP 200 answer" if body else "in the stream"
    if code is None:
        return from_status(400 if body else 500, payload, endpoint, what=f"an error {where}")
    return from_status(code, payload, endpoint, what=f"error {code} {where}")


def redirected(status: int, location: str, endpoint: Endpoint) -> RequestRefused:
    """An HTTP redirect (an ``http://`` endpoint follows none): where to point instead."""
    base = location.split("/chat/completions", 1)[0] if location else ""
    hint = f"Use --base-url {base}" if base else "Check --base-url."
    return RequestRefused(f"HTTP {status}", f"redirected to {snippet(location or '?')}",
                          hint=hint, endpoint=endpoint.base_url, status=status)


def broken(what: str, detail: str, endpoint: Endpoint) -> StreamBroken:
    return StreamBroken(what, detail, endpoint=endpoint.base_url)


def invalid(what: str, detail: str, endpoint: Endpoint) -> InvalidResponse:
    return InvalidResponse(what, detail, endpoint=endpoint.base_url)
