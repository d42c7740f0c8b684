"""The session store: durable sessions behind one API, on either backend (docs/storage.md).

A store is built from a backend's parts (:class:`~actors.store._parts.Backend`: its
transactions, its lease and its search index) and seen through two faces over one
:class:`~actors.store._shared.Shared` state:

* :class:`~actors.store._reads.SessionReader` (:attr:`Store.reader`): the reads, and
  nothing that changes a session; what everyone but the session's writer gets;
* :class:`Store`: the reads and the writes, each one transaction under the session's lease,
  built up by concern: :mod:`~actors.store._writes` (create, checkpoint and append,
  write-ahead records, the context replaced, recovery, metadata, delete),
  :mod:`~actors.store._branching` (fork, rewind) and :mod:`~actors.store._importing`
  (whole records in). In a run only the checkpoint writer holds it; outside a run, the
  session commands open one (``actors.store.open_store``).

Export and import of files are functions over this API (:mod:`actors.store._portability`).

Threads and cancellation: every method is synchronous, thread-safe (the transactions hold
the database's lock) and one transaction; async callers run it in a worker thread. Nothing
is cancellable: a call that has started runs to its end in its thread.
"""

from __future__ import annotations

from pathlib import Path

from actors.store import _portability
from actors.store._importing import Importing
from actors.store._parts import Backend, Lease, SearchIndex, Transactions
from actors.store._reads import SessionReader
from actors.store._shared import Shared, private_memory_dir


class Store(Importing):
    """Durable sessions (see docs/storage.md): :class:`~actors.store.sqlite.SqliteStore` (the
    default) or :class:`~actors.store.postgres.PostgresStore`, the one type the writers of
    sessions annotate with (everyone else: :class:`SessionReader`, :attr:`reader`).

    Synchronous and thread-safe. Every mutating method takes the session's lease (re-entrant
    in this process) and fails at once with :class:`SessionLocked` if another process holds
    it; reads take no lease.

    ``memory_dir`` must exist (:func:`private_memory_dir`); the backend's constructor makes
    it before opening its parts. With ``import_legacy``, older JSON records in
    ``memory_dir/sessions`` are imported on open.
    """

    def __init__(self, memory_dir: Path, backend: Backend, *, import_legacy: bool) -> None:
        super().__init__(Shared(memory_dir, backend.db, backend.leases, backend.index,
                                list(backend.warnings), read_only=backend.read_only))
        self._reader = SessionReader(self._shared)
        if import_legacy and not backend.read_only:
            _portability.import_legacy_dir(self)

    @property
    def db(self) -> Transactions:
        """The database part (the doctor and tests look at it; writes go through methods)."""
        return self._shared.db

    @property
    def leases(self) -> Lease:
        return self._shared.leases

    @property
    def index(self) -> SearchIndex:
        """The search index part (replaceable by a watched one, as a test does)."""
        return self._shared.index

    @index.setter
    def index(self, index: SearchIndex) -> None:
        self._shared.index = index

    @property
    def reader(self) -> SessionReader:
        """This store's read-only face, for everyone who reads sessions but does not own
        their writes (the same instance, caches and all, without the writes)."""
        return self._reader

    @property
    def sessions_dir(self) -> Path:
        """Where the older JSON layout's records (and SQLite's lease files) are."""
        return self._shared.sessions_dir

    @property
    def import_warnings(self) -> list[str]:
        """What opening the store had to say (one line each), for the command to show."""
        return self._shared.warnings

    def close(self) -> None:
        """Close the connections (idempotent). Leases held stay held until released."""
        self.db.close()
        self.leases.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SessionReader", "Store", "private_memory_dir"]
