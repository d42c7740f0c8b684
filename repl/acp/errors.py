"""The harness's errors as JSON-RPC errors: translated once, where a client's request enters.

A request the harness cannot do answers an error whose message is the one line the command
line would print: an unknown session is ``-32002`` (resource not found), any other mistake of
the client's (a locked, archived or another project's session, a bad ``cwd``, a prompt while
one runs) ``-32602`` (invalid params), a failure of the harness, the store or the model
``-32603`` (internal error). A bug is one line in the log and an internal error, never a
traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from acp import RequestError

from actors.core.errors import HarnessError, SessionNotFound, UsageError

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

log = logging.getLogger("harness.acp")


def request_error(exc: Exception) -> RequestError:
    """The JSON-RPC error for ``exc``."""
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, SessionNotFound):
        return RequestError(RESOURCE_NOT_FOUND, str(exc))
    if isinstance(exc, UsageError):
        return RequestError(INVALID_PARAMS, str(exc))
    if isinstance(exc, HarnessError):
        return RequestError(INTERNAL_ERROR, str(exc))
    log.error("a bug: %s: %s", type(exc).__name__, exc)
    return RequestError(INTERNAL_ERROR, f"The harness failed ({type(exc).__name__}: {exc}).")


@contextmanager
def translated() -> Iterator[None]:
    """Raise what the block raises as a :class:`RequestError` (see the module doc)."""
    try:
        yield
    except Exception as exc:
        raise request_error(exc) from None
