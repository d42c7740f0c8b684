"""The parts a store is built from: its transactions, its lease and its search index.

A backend is not a subclass filling in hooks; it is three objects handed to
:class:`actors.store._store.Store`::

    Store ──▶ Transactions   read() / write(*leased): one transaction each, errors translated
      │
      ├────▶ Lease           hold(id) / is_held_here(id) / held_elsewhere(id)
      │
      └────▶ SearchIndex     catches up behind the checkpoints; finds one word

The store's logic (the extend rule, delta appends, write-ahead records, recovery, fork, search
ranking) is written once against these protocols and the shared SQL dialect (``?``
placeholders, ``ON CONFLICT … DO UPDATE``), which SQLite speaks natively and the PostgreSQL
connection adapts in one place. ``actors/store/sqlite/`` and ``actors/store/postgres/`` each
supply the three parts.

Threads and cancellation: every part is synchronous and thread-safe; a call that has started
runs to its end in its thread (async callers use a worker thread). Nothing here is
cancellable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


class Cursor(Protocol):
    """What the shared code reads from a statement: rows as tuples (or tuple-like rows)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The connection of one transaction, as the shared SQL sees it (``?`` placeholders)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...


class Transactions(Protocol):
    """The database: one transaction per ``with`` block, its errors translated into
    :class:`StorageError` (damage found while reading one session: :class:`CorruptSession`)."""

    @property
    def location(self) -> str:
        """Where the sessions are, for people (a file path, or a URL without password)."""
        ...

    @property
    def damage_hint(self) -> str:
        """How to get a damaged session looked at (ends :class:`CorruptSession` messages)."""
        ...

    def read(self, session_id: str | None = None) -> AbstractContextManager[Conn]:
        """A read transaction (one consistent snapshot); damage is blamed on ``session_id``."""
        ...

    def write(self, *leased: str, durable: bool = True) -> AbstractContextManager[Conn]:
        """One write transaction, rolled back whole if anything in it fails (COMMIT included).

        ``leased`` are the sessions it writes, whose leases the caller holds: a backend whose
        lease can be lost behind its back checks, inside the transaction, that it still holds
        them, and writes nothing otherwise. ``durable=False`` (derived data only, the search
        index): COMMIT does not wait for the disk; a crash may lose the transaction whole,
        never part of it, and the next durable commit makes it durable too.
        """
        ...

    def companion(self) -> Transactions | None:
        """A database of its own on the same server and schema, for another part of the
        harness to keep its tables beside the sessions (the workspace's objects: a big
        snapshot then never holds the sessions' connection); None where that part keeps a
        file of its own (SQLite). The caller closes it."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


class Lease(Protocol):
    """Who may write a session: at most one process at a time, re-entrant inside it."""

    def hold(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the lease of a (checked) session id for a ``with`` block.

        May be entered in one thread and exited in another (the supervisor does). Raises
        :class:`SessionLocked` at once, never after waiting, when another process holds it.
        """
        ...

    def is_held_here(self, session_id: str) -> bool:
        """True when this process holds the session's lease."""
        ...

    def held_elsewhere(self, session_id: str) -> bool:
        """True when another process holds the session's lease right now."""
        ...

    def close(self) -> None:
        """This store instance is done with the leases (holds still open stay held)."""
        ...


class SearchIndex(Protocol):
    """The text index behind search. A checkpoint only marks its messages
    (:meth:`mark_pending`); :meth:`claim_pending` and :meth:`add_messages` index them
    later, in transactions of their own (:meth:`actors.store._store.Store.index_pending`)."""

    def mark_pending(self, conn: Conn, mids: Sequence[int]) -> None:
        """Mark new transcript rows as not yet indexed, durably, in the caller's
        transaction (the checkpoint's: as cheap as can be)."""
        ...

    def has_pending(self, conn: Conn) -> bool:
        """Whether any transcript row is still to be indexed."""
        ...

    def claim_pending(self, conn: Conn, limit: int) -> list[tuple[int, int | None, str | None]]:
        """Remove up to ``limit`` of the oldest "not yet indexed" marks, which no other
        transaction is claiming; ``(mid, session rid, body)`` of each (rid and body None when
        the message is gone)."""
        ...

    def add_messages(self, conn: Conn, rid: int, rows: Sequence[tuple[int, str]]) -> None:
        """Add ``(mid, text)`` of new transcript messages of session ``rid``."""
        ...

    def set_session_text(self, conn: Conn, rid: int, text: str) -> None:
        """Set the indexed title/summary/compaction-summary text of session ``rid``."""
        ...

    def remove_session(self, conn: Conn, rid: int) -> None:
        """Remove session ``rid``'s messages and text (before its rows go)."""
        ...

    def copy_session(self, conn: Conn, old_rid: int, new_rid: int) -> None:
        """Index the copy ``new_rid`` of ``old_rid`` (its rows already written): its session
        text now, its messages marked for the indexer."""
        ...

    def message_matches(self, conn: Conn, term: str) -> Iterable[tuple[int, int, int]]:
        """``(session rid, matching messages, mid of one of them)`` for the messages
        containing ``term`` (lowercase) as a case-insensitive substring."""
        ...

    def session_matches(self, conn: Conn, term: str) -> Iterable[int]:
        """Rids of sessions whose title, summary or compaction summaries contain ``term``."""
        ...

    def texts(self, conn: Conn, kind: str, keys: Sequence[int]) -> dict[int, str]:
        """The indexed text of messages (``kind`` "message", by mid) or sessions
        ("session", by rid), to cut snippets from."""
        ...

    def rid_among(self, rids: list[int]) -> tuple[str, Sequence[Any]]:
        """A condition on ``rid`` matching any of ``rids`` (there may be thousands) and its
        parameters, e.g. ``IN (?, …)``."""
        ...


@dataclass(frozen=True)
class Backend:
    """The parts of one store, and what opening them had to say (e.g. a truncated file)."""

    db: Transactions
    leases: Lease
    index: SearchIndex
    warnings: tuple[str, ...] = ()
    read_only: bool = False  # the database can be read but not written here
