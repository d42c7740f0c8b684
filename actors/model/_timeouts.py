"""How long a request may wait for the endpoint: for its answer to begin, and for each next
byte once it has.

- ``first_token`` (``--llm-first-token-timeout``, default 600 s): from
  sending the request until the first chunk of the answer. A local model on a CPU reads a long
  prompt before it writes anything (minutes, for tens of thousands of tokens); nothing comes
  meanwhile. Never shorter than ``silence``.
- ``silence`` (``--llm-timeout``, default 120 s): once the answer began, the longest wait for
  the next bytes (a keep-alive comment counts). A slow, steady answer never meets it, however
  long it takes; a server that stalls does.
- ``total`` (``--llm-total-timeout``, none by default): a limit on the whole request, retries
  and their waits included, only when the user asks for one.

Time is the event loop's clock (the tests run on a virtual one). Only the waits for the
server count: the time the answer's pieces take to be shown or to wait for their checkpoint
(:attr:`~actors.model._protocol.ModelRequest.saved`) does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import anyio

from actors.core.config import DEFAULT_FIRST_TOKEN_TIMEOUT
from actors.core.errors import EndpointTimeout


@dataclass(frozen=True)
class Timeouts:
    silence: float
    first_token: float = DEFAULT_FIRST_TOKEN_TIMEOUT
    total: float | None = None

    @property
    def first(self) -> float:
        """The wait for the first chunk: never shorter than the silence allowed after it."""
        return max(self.first_token, self.silence)


class Watch:
    """The deadline of one request on the wire: :attr:`scope` (entered around the request)
    is cancelled when the server has kept it waiting too long; :meth:`error` then says how.

    Cancellation: the scope catches only its own cancellation; a turn's passes through.
    """

    def __init__(self, timeouts: Timeouts) -> None:
        self._timeouts = timeouts
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + timeouts.first)
        self.began = False  # a chunk of the answer has arrived

    def waiting(self) -> None:
        """About to wait for the server's next bytes: once the answer began, it has
        ``silence`` seconds from now to send some."""
        if self.began:
            self.scope.deadline = anyio.current_time() + self._timeouts.silence

    def heard(self, chunk: bool) -> None:
        """Bytes arrived (``chunk``: a chunk of the answer among them): once the answer
        began, no deadline runs until the next :meth:`waiting`, while what came is shown
        (and waits for its checkpoint)."""
        self.began = self.began or chunk
        if self.began:
            self.scope.deadline = math.inf

    def error(self, endpoint: str, chunks: int) -> EndpointTimeout:
        """What the user is told when :attr:`scope` ran out."""
        if not self.began:
            return EndpointTimeout(
                f"the answer did not begin within {self._timeouts.first:g} s",
                endpoint=endpoint,
                hint="A long prompt on a slow machine can take longer: raise "
                     "--llm-first-token-timeout.")
        count = f"{chunks} chunk{'s' if chunks != 1 else ''}"
        return EndpointTimeout(
            f"the answer stopped for {self._timeouts.silence:g} s", f"after {count}",
            endpoint=endpoint,
            hint="Raise --llm-timeout if the model pauses that long.")
