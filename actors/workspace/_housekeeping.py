"""Keeping the workspace store bounded: collect what no session needs, report what is kept.

:func:`collect` drops the marks of sessions that no longer exist (deleted) and the marks
older than the retention (``retention_days``; the newest mark of each session is kept, so
"as the session last saw them" stays known), then deletes every object no remaining mark
reaches (objects used within the grace period stay: a snapshot being taken). It runs from
the keeper at most once a day (in its task, after the prompt is up) and from ``--doctor
--repair``; :func:`report` is what ``--doctor`` shows.

Blocking; call it from a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from actors.workspace._objects import Collected, ObjectStore, Usage
from actors.workspace._snapshot import GRACE_SECONDS

DEFAULT_RETENTION_DAYS = 30.0
COLLECT_EVERY_SECONDS = 24 * 3600.0
LARGEST = 5


@dataclass(frozen=True)
class Housekept:
    """What a collection did."""

    sessions_gone: int  # sessions whose marks were dropped (deleted sessions)
    marks_expired: int  # marks older than the retention
    collected: Collected


@dataclass(frozen=True)
class Report:
    """What ``--doctor`` says of the workspace store."""

    location: str
    usage: Usage
    sessions: int  # sessions with snapshots
    gone: list[str]  # sessions with snapshots that no longer exist
    largest: list[tuple[str, int]]  # (session id, stored bytes its snapshots reach)
    collectable_bytes: int  # stored bytes only deleted sessions' snapshots reach

    def lines(self) -> list[str]:
        out = [
            f"Workspace snapshots: {self.usage.objects} objects, {size(self.usage.stored)} "
            f"stored ({size(self.usage.size)} of files), for {self.sessions} session(s) "
            f"({self.location}).",
        ]
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


def report(objects: ObjectStore, exists: Callable[[str], bool]) -> Report:
    """See :class:`Report` (reads every snapshot's trees: as slow as the store is large)."""
    by_session = objects.marks.roots()
    gone = sorted(sid for sid in by_session if not exists(sid))
    reached = {sid: objects.reachable(roots) for sid, roots in by_session.items()}
    sizes = objects.stored_sizes(set().union(*reached.values()) if reached else set())
    largest = sorted(((sid, sum(sizes.get(oid, 0) for oid in oids))
                      for sid, oids in reached.items() if sid not in gone),
                     key=lambda item: -item[1])[:LARGEST]
    live: set[bytes] = set()
    for sid, oids in reached.items():
        if sid not in gone:
            live |= oids
    only_gone = set().union(*(reached[sid] for sid in gone)) - live if gone else set()
    return Report(objects.location, objects.usage(), len(by_session), gone, largest,
                  sum(sizes.get(oid, 0) for oid in only_gone))
