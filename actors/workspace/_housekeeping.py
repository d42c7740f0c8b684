"""Keeping the workspace store bounded: collect what no session needs, keep it under its
quota, report what is kept.

:func:`collect` drops the marks of sessions that no longer exist (deleted) and the marks
older than the retention (``retention_days``; the newest mark of each session is kept, so
"as the session last saw them" stays known), then deletes every object no remaining mark
reaches (objects used within the grace period stay: a snapshot being taken). It runs from
the keeper at most once a day (in its task, after the prompt is up) and from ``--doctor
--repair``; :func:`report` is what ``--doctor`` shows (per project too).

The quota (:func:`make_room`, from the keeper after a snapshot that stored something): when
the bytes stored pass it, the oldest marks of the other sessions are dropped, then the
oldest of this session's, a batch at a time, each followed by a collection, until the store
fits. A session's newest mark and its newest rewind (the undo point ``--undo`` goes back to)
are never dropped, nor is anything used within the collection's grace period. What still
does not fit is answered, so the keeper can say that a snapshot could not be kept. The
default quota is :data:`DEFAULT_QUOTA_BYTES`, or :data:`QUOTA_PER_PROJECT` times the
project's kept size when that is more (``--snapshot-quota`` sets it).

Blocking; call it from a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from actors.workspace._objects import Collected, ObjectStore, Usage
from actors.workspace._snapshot import GRACE_SECONDS

DEFAULT_RETENTION_DAYS = 30.0
COLLECT_EVERY_SECONDS = 24 * 3600.0
LARGEST = 5
DEFAULT_QUOTA_BYTES = 1 << 30
QUOTA_PER_PROJECT = 4  # the default quota is at least this many times the project's size
DROP_BATCH = 64  # marks dropped before each collection, at least


def quota_for(setting: int | None, project_bytes: int) -> int:
    """The quota in force: ``setting``, or the default (see the module doc)."""
    if setting is not None:
        return setting
    return max(DEFAULT_QUOTA_BYTES, QUOTA_PER_PROJECT * project_bytes)


@dataclass(frozen=True)
class Room:
    """What :func:`make_room` did."""

    before: int  # bytes stored before
    after: int  # and after
    quota: int
    dropped: int  # marks dropped

    @property
    def fits(self) -> bool:
        return self.after <= self.quota


def make_room(objects: ObjectStore, quota: int, session_id: str, *,
              grace_seconds: float = GRACE_SECONDS) -> Room:
    """Bring the store under ``quota`` (see the module doc)."""
    before = objects.stored_bytes()
    dropped = 0
    marks = objects.marks
    for own in (False, True):
        while objects.stored_bytes() > quota:
            waiting = marks.oldest(session_id, own=own, limit=1_000_000)
            if not waiting:
                break
            dropped += marks.forget(waiting[: max(DROP_BATCH, len(waiting) // 4)])
            roots = [root for kept in marks.roots().values() for root in kept]
            objects.collect(roots, grace_seconds=grace_seconds)
    return Room(before, objects.stored_bytes(), quota, dropped)


@dataclass(frozen=True)
class Housekept:
    """What a collection did."""

    sessions_gone: int  # sessions whose marks were dropped (deleted sessions)
    marks_expired: int  # marks older than the retention
    collected: Collected

    def line(self, retention_days: float) -> str:
        """What ``--doctor --repair`` says it did."""
        return (f"Workspace snapshots collected: {self.sessions_gone} deleted session(s), "
                f"{self.marks_expired} snapshot(s) older than {retention_days:g} days, "
                f"{self.collected.deleted} objects ({size(self.collected.freed_bytes)}).")


@dataclass(frozen=True)
class Report:
    """What ``--doctor`` says of the workspace store."""

    location: str
    usage: Usage
    sessions: int  # sessions with snapshots
    gone: list[str]  # sessions with snapshots that no longer exist
    largest: list[tuple[str, int]]  # (session id, stored bytes its snapshots reach)
    collectable_bytes: int  # stored bytes only deleted sessions' snapshots reach
    projects: list[tuple[str, int, int]] = field(default_factory=list)  # (project, stored
    # bytes its sessions' snapshots reach, sessions), largest first
    quota: int | None = None

    def lines(self) -> list[str]:
        quota = f"; quota {size(self.quota)}" if self.quota is not None else ""
        out = [
            f"Workspace snapshots: {self.usage.objects} objects, {size(self.usage.stored)} "
            f"stored ({size(self.usage.size)} of files{quota}), for {self.sessions} "
            f"session(s) ({self.location}).",
        ]
        for project, stored, sessions in self.projects:
            out.append(f"  {project or '(no project recorded)'}: {size(stored)} "
                       f"({sessions} session{'s' if sessions != 1 else ''})")
        if self.largest:
            out.append("  largest: " + ", ".join(f"{sid} {size(n)}" for sid, n in self.largest))
        if self.gone:
            out.append(f"  {len(self.gone)} deleted session(s) still have snapshots "
                       f"({size(self.collectable_bytes)} only they use); "
                       "`harness --doctor --repair` collects them now (it also happens once "
                       "a day).")
        return out


def size(n: int) -> str:
    """``n`` bytes for people: 512 B, 12.3 KB, 4.5 MB, 1.2 GB."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def collect(
    objects: ObjectStore,
    exists: Callable[[str], bool],
    *,
    retention_days: float = DEFAULT_RETENTION_DAYS,
    grace_seconds: float = GRACE_SECONDS,
) -> Housekept:
    """See the module doc. ``exists(session_id)`` says whether a session is still there."""
    marks = objects.marks
    gone = [sid for sid in marks.sizes() if not exists(sid)]
    marks.forget_sessions(gone)
    expired = marks.expire(time.time() - retention_days * 86400)
    roots = [root for kept in marks.roots().values() for root in kept]
    collected = objects.collect(roots, grace_seconds=grace_seconds)
    objects.set_meta("collected_at", str(time.time()))
    return Housekept(len(gone), expired, collected)


def due(objects: ObjectStore) -> bool:
    """Whether a collection has not run for a day."""
    last = objects.meta("collected_at")
    return last is None or time.time() - float(last) > COLLECT_EVERY_SECONDS


def report(objects: ObjectStore, exists: Callable[[str], bool],
           project_of: Callable[[str], str] = lambda _sid: "",
           quota: int | None = None) -> Report:
    """See :class:`Report` (reads every snapshot's trees: as slow as the store is large).
    ``project_of(session id)``: the session's project (asked of the live ones)."""
    by_session = objects.marks.roots()
    gone = sorted(sid for sid in by_session if not exists(sid))
    reached = {sid: objects.reachable(roots) for sid, roots in by_session.items()}
    sizes = objects.stored_sizes(set().union(*reached.values()) if reached else set())
    largest = sorted(((sid, sum(sizes.get(oid, 0) for oid in oids))
                      for sid, oids in reached.items() if sid not in gone),
                     key=lambda item: -item[1])[:LARGEST]
    live: set[bytes] = set()
    by_project: dict[str, tuple[set[bytes], int]] = {}
    for sid, oids in reached.items():
        if sid not in gone:
            live |= oids
            project = project_of(sid)
            kept, count = by_project.get(project, (set(), 0))
            by_project[project] = (kept | oids, count + 1)
    projects = sorted(((project, sum(sizes.get(oid, 0) for oid in oids), count)
                       for project, (oids, count) in by_project.items()),
                      key=lambda item: -item[1])
    only_gone = set().union(*(reached[sid] for sid in gone)) - live if gone else set()
    return Report(objects.location, objects.usage(), len(by_session), gone, largest,
                  sum(sizes.get(oid, 0) for oid in only_gone), projects, quota)
