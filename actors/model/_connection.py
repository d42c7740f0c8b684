"""The connection to one endpoint: the HTTP client every request goes through (the one the
openai SDK is built on: httpx2, :mod:`actors.model._http`), and what every request sends.

The openai SDK itself is not imported. Importing it takes 0.7-1 s of CPU (its type
definitions), which an unreachable endpoint's one line, print mode and ``--doctor`` all paid
before the first byte was sent; and it did nothing a request needs: the chat request went
to the HTTP client directly already, its body encoded here (:mod:`actors.model._body`), its
answer read here (:mod:`actors.model._wire`), its failures classified here
(:mod:`actors.model._classify`). What the SDK still gave is written out below: the headers
it sends (the key as a bearer token, ``$OPENAI_ORG_ID`` and ``$OPENAI_PROJECT_ID`` as
``OpenAI-Organization`` and ``OpenAI-Project``, JSON both ways) and how it joins a path to
the base URL (docs/decisions.md, "The openai SDK is not imported").

Timeouts: the HTTP client bounds connecting (:data:`CONNECT_SECONDS`) and nothing else. How
long an answer may take to begin and to go silent is bounded by the chat request itself, on
the event loop's clock (:mod:`actors.model._timeouts`); every other request is bounded by its
caller.

Made in a worker thread (:func:`connect`): importing the HTTP library and building its client
(the CA bundle is loaded) take tens of milliseconds the event loop should not be held for.

"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio

from actors.model._http import http

CONNECT_SECONDS = 5.0
USER_AGENT = "agent-harness"
ORGANIZATION_ENV = "OPENAI_ORG_ID"  # the SDK's names for them
PROJECT_ENV = "OPENAI_PROJECT_ID"


@dataclass(frozen=True)
class Connection:
    """The HTTP client of one endpoint and what each request sends."""

    client: http.AsyncClient
    base_url: str  # without a trailing slash
    headers: dict[str, str]  # sent with every request (not the length)

    @property
    def chat_url(self) -> str:
        """The endpoint's ``/chat/completions``, absolute."""
        return self.base_url + "/chat/completions"

    def url(self, path: str) -> str:
        """``path`` as an absolute URL: one that has a scheme as it is, else under the base
        URL (``/models`` is ``<base>/models``, as the SDK joins them)."""
        if "://" in path:
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    async def fetch(self, path: str, body: Any = None) -> http.Response:
        """GET ``path`` (or POST ``body`` as JSON to it), read whole. Raises the HTTP
        library's errors: a transport failure, or :class:`HTTPStatusError` for a status of
        400 or more. Cancellation: the caller bounds it; the response is closed."""
        url = self.url(path)
        if body is None:
            response = await self.client.get(url, headers=self.headers)
        else:
            response = await self.client.post(url, content=json.dumps(body).encode(),
                                            headers=self.headers)
        response.raise_for_status()
        return response

    async def aclose(self) -> None:
        """Close the HTTP client. Cancellation: the caller bounds it."""
        with contextlib.suppress(Exception):
            await self.client.aclose()


async def listening(base_url: str) -> OSError | None:
    """Whether anything accepts a TCP connection at ``base_url``'s host and port: the error
    of a refused connection or an unknown host, else None (connected, or no answer within
    :data:`CONNECT_SECONDS`, left to the request to report). Asked before the first
    connection is made: "nothing listens" (the commonest failure, a server not started) is
    then known without importing the HTTP library and building its client.
    Cancellation: the attempt stops."""
    parts = urlsplit(base_url.strip())
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return None  # the request reports a bad URL
    if not parts.hostname:
        return None
    with anyio.move_on_after(CONNECT_SECONDS):
        try:
            stream = await anyio.connect_tcp(parts.hostname, port)
        except OSError as exc:
            return exc
        with anyio.CancelScope(shield=True):
            await stream.aclose()
    return None


def request_headers(api_key: str) -> dict[str, str]:
    """What every request sends: JSON both ways, the key as a bearer token (none when it is
    empty), the organization and project from the SDK's environment variables when set."""
    headers = {"Accept": "application/json", "Content-Type": "application/json",
               "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    for name, variable in (("OpenAI-Organization", ORGANIZATION_ENV),
                           ("OpenAI-Project", PROJECT_ENV)):
        value = os.environ.get(variable)
        if value:
            headers[name] = value
    return headers


def connect(
    *, base_url: str, api_key: str, http_client: http.AsyncClient | None = None,
) -> Connection:
    """The connection to ``base_url`` (blocking: run it in a worker thread).
    ``http_client``: an HTTP client to send through (a test's mock transport); None makes
    one that bounds only connecting (:data:`CONNECT_SECONDS`).

    An ``http://`` endpoint (every local server) gets a client without TLS: loading the CA
    bundle took 0.4-0.6 s of CPU on a loaded machine, most of the time to an unreachable
    endpoint's line. It follows no redirect, so it never speaks TLS unverified; a server that
    redirects is told to the user with its new URL (:mod:`actors.model._wire`). An
    ``https://`` endpoint gets a verifying client that follows redirects."""
    secure = base_url.strip().lower().startswith("https://")
    client = http_client or http.AsyncClient(
        timeout=http.Timeout(None, connect=CONNECT_SECONDS), follow_redirects=secure,
        verify=secure)
    return Connection(client, base_url.strip().rstrip("/"), request_headers(api_key))
