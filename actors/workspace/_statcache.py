"""The stat cache: what the last snapshot of a project saw, so the next one reads only what
changed.

For every directory it keeps the ``lstat`` key of each file (mode, size, mtime, ctime,
inode: a content change moves mtime or ctime, a replacement the inode), the file's oid and
permissions, each subdirectory's tree, and the directory's own tree and permissions. A
directory whose keys, permissions and subtrees are all equal is its cached tree, without
reading a byte; a file whose key changed is read and hashed again.

*Racily clean* files (modified within :data:`RACY_NS` of the walk, where a later write could
keep the same timestamp) are stored with a key that never matches, so the next snapshot reads
them again; git does the same.

A directory's *listing* is kept too: the names of its files and of the subdirectories the
walk entered, the ``.gitignore`` decisions made (by the digest of the rules in force), under
the directory's own stamp (mtime, ctime, inode, device). Creating, removing or renaming an
entry updates a directory's mtime and ctime (POSIX requires it), so while the stamp is the
same the names are, and the next walk only ``lstat``s the files it names: no ``scandir``, no
matching. A stamp whose mtime is racily recent is not kept (an entry added later in the same
clock tick would not move it), as for files; neither is a listing made with paths forced in.

The cache belongs to one project and one object store on this machine. It is kept in
``<memory-dir>/workspace/cache/`` (the harness's state, which no tool may read or write),
written atomically (a temporary file renamed over the name) and read back with ``marshal``;
a missing or unreadable cache only costs a snapshot that reads every file. It is never
trusted for objects a collection may have deleted: it names a root, and is used only while
that root was used within half the collection's grace period (see :mod:`._objects`).

Blocking (file I/O); call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from dataclasses import dataclass, field
from pathlib import Path

VERSION = 4  # 2: 160-bit oids; 3: the directory's listing; 4: permissions
RACY_NS = 2_000_000_000  # files this close to the walk's start are read again next time
RACY: tuple[int, ...] = (0, -1, 0, 0, 0)  # a key no file has

Key = tuple[int, ...]
# A directory's listing as a walk saw it, reusable while the directory's own stat is the same
# (see the module doc): (stamp, rules digest, has a .gitignore, entries listed, the names of
# its files and links, the names of the subdirectories entered).
Listing = tuple[Key, bytes, bool, int, tuple[str, ...], tuple[str, ...]]


@dataclass(slots=True)
class DirState:
    """One directory as the last snapshot saw it."""

    tree: bytes
    keys: dict[str, Key]  # file or link name -> its lstat key (RACY: read it again)
    entries: dict[str, tuple[str, bytes, int, int]]  # name -> (kind, oid, size, mode), files
    # and links
    subs: dict[str, bytes]  # subdirectory name -> its tree (kept-out ones: not here)
    files: int  # files kept below (this directory included)
    size: int  # their bytes
    listing: Listing | None = None  # None: list it again next time
    mode: int = 0  # the directory's own permissions

    def dump(self) -> tuple[object, ...]:
        return (self.tree, self.keys, self.entries, self.subs, self.files, self.size,
                self.listing, self.mode)


@dataclass
class StatCache:
    """What the last snapshot of one project saw (see the module doc)."""

    dirs: dict[str, DirState] = field(default_factory=dict)  # "" is the root, then "a/b"
    root: bytes | None = None  # the tree the cache describes
    used_at: float = 0.0  # when that tree was last stored or marked used (time.time())
    epoch: int = -1  # the object store's epoch when it was (see _objects)
    dirty: bool = False  # changed since it was written

    def clear(self) -> None:
        self.dirs.clear()
        self.root = None
        self.used_at = 0.0
        self.epoch = -1
        self.dirty = True

    def forget_below(self, rel: str) -> None:
        """Drop the directories at and below ``rel`` (a directory that went away)."""
        prefix = rel + "/"
        for key in [k for k in self.dirs if k == rel or k.startswith(prefix)]:
            del self.dirs[key]


def cache_path(cache_dir: Path, project: str, store_identity: str) -> Path:
    digest = hashlib.sha256(f"{project}\0{store_identity}".encode()).hexdigest()[:24]
    return cache_dir / f"{digest}.stat"


def load(path: Path, project: str, store_identity: str) -> StatCache:
    """The cache at ``path``, or an empty one (missing, unreadable, another project or
    store, an older version)."""
    try:
        with open(path, "rb") as f:
            data = marshal.load(f)
        version, owner, store, root, used_at, epoch, dirs = data
        if (version, owner, store) != (VERSION, project, store_identity):
            return StatCache()
        return StatCache(
            {rel: DirState(*state) for rel, state in dirs.items()}, root, float(used_at),
            int(epoch),
        )
    except (OSError, EOFError, ValueError, TypeError):
        return StatCache()


def save(path: Path, cache: StatCache, project: str, store_identity: str) -> None:
    """Write ``cache`` atomically (no fsync: a cache lost to a power cut costs one slow
    snapshot, never a wrong one)."""
    data = marshal.dumps((VERSION, project, store_identity, cache.root, cache.used_at,
                          cache.epoch,
                          {rel: state.dump() for rel, state in cache.dirs.items()}))
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    cache.dirty = False
