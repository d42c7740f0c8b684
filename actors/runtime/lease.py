"""The session lease for one supervisor run: taken before anything else, released last.

Across processes the store's lease decides (a second process is refused at once). Inside one
process the store's lease is re-entrant (nested store calls take it again), so a second run of
the same session is refused here: the "is it held here?" check and the acquisition happen in
one step under a process-wide lock, and two concurrent opens cannot both pass the check.

Cancellation: the lease is taken in a worker thread that is never abandoned, so a cancel that
arrives meanwhile waits for it and then finds the lease held and released by the ``finally``
of :func:`hold_lease`. The release runs shielded, so a cancel cannot skip it either.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator

import anyio

from actors.core.errors import SessionLocked
from actors.store import Store

RELEASE_SECONDS = 15
_taking = threading.Lock()  # one check-and-take at a time in this process


def _take(store: Store, session_id: str) -> contextlib.AbstractContextManager[None]:
    with _taking:
        if store.is_leased_here(session_id):
            raise SessionLocked(session_id, f"pid {os.getpid()}, this process")
        lease = store.lease(session_id)
        lease.__enter__()
        return lease


@contextlib.asynccontextmanager
async def hold_lease(store: Store, session_id: str) -> AsyncIterator[None]:
    """Hold the session's lease for the ``async with`` block; :class:`SessionLocked` at once
    when another process, or another run in this process, holds it."""
    lease = await anyio.to_thread.run_sync(_take, store, session_id)
    try:
        yield
    finally:
        with anyio.move_on_after(RELEASE_SECONDS, shield=True):
            await anyio.to_thread.run_sync(lease.__exit__, None, None, None)
