"""Restoring the project's files to a snapshot: the plan shown first, then the writes.

A plan compares a fresh snapshot of the files as they are (the *undo* snapshot: a rewind
can be undone by restoring it) with the target. Paths the target has that ``.gitignore``
hides now are looked at too (the undo snapshot includes them), so nothing is overwritten
that was not kept first. The plan says, per path, what will happen, and which of those
paths were changed since the session last looked (``hand_edited``: edits made by hand, or
by anything but the session's tools), so they are not lost silently.

Nothing is restored over what the snapshots could not keep: a path the target kept out
(too big) is left as it is now, and so is a file too big to be kept in the undo snapshot.
Files the snapshots never saw (ignored ones inside a directory that goes away) stay, and so
does their directory.

Applying goes through the tools' sandbox (:class:`~actors.tools._sandbox.Sandbox`): every
path is walked from a descriptor of the project with ``O_NOFOLLOW``, the entry at the path
is replaced atomically as an entry (a symlink there is replaced, never followed; a hard
link's other names keep their content), and the harness's own state is refused. Order:
files removed, then directories that go away (deepest first), then directories made, then
files written.

Blocking; call it from a worker thread. A restore interrupted half-way is finished or undone
by the journal (:mod:`._journal`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from actors.tools._sandbox import Sandbox
from actors.workspace._crashpoints import reached
from actors.workspace._diff import Stat, Trees, diff, diffstat
from actors.workspace._snapshot import Snapshot
from actors.workspace._tree import DIR, KEPT_OUT, LINK, Change, Entry

LOAD_BATCH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LeftAlone:
    """A path a restore does not change, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class RestorePlan:
    """What restoring ``target`` over the files as they are (``undo``) would do."""

    target: bytes
    undo: Snapshot  # the files as they are now (hand edits included)
    changes: tuple[Change, ...]  # from now to the target: what will be done
    stats: tuple[Stat, ...]  # a diffstat line per file of ``changes``
    hand_edited: frozenset[str]  # paths of ``changes`` changed since the session looked
    left_alone: tuple[LeftAlone, ...]
    touched: frozenset[str]  # paths the target has that .gitignore hides now

    @property
    def empty(self) -> bool:
        return not self.changes

    def files(self) -> list[Change]:
        return [c for c in self.changes if not c.is_dir]


def _left_alone(change: Change) -> LeftAlone | None:
    old, new = change.old, change.new
    if new is not None and new.kind in KEPT_OUT:
        return LeftAlone(change.path, "not restored: that snapshot kept it out (too big or "
                         "unreadable then)")
    if old is not None and old.kind in KEPT_OUT:
        return LeftAlone(change.path, "left as it is: too big (or unreadable) to keep a copy "
                         "first, so the change could not be undone")
    return None


def plan(
    take: Callable[[frozenset[str]], Snapshot],
    trees: Trees,
    target: bytes,
    *,
    since: bytes | None = None,
    touched: Sequence[str] = (),
) -> RestorePlan:
    """The plan to bring the files to ``target``. ``take(force)`` snapshots the project;
    ``since``: the session's latest snapshot (what it last saw), to flag hand edits;
    ``touched``: paths to look at even if ignored (an interrupted restore's)."""
    force = frozenset(touched)
    now = take(force)
    hidden = frozenset(
        c.path for c in diff(trees, now.root, target)
        if c.old is None and c.new is not None and c.new.kind != DIR
    )
    if hidden - force:  # perhaps there, but ignored: look before writing over them
        force |= hidden
        now = take(force)
    changes = diff(trees, now.root, target)
    doable, left = [], []
    for change in changes:
        alone = _left_alone(change)
        if alone is None:
            doable.append(change)
        else:
            left.append(alone)
    edited: frozenset[str] = frozenset()
    if since is not None and since != now.root:
        by_hand = {c.path for c in diff(trees, since, now.root) if not c.is_dir}
        edited = frozenset(c.path for c in doable if c.path in by_hand)
    return RestorePlan(target, now, tuple(doable), tuple(diffstat(trees, doable)), edited,
                       tuple(left), force)


def _depth(path: str) -> int:
    return path.count("/")


def apply(sandbox: Sandbox, trees: Trees, plan: RestorePlan) -> int:
    """Carry ``plan`` out (see the module doc); the number of paths changed. Raises
    :class:`ToolFailed` or :class:`OSError` at the first path that cannot be changed."""
    removed_files = [c for c in plan.changes if not c.is_dir and c.new is None]
    removed_dirs = sorted((c for c in plan.changes if c.is_dir and c.new is None),
                          key=lambda c: -_depth(c.path))
    made_dirs = sorted((c for c in plan.changes if c.is_dir and c.new is not None),
                       key=lambda c: _depth(c.path))
    written = [c for c in plan.changes if not c.is_dir and c.new is not None]
    done = 0
    for change in sorted(removed_files, key=lambda c: -_depth(c.path)):
        done += sandbox.remove(change.path)
        reached("restore")
    for change in removed_dirs:
        done += sandbox.remove_dir(change.path)
        reached("restore")
    for change in made_dirs:
        sandbox.make_dir(change.path)
        done += 1
        reached("restore")
    for change, data in _contents(trees, written):
        entry = change.new
        assert entry is not None
        if entry.kind == LINK:
            sandbox.put_link(change.path, os.fsdecode(data))
        else:
            sandbox.put_file(change.path, data, executable=entry.kind == "x")
        done += 1
        reached("restore")
    return done


def _contents(trees: Trees, changes: list[Change]) -> Iterator[tuple[Change, bytes]]:
    """Each change with its new content, loaded in batches of bounded size."""
    batch: list[Change] = []
    size = 0
    for change in changes:
        entry: Entry | None = change.new
        assert entry is not None
        batch.append(change)
        size += entry.size
        if size >= LOAD_BATCH_BYTES:
            yield from _load(trees, batch)
            batch, size = [], 0
    yield from _load(trees, batch)


def _load(trees: Trees, batch: list[Change]) -> Iterator[tuple[Change, bytes]]:
    blobs = trees.objects.load_many(c.new.oid for c in batch if c.new is not None)
    for change in batch:
        assert change.new is not None
        data = blobs.get(change.new.oid)
        if data is None:
            data = trees.objects.load(change.new.oid)  # raises: the object is missing
        yield change, data
