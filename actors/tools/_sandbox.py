"""Paths inside the sandbox, opened by file descriptor, never by name.

A path a tool names is walked from a file descriptor of the sandbox directory, one component
at a time, each opened relative to the directory before it (``openat``) with ``O_NOFOLLOW``.
The kernel never follows a symlink for us: this code reads the link (``readlinkat``) and walks
its text by the same rules, so a link leads only to places inside the sandbox, and a link
swapped in during the walk is met by ``O_NOFOLLOW`` (the open fails) instead of being followed.
``..`` pops the directories already opened; it never climbs above the sandbox.

Writes never modify a file in place: the new content goes to a temporary file created in the
same (already opened) directory, which then replaces the name (``renameat``). Whatever sits at
the name at that moment (a symlink swapped in, a hard link to a file outside) is replaced as
a directory entry; the file it pointed to is left unchanged.

The harness's own state (the memory directory: the session store, its ``-wal``/``-shm`` and
lock files, the input history and the memory notes) is recognised by device and inode, so no
other name for it (a symlink, a bind mount, a hard link) reaches it: file tools may neither
read nor write it, and directory walks skip it.

Everything here blocks; call it in a worker thread. It uses only the standard library and
:mod:`actors.core.errors`, so the grep worker process can import it without the tools.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator, Sequence

from actors.core.errors import ToolFailed

MAX_LINKS = 40  # symlinks followed in one path, like the kernel's limit
MAX_PATH_CHARS = 4096
MAX_DEPTH = 256  # directory levels a walk descends
MAX_PROTECTED_ENTRIES = 10_000  # files of the protected directories compared with hard links

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)

Identity = tuple[int, int]  # (st_dev, st_ino)


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


def kind_of(mode: int) -> str:
    """A file type's name for messages: "a directory", "a FIFO", ..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


class Place:
    """Where a walk ended: an open parent directory and the last component's name.

    ``parts`` is the path from the sandbox root after links were followed (the real place,
    used for the rules about .git and friends); ``st`` is the last component's ``lstat``
    (None: it does not exist); ``missing`` are components below ``parts`` that do not exist
    yet (only when walked with ``missing_ok``). (Plain classes, not dataclasses: the grep
    worker imports this module at every start, and ``dataclasses`` costs it 8 ms.)
    """

    __slots__ = ("missing", "name", "parent_fd", "parts", "st")

    def __init__(
        self, parent_fd: int, name: str, parts: list[str], st: os.stat_result | None,
        missing: list[str] | None = None,
    ) -> None:
        self.parent_fd = parent_fd
        self.name = name
        self.parts = parts
        self.st = st
        self.missing = missing or []

    @property
    def relative(self) -> str:
        return "/".join([*self.parts, *self.missing]) or "."


class Written:
    """What a write did: created the file or replaced it, its size, and how many hard links
    the replaced file had (the other names keep the old content)."""

    __slots__ = ("created", "links", "size")

    def __init__(self, created: bool, size: int, links: int) -> None:
        self.created = created
        self.size = size
        self.links = links


class Sandbox:
    """The sandbox directory and the directories no tool may touch (see the module doc)."""

    def __init__(self, root: str | os.PathLike[str], protected: Sequence[str | os.PathLike[str]]):
        self.root = posixpath.normpath(os.path.abspath(os.fspath(root)))
        self.real_root = os.path.realpath(self.root)
        try:
            self.root_id = identity(os.stat(self.real_root))
        except OSError as exc:
            raise ToolFailed(
                f"The project directory {self.root} cannot be opened: {exc.strerror}."
            ) from None
        self.protected: dict[Identity, str] = {}
        for path in protected:
            with contextlib.suppress(OSError):
                real = os.path.realpath(os.fspath(path))
                self.protected[identity(os.stat(real))] = real
        self.root_protected = self._protecting_ancestor(self.real_root)
        self._protected_files: set[Identity] | None = None

    # -- the walk -------------------------------------------------------------------------

    def _protecting_ancestor(self, real: str) -> str | None:
        """The protected directory that is ``real`` or holds it, if any."""
        path = real
        while True:
            with contextlib.suppress(OSError):
                found = self.protected.get(identity(os.stat(path)))
                if found:
                    return found
            parent = posixpath.dirname(path)
            if parent == path:
                return None
            path = parent

    def refusal(self, shown: str, where: str) -> ToolFailed:
        return ToolFailed(
            f"'{shown}' is in the harness's own state directory {where} (its session store, "
            "input history and memory notes); tools may not read or write it."
        )

    def _outside(self, shown: str) -> ToolFailed:
        return ToolFailed(f"Path '{shown}' is outside the sandbox directory {self.root}.")

    def _relative(self, absolute: str) -> str | None:
        """``absolute`` relative to the sandbox root (None: not under it)."""
        norm = posixpath.normpath(absolute)
        for root in (self.root, self.real_root):
            if norm == root:
                return "."
            prefix = root.rstrip("/") + "/"
            if norm.startswith(prefix):
                return norm[len(prefix) :]
        return None

    def components(self, path: object) -> list[str]:
        """``path`` relative to the sandbox root, split (absolute paths outside are refused)."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ToolFailed("Path must be a non-empty string without NUL bytes.")
        if len(path) > MAX_PATH_CHARS:
            raise ToolFailed(f"Path is longer than {MAX_PATH_CHARS} characters.")
        if path.startswith("~"):
            path = os.path.expanduser(path)
        if path.startswith("/"):
            relative = self._relative(path)
            if relative is None:
                raise self._outside(path)
            path = relative
        return path.split("/")

    def _open_root(self, shown: str) -> int:
        if self.root_protected:
            raise self.refusal(shown, self.root_protected)
        fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if identity(os.fstat(fd)) != self.root_id:
            os.close(fd)
            raise ToolFailed(f"The project directory {self.root} was replaced; restart.")
        return fd

    def _check_dir(self, fd: int, shown: str) -> None:
        where = self.protected.get(identity(os.fstat(fd)))
        if where is not None:
            raise self.refusal(shown, where)

    @contextlib.contextmanager
    def walk(
        self, path: str, *, create_dirs: bool = False, missing_ok: bool = False,
        follow_last: bool = True,
    ) -> Iterator[Place]:
        """Walk ``path`` to its last component (see the module doc); the fds close on exit.

        A symlink as the last component is followed too (inside the sandbox), unless
        ``follow_last`` is false: then the place is the link itself. Missing directories are
        created (``create_dirs``), reported in ``Place.missing`` (``missing_ok``), or
        refused. Refusals raise :class:`ToolFailed`.
        """
        shown = path if isinstance(path, str) else repr(path)
        pending = list(reversed(self.components(path)))
        stack = [self._open_root(shown)]
        parts: list[str] = []
        links = created = 0
        try:
            while True:
                while pending and pending[-1] in ("", "."):
                    pending.pop()
                if not pending:  # the path names the root itself (or a directory, with "/")
                    if not parts:
                        yield Place(stack[0], ".", [], os.fstat(stack[0]))
                        return
                    # "dir/" or "dir/.": the last opened directory is the place
                    name = parts[-1]
                    os.close(stack.pop())
                    parts.pop()
                    yield Place(stack[-1], name, [*parts, name],
                                os.stat(name, dir_fd=stack[-1], follow_symlinks=False))
                    return
                component = pending.pop()
                if component == "..":
                    if not parts:
                        raise self._outside(shown)
                    os.close(stack.pop())
                    parts.pop()
                    continue
                if not pending:  # the last component, without a trailing "/": any kind
                    try:
                        st: os.stat_result | None = os.stat(
                            component, dir_fd=stack[-1], follow_symlinks=False
                        )
                    except FileNotFoundError:
                        st = None
                    if st is None or not stat.S_ISLNK(st.st_mode) or not follow_last:
                        yield Place(stack[-1], component, [*parts, component], st)
                        return
                    target = os.readlink(component, dir_fd=stack[-1])
                else:
                    try:
                        fd = os.open(component, _DIR_FLAGS, dir_fd=stack[-1])
                    except FileNotFoundError:
                        if missing_ok:
                            rest = [c for c in reversed(pending) if c not in ("", ".")]
                            yield Place(stack[-1], component, parts, None, [component, *rest])
                            return
                        if not create_dirs:
                            raise ToolFailed(
                                f"No such directory: '{'/'.join([*parts, component])}' "
                                f"(in '{shown}')."
                            ) from None
                        created += 1
                        if created > MAX_PATH_CHARS:  # a directory removed as soon as made
                            raise ToolFailed(
                                f"Cannot create the directories of '{shown}'."
                            ) from None
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(component, 0o777, dir_fd=stack[-1])
                        pending.append(component)  # open what is there now, by the same rules
                        continue
                    except OSError as exc:
                        if exc.errno not in _LINK_ERRNOS:
                            raise
                        target = self._link_or_refuse(stack[-1], component, parts, shown)
                    else:
                        stack.append(fd)
                        parts.append(component)
                        self._check_dir(fd, shown)
                        continue
                links += 1
                if links > MAX_LINKS:
                    raise ToolFailed(f"Too many levels of symbolic links in '{shown}'.")
                if target.startswith("/"):
                    relative = self._relative(target)
                    if relative is None:
                        raise self._outside(shown)
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                    parts.clear()
                    target = relative
                pending.extend(reversed(target.split("/")))
        finally:
            for fd in stack:
                os.close(fd)

    def _link_or_refuse(self, dir_fd: int, component: str, parts: list[str], shown: str) -> str:
        """The text of the symlink ``component``; a refusal if it is not a directory at all."""
        try:
            return os.readlink(component, dir_fd=dir_fd)
        except OSError:
            raise ToolFailed(
                f"'{'/'.join([*parts, component])}' is not a directory (in '{shown}')."
            ) from None

    # -- reading --------------------------------------------------------------------------

    def is_protected_file(self, st: os.stat_result) -> bool:
        """Whether ``st`` (a file with several links) is a file of a protected directory."""
        if st.st_nlink < 2 or not self.protected:
            return False
        if self._protected_files is None:
            found: set[Identity] = set()
            for directory in self.protected.values():
                with contextlib.suppress(OSError):
                    for top, _dirs, files in os.walk(directory):
                        for name in files:
                            with contextlib.suppress(OSError):
                                found.add(identity(os.lstat(os.path.join(top, name))))
                        if len(found) > MAX_PROTECTED_ENTRIES:
                            break
            self._protected_files = found
        return identity(st) in self._protected_files

    def open_entry(self, dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
        """Open the regular file ``name`` of ``dir_fd`` for reading, without following a link.

        ``O_NONBLOCK`` makes opening a FIFO swapped in return at once; the type is checked on
        the open descriptor, so nothing but a regular file is ever read.
        """
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolFailed(f"'{shown}' changed while it was opened; try again.") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ToolFailed(f"'{shown}' is {kind_of(st.st_mode)}, not a regular file.")
        if self.is_protected_file(st):
            os.close(fd)
            raise self.refusal(shown, ", ".join(sorted(self.protected.values())))
        return fd, st

    @contextlib.contextmanager
    def open_file(self, path: str) -> Iterator[tuple[int, os.stat_result, Place]]:
        """An open descriptor of the regular file at ``path`` (closed on exit)."""
        with self.walk(path) as place:
            self._check_regular(place, path)
            fd, st = self.open_entry(place.parent_fd, place.name, path)
            try:
                if place.st is not None and identity(st) != identity(place.st):
                    raise ToolFailed(f"'{path}' changed while it was opened; try again.")
                yield fd, st, place
            finally:
                os.close(fd)

    def check_not_protected_file(self, st: os.stat_result, shown: str) -> None:
        if stat.S_ISREG(st.st_mode) and self.is_protected_file(st):
            raise self.refusal(shown, ", ".join(sorted(self.protected.values())))

    def _check_regular(self, place: Place, shown: str) -> None:
        if place.st is None:
            raise ToolFailed(f"File not found: '{shown}'.")
        if stat.S_ISDIR(place.st.st_mode):
            raise ToolFailed(f"'{shown}' is a directory, not a file.")
        if not stat.S_ISREG(place.st.st_mode):
            raise ToolFailed(f"'{shown}' is {kind_of(place.st.st_mode)}, not a regular file.")

    @contextlib.contextmanager
    def open_directory(self, path: str) -> Iterator[tuple[int, Place]]:
        """An open descriptor of the directory at ``path`` (closed on exit)."""
        with self.walk(path) as place:
            if place.st is None:
                raise ToolFailed(f"No such file or directory: '{path}'.")
            if place.name == "." and not place.parts:
                yield os.dup(place.parent_fd), place
                return
            if not stat.S_ISDIR(place.st.st_mode):
                raise ToolFailed(f"'{path}' is not a directory.")
            try:
                fd = os.open(place.name, _DIR_FLAGS, dir_fd=place.parent_fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    raise ToolFailed(f"'{path}' changed while it was opened; try again.") from None
                raise
            try:
                self._check_dir(fd, path)
                yield fd, place
            finally:
                os.close(fd)

    # -- writing --------------------------------------------------------------------------

    def write(self, path: str, data: bytes) -> Written:
        """Replace (or create) the file at ``path`` with ``data``; see the module doc."""
        with self.walk(path, create_dirs=True) as place:
            if place.st is not None:
                self.check_not_protected_file(place.st, path)
                if stat.S_ISDIR(place.st.st_mode):
                    raise ToolFailed(f"'{path}' is a directory; give a file path.")
                if not stat.S_ISREG(place.st.st_mode):
                    raise ToolFailed(
                        f"'{path}' is {kind_of(place.st.st_mode)}; only regular files are written."
                    )
            return self._replace(place, data)

    def edit(self, path: str, change: Callable[[bytes], bytes], max_bytes: int) -> Written:
        """Read the file at ``path`` (at most ``max_bytes``), and replace it with ``change(old)``.

        ``change`` may raise :class:`ToolFailed` to leave the file as it is.
        """
        with self.walk(path) as place:
            self._check_regular(place, path)
            fd, st = self.open_entry(place.parent_fd, place.name, path)
            try:
                if st.st_size > max_bytes:
                    raise ToolFailed(
                        f"'{path}' is {st.st_size} bytes; edit_file edits files up to "
                        f"{max_bytes // (1024 * 1024)} MB."
                    )
                old = _read_all(fd, max_bytes)
            finally:
                os.close(fd)
            return self._replace(place, change(old), existing=st)

    def _replace(
        self, place: Place, data: bytes, existing: os.stat_result | None = None,
        executable: bool | None = None, exact_mode: int = 0,
    ) -> Written:
        current = existing if existing is not None else place.st
        if current is not None and not stat.S_ISREG(current.st_mode):
            current = None  # a symlink replaced as an entry (restoring): a new file
        directory = place.parent_fd
        temp = f".{place.name[:200]}.{os.urandom(4).hex()}.tmp"
        mode = stat.S_IMODE(current.st_mode) if current is not None else 0o666
        private = current is not None or exact_mode  # no wider than it ends, meanwhile
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600 if private else 0o666, dir_fd=directory)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if exact_mode:  # restoring: the permissions the snapshot kept
                    mode = exact_mode & 0o777  # never setuid, setgid or sticky
                elif executable is not None:  # restoring a snapshot without permissions
                    if current is None:
                        mode = stat.S_IMODE(os.fstat(fd).st_mode)  # 0o666 less the umask
                    mode = mode | (mode & 0o444) >> 2 if executable else mode & ~0o111
                if private or executable is not None:
                    os.fchmod(fd, mode)
                if current is not None and (
                    (current.st_uid, current.st_gid) != (os.geteuid(), os.getegid())
                ):
                    with contextlib.suppress(OSError):  # only root may give a file away
                        os.fchown(fd, current.st_uid, current.st_gid)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, place.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=directory)
            raise
        return Written(current is None, len(data), current.st_nlink if current else 0)

    # -- restoring a snapshot ---------------------------------------------------------------
    # The entry at the path itself is what changes: a symlink there is replaced or removed as
    # a link, never followed (links in the directories above are followed inside the sandbox,
    # as for every path).

    def put_file(self, path: str, data: bytes, *, executable: bool, mode: int = 0) -> Written:
        """Make ``path`` a regular file holding ``data`` with the permissions ``mode`` (0:
        unknown, then executable or not), replacing the file or symlink there atomically;
        missing directories are created."""
        with self.walk(path, create_dirs=True, follow_last=False) as place:
            if place.st is not None:
                self.check_not_protected_file(place.st, path)
                if stat.S_ISDIR(place.st.st_mode):
                    raise ToolFailed(f"'{path}' is a directory; it cannot become a file.")
            return self._replace(place, data, executable=executable, exact_mode=mode)

    def put_link(self, path: str, target: str) -> None:
        """Make ``path`` a symlink to ``target`` (only its text: nothing is followed),
        replacing the file or symlink there atomically."""
        with self.walk(path, create_dirs=True, follow_last=False) as place:
            if place.st is not None and stat.S_ISDIR(place.st.st_mode):
                raise ToolFailed(f"'{path}' is a directory; it cannot become a link.")
            temp = f".{place.name[:200]}.{os.urandom(4).hex()}.tmp"
            os.symlink(target, temp, dir_fd=place.parent_fd)
            try:
                os.replace(temp, place.name, src_dir_fd=place.parent_fd,
                           dst_dir_fd=place.parent_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=place.parent_fd)
                raise

    def make_dir(self, path: str, mode: int = 0o777) -> None:
        """Make ``path`` a directory (and the ones above it); ``mode`` as ``mkdir`` takes it
        (less the umask)."""
        with self.walk(path, create_dirs=True, follow_last=False) as place:
            if place.st is None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(place.name, mode, dir_fd=place.parent_fd)
            elif not stat.S_ISDIR(place.st.st_mode):
                raise ToolFailed(f"'{path}' is {kind_of(place.st.st_mode)}, not a directory.")

    def set_dir_mode(self, path: str, mode: int) -> bool:
        """Give the directory at ``path`` the permissions ``mode`` (never setuid, setgid or
        sticky); False: no directory there."""
        with self.walk(path, missing_ok=True, follow_last=False) as place:
            if place.st is None or place.missing or not stat.S_ISDIR(place.st.st_mode):
                return False
            if not place.parts:
                return False  # the project itself
            fd = os.open(place.name, _DIR_FLAGS, dir_fd=place.parent_fd)
            try:
                os.fchmod(fd, mode & 0o777)
            finally:
                os.close(fd)
            return True

    def remove(self, path: str) -> bool:
        """Remove the file or symlink at ``path`` (a link itself); False: nothing there."""
        with self.walk(path, missing_ok=True, follow_last=False) as place:
            if place.st is None or place.missing:
                return False
            if stat.S_ISDIR(place.st.st_mode):
                raise ToolFailed(f"'{path}' is a directory, not a file.")
            try:
                os.unlink(place.name, dir_fd=place.parent_fd)
            except FileNotFoundError:
                return False
            return True

    def remove_dir(self, path: str) -> bool:
        """Remove the directory at ``path`` if it is empty; False when it is not there or
        holds something (files a snapshot leaves out, for instance)."""
        with self.walk(path, missing_ok=True, follow_last=False) as place:
            if place.st is None or place.missing or not stat.S_ISDIR(place.st.st_mode):
                return False
            if not place.parts:
                return False  # the project itself
            try:
                os.rmdir(place.name, dir_fd=place.parent_fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY):
                    return False
                raise
            return True

    # -- walking directories --------------------------------------------------------------

    def entries(
        self, dir_fd: int, prefix: list[str], *, skip: Callable[[list[str]], bool],
        max_depth: int = MAX_DEPTH, check: Callable[[], None] = lambda: None,
    ) -> Iterator[tuple[int, str, list[str], os.DirEntry[str]]]:
        """Every entry below ``dir_fd`` as ``(dir_fd, name, parts, entry)``, depth first.

        In each directory the entries come in name order; a directory's own entries come
        before those of its subdirectories. Symlinks are listed, never followed; directories
        for which ``skip(parts)`` is true and protected directories are not entered; ``check``
        is called between entries (it may raise to stop). One descriptor per level is open.
        """
        levels: list[tuple[int, list[str], Iterator[str]]] = []
        fd, parts = os.dup(dir_fd), list(prefix)
        try:
            while True:
                subdirs = []
                with os.scandir(fd) as scan:
                    listed = sorted(scan, key=lambda e: e.name)
                for entry in listed:
                    check()
                    entry_parts = [*parts, entry.name]
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if is_dir and self._is_protected_entry(entry):
                        continue  # the harness's own state: not even listed
                    yield fd, entry.name, entry_parts, entry
                    if is_dir and not skip(entry_parts):
                        subdirs.append(entry.name)
                if len(levels) < max_depth - 1:
                    levels.append((fd, parts, iter(subdirs)))
                else:
                    os.close(fd)
                fd = -1
                while levels:
                    parent, parent_parts, names = levels[-1]
                    name = next(names, None)
                    if name is None:
                        os.close(parent)
                        levels.pop()
                        continue
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=parent)
                    except OSError:
                        continue  # vanished, or swapped for a link: not followed
                    st = os.fstat(child)
                    if identity(st) in self.protected:
                        os.close(child)
                        continue
                    fd, parts = child, [*parent_parts, name]
                    break
                if fd == -1:
                    return
        finally:
            if fd != -1:
                os.close(fd)
            for level_fd, _parts, _names in levels:
                os.close(level_fd)


    def _is_protected_entry(self, entry: os.DirEntry[str]) -> bool:
        if not self.protected:
            return False
        try:
            return identity(entry.stat(follow_symlinks=False)) in self.protected
        except OSError:
            return False


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1024 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def sandbox_warnings(root: str | os.PathLike[str], protected: Sequence[str | os.PathLike[str]]
                     ) -> list[str]:
    """What the user should know at the start about the sandbox and the protected directories
    (blocking): a sandbox holding the harness's state, or inside it."""
    real_root = os.path.realpath(os.fspath(root))
    warnings = []
    for path in dict.fromkeys(os.path.realpath(os.fspath(p)) for p in protected):
        if real_root == path or real_root.startswith(path.rstrip("/") + "/"):
            warnings.append(
                f"The project directory {real_root} is inside the harness's state directory "
                f"{path}: the file tools refuse every path in it. Start the harness in a "
                "project directory."
            )
        elif path.startswith(real_root.rstrip("/") + "/"):
            warnings.append(
                f"The project directory {real_root} contains the harness's state directory "
                f"{path} (sessions, history, memory notes): the file tools will not read or "
                "write it, but run_bash commands run as you and can. Prefer starting the "
                "harness in a project directory."
            )
    return warnings
