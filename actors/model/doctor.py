"""``--doctor``'s (and the REPL's ``\\doctor``) checks of the model endpoint, one line each,
with the fix when something is wrong:

- **reachable**: ``GET /v1/models`` answers (or the server answers at all);
- **model**: the model is in the server's list (llama.cpp serves its one model under any
  name; a server that lists nothing leaves it to the next check);
- **tools**: one tiny streamed request with one tool schema is answered (llama.cpp without
  ``--jinja``, vLLM without ``--enable-auto-tool-choice``, an ollama model without tool
  support refuse it);
- **context**: what the server really holds (ollama's ``/api/ps`` after that request loaded
  the model, llama.cpp's ``/props``, vLLM's ``max_model_len``) against
  ``--max-context-tokens``.

Bounded in time: the list and the server's own questions a few seconds each, the tiny request
:data:`REQUEST_SECONDS` (a model being loaded can take that long; the line says so). After an
unreachable endpoint the other checks are not tried (their lines say why). Never raises for
anything the endpoint does. Cancellation: everything stops; the connection is closed,
shielded and bounded.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from actors.core.errors import EndpointUnreachable, ModelError, ModelNotFound
from actors.model._assembly import Assembly
from actors.model._body import EncodedMessages
from actors.model._classify import from_exception
from actors.model._connection import Connection, connect
from actors.model._endpoint import Endpoint, check_base_url, root_url
from actors.model._http import http
from actors.model._preflight import (
    LOOKUP_SECONDS,
    context_warning,
    get_json,
    llamacpp_context,
    ollama_context,
)
from actors.model._reasoning import Piece
from actors.model._timeouts import Timeouts
from actors.model._wire import stream_chat

REQUEST_SECONDS = 60.0
CLOSE_SECONDS = 2
Status = Literal["ok", "problem", "unknown"]
PROBE_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "get_time", "description": "The current time.",
    "parameters": {"type": "object", "properties": {}}}}
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the word OK."}]


@dataclass(frozen=True)
class Finding:
    """One check's result: ``text`` is the line the user reads (the fix included)."""

    check: str
    status: Status
    text: str

    def line(self) -> str:
        mark = {"ok": "ok", "problem": "PROBLEM", "unknown": "?"}[self.status]
        return f"  {self.check + ':':<11}{mark:<8} {self.text}"


async def diagnose(
    *, base_url: str, api_key: str, model: str, budget: int,
    request_seconds: float = REQUEST_SECONDS, http_client: http.AsyncClient | None = None,
) -> list[Finding]:
    """The four findings (see the module docstring); ``request_seconds`` bounds the tiny
    request. ``http_client``: to send through (a test's transport); None makes the
    connection as the model client does."""
    endpoint = Endpoint(base_url, model)
    try:
        check_base_url(base_url)
    except EndpointUnreachable as error:
        return _unreachable(str(error))
    connection = await anyio.to_thread.run_sync(lambda: connect(
        base_url=base_url, api_key=api_key, http_client=http_client))
    try:
        return await _diagnose(connection, endpoint, budget, request_seconds)
    finally:
        with anyio.move_on_after(CLOSE_SECONDS, shield=True):
            await connection.aclose()


def _unreachable(line: str) -> list[Finding]:
    skipped = "not checked: the endpoint cannot be reached."
    return [Finding("reachable", "problem", line),
            *(Finding(check, "unknown", skipped) for check in ("model", "tools", "context"))]


async def _diagnose(connection: Connection, endpoint: Endpoint, budget: int,
                    request_seconds: float) -> list[Finding]:
    listed, problem = await _models(connection, endpoint)
    if isinstance(problem, EndpointUnreachable):
        return _unreachable(str(problem))
    if endpoint.server == "unknown":
        version = await get_json(connection, f"{root_url(endpoint.base_url)}/api/version")
        if isinstance(version, dict) and "version" in version:
            endpoint.server = "ollama"
    found = [Finding("reachable", "ok", _reached(endpoint, listed, problem)), _model(endpoint)]
    if found[-1].status == "problem":
        found.append(Finding("tools", "unknown", "not checked: the model is not there."))
    else:
        found.append(await _tools(connection, endpoint, request_seconds))
    found.append(await _context(connection, endpoint, budget))
    return found


async def _models(connection: Connection, endpoint: Endpoint
                  ) -> tuple[bool, ModelError | str | None]:
    """Whether ``/v1/models`` listed the models (learned into ``endpoint``), and what went
    wrong if not: an error (unreachable), or a line (reachable, no list)."""
    with anyio.move_on_after(LOOKUP_SECONDS):
        try:
            payload = (await connection.fetch("/models")).json()
        except http.HTTPStatusError as exc:
            return False, f"no list of models (HTTP {exc.response.status_code} at /models)"
        except ValueError:
            return False, "no list of models (/models is not JSON)"
        except Exception as exc:
            return False, from_exception(exc, endpoint, streaming=False)
        endpoint.learn_from_models(payload)
        return True, None
    return False, EndpointUnreachable(
        "no answer", f"GET /models took more than {LOOKUP_SECONDS:g} s",
        endpoint=endpoint.base_url, hint=endpoint.unreachable_hint())


def _reached(endpoint: Endpoint, listed: bool, problem: ModelError | str | None) -> str:
    where = f"{endpoint.base_url} ({endpoint.named})" if endpoint.server != "unknown" \
        else endpoint.base_url
    if listed:
        count = len(endpoint.models)
        return f"{where}, {count} model{'s' if count != 1 else ''} listed."
    return f"{where} answers; {problem}." if isinstance(problem, str) else f"{where} answers."


def _model(endpoint: Endpoint) -> Finding:
    present = endpoint.has_model()
    if present:
        return Finding("model", "ok", f"{endpoint.model} is there.")
    if present is None:
        why = ("llama.cpp serves its one model under any name" if endpoint.server == "llama.cpp"
               else "the server lists no models")
        return Finding("model", "unknown", f"{endpoint.model}: not listed ({why}); the "
                       "request below tells.")
    missing = ModelNotFound(endpoint.model, "not in its list of models",
                            available=endpoint.models, endpoint=endpoint.base_url,
                            hint=endpoint.pull_hint())
    return Finding("model", "problem", str(missing))


async def _tools(connection: Connection, endpoint: Endpoint, seconds: float) -> Finding:
    encoded = EncodedMessages()
    encoded.update(PROBE_MESSAGES)
    body = encoded.body({"model": endpoint.model},
                        {"stream": True, "tools": [PROBE_TOOL], "max_tokens": 16})
    assembly = Assembly()

    async def ignore(piece: Piece) -> None:
        pass

    started = time.monotonic()
    with anyio.move_on_after(seconds) as bound:
        try:
            await stream_chat(connection, body, endpoint, assembly, ignore,
                              Timeouts(math.inf, math.inf))  # the bound is the one above
        except ModelError as error:
            return Finding("tools", "problem", str(error))
    if bound.cancelled_caught:
        return Finding("tools", "problem", f"a request with one tool schema got no answer "
                       f"within {seconds:g} s; the server may still be loading the "
                       "model: run --doctor again in a minute.")
    endpoint.learn_from_fingerprint(assembly.fingerprint)
    return Finding("tools", "ok", f"a request with one tool schema was answered in "
                   f"{time.monotonic() - started:.1f} s.")


async def _context(connection: Connection, endpoint: Endpoint, budget: int) -> Finding:
    if endpoint.server == "ollama":
        await ollama_context(connection, endpoint)
    elif endpoint.server == "llama.cpp":
        await llamacpp_context(connection, endpoint)
    length = endpoint.context_length
    if length is None:
        return Finding("context", "unknown", f"the server does not say how much it holds; "
                       f"--max-context-tokens {budget:,} is assumed to fit.")
    warning = context_warning(endpoint, budget)
    if warning is not None:
        return Finding("context", "problem", warning)
    source = f" ({endpoint.context_source})" if endpoint.context_source else ""
    return Finding("context", "ok", f"the server holds {length:,} tokens{source}; "
                   f"--max-context-tokens {budget:,} fits.")
