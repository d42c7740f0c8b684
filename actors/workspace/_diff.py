"""What changed between two snapshots: the paths, a diffstat, and a unified diff on demand.

:func:`diff` walks the two root trees together and descends only where their oids differ,
so its cost is the directories that changed, not the tree. It reports files and links
(added, deleted, modified: content, kind or permissions) and directories that appear, go
away (a restore creates or removes them) or change permissions. A kept-out entry on either
side is one change, marked as such (:attr:`Change.kept_out`), and nothing below it is
compared: a directory one snapshot did not look in (over the caps, unreadable) says nothing
of what it holds, so no file below it is reported as added or deleted, and a restore never
touches it.

Blocking (it reads objects); call it from a worker thread.
"""

from __future__ import annotations

import difflib
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from actors.workspace._objects import ObjectStore
from actors.workspace._tree import DIR, KEPT_OUT, Change, Entry, decode_tree

MAX_EXACT_LINES = 4000  # beyond this many lines a diffstat counts lines as multisets
MAX_DIFF_CHARS = 200_000
_BINARY_PROBE = 8000



@dataclass(frozen=True)
class Stat:
    """A diffstat line: lines added and removed (None for a binary file or a link)."""

    change: Change
    added: int | None
    removed: int | None

    @property
    def binary(self) -> bool:
        return self.added is None


class Trees:
    """Decoded trees of one object store, the most recently used kept in memory."""

    def __init__(self, objects: ObjectStore, keep: int = 4096) -> None:
        self.objects = objects
        self._keep = keep
        self._trees: OrderedDict[bytes, dict[str, Entry]] = OrderedDict()

    def get(self, oid: bytes | None) -> dict[str, Entry]:
        if oid is None:
            return {}
        found = self._trees.get(oid)
        if found is not None:
            self._trees.move_to_end(oid)
            return found
        entries = {e.name: e for e in decode_tree(self.objects.load(oid))}
        self._trees[oid] = entries
        if len(self._trees) > self._keep:
            self._trees.popitem(last=False)
        return entries

    def entry(self, root: bytes, path: str) -> Entry | None:
        """The entry at ``path`` in the tree ``root`` (None: not there)."""
        tree = self.get(root)
        parts = path.split("/")
        for part in parts[:-1]:
            found = tree.get(part)
            if found is None or found.kind != DIR:
                return None
            tree = self.get(found.oid)
        return tree.get(parts[-1])

    def files(self, root: bytes, prefix: str = "") -> Iterable[tuple[str, Entry]]:
        """Every entry below ``root`` but directories, as ``(path, entry)``."""
        for name, entry in sorted(self.get(root).items()):
            path = prefix + name
            if entry.kind == DIR:
                yield from self.files(entry.oid, path + "/")
            else:
                yield path, entry


def diff(trees: Trees, old: bytes | None, new: bytes | None) -> list[Change]:
    """The changes from snapshot ``old`` to snapshot ``new`` (None: empty), by path."""
    changes: list[Change] = []
    _diff_dirs(trees, old, new, "", changes)
    return changes


def _diff_dirs(trees: Trees, old: bytes | None, new: bytes | None, prefix: str,
               out: list[Change]) -> None:
    if old == new:
        return
    a, b = trees.get(old), trees.get(new)
    for name in sorted(a.keys() | b.keys()):
        x, y = a.get(name), b.get(name)
        if x == y:
            continue
        path = prefix + name
        if (x is not None and x.kind in KEPT_OUT) or (y is not None and y.kind in KEPT_OUT):
            if (x is not None and y is not None and x.kind in KEPT_OUT and y.kind in KEPT_OUT
                    and x.size == y.size):
                continue  # kept out on both sides, same size: nothing known to compare
            out.append(Change(path, x, y))  # one change, never what is below it: a side
            continue  # that was not looked at (or kept) says nothing of its contents
        x_dir = x is not None and x.kind == DIR
        y_dir = y is not None and y.kind == DIR
        if x_dir and y_dir:
            assert x is not None and y is not None
            if x.mode != y.mode and x.mode and y.mode:
                out.append(Change(path, x, y))  # its permissions changed
            _diff_dirs(trees, x.oid, y.oid, path + "/", out)
            continue
        if x_dir:  # a directory goes away (perhaps for a file)
            assert x is not None
            out.append(Change(path, x, None))
            _diff_dirs(trees, x.oid, None, path + "/", out)
            if y is not None:
                out.append(Change(path, None, y))
            continue
        if y_dir:
            assert y is not None
            if x is not None:
                out.append(Change(path, x, None))
            out.append(Change(path, None, y))
            _diff_dirs(trees, None, y.oid, path + "/", out)
            continue
        if (x is not None and y is not None and x.kind == y.kind and x.oid == y.oid
                and (x.mode == y.mode or not (x.mode and y.mode))):
            continue  # the same content, its mode unknown on one side (an older tree)
        out.append(Change(path, x, y))


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:_BINARY_PROBE]


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines()


def diffstat(trees: Trees, changes: Iterable[Change]) -> list[Stat]:
    """Lines added and removed per changed file (links, kept-out and binary files: None)."""
    files = [c for c in changes if not c.is_dir]
    wanted = [e.oid for c in files for e in (c.old, c.new)
              if e is not None and e.kind in ("f", "x")]
    blobs = trees.objects.load_many(wanted)
    stats = []
    for change in files:
        sides: list[bytes | None] = []
        for entry in (change.old, change.new):
            if entry is None:
                sides.append(b"")
            elif entry.kind in ("f", "x") and entry.oid in blobs:
                sides.append(blobs[entry.oid])
            else:
                sides.append(None)
        old, new = sides
        if old is None or new is None or is_binary(old) or is_binary(new):
            stats.append(Stat(change, None, None))
            continue
        added, removed = count_lines(_lines(old), _lines(new))
        stats.append(Stat(change, added, removed))
    return stats


def count_lines(old: list[str], new: list[str]) -> tuple[int, int]:
    """Lines added and removed from ``old`` to ``new``."""
    if len(old) + len(new) <= MAX_EXACT_LINES:
        added = removed = 0
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                removed += i2 - i1
            if tag in ("replace", "insert"):
                added += j2 - j1
        return added, removed
    a, b = Counter(old), Counter(new)
    return sum((b - a).values()), sum((a - b).values())


def unified(trees: Trees, change: Change, *, context: int = 3) -> str:
    """The unified diff of one change (a note instead for binary, kept-out or link sides)."""
    sides: list[bytes | None] = []
    notes = []
    for entry in (change.old, change.new):
        if entry is None:
            sides.append(b"")
        elif entry.kind in KEPT_OUT:
            sides.append(None)
            notes.append("kept out of the snapshot (too big or not read)")
        elif entry.kind == DIR:
            sides.append(None)
            notes.append("a directory")
        else:
            sides.append(trees.objects.load(entry.oid))
    old, new = sides
    head = f"--- a/{change.path}\n+++ b/{change.path}\n"
    if old is None or new is None:
        return head + f"({'; '.join(notes)})\n"
    if is_binary(old) or is_binary(new):
        return head + f"(binary: {len(old)} -> {len(new)} bytes)\n"
    lines = difflib.unified_diff(
        _lines(old), _lines(new), f"a/{change.path}", f"b/{change.path}", lineterm="", n=context
    )
    text = "\n".join(lines)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n[... diff cut ...]"
    return text + "\n" if text else head
