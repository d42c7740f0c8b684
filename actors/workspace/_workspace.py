"""One project's workspace snapshots: taking them, comparing them, restoring one.

:class:`Workspace` puts the parts together for a project directory: the sandbox the tools
use (the same confinement for reading and for restoring), the object store, the stat cache,
the rewind journal, and a lock per project (``flock`` on a file in the memory dir: shared by
snapshots, exclusive for a restore, so a snapshot never sees a restore half-way, even from
another process).

A restore is steps, so that its commit point can be the caller's (recording the rewind in
the session's marks): :meth:`begin_restore` (lock, plan again: the files as they are become
the undo point; journal), then the caller records it, then :meth:`apply_restore` (the
writes) and :meth:`end_restore` (the journal goes); :meth:`cancel_restore` when it could not
be recorded, :meth:`leave_restore` when a signal stopped it. A restore that was cut short is
told by :meth:`pending` (where each of its paths stands), carried on by
:meth:`finish_pending` (only the paths still as its undo point had them), or put back by a
restore of its own, :meth:`begin_put_back` (only the paths still as it left them). The
protocol is written out in :mod:`actors.workspace`.

Everything blocks; the runtime calls it from worker threads (never abandoned, so a cancel
waits for the step to end). ``Workspace`` is not thread-safe: one owner at a time (the
workspace actor).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.errors import StorageError, ToolFailed, UsageError
from actors.tools._sandbox import Place, Sandbox
from actors.workspace import _statcache
from actors.workspace._database import WorkspaceDatabase
from actors.workspace._diff import Stat, Trees, diff, diffstat, unified
from actors.workspace._journal import Journal, JournalEntry
from actors.workspace._objects import ObjectStore, PgObjects
from actors.workspace._paths import journal_path, project_digest, workspace_home
from actors.workspace._restore import (
    Applied,
    RestorePlan,
    Standing,
    apply,
    changes_between,
    classify,
    plan,
)
from actors.workspace._snapshot import Limits, Snapshot, Snapshotter, read_bounded
from actors.workspace._tree import DIR, EXEC, FILE, LINK, PERMISSIONS, Change, Entry, blob_oid

if TYPE_CHECKING:
    from actors.store import SessionReader

LOCK_WAIT_SECONDS = 30.0
OBJECTS_FILE = "objects.sqlite3"


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


@dataclass(frozen=True)
class Pending:
    """A restore of the project's files that was cut short (its journal was left), and
    where its paths stand now."""

    entry: JournalEntry  # the restore in force (a put-back not recorded: the one before it)
    recorded: bool  # False: it was never recorded, so nothing of it was written
    standing: Standing  # its paths: still to do, done, changed since
    now: bytes  # the snapshot that told it (the files as they are)

    @property
    def changed(self) -> list[str]:
        """The paths changed since the restore left them (left alone, whatever is done)."""
        return [c.path for c in self.standing.changed if not c.is_dir]


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
        self.journal = Journal(journal_path(memory_dir, self.project))
        self._restoring: JournalEntry | None = None  # the restore under way (steps 1 to 3)
        self._holding = False  # the exclusive lock is held (a restore, or taking one up)

    def close(self) -> None:
        """Write the stat cache and let go of the lock (idempotent)."""
        self.save_cache()
        if self._lock_fd != -1:
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- the project lock -----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, how: int) -> Iterator[None]:
        held = self._holding
        self._lock(how)
        try:
            yield
        finally:
            if not held:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _lock(self, how: int) -> None:
        if self._holding:
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
        """Step 1 of a restore (see the module doc): lock the project, plan again, and
        journal it. Nothing of the project is written. The caller then records it (under the
        entry's id: the commit point), calls :meth:`apply_restore`, and :meth:`end_restore`;
        or :meth:`cancel_restore` if it could not record it.

        :class:`UsageError` (nothing done) when the files changed since ``shown`` was
        planned in a way that changes what the restore does, or another restore is pending.
        """
        self._lock_for_restore()
        try:
            if self.journal.exists():
                raise UsageError("An interrupted rewind of this project's files is pending; "
                                 "finish it or put its files back first.")
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
            self._journal(entry)
        except BaseException:
            self._release()
            raise
        self._restoring = entry
        return entry, fresh

    @property
    def restoring(self) -> JournalEntry | None:
        """The restore under way (between :meth:`begin_restore` and its end)."""
        return self._restoring

    def apply_restore(self, entry: JournalEntry, changes: Sequence[Change], *,
                      stop: threading.Event | None = None) -> Applied:
        """Step 2: write ``changes`` (the restore's, or what is left of them), each only if
        the path is still as the snapshot the restore planned on saw it (see :mod:`._restore`).
        Raises :class:`ToolFailed` or :class:`OSError` at a path that cannot be written (the
        caller puts back what was written: :meth:`begin_put_back`)."""
        self._check_restoring(entry)
        return apply(self.sandbox, self.trees, changes, still=self._still, stop=stop)

    def end_restore(self, entry: JournalEntry) -> None:
        """Step 3: the restore is over (all of it done): forget its journal, let go of the
        lock."""
        self._check_restoring(entry)
        try:
            self.journal.finish()
        finally:
            self._release()

    def leave_restore(self, entry: JournalEntry) -> None:
        """Stopped half-way (a signal): the journal stays (the restore is pending), the lock
        is let go."""
        self._check_restoring(entry)
        self._release()

    def cancel_restore(self, entry: JournalEntry) -> None:
        """The restore could not be recorded: nothing of it was written; forget it."""
        self._check_restoring(entry)
        try:
            if entry.previous is not None:
                self._journal(entry.previous)  # the restore it was to put back is still on
            else:
                self.journal.finish()
        finally:
            self._release()

    # -- a restore that was cut short -----------------------------------------------------

    def pending(self, recorded: Callable[[str], bool]) -> Pending | None:
        """The restore of this project that was cut short, if any, and where its paths stand
        now (``recorded(id)``: whether the session recorded the restore journaled as ``id``).
        Reads only (the snapshot it takes stores its objects)."""
        if not self.journal.exists():
            return None
        with self._locked(fcntl.LOCK_SH):
            return self._pending(recorded)

    def _pending(self, recorded: Callable[[str], bool]) -> Pending | None:
        entry = self.journal.pending()
        if entry is None or entry.project != self.project:
            return None
        if not recorded(entry.id) and entry.previous is not None and recorded(
                entry.previous.id):
            entry = entry.previous  # its put-back was not recorded: nothing of it was written
        is_recorded = recorded(entry.id)
        if not is_recorded and entry.version > 1:  # nothing written before the record
            return Pending(entry, False, Standing(), bytes.fromhex(entry.undo))
        now = self.snapshotter.take(frozenset(entry.touched))
        changes, _left = changes_between(self.trees, bytes.fromhex(entry.undo),
                                         bytes.fromhex(entry.target), entry.paths)
        return Pending(entry, is_recorded, classify(self.trees, now.root, changes), now.root)

    def finish_pending(self, recorded: Callable[[str], bool], *,
                       stop: threading.Event | None = None) -> tuple[Pending, Applied] | None:
        """Carry on with the restore that was cut short: the paths still as its undo point
        had them are brought to its target; those changed since are left alone. Its journal
        goes once nothing is left to do (not when ``stop`` stopped it). None: nothing
        pending (another process finished it)."""
        self._lock_for_restore()
        try:
            found = self._pending(recorded)
            if found is None:
                return None
            if not found.recorded:
                self.journal.finish()
                return found, Applied()
            applied = apply(self.sandbox, self.trees, found.standing.todo, still=self._still,
                            stop=stop)
            if not applied.stopped:
                self.journal.finish()
            return found, applied
        finally:
            self._release()

    def begin_put_back(self, recorded: Callable[[str], bool], *, session: str = "",
                       label: str = "") -> tuple[JournalEntry, list[Change], Pending] | None:
        """Step 1 of putting back what an interrupted (or failed) restore wrote: the paths
        still as it left them go back to its undo point, those changed since stay. A
        restore of its own (recorded, applied, ended as :meth:`begin_restore`'s): the files
        as they are now are its undo point. None: nothing pending."""
        self._lock_for_restore()
        try:
            found = self._pending(recorded)
            if found is None or not (found.recorded or found.standing.done):
                if found is not None:  # never recorded: nothing of it was written
                    self.journal.finish()
                self._release()
                return None
            first = found.entry
            paths = tuple(c.path for c in found.standing.done)
            entry = JournalEntry(target=first.undo, undo=found.now.hex(), project=self.project,
                                 session=session or first.session, label=label,
                                 touched=first.touched, paths=paths, previous=first)
            changes, _left = changes_between(self.trees, found.now, bytes.fromhex(first.undo),
                                             paths)
            self._journal(entry)
        except BaseException:
            self._release()
            raise
        self._restoring = entry
        return entry, changes, found

    # -- the lock and the journal of a restore --------------------------------------------

    def _lock_for_restore(self) -> None:
        if self._restoring is not None:
            raise UsageError("A restore of this project's files is already in progress.")
        self._lock(fcntl.LOCK_EX)
        self._holding = True

    def _journal(self, entry: JournalEntry) -> None:
        try:
            self.journal.begin(entry)
        except OSError as exc:
            raise StorageError(f"Cannot write the rewind journal: {exc.strerror or exc} "
                               f"({self.journal.path}); nothing was restored.") from exc

    def _check_restoring(self, entry: JournalEntry) -> None:
        if self._restoring is None or self._restoring.id != entry.id:
            raise UsageError("No such restore in progress.")

    def _release(self) -> None:
        self._restoring = None
        if self._holding:
            self._holding = False
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _still(self, change: Change) -> bool:
        """Whether the path of ``change`` is as the restore expects it (``change.old``):
        unchanged since the snapshot just taken saw it (its stat key), or else the same
        content and permissions read again."""
        expected = change.old
        directory, _, name = change.path.rpartition("/")
        try:
            with self.sandbox.walk(change.path, missing_ok=True, follow_last=False) as place:
                st = None if place.missing else place.st
                if change.is_dir or expected is None or expected.kind == DIR:
                    if st is None:
                        return expected is None or (change.new is None)
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if change.new is not None and change.new.kind == DIR:
                        return is_dir  # made (or its permissions set): a directory is fine
                    return is_dir if expected is not None and expected.kind == DIR else False
                if st is None:
                    return False
                key = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                cached = self.cache.dirs.get(directory)
                if cached is not None and cached.keys.get(name) == key:
                    return True  # as the snapshot saw it (a racy key never matches)
                return self._same_content(place, st, expected)
        except (OSError, ToolFailed):
            return False

    def _same_content(self, place: Place, st: os.stat_result, expected: Entry) -> bool:
        if stat.S_ISLNK(st.st_mode):
            if expected.kind != LINK:
                return False
            text = os.readlink(place.name, dir_fd=place.parent_fd)
            return blob_oid(os.fsencode(text)) == expected.oid
        if not stat.S_ISREG(st.st_mode) or expected.kind not in (FILE, EXEC):
            return False
        if expected.mode and stat.S_IMODE(st.st_mode) & PERMISSIONS != expected.mode:
            return False
        if st.st_size != expected.size:
            return False
        fd, _ = self.sandbox.open_entry(place.parent_fd, place.name, "/".join(place.parts))
        try:
            data = read_bounded(fd, expected.size)
        finally:
            os.close(fd)
        return blob_oid(data) == expected.oid


def _paths(p: RestorePlan) -> set[tuple[str, str]]:
    return {(c.path, c.status) for c in p.changes}


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return str(exc)
