"""What the views of one store instance share: its parts, its caches, where it lives.

A store instance is one :class:`Shared` seen through two faces: the read-only
:class:`~actors.store._reads.SessionReader` handed to everyone who reads sessions, and the
writable :class:`~actors.store._store.Store` that its owner (the checkpoint writer in a run,
a session command outside one) writes through. Both hold the same :class:`Shared`, so a
load primes the cache a checkpoint then relies on, whichever face loaded.

Thread-safety: the parts are thread-safe; the context cache is used inside the database's
transactions, which hold its lock (:mod:`actors.store._extend`); ``unindexed`` is a hint.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from actors.core.errors import StorageError
from actors.store._extend import ContextCache
from actors.store._parts import Lease, SearchIndex, Transactions


@dataclass(eq=False)
class Shared:
    """The state of one store instance, shared by its faces."""

    memory_dir: Path  # resolved, private (private_memory_dir)
    db: Transactions
    leases: Lease
    index: SearchIndex
    # What opening the store had to say (a truncated file, an older record skipped...),
    # one line each, for the command that opened it to show.
    warnings: list[str] = field(default_factory=list)
    # Invariant: an entry is the saved context of its session as of the session row's
    # (rid, context_version, context_len) it is keyed by; updated only after COMMIT.
    contexts: ContextCache = field(default_factory=ContextCache)
    # Messages this instance left for the indexer since it last found nothing pending
    # (1 at first: look once for what an earlier process left). A hint, not the truth:
    # the database's "not yet indexed" marks are.
    unindexed: int = 1
    # The database cannot be written here (a read-only file system or file, a read-only
    # server): reads work, writes fail with StorageError saying so.
    read_only: bool = False

    @property
    def sessions_dir(self) -> Path:
        """Where the older JSON layout's records and (SQLite) the lease files are."""
        return self.memory_dir / "sessions"


def private_memory_dir(memory_dir: str | os.PathLike[str]) -> Path:
    """The memory directory, resolved, with it and its ``sessions/`` created 0700.

    Every directory it creates is 0700 whatever the umask, the missing parents included
    (``~/.agent-harness`` of the default ``~/.agent-harness/memory``): ``mkdir -p`` would make
    them 0777 under ``umask 000``. Directories that exist are left as they are (one on a
    read-only file system is then read, not written).
    """
    path = Path(memory_dir).expanduser().resolve()
    try:
        missing = []
        for directory in (path, *path.parents):
            if directory.exists():
                break
            missing.append(directory)
        for directory in [*reversed(missing), path / "sessions"]:
            if not directory.is_dir():
                with contextlib.suppress(FileExistsError):  # another process made it
                    directory.mkdir(mode=0o700)
                    os.chmod(directory, 0o700)
    except OSError as exc:
        if path.is_dir() and not os.access(path, os.W_OK):
            return path  # a read-only memory directory: the store reads what is there
        raise StorageError(f"{exc.strerror or exc} ({exc.filename or path}).") from exc
    return path


__all__ = ["Shared", "private_memory_dir"]
