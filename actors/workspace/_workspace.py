"""One project's workspace snapshots: taking them, comparing them, restoring one.

:class:`Workspace` puts the parts together for a project directory: the sandbox the tools
use (the same confinement for reading and for restoring), the object store, the stat cache,
the rewind journal, and a lock per project (``flock`` on a file in the memory dir: shared by
snapshots, exclusive for a restore, so a snapshot never sees a restore half-way, even from
another process).

A restore is three steps so that its commit point can be the caller's (recording the rewind
in the session, through the session's one writer): :meth:`begin_restore` (lock, plan again,
journal, write the files), then the caller commits, then :meth:`finish_restore`; or
:meth:`abort_restore` to put the files back. :meth:`recover` finishes or undoes a restore
that a crash cut short (see :mod:`._journal`).

Everything blocks; the runtime calls it from worker threads (never abandoned, so a cancel
waits for the step to end). ``Workspace`` is not thread-safe: one owner at a time (the
workspace actor).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.errors import RestoreFailed, StorageError, ToolFailed, UsageError
from actors.tools._sandbox import Sandbox
from actors.workspace import _statcache
from actors.workspace._database import WorkspaceDatabase
from actors.workspace._diff import Stat, Trees, diff, diffstat, unified
from actors.workspace._journal import Journal, JournalEntry
from actors.workspace._objects import ObjectStore, PgObjects
from actors.workspace._restore import RestorePlan, apply, plan
from actors.workspace._snapshot import Limits, Snapshot, Snapshotter
from actors.workspace._tree import Change

if TYPE_CHECKING:
    from actors.store import SessionReader

LOCK_WAIT_SECONDS = 30.0
OBJECTS_FILE = "objects.sqlite3"


def workspace_home(memory_dir: Path) -> Path:
    """``<memory-dir>/workspace`` and its folders, created 0700."""
    home = memory_dir / "workspace"
    for directory in (home, home / "cache", home / "journal", home / "locks"):
        if not directory.is_dir():
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=0o700)
                os.chmod(directory, 0o700)
    return home


def open_objects(memory_dir: Path, store: SessionReader | None = None) -> ObjectStore:
    """The object store beside ``store``: tables in its database for PostgreSQL, a file of
    its own in the memory dir for SQLite (or when no store is given).

    On PostgreSQL the objects get a connection of their own to the store's database and
    schema: a big snapshot then never holds the session store's connection (its checkpoints
    do not wait), and a failure of one is not taken for a failure of the other. Close it with
    :meth:`ObjectStore.close`."""
    own = store.companion_database() if store is not None else None
    if own is not None:
        try:
            return ObjectStore(PgObjects(own))
        except BaseException:
            own.close()
            raise
    try:
        home = workspace_home(memory_dir)
    except OSError as exc:
        raise StorageError(f"{exc.strerror or exc} ({exc.filename or memory_dir}).") from exc
    return ObjectStore(WorkspaceDatabase(home / OBJECTS_FILE))


def project_digest(project: str) -> str:
    return hashlib.sha256(project.encode("utf-8", "surrogateescape")).hexdigest()[:24]


@dataclass(frozen=True)
class Recovered:
    """A restore a crash cut short, and what recovery made of it."""

    entry: JournalEntry
    done: bool  # finished (the session had recorded it) or undone

    def __str__(self) -> str:
        label = f" {self.entry.label}" if self.entry.label else ""
        what = f"A rewind of the project's files{label}"
        if self.done:
            return f"{what} was interrupted after it was recorded; it has been finished."
        return (f"{what} was interrupted before it was recorded; the files were put back as "
                "they were, so it did not happen.")


class Workspace:
    """The snapshots of one project (see the module doc)."""

    def __init__(
        self,
        project: Path,
        memory_dir: Path,
        objects: ObjectStore,
        *,
        limits: Limits | None = None,
        protected: Sequence[Path] = (),
    ) -> None:
        self.sandbox = Sandbox(project, [memory_dir, *protected])
        self.project = self.sandbox.real_root
        self.objects = objects
        try:
            home = workspace_home(memory_dir)
            digest = project_digest(self.project)
            self._lock_fd = os.open(home / "locks" / f"{digest}.lock",
                                    os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StorageError(f"{exc.strerror or exc} ({exc.filename or memory_dir}).") from exc
        self._cache_path = _statcache.cache_path(home / "cache", self.project, objects.identity)
        self.cache = _statcache.load(self._cache_path, self.project, objects.identity)
        self.snapshotter = Snapshotter(self.sandbox, objects, self.cache, limits)
        self.trees = Trees(objects)
        self.journal = Journal(home / "journal" / f"{digest}.json")
        self._restoring: JournalEntry | None = None

    def close(self) -> None:
        """Write the stat cache and let go of the lock (idempotent)."""
        self.save_cache()
        if self._lock_fd != -1:
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- the project lock -----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, how: int) -> Iterator[None]:
        self._lock(how)
        try:
            yield
        finally:
            if self._restoring is None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _lock(self, how: int) -> None:
        if self._restoring is not None:
            return  # held exclusively for the restore in progress
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(self._lock_fd, how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StorageError(
                        "Another process has been restoring this project's files for "
                        f"{LOCK_WAIT_SECONDS:g} s; try again when it is done."
                    ) from None
                time.sleep(0.01)

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self, force: frozenset[str] = frozenset(),
                 stop: threading.Event | None = None) -> Snapshot:
        """The files as they are now (see :mod:`._snapshot`); ``stop`` set from another
        thread stops it (:class:`SnapshotStopped`)."""
        with self._locked(fcntl.LOCK_SH):
            self.snapshotter.stop = stop
            try:
                return self.snapshotter.take(force)
            finally:
                self.snapshotter.stop = None

    def save_cache(self) -> None:
        """Write the stat cache if it changed (a failure costs only speed)."""
        if self.cache.dirty:
            with contextlib.suppress(OSError):
                _statcache.save(self._cache_path, self.cache, self.project,
                                self.objects.identity)

    def diff(self, old: bytes | None, new: bytes | None) -> list[Change]:
        return diff(self.trees, old, new)

    def diffstat(self, changes: Sequence[Change]) -> list[Stat]:
        return diffstat(self.trees, changes)

    def unified(self, change: Change) -> str:
        return unified(self.trees, change)

    def has(self, root: bytes) -> bool:
        return not self.objects.missing([root])

    # -- restoring ------------------------------------------------------------------------

    def plan_restore(self, target: bytes, *, since: bytes | None = None) -> RestorePlan:
        """What restoring ``target`` would do now (nothing is written but the undo
        snapshot's objects)."""
        if not self.has(target):
            raise UsageError(f"The snapshot {target.hex()[:12]} is not in the workspace store "
                             f"({self.objects.location}); it may have been collected.")
        with self._locked(fcntl.LOCK_SH):
            return plan(self.snapshotter.take, self.trees, target, since=since)

    def begin_restore(
        self, shown: RestorePlan, *, session: str = "", label: str = "",
        since: bytes | None = None,
    ) -> tuple[JournalEntry, RestorePlan]:
        """Lock the project, plan again, journal, and write the files of ``shown``'s
        target; the caller then commits (records the rewind under the entry's id) and calls
        :meth:`finish_restore`, or :meth:`abort_restore`.

        :class:`UsageError` (nothing written) when the files changed since ``shown`` was
        planned in a way that changes what the restore does; :class:`RestoreFailed` when a
        file cannot be written (the files are put back first if at all possible).
        """
        if self._restoring is not None:
            raise UsageError("A restore of this project's files is already in progress.")
        self._lock(fcntl.LOCK_EX)
        try:
            fresh = plan(self.snapshotter.take, self.trees, shown.target, since=since,
                         touched=sorted(shown.touched))
            if _paths(fresh) != _paths(shown) or fresh.hand_edited != shown.hand_edited:
                raise UsageError(
                    "The project's files changed while the rewind was being confirmed; "
                    "nothing was restored. Rewind again to see what it would do now."
                )
            entry = JournalEntry(target=fresh.target.hex(), undo=fresh.undo.root.hex(),
                                 project=self.project, session=session, label=label,
                                 touched=tuple(sorted(fresh.touched)))
            try:
                self.journal.begin(entry)
            except OSError as exc:
                raise StorageError(f"Cannot write the rewind journal: {exc.strerror or exc} "
                                   f"({self.journal.path}); nothing was restored.") from exc
        except BaseException:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            raise
        self._restoring = entry
        try:
            apply(self.sandbox, self.trees, fresh)
        except Exception as exc:  # whatever stopped it, the files go back as they were
            self._put_back(entry, _cause(exc))
        return entry, fresh

    def finish_restore(self, entry: JournalEntry) -> None:
        """The rewind was recorded: the restore is done."""
        self._check_restoring(entry)
        try:
            self.journal.finish()
        finally:
            self._release()

    def abort_restore(self, entry: JournalEntry, reason: str) -> None:
        """The rewind could not be recorded: put the files back as they were, and raise
        :class:`RestoreFailed` saying so."""
        self._check_restoring(entry)
        self._put_back(entry, reason)

    def _check_restoring(self, entry: JournalEntry) -> None:
        if self._restoring is None or self._restoring.id != entry.id:
            raise UsageError("No such restore in progress.")

    def _release(self) -> None:
        self._restoring = None
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _put_back(self, entry: JournalEntry, reason: str) -> None:
        """Restore the undo snapshot of ``entry``; raise :class:`RestoreFailed`."""
        try:
            self._restore_to(bytes.fromhex(entry.undo), entry.touched)
        except (ToolFailed, OSError, StorageError) as exc:
            self._restoring = None  # the lock is released; the journal stays for recovery
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            raise RestoreFailed(
                f"Restoring the project's files failed ({reason}), and so did putting them "
                f"back ({_cause(exc)}). The rewind is still pending: the next start of the "
                "harness in this project finishes putting the files back.",
                rolled_back=False,
            ) from None
        try:
            self.journal.finish()
        finally:
            self._release()
        raise RestoreFailed(
            f"Restoring the project's files failed ({reason}); they were put back as they "
            "were, so the rewind did not happen.",
            rolled_back=True,
        )

    def _restore_to(self, root: bytes, touched: Sequence[str]) -> None:
        again = plan(self.snapshotter.take, self.trees, root, touched=touched)
        apply(self.sandbox, self.trees, again)

    def recover(self, committed: Callable[[JournalEntry], bool]) -> Recovered | None:
        """Finish or undo a restore a crash cut short (None: there was none). ``committed``
        says whether the session recorded the rewind."""
        entry = self.journal.pending()
        if entry is None:
            return None
        if entry.project != self.project:
            return None
        self._lock(fcntl.LOCK_EX)
        try:
            entry = self.journal.pending()  # another process may have recovered it meanwhile
            if entry is None:
                return None
            done = committed(entry)
            try:
                self._restore_to(bytes.fromhex(entry.target if done else entry.undo),
                                 entry.touched)
            except (ToolFailed, OSError, StorageError) as exc:
                raise RestoreFailed(
                    f"An interrupted rewind of the project's files could not be "
                    f"{'finished' if done else 'undone'} ({_cause(exc)}); it will be tried "
                    "again at the next start.",
                    rolled_back=False,
                ) from None
            self.journal.finish()
            return Recovered(entry, done)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)


def _paths(p: RestorePlan) -> set[tuple[str, str]]:
    return {(c.path, c.status) for c in p.changes}


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return str(exc)
