"""How the REPL's lists change other sessions (the picker's fork, archive and rename,
``\\fork ID``): :class:`SessionEdits`.

In a run the writes go through the running session's checkpoint writer, its store's only
writer (:class:`RunEdits`: the supervisor's commands); before any session runs (``harness
-r``'s picker) they go through the store the command line opened for writing
(:class:`StoreEdits`), in a worker thread. Either way the lists themselves only read.
Cancellation: waiting is cancellable; a write that started still lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio

if TYPE_CHECKING:
    from actors.runtime.supervisor import Supervisor
    from actors.store import Store


class SessionEdits(Protocol):
    """Fork, archive or rename a session (not the running one's context: its own commands
    do that). Store errors are raised as they are (one line each)."""

    async def fork(self, session_id: str) -> str:
        """A whole copy of the session; the new id."""
        ...

    async def archive(self, session_id: str) -> None: ...

    async def rename(self, session_id: str, title: str) -> None: ...


class RunEdits:
    """The edits of a run: through the supervisor's checkpoint writer."""

    def __init__(self, sup: Supervisor) -> None:
        self._sup = sup

    async def fork(self, session_id: str) -> str:
        return await self._sup.fork_session(session_id)

    async def archive(self, session_id: str) -> None:
        await self._sup.edit_session(session_id, archived=True)

    async def rename(self, session_id: str, title: str) -> None:
        await self._sup.edit_session(session_id, title=title)


class StoreEdits:
    """The edits before any session runs: the store the command line opened for writing."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def fork(self, session_id: str) -> str:
        return await anyio.to_thread.run_sync(self._store.fork, session_id)

    async def archive(self, session_id: str) -> None:
        await anyio.to_thread.run_sync(lambda: self._store.update(session_id, archived=True))

    async def rename(self, session_id: str, title: str) -> None:
        await anyio.to_thread.run_sync(lambda: self._store.update(session_id, title=title))
