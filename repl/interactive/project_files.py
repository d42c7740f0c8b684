"""Reading the project for the front end (approval diffs, ``@path`` attachments) by the same
rules as the tools: paths walked by file descriptor inside the project, never through a
symlink that leads out, never into the harness's own state, never a FIFO or a device, and
every read bounded. Blocking: call in a worker thread.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.errors import ToolFailed
from actors.store import SessionReader

if TYPE_CHECKING:  # the tools are imported at the first read, not before the first prompt
    from actors.tools import Sandbox

MAX_LISTED = 200  # entries listed for a directory


@dataclass(frozen=True)
class FileRead:
    data: bytes  # at most ``limit`` bytes
    size: int  # the file's whole size
    missing: bool = False


class ProjectFiles:
    """The project directory as the tools see it."""

    def __init__(self, sandbox: Path, memory_dir: Path, store: SessionReader) -> None:
        self._sandbox, self._memory_dir, self._store = sandbox, memory_dir, store

    def _confined(self) -> Sandbox:
        from actors.tools import project_sandbox

        return project_sandbox(self._sandbox, self._memory_dir, self._store)

    def read(self, path: str, limit: int) -> FileRead:
        """The first ``limit`` bytes of a regular file (``missing`` if it does not exist).
        Raises :class:`ToolFailed` (one line) for anything refused or unreadable."""
        sandbox = self._confined()
        try:
            with sandbox.walk(path, missing_ok=True) as place:
                if place.st is None or place.missing:
                    return FileRead(b"", 0, missing=True)
            with sandbox.open_file(path) as (fd, st, _place):
                chunks, size = [], 0
                while size < limit:
                    chunk = os.read(fd, min(1024 * 1024, limit - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                return FileRead(b"".join(chunks), st.st_size)
        except OSError as exc:
            raise ToolFailed(f"Cannot read '{path}': {exc.strerror or exc}.") from None

    def is_directory(self, path: str) -> bool:
        sandbox = self._confined()
        try:
            with sandbox.walk(path, missing_ok=True) as place:
                return place.st is not None and stat.S_ISDIR(place.st.st_mode)
        except OSError:
            return False

    def listing(self, path: str) -> tuple[list[str], bool]:
        """The files under a directory (relative to it, directories ending in ``/``, hidden
        ones left out), at most :data:`MAX_LISTED`; and whether there were more."""
        sandbox = self._confined()
        names: list[str] = []
        try:
            with sandbox.open_directory(path) as (fd, _place):
                for _dir_fd, _name, parts, entry in sandbox.entries(
                    fd, [], skip=lambda p: p[-1].startswith(".") or p[-1] in (
                        "node_modules", "__pycache__"), max_depth=8,
                ):
                    if any(p.startswith(".") for p in parts):
                        continue
                    if len(names) >= MAX_LISTED:
                        return names, True
                    slash = "/" if entry.is_dir(follow_symlinks=False) else ""
                    names.append("/".join(parts) + slash)
        except OSError as exc:
            raise ToolFailed(f"Cannot list '{path}': {exc.strerror or exc}.") from None
        return names, False
