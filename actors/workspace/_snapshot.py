"""Taking a snapshot: walk the project, read what changed, store the new objects.

The walk starts from a descriptor of the project opened by the tools' sandbox
(:class:`~actors.tools._sandbox.Sandbox`) and opens each directory relative to its parent
with ``O_NOFOLLOW``: symlinks are recorded as links and never followed, the harness's own
state directory (recognised by device and inode) is never entered, a hard link to one of its
files is never read, and ``.git`` is never entered. Ignored paths (:mod:`._ignore`) are not
looked at.

Cost: one ``lstat`` per file, compared with the stat cache (:mod:`._statcache`); a directory
whose own stat is what it was is not listed again (its cached listing and ``.gitignore``
decisions are reused while the rules in force are the same); only files whose key changed
are read and hashed, only directories that changed get a new tree, and
only objects the store lacks are compressed and written, in one transaction. An unchanged
tree touches the database at most once in a while (to mark its root as used).

Caps (:class:`Limits`): a file over ``max_file_bytes`` is kept out; when the files kept
would pass ``max_project_bytes``, the largest are kept out until they fit; past
``max_entries`` kept entries (files, links and directories the snapshot keeps: ignored ones
do not count) or ``max_depth`` levels, directories are not looked at. What is kept out is an
entry of its own in the tree (see :mod:`._tree`), and each snapshot reports what it newly
kept out and which directories it did not look in (:attr:`Snapshot.unscanned`), so nothing
goes missing silently. Permissions (``0o777`` of the mode) of files and directories are kept
in the entries.

A changed file's new content is handed to the store with the oid of its previous version
(the *base*), which the store may keep it as a delta against (see :mod:`._objects`).

Blocking; run it in a worker thread. Setting :attr:`Snapshotter.stop` stops it at the next
directory (:class:`SnapshotStopped`; the stat cache is left as it was). Interrupting it (a
kill -9 included) leaves the store consistent: objects are written in one transaction
before the snapshot's id exists, so at worst unreferenced objects remain for the next
collection.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from actors.core.errors import StorageError, ToolFailed
from actors.tools._sandbox import Sandbox
from actors.workspace._crashpoints import reached
from actors.workspace._ignore import Rules
from actors.workspace._objects import BLOB, TREE, ObjectStore
from actors.workspace._statcache import RACY, RACY_NS, DirState, Key, Listing, StatCache
from actors.workspace._tree import (
    DIR,
    EXEC,
    FILE,
    LINK,
    OMITTED,
    PERMISSIONS,
    UNSCANNED,
    ZERO,
    Entry,
    blob_oid,
    encode_tree,
    tree_oid,
)

GRACE_SECONDS = 3600.0  # a collection keeps what was used this recently (see _objects)
TOUCH_EVERY = GRACE_SECONDS / 4  # an unchanged root is marked used at most this often
FLUSH_BYTES = 32 * 1024 * 1024  # new content held in memory before it is written
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_S_IFMT, _S_IFREG, _S_IFLNK = 0o170000, stat.S_IFREG, stat.S_IFLNK


@dataclass(frozen=True)
class Limits:
    """What a snapshot keeps (see the module doc)."""

    max_file_bytes: int = 4 * 1024 * 1024
    max_project_bytes: int = 512 * 1024 * 1024
    max_entries: int = 200_000
    max_depth: int = 64


@dataclass(frozen=True)
class KeptOut:
    """A path a snapshot did not keep, and why."""

    path: str
    size: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.reason})"


@dataclass(frozen=True)
class Snapshot:
    """A snapshot taken: its root tree (its id) and what it cost."""

    root: bytes
    files: int
    size: int  # bytes of the files kept
    new_objects: int
    new_bytes: int  # bytes of content the store did not have
    changed_dirs: int
    kept_out: tuple[KeptOut, ...]  # newly kept out (in the directories that changed)
    seconds: float
    unscanned: tuple[str, ...] = ()  # directories not looked at (caps), in this walk

    @property
    def id(self) -> str:
        return self.root.hex()


@dataclass(slots=True)
class _Node:
    """One directory of this walk."""

    rel: str
    keys: dict[str, Key]
    subs: dict[str, _Node | None]  # None: not looked at (caps), or unreadable
    cached: DirState | None
    mode: int = 0  # the directory's permissions
    changed: bool = False
    entries: dict[str, tuple[str, bytes, int, int]] = field(default_factory=dict)
    tree: bytes = b""
    files: int = 0
    size: int = 0
    listing: Listing | None = None  # what the stat cache keeps of its listing
    subnames: Sequence[str] = ()  # the subdirectories to enter


class _Restart(Exception):
    """The store's epoch moved under the snapshot: take it again without the cache."""


class SnapshotStopped(Exception):
    """The snapshot was stopped (its ``stop`` event was set): nothing of it was recorded."""


class Snapshotter:
    """Takes snapshots of one project into one object store (see the module doc)."""

    def __init__(self, sandbox: Sandbox, objects: ObjectStore, cache: StatCache,
                 limits: Limits | None = None) -> None:
        self.sandbox = sandbox
        self.objects = objects
        self.cache = cache
        self.limits = limits or Limits()
        self._protected_inodes = {ino for _dev, ino in sandbox.protected}
        self.stop: threading.Event | None = None  # set: the walk stops at the next directory
        self._rules_cache: dict[tuple[str, Key, Rules], Rules] = {}

    def take(self, force: frozenset[str] = frozenset()) -> Snapshot:
        """Snapshot the project now. ``force``: paths (and their directories) included even
        where ``.gitignore`` leaves them out (a restore takes them into its undo)."""
        try:
            return self._take(force)
        except _Restart:
            self.cache.clear()
            return self._take(force)

    # -- the walk -------------------------------------------------------------------------

    def _take(self, force: frozenset[str]) -> Snapshot:
        started = time.perf_counter()
        now = time.time()
        self._start_ns = time.time_ns()
        self._force = force
        self._force_dirs = frozenset(
            p[: i] for p in force for i in range(len(p)) if p[i] == "/"
        )
        self._entries = 0
        self._unscanned: list[str] = []
        self._bases: dict[bytes, bytes] = {}  # new blob -> the previous version's oid
        self._pending: dict[bytes, tuple[int, bytes]] = {}
        self._pending_bytes = 0
        self._new_objects = 0
        self._new_bytes = 0
        self._kept_out: list[KeptOut] = []
        self._changed = 0
        cache = self.cache
        self._epoch: int | None = None
        if now - cache.used_at > TOUCH_EVERY * 2:  # the cache may name collected objects
            self._epoch = self.objects.epoch()
            if self._epoch != cache.epoch:
                cache.clear()
        try:
            with self.sandbox.open_directory(".") as (fd, _place):
                root = self._scan(fd, "", Rules.EMPTY, 0, os.fstat(fd))
        except ToolFailed as exc:
            raise StorageError(f"Cannot snapshot the project: {exc}") from None
        limits = self.limits
        if _total(root) > limits.max_project_bytes:
            self._cap_project(root)
        self._build(root)
        if root.tree != cache.root or now - cache.used_at > TOUCH_EVERY:
            self._flush(touch=[root.tree], final=True)
        reached("snapshot")
        self._remember(root)
        cache.root = root.tree
        cache.used_at = now
        return Snapshot(
            root.tree, root.files, root.size, self._new_objects, self._new_bytes,
            self._changed, tuple(self._kept_out), time.perf_counter() - started,
            tuple(self._unscanned),
        )

    def _rules_for(self, fd: int, rel: str, parent: Rules, has_gitignore: bool) -> Rules:
        if not has_gitignore:
            return parent
        try:
            st = os.stat(".gitignore", dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 1024 * 1024:
                return parent
            key = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            cached = self._rules_cache.get((rel, key, parent))
            if cached is not None:
                return cached
            gfd, _ = self.sandbox.open_entry(fd, ".gitignore", rel + ".gitignore")
            try:
                text = read_bounded(gfd, 1024 * 1024).decode("utf-8", "replace")
            finally:
                os.close(gfd)
        except (OSError, ToolFailed):
            return parent
        rules = parent.extended(text, rel.rstrip("/"))
        if len(self._rules_cache) > 4096:
            self._rules_cache.clear()
        self._rules_cache[(rel, key, parent)] = rules
        return rules

    def _scan(self, fd: int, rel: str, parent_rules: Rules, depth: int,
              dir_stat: os.stat_result) -> _Node:
        """Walk one directory (``rel``: "" or "a/b/"; ``dir_stat``: its ``fstat``, taken
        before anything in it is read) and those below it."""
        if self.stop is not None and self.stop.is_set():
            raise SnapshotStopped
        cached = self.cache.dirs.get(rel[:-1])
        stamp = (dir_stat.st_mtime_ns, dir_stat.st_ctime_ns, dir_stat.st_ino, dir_stat.st_dev)
        node: _Node | None = None
        listing = cached.listing if cached is not None else None
        if listing is not None and listing[0] == stamp and not self._force:
            rules = self._rules_for(fd, rel, parent_rules, listing[2])
            if rules.digest == listing[1]:
                assert cached is not None
                node = self._relist(fd, rel, cached, listing)
        if node is None:
            node, rules = self._list(fd, rel, parent_rules, cached, stamp)
        node.mode = stat.S_IMODE(dir_stat.st_mode) & PERMISSIONS
        over = depth + 1 >= self.limits.max_depth or self._entries > self.limits.max_entries
        protected = self.sandbox.protected
        for name in node.subnames:
            if over:
                node.subs[name] = None
                self._unscanned.append(rel + name)
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                node.subs[name] = None  # unreadable, or swapped for a link: not followed
                self._unscanned.append(rel + name)
                continue
            try:
                st = os.fstat(child)
                if (st.st_dev, st.st_ino) in protected:
                    continue
                node.subs[name] = self._scan(child, f"{rel}{name}/", rules, depth + 1, st)
            finally:
                os.close(child)
        self._judge(fd, node)
        return node

    def _relist(self, fd: int, rel: str, cached: DirState, listing: Listing) -> _Node | None:
        """A directory whose stamp is the one its listing was made under: the same names,
        so only its files are ``lstat``ed (None: one has gone, or is no longer a file or a
        link, so the listing is stale after all; it is listed again)."""
        lstat = os.lstat
        keys: dict[str, Key] = {}
        try:
            for name in listing[4]:  # the hot loop of an unchanged tree: one lstat per file
                st = lstat(name, dir_fd=fd)
                keys[name] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                              st.st_ino)
        except OSError:
            return None
        old = cached.keys
        if keys != old:
            isreg, islnk, ifmt = _S_IFREG, _S_IFLNK, _S_IFMT
            for name, key in keys.items():
                if key != old.get(name) and key[0] & ifmt not in (isreg, islnk):
                    return None
        self._entries += listing[3]  # what it keeps (files, links, directories entered)
        return _Node(rel[:-1], keys, {}, cached, listing=listing,
                     subnames=listing[5])

    def _list(self, fd: int, rel: str, parent_rules: Rules, cached: DirState | None,
              stamp: Key) -> tuple[_Node, Rules]:
        """List a directory, decide what is ignored, ``lstat`` its files."""
        with os.scandir(fd) as scan:
            listed = list(scan)
        names = [e.name for e in listed]
        rules = self._rules_for(fd, rel, parent_rules, ".gitignore" in names)
        ignored: Callable[[str, bool], bool] | None = rules.ignored if rules.rules else None
        force, force_dirs = self._force, self._force_dirs
        keys: dict[str, Key] = {}
        subdirs = []
        isreg, islnk, ifmt = _S_IFREG, _S_IFLNK, _S_IFMT
        for entry in listed:  # one lstat per file, nothing else when unignored
            if entry.is_dir(follow_symlinks=False):
                name = entry.name
                if name == ".git" or (ignored is not None and ignored(rel + name, True)
                                      and rel + name not in force_dirs):
                    continue
                if entry.inode() in self._protected_inodes and self._protected(entry):
                    continue
                subdirs.append(name)
                continue
            if ignored is not None and ignored(rel + entry.name, False) and (
                rel + entry.name not in force
            ):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            mode = st.st_mode
            kind = mode & ifmt
            if kind in (isreg, islnk):
                keys[entry.name] = (mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                    st.st_ino)
        keys.pop(".git", None)  # a worktree's .git file: git's, never the project's
        kept = len(keys) + len(subdirs)  # the cap counts what is kept, never what is ignored
        self._entries += kept
        listing: Listing | None = None
        if not force and stamp[0] < self._start_ns - RACY_NS:  # see _statcache
            listing = (stamp, rules.digest, ".gitignore" in names, kept, tuple(keys),
                       tuple(subdirs))
        return _Node(rel[:-1], keys, {}, cached, listing=listing, subnames=subdirs), rules

    def _protected(self, entry: os.DirEntry[str]) -> bool:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in self.sandbox.protected

    def _judge(self, fd: int, node: _Node) -> None:
        """Decide whether ``node`` changed; read and hash its changed files (its descriptor
        is open now)."""
        cached = node.cached
        subs = node.subs
        if (cached is not None and node.keys == cached.keys and len(subs) == len(cached.subs)
                and node.mode == cached.mode):
            same = True
            for name, sub in subs.items():
                if sub is None or sub.changed or cached.subs.get(name) != sub.tree:
                    same = False
                    break
            if same:
                node.tree, node.files, node.size = cached.tree, cached.files, cached.size
                node.entries = cached.entries
                if cached.listing != node.listing:  # the same files, listed again (a file
                    cached.listing = node.listing  # came and went; a racy stamp aged)
                    self.cache.dirty = True
                return
        node.changed = True
        self._changed += 1
        old_keys = cached.keys if cached is not None else {}
        old_entries = cached.entries if cached is not None else {}
        prefix = f"{node.rel}/" if node.rel else ""
        limit = self.limits.max_file_bytes
        racy_after = self._start_ns - RACY_NS
        for name, key in list(node.keys.items()):
            if old_keys.get(name) == key and name in old_entries:
                node.entries[name] = old_entries[name]
                continue
            mode, size = key[0], key[1]
            if key[2] >= racy_after:  # mtime: see _statcache on racily clean files
                node.keys[name] = RACY
            if stat.S_ISLNK(mode):
                try:
                    data = os.fsencode(os.readlink(name, dir_fd=fd))
                except OSError:
                    node.keys[name] = RACY
                    continue
                node.entries[name] = (LINK, self._blob(data), len(data), 0)
                continue
            if size > limit:
                node.entries[name] = (OMITTED, ZERO, size, 0)
                self._kept_out.append(KeptOut(prefix + name, size, _too_big(size, limit)))
                continue
            try:
                if size == 0:  # nothing to read (an __init__.py, a .gitkeep): its stat is
                    data, now_key = b"", key  # all there is, and a racy one is read again
                else:
                    data, now_key = self._read_file(fd, name, prefix + name, limit)
            except (OSError, ToolFailed) as exc:
                node.keys.pop(name, None)
                if not isinstance(exc, FileNotFoundError):
                    node.entries[name] = (OMITTED, ZERO, size, 0)
                    node.keys[name] = RACY
                    self._kept_out.append(KeptOut(prefix + name, size, _unreadable(exc)))
                continue
            if now_key != key:
                node.keys[name] = RACY  # it changed while being read: read it again next time
            if len(data) > limit:
                node.entries[name] = (OMITTED, ZERO, len(data), 0)
                self._kept_out.append(KeptOut(prefix + name, len(data), _too_big(len(data),
                                                                                  limit)))
                continue
            old = old_entries.get(name)
            base = old[1] if old is not None and old[0] in (FILE, EXEC) else None
            now_mode = now_key[0]
            node.entries[name] = (EXEC if now_mode & 0o111 else FILE, self._blob(data, base),
                                  len(data), stat.S_IMODE(now_mode) & PERMISSIONS)

    def _read_file(self, dir_fd: int, name: str, shown: str, limit: int) -> tuple[bytes, Key]:
        fd, _st = self.sandbox.open_entry(dir_fd, name, shown)
        try:
            data = read_bounded(fd, limit)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return data, (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    # -- the project cap, the trees -------------------------------------------------------

    def _cap_project(self, root: _Node) -> None:
        """Keep out the largest files until the rest fit ``max_project_bytes``."""
        files: list[tuple[int, str, _Node, str]] = []

        def gather(node: _Node) -> None:
            prefix = f"{node.rel}/" if node.rel else ""
            for name, (kind, _oid, size, _mode) in node.entries.items():
                if kind in (FILE, EXEC):
                    files.append((size, prefix + name, node, name))
            for sub in node.subs.values():
                if sub is not None:
                    gather(sub)

        gather(root)
        total = sum(f[0] for f in files)
        cap = self.limits.max_project_bytes
        touched: set[int] = set()
        dropped: set[bytes] = set()
        for size, path, node, name in sorted(files, key=lambda f: (-f[0], f[1])):
            if total <= cap:
                break
            total -= size
            dropped.add(node.entries[name][1])
            if not node.changed:
                node.entries = dict(node.entries)
            node.entries[name] = (OMITTED, ZERO, size, 0)
            self._kept_out.append(KeptOut(path, size, "over the project's size cap "
                                          f"({cap // (1024 * 1024)} MB in all)"))
            touched.add(id(node))

        def mark(node: _Node) -> bool:
            below = [mark(sub) for sub in node.subs.values() if sub is not None]
            if id(node) in touched or any(below):
                if not node.changed:
                    node.changed = True
                    self._changed += 1
                return True
            return False

        mark(root)
        kept = {oid for _size, _path, node, name in files
                for kind, oid, _len, _mode in (node.entries[name],) if kind != OMITTED}
        for oid in dropped - kept:  # not stored (unless already flushed: collected later)
            found = self._pending.pop(oid, None)
            if found is not None:
                self._pending_bytes -= len(found[1])

    def _build(self, node: _Node) -> None:
        """Give every changed directory its tree, below first."""
        if not node.changed:
            return
        entries = []
        files = size = 0
        for name, (kind, oid, length, mode) in node.entries.items():
            entries.append(Entry(name, kind, oid, length, mode))
            if kind != OMITTED:
                files += 1
                size += length
        for name, sub in node.subs.items():
            if sub is None:
                entries.append(Entry(name, UNSCANNED, ZERO, 0))
                continue
            self._build(sub)
            entries.append(Entry(name, DIR, sub.tree, sub.size, sub.mode))
            files += sub.files
            size += sub.size
        encoded = encode_tree(entries)
        node.tree = tree_oid(encoded)
        node.files, node.size = files, size
        self._add(node.tree, TREE, encoded)

    def _blob(self, data: bytes, base: bytes | None = None) -> bytes:
        oid = blob_oid(data)
        if base is not None and base != oid:
            self._bases[oid] = base
        self._add(oid, BLOB, data)
        return oid

    def _add(self, oid: bytes, kind: int, data: bytes) -> None:
        if oid not in self._pending:
            self._pending[oid] = (kind, data)
            self._pending_bytes += len(data)
            if self._pending_bytes > FLUSH_BYTES:
                self._flush()

    def _flush(self, touch: list[bytes] | None = None, *, final: bool = False) -> None:
        """Write the pending objects the store lacks (and mark ``touch`` used)."""
        pending, self._pending, self._pending_bytes = self._pending, {}, 0
        missing = self.objects.missing(pending) if pending else set()
        new = {oid: pending[oid] for oid in missing}
        if not new and not final:
            return
        bases = {oid: self._bases[oid] for oid in new if oid in self._bases}
        epoch = self.objects.save(new, touch=touch or (), epoch=self._epoch, bases=bases)
        if epoch is None:
            raise _Restart
        self.cache.epoch = self._epoch = epoch
        self._new_objects += len(new)
        self._new_bytes += sum(len(data) for _kind, data in new.values())

    def _remember(self, node: _Node) -> None:
        """Put the changed directories into the stat cache."""
        if not node.changed:
            return
        dirs = self.cache.dirs
        cached = node.cached
        if cached is not None:
            for name in cached.subs:
                sub = node.subs.get(name)
                if sub is None:
                    self.cache.forget_below(f"{node.rel}/{name}" if node.rel else name)
        subs = {}
        for name, sub in node.subs.items():
            if sub is None:
                continue
            self._remember(sub)
            subs[name] = sub.tree
        dirs[node.rel] = DirState(node.tree, node.keys, node.entries, subs, node.files,
                                  node.size, node.listing, node.mode)
        self.cache.dirty = True


def _total(node: _Node) -> int:
    """Bytes of the files ``node`` keeps (before its tree is built)."""
    if not node.changed:
        return node.size
    own = sum(size for kind, _oid, size, _mode in node.entries.values() if kind != OMITTED)
    return own + sum(_total(sub) for sub in node.subs.values() if sub is not None)


def read_bounded(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``fd`` (one more tells a file that grew too big)."""
    chunks = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(4 * 1024 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _too_big(size: int, limit: int) -> str:
    return f"{_megabytes(size)}, over the {_megabytes(limit)} cap per file"


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _unreadable(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read: permission denied"
    return f"cannot be read: {exc}"

