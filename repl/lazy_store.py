"""The run's session store, opened when it is first needed.

The command line opens it before anything runs (a session command, print mode, a resume),
so that a store that cannot open is said first. A new session's interactive prompt opens it
after its first prompt is drawn, with the session's supervisor: the store's modules (some 40,
a tenth of the start) are not needed to draw it (docs/decisions.md, "The store of a new
session's REPL is opened after its first prompt").

Two doors: :meth:`LazyStore.writable` is the store itself, for the session's supervisor
(which hands it to its checkpoint writer, the session's only writer) and for the commands
that write without one (``--rename``, ``--delete``, ``--import``, ``harness -r``'s picker
before any session runs...); :meth:`LazyStore.reader` is its read-only face, for everything
else (the REPL's commands, lists and completion).

Imports nothing of the store itself: the function given opens it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.core.errors import HarnessError
    from actors.store import SessionReader, Store


class LazyStore:
    """A store opened by the first :meth:`writable` or :meth:`reader` (from any thread),
    closed by :meth:`close`."""

    def __init__(self, open_store: Callable[[], Store]) -> None:
        self._open = open_store
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._failed: HarnessError | None = None
        self._closed = False

    @property
    def opened(self) -> SessionReader | None:
        """The store's read-only face if it is open (None: not opened yet, or its open
        failed)."""
        return None if self._store is None else self._store.reader

    def writable(self) -> Store:
        """The store, opened now if it was not: for the supervisor, and for the commands
        that write without one. Blocking (the store's imports and its database's open; on
        the event loop, call it in a worker thread). A failure to open is raised by this
        call and by every later one; after :meth:`close`, nothing opens."""
        with self._lock:
            if self._store is not None:
                return self._store
            if self._failed is not None:
                raise self._failed
            if self._closed:
                raise RuntimeError("the store was closed")
            from actors.core.errors import HarnessError

            try:
                self._store = self._open()
            except HarnessError as exc:
                self._failed = exc
                raise
            return self._store

    def reader(self) -> SessionReader:
        """The store's read-only face, opened as :meth:`writable` opens it."""
        return self.writable().reader

    def close(self) -> None:
        """Close the store if it was opened; later calls open nothing."""
        with self._lock:
            self._closed = True
            store, self._store = self._store, None
        if store is not None:
            store.close()
