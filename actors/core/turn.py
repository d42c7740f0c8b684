"""The cancellation of one user turn, shared by the supervisor and the actors working for it.

The supervisor creates a :class:`Turn` per user message and cancels it on Ctrl-C, SIGTERM or an
actor's failure. An actor doing work for the turn enters ``turn.scope()``: a fresh cancel scope
that is cancelled when the turn is (at once, if it already was). Actors always reply after
their scope ends, so the supervisor learns what was done, interrupted, or never started.
"""

from __future__ import annotations

import time

import anyio


class Turn:
    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self.cancelled = False
        self.reason = ""
        self.cancelled_at: float | None = None

    def scope(self) -> anyio.CancelScope:
        """A new cancel scope bound to this turn (enter it once, with ``with``)."""
        scope = anyio.CancelScope()
        if self.cancelled:
            scope.cancel()
        self._scopes.add(scope)
        return scope

    def cancel(self, reason: str = "interrupted by the user") -> None:
        """Cancel every scope of this turn; later scopes start cancelled. Idempotent."""
        if not self.cancelled:
            self.cancelled = True
            self.reason = reason
            self.cancelled_at = time.monotonic()
        for scope in self._scopes:
            scope.cancel()
