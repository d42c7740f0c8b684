"""Who has the SQLite store open: a shared ``flock`` on ``<memory-dir>/store.lock``.

Every :class:`~actors.store.sqlite._database.SqliteDatabase` holds the lock *shared* for as
long as it is open, so a process that wants to replace the database file (``--doctor
--repair`` setting a damaged file aside or putting a salvaged copy in its place) can tell,
without races, whether anyone else uses it: it takes the lock *exclusively*, which succeeds
only when no other process holds it, and keeps it while it works, so nobody opens the file
being replaced meanwhile (they wait up to :data:`WAIT_SECONDS`, then get a clear error).

The lock is on a file of its own, never on the database: SQLite's own locks are POSIX
``fcntl`` locks on the database file, and ``flock`` emulated over ``fcntl`` (NFS) would
collide with them. The file is opened ``O_CLOEXEC``, so a tool's subprocess never inherits it.

Blocking only for ``open`` and non-blocking ``flock`` attempts (a shared hold polls for at most
:data:`WAIT_SECONDS` while a repair runs); async callers use a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

from actors.core.errors import StorageError

LOCK_NAME = "store.lock"
WAIT_SECONDS = 10.0  # how long an opening store waits for a repair to finish
_POLL_SECONDS = 0.05


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StorageError(f"Cannot open {path}: {exc.strerror}.") from exc


def _try(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise StorageError(f"Cannot lock the session store: {exc.strerror}.") from exc
    return True


def _repairer(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip() or "0")
        if pid:
            return f" (pid {pid})"
    return ""


class StoreUsers:
    """The shared hold of one open store; :meth:`exclusive` for the one that replaces it."""

    def __init__(self, memory_dir: Path) -> None:
        self.path = memory_dir / LOCK_NAME
        self._fd: int | None = None

    def share(self, wait: float = WAIT_SECONDS, *, read_only: bool = False) -> None:
        """Hold the lock shared (this process uses the store); waits up to ``wait`` seconds
        for a repair that holds it exclusively, then raises :class:`StorageError`. A store
        that cannot be written (``read_only``) holds it if the file is there to be read,
        else nothing: no repair can replace a file there either."""
        if read_only:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return
        else:
            fd = _open(self.path)
        deadline = time.monotonic() + wait
        try:
            while not _try(fd, fcntl.LOCK_SH):
                if time.monotonic() >= deadline:
                    raise StorageError(
                        f"The session store is being repaired by `harness --doctor --repair`"
                        f"{_repairer(fd)}; try again when it has finished."
                    )
                time.sleep(_POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def exclusive(self) -> bool:
        """Hold the lock exclusively: True when no other process has the store open (it
        stays so until :meth:`close`); False, holding nothing, when someone has."""
        if self._fd is not None:
            raise RuntimeError("release the shared hold before taking the exclusive one")
        fd = _open(self.path)
        if not _try(fd, fcntl.LOCK_EX):
            os.close(fd)
            return False
        with contextlib.suppress(OSError):  # who repairs, for the error of a waiting opener
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def close(self) -> None:
        """Release the hold (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size:
                    os.ftruncate(fd, 0)  # only the exclusive holder wrote its pid
            os.close(fd)
