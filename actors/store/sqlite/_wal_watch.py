"""Noticing the database's ``-wal`` and ``-shm`` files deleted or replaced behind SQLite's back.

In WAL mode a committed transaction lives in ``sessions.sqlite3-wal`` until a checkpoint
copies it into the database file. SQLite keeps that file open; if another program unlinks it
(a cleanup script, ``rm *-wal``, a sync tool replacing files), SQLite goes on committing into
the orphaned inode, every commit "succeeds", and everything since the last checkpoint is lost
at the next crash or close: silently. The ``-shm`` index is as vital: a process that opens
the database after it was replaced no longer shares the other processes' view.

:class:`WalWatch` records, when the connection has opened them, which files (device and
inode) SQLite holds open under those names, read from ``/proc/self/fd`` where there is one
(so it is the very file SQLite opened), else from the names at that moment. :meth:`changed`
compares the names with them, before every write transaction. Cheaply: a name can only be
unlinked or replaced by changing its directory, so each check first ``stat``s the directory
(about 2 µs) and looks at the files only when its modification or change time moved, or at
every :data:`FULL_CHECK_EVERY`-th write whatever the directory says (a clock too coarse to
tell two changes apart, a directory time set back by hand). The files' own ``stat`` is what
is avoided: a ``stat`` of the log measurably slows the next commit's ``fsync`` (about 50 µs
here, on a 0.45 ms checkpoint). Nothing is opened, on purpose: closing a descriptor of a file
drops every POSIX lock the process holds on it, SQLite's included.

Blocking (``stat``), never cancellable; called under the database's lock.
"""

from __future__ import annotations

import os
from pathlib import Path

_SIDE_FILES = ("-wal", "-shm")
FULL_CHECK_EVERY = 64
FileId = tuple[int, int]  # (st_dev, st_ino)


def _id_of(path: str) -> FileId | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _open_by_sqlite(paths: list[str]) -> dict[str, FileId]:
    """The files this process holds open under ``paths`` (Linux: ``/proc/self/fd``)."""
    found: dict[str, FileId] = {}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target in paths and target not in found:
            file_id = _id_of(f"/proc/self/fd/{fd}")  # the open file itself, not the name
            if file_id is not None:
                found[target] = file_id
    return found


class WalWatch:
    """The identity of the database's side files as SQLite opened them."""

    def __init__(self, db_path: Path) -> None:
        self.paths = [os.fspath(db_path) + suffix for suffix in _SIDE_FILES]
        self.directory = os.fspath(db_path.parent)
        self._ids: dict[str, FileId] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._checks = 0

    def start(self) -> None:
        """Record the files SQLite has open now (call after the connection's first read)."""
        self._stamp = self._directory_stamp()
        opened = _open_by_sqlite(self.paths)
        self._ids = {}
        for path in self.paths:
            file_id = opened.get(path) or _id_of(path)
            if file_id is not None:
                self._ids[path] = file_id

    def _directory_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.directory)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)

    def changed(self) -> str | None:
        """How a side file changed behind SQLite's back (``"sessions.sqlite3-wal was
        deleted"``), or None while each name still names the file SQLite has open."""
        self._checks += 1
        stamp = self._directory_stamp()  # read before the files: a later change moves it
        if stamp is not None and stamp == self._stamp and self._checks % FULL_CHECK_EVERY:
            return None
        self._stamp = stamp
        for path in self.paths:
            expected = self._ids.get(path)
            now = _id_of(path)
            if expected is None:
                if now is not None:  # created after the start (not open then): watch it now
                    self._ids[path] = now
                continue
            if now is None:
                return f"{Path(path).name} was deleted"
            if now != expected:
                return f"{Path(path).name} was replaced by another file"
        return None
