"""The connection to one endpoint: the SDK's client, and the HTTP client under it that chat
requests go through directly.

The SDK's client (``openai.AsyncOpenAI``) lists the models and asks the server its own
questions (:mod:`actors.model._preflight`). A chat request goes straight to the HTTP client
the SDK is built on (handed to the SDK, so both share one pool of connections), with the
headers the SDK would send (its default and auth headers: the key, the organization and
project, its user agent), read once. The SDK's ``post`` costs ~0.35 ms of CPU a request
beyond the HTTP client's own (its request options, the headers merged again, the response
wrapped), for a body that arrives encoded and an answer this package reads itself; its
error for an HTTP status is made here from the same status, body and ``Retry-After``
(:func:`actors.model._classify.from_status`).

Made in a worker thread (:func:`connect`): building the HTTP client loads the CA bundle and
imports the rest of the HTTP library, tens of milliseconds the event loop should not be
held for while the user types or a turn streams.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from actors.model._http import http

if TYPE_CHECKING:
    import openai

CONNECT_SECONDS = 5.0


@dataclass(frozen=True)
class Connection:
    """The clients of one endpoint, and what a chat request needs of them."""

    sdk: openai.AsyncOpenAI
    http: http.AsyncClient
    chat_url: str  # the endpoint's /chat/completions, absolute
    headers: dict[str, str]  # what the SDK sends with every request (not the length)

    async def aclose(self) -> None:
        """Close both clients (the SDK closes the HTTP client it was given; closing again is
        harmless). Cancellation: the caller bounds it."""
        await self.sdk.close()
        with contextlib.suppress(Exception):
            await self.http.aclose()


def connect(
    sdk: ModuleType, *, base_url: str, api_key: str, timeout: float,
    http_client: http.AsyncClient | None = None,
) -> Connection:
    """The clients of ``base_url`` (blocking: run it in a worker thread). ``http_client``: an
    HTTP client to send through (a test's mock transport); None makes one like the SDK's own,
    with ``timeout`` for every request (connecting: at most :data:`CONNECT_SECONDS`)."""
    limit = http.Timeout(timeout, connect=min(CONNECT_SECONDS, timeout))
    client = http_client or http.AsyncClient(timeout=limit, follow_redirects=True)
    openai_client = sdk.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                    timeout=limit, http_client=client)
    sent = {**openai_client.default_headers, **openai_client.auth_headers}
    headers = {name: value for name, value in sent.items() if isinstance(value, str)}
    chat_url = str(openai_client.base_url).rstrip("/") + "/chat/completions"
    return Connection(openai_client, client, chat_url, headers)
