"""The SQLite store's lease: one advisory ``flock`` per session, held by one process at most.

A lease is taken without waiting: if another process holds it, :class:`SessionLocked` is raised
at once, naming the holder's pid (which the holder writes into the lock file). Inside one
process the lease is re-entrant, across threads and store instances alike: a process-wide
registry counts nested holds and releases the lock when the outermost one ends. The kernel
releases the lock when the holding process dies, however it dies.

Lock files (``<memory-dir>/sessions/<id>.lock``, 0600, opened ``O_CLOEXEC`` so a tool's
shell never inherits one) are never deleted, not even with their session: removing one could
let two processes lock two different files under the same name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from actors.core.errors import SessionLocked, StorageError


@dataclass
class _Held:
    fd: int
    count: int


_registry: dict[str, _Held] = {}
_registry_lock = threading.Lock()


def _holder_of(fd: int) -> str | None:
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8"))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    host = info.get("host")
    if host and host != os.uname().nodename:
        return f"pid {pid} on {host}"
    return f"pid {pid}"


def _acquire(path: Path, session_id: str) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StorageError(f"Cannot open lock file {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder_of(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise SessionLocked(session_id, holder) from None
        raise StorageError(f"Cannot lock {path}: {exc.strerror}") from exc
    record = json.dumps({"pid": os.getpid(), "host": os.uname().nodename}).encode()
    with contextlib.suppress(OSError):  # the pid is a courtesy for error messages
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
    return fd


def is_held_here(path: Path, key: str | None = None) -> bool:
    """True when this process holds the lease at ``path`` (``key``: its resolved path)."""
    key = str(path.resolve()) if key is None else key
    with _registry_lock:
        return key in _registry


def held_elsewhere(path: Path, key: str | None = None) -> bool:
    """True when another process holds the lease at ``path`` (probes without keeping it)."""
    if is_held_here(path, key) or not path.exists():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


class _Hold:
    """One hold of the lease at ``path`` for a ``with`` block (see :func:`hold`): a class, not
    a generator, since every checkpoint enters one (the supervisor's outer hold makes each
    a count, not a lock)."""

    __slots__ = ("held", "key", "path", "session_id")

    def __init__(self, path: Path, session_id: str, key: str) -> None:
        self.path = path
        self.session_id = session_id
        self.key = key
        self.held: _Held | None = None

    def __enter__(self) -> None:
        with _registry_lock:
            held = _registry.get(self.key)
            if held is None:
                held = _registry[self.key] = _Held(_acquire(self.path, self.session_id), 0)
            held.count += 1
        self.held = held

    def __exit__(self, *exc: object) -> None:
        held = self.held
        if held is None:
            return
        self.held = None
        with _registry_lock:
            held.count -= 1
            if held.count == 0:
                del _registry[self.key]
                with contextlib.suppress(OSError):
                    fcntl.flock(held.fd, fcntl.LOCK_UN)
                os.close(held.fd)


def hold(path: Path, session_id: str, key: str | None = None
         ) -> contextlib.AbstractContextManager[None]:
    """Hold the lease at ``path`` for the ``with`` block (re-entrant within this process;
    ``key``: the resolved path, the registry's key).

    Blocking only for the duration of ``open`` and a non-blocking ``flock``: async callers run
    it in a worker thread. Raises :class:`SessionLocked` when another process holds it.
    """
    return _Hold(path, session_id, str(path.resolve()) if key is None else key)


class FlockLeases:
    """The :class:`~actors.store._parts.Lease` of the SQLite store: lock files in
    ``sessions_dir``. A flock cannot be lost while its process lives."""

    def __init__(self, sessions_dir: Path) -> None:
        self.sessions_dir = sessions_dir
        # session id -> the lock file and its resolved path: resolving costs ~50 µs (an lstat
        # per component), once per session rather than on every checkpoint.
        self._paths: dict[str, tuple[Path, str]] = {}

    def path_of(self, session_id: str) -> Path:
        """The lock file of a (checked) session id."""
        return self.sessions_dir / f"{session_id}.lock"

    def _path(self, session_id: str) -> tuple[Path, str]:
        known = self._paths.get(session_id)
        if known is None:
            path = self.path_of(session_id)
            known = self._paths[session_id] = (path, str(path.resolve()))
        return known

    def hold(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        path, key = self._path(session_id)
        return _Hold(path, session_id, key)

    def is_held_here(self, session_id: str) -> bool:
        with _registry_lock:
            return self._path(session_id)[1] in _registry

    def held_elsewhere(self, session_id: str) -> bool:
        return held_elsewhere(*self._path(session_id))

    def close(self) -> None:
        """Nothing to close: the lock files are opened per hold."""
