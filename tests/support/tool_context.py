"""Tool contexts for tests of the tools on their own: a real session store and session, and a
writer that writes the session straight to that store (in the harness, the checkpoint writer
does; tools see the same ``set_metadata`` either way). Tools read through the store's
read-only face, as in the harness."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from actors.core.planning import Planning
from actors.store import SessionStore
from actors.tools import ToolContext


@dataclass
class DirectWriter:
    """A ``SessionWriter`` that calls the store in a worker thread."""

    store: SessionStore
    session_id: str

    async def set_metadata(self, *, summary: str | None = None) -> None:
        await anyio.to_thread.run_sync(
            lambda: self.store.update(self.session_id, summary=summary))


@dataclass
class ToolSession:
    """The session a test's tool calls belong to."""

    store: SessionStore
    session_id: str

    def context(self, sandbox: Path, memory_dir: Path,
                planning: Planning | None = None) -> ToolContext:
        return ToolContext(
            sandbox=sandbox, memory_dir=memory_dir, planning=planning or Planning(),
            store=self.store.reader, session_id=self.session_id,
            writer=DirectWriter(self.store, self.session_id),
        )


@contextmanager
def tool_session(store_dir: Path, project_root: Path | None = None) -> Iterator[ToolSession]:
    """A store in ``store_dir`` with one session (of ``project_root``), closed afterwards."""
    with SessionStore(store_dir) as store:
        sid = (store.create_session(project_root=str(project_root)) if project_root
               else store.create_session())
        yield ToolSession(store, sid)
