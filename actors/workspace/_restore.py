"""Restoring the project's files to a snapshot: the plan shown first, then the writes.

A plan compares a fresh snapshot of the files as they are (the *undo* snapshot: the undo
point, which a rewind can be undone by restoring) with the target. Paths the target has
that ``.gitignore`` hides now are looked at too (the undo snapshot includes them), so
nothing is overwritten that was not kept first. The plan says, per path, what will happen,
and which of those paths were changed since the session last looked (``hand_edited``:
edits made by hand, or by anything but the session's tools), so they are not lost silently.

A restore touches only what both snapshots saw: a path either one kept out (too big,
unreadable) is left as it is now, and so is everything below a directory either one did not
look in (over the entry or depth caps, unreadable): never deleted, never overwritten
(:func:`changes_between`; the diff reports such a directory as one change and nothing below
it). Files the snapshots never saw (ignored ones inside a directory that goes away) stay,
and so does their directory.

Where each path of a restore stands (:func:`classify`) is told by a fresh snapshot: as the
undo point had it (still to do), as the target has it (done), or neither (changed since, by
the user, another session, a run without snapshots): a restore interrupted and taken up
again writes only the first, and never the last.

Applying (:func:`apply`) goes through the tools' sandbox
(:class:`~actors.tools._sandbox.Sandbox`): every path is walked from a descriptor of the
project with ``O_NOFOLLOW``, the entry at the path is replaced atomically as an entry (a
symlink there is replaced, never followed; a hard link's other names keep their content),
and the harness's own state is refused. Before each path is changed, ``still`` is asked
whether it is as the restore expects (as the plan's snapshot saw it); a path that is not is
left alone and reported. Order: files removed, then directories that go away (deepest
first), then directories made, then files written, then the permissions of directories
(deepest first: a directory made read-only is made so after what goes in it). Permissions
come back as kept (never setuid or setgid). ``stop`` (set from another thread: a signal)
is looked at between paths: the path under way is finished, and the rest left for later.

Blocking; call it from a worker thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from actors.tools._sandbox import Sandbox
from actors.workspace._crashpoints import reached
from actors.workspace._diff import Stat, Trees, diff, diffstat
from actors.workspace._snapshot import Snapshot
from actors.workspace._tree import DIR, LINK, OMITTED, UNSCANNED, Change, Entry

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
    if new is not None and new.kind == UNSCANNED:
        return LeftAlone(change.path, "not restored: that snapshot did not look in this "
                         "directory (over its entry or depth cap, or unreadable then); "
                         "nothing in it is touched")
    if old is not None and old.kind == UNSCANNED:
        return LeftAlone(change.path, "left as it is: not looked in now (over the entry or "
                         "depth cap, or unreadable); nothing in it is touched")
    if new is not None and new.kind == OMITTED:
        return LeftAlone(change.path, "not restored: that snapshot kept it out (too big or "
                         "unreadable then)")
    if old is not None and old.kind == OMITTED:
        return LeftAlone(change.path, "left as it is: too big (or unreadable) to keep a copy "
                         "first, so the change could not be undone")
    return None


def changes_between(trees: Trees, undo: bytes, target: bytes,
                    paths: Sequence[str] | None = None) -> tuple[list[Change], list[LeftAlone]]:
    """What a restore from snapshot ``undo`` to ``target`` changes (limited to ``paths``
    when given), and what it leaves alone (see the module doc)."""
    doable: list[Change] = []
    left: list[LeftAlone] = []
    only = None if paths is None else frozenset(paths)
    for change in diff(trees, undo, target):
        if only is not None and change.path not in only:
            continue
        alone = _left_alone(change)
        if alone is None:
            doable.append(change)
        else:
            left.append(alone)
    return doable, left


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
    doable, left = changes_between(trees, now.root, target)
    edited: frozenset[str] = frozenset()
    if since is not None and since != now.root:
        by_hand = {c.path for c in diff(trees, since, now.root) if not c.is_dir}
        edited = frozenset(c.path for c in doable if c.path in by_hand)
    return RestorePlan(target, now, tuple(doable), tuple(diffstat(trees, doable)), edited,
                       tuple(left), force)


def same(entry: Entry | None, other: Entry | None) -> bool:
    """Whether the path holds the same thing in both (content, kind and permissions; a side
    whose permissions were not kept matches any)."""
    if entry is None or other is None:
        return entry is other
    if entry.kind != other.kind or entry.kind in (OMITTED, UNSCANNED):
        return False
    if entry.kind != DIR and entry.oid != other.oid:
        return False
    return entry.mode == other.mode or not (entry.mode and other.mode)


@dataclass
class Standing:
    """Where the paths of a restore stand now (see :func:`classify`)."""

    todo: list[Change] = field(default_factory=list)  # as the undo point had them
    done: list[Change] = field(default_factory=list)  # as the target has them
    changed: list[Change] = field(default_factory=list)  # neither: changed since


def classify(trees: Trees, now: bytes, changes: Sequence[Change]) -> Standing:
    """Where each of ``changes`` stands in snapshot ``now`` (see the module doc). A
    directory the restore makes counts as still to do while its permissions are not yet
    the target's."""
    standing = Standing()
    for change in changes:
        current = trees.entry(now, change.path)
        if same(current, change.new):
            standing.done.append(change)
        elif same(current, change.old) or (
            change.new is not None and change.new.kind == DIR
            and current is not None and current.kind == DIR
        ):
            standing.todo.append(change)
        else:
            standing.changed.append(change)
    return standing


@dataclass
class Applied:
    """What :func:`apply` did."""

    changed: int = 0  # paths written or removed
    left: list[str] = field(default_factory=list)  # not as expected when their turn came
    stopped: bool = False  # ``stop`` was set: the rest is still to do


def _depth(path: str) -> int:
    return path.count("/")


def apply(sandbox: Sandbox, trees: Trees, changes: Sequence[Change], *,
          still: Callable[[Change], bool] = lambda _change: True,
          stop: threading.Event | None = None) -> Applied:
    """Carry ``changes`` out (see the module doc). Raises :class:`ToolFailed` or
    :class:`OSError` at the first path that cannot be changed."""
    removed_files = sorted((c for c in changes if not c.is_dir and c.new is None),
                           key=lambda c: -_depth(c.path))
    removed_dirs = sorted((c for c in changes if c.is_dir and c.new is None),
                          key=lambda c: -_depth(c.path))
    made_dirs = sorted((c for c in changes if c.is_dir and c.new is not None),
                       key=lambda c: _depth(c.path))
    written = [c for c in changes if not c.is_dir and c.new is not None]
    done = Applied()

    def turn(change: Change) -> bool:
        if stop is not None and stop.is_set():
            done.stopped = True
            return False
        if still(change):
            return True
        done.left.append(change.path)
        return False

    for change in removed_files:
        if not turn(change):
            if done.stopped:
                return done
            continue
        done.changed += sandbox.remove(change.path)
        reached("restore")
    for change in removed_dirs:
        if not turn(change):
            if done.stopped:
                return done
            continue
        done.changed += sandbox.remove_dir(change.path)
        reached("restore")
    for change in made_dirs:
        if not turn(change):
            if done.stopped:
                return done
            continue
        mode = change.new.mode if change.new is not None else 0
        sandbox.make_dir(change.path, mode | 0o700 if mode else 0o777)  # exact ones last

        done.changed += 1
        reached("restore")
    for change, data in _contents(trees, written):
        if not turn(change):
            if done.stopped:
                return done
            continue
        entry = change.new
        assert entry is not None
        if entry.kind == LINK:
            sandbox.put_link(change.path, os.fsdecode(data))
        else:
            sandbox.put_file(change.path, data, executable=entry.kind == "x", mode=entry.mode)
        done.changed += 1
        reached("restore")
    for change in reversed(made_dirs):
        entry = change.new
        if entry is not None and entry.mode and change.path not in done.left:
            sandbox.set_dir_mode(change.path, entry.mode)
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
