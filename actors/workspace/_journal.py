"""The restore journal: which restore of the project's files may be under way.

One file per project (``<memory-dir>/workspace/journal/<project>.json``), written to a
temporary file, fsynced, renamed, the directory fsynced. An entry names the session, the
*undo* snapshot (the files as they were just before: the undo point), the *target*
snapshot, the paths the restore may create that ``.gitignore`` hides (``touched``: a
snapshot looks at them too), the paths it is limited to (``paths``; None: every path the
two snapshots differ in that both kept), and an id, under which the restore is recorded in
the session (its ``rewind`` mark, :mod:`._marks`: the commit point). An entry that puts back
part of an interrupted restore (``previous``) carries that restore's entry, which stays in
force until the new one is recorded.

The file is removed when the restore is over. What a journal left behind means is decided
by :mod:`._workspace` (see ``Workspace.pending``): not recorded, nothing was written; recorded,
each path is as the undo point had it, as the target has it, or changed since.

Blocking file I/O; call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

VERSION = 2


@dataclass(frozen=True)
class JournalEntry:
    """A restore that may be under way (see the module doc)."""

    target: str  # hex oid of the snapshot being restored
    undo: str  # hex oid of the snapshot taken just before: the files as they were
    project: str
    session: str = ""
    label: str = ""  # what the rewind was, for the message ("to message 5")
    touched: tuple[str, ...] = ()  # paths it may create that .gitignore hides
    paths: tuple[str, ...] | None = None  # the paths it is limited to (None: all)
    previous: JournalEntry | None = None  # the restore this one puts back part of
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = field(default_factory=time.time)
    version: int = VERSION  # 1: its files were written before it was recorded


def _entry(raw: dict[str, Any]) -> JournalEntry:
    raw.setdefault("version", 1)
    raw["touched"] = tuple(raw.get("touched", ()))
    if raw.get("paths") is not None:
        raw["paths"] = tuple(raw["paths"])
    if raw.get("previous") is not None:
        raw["previous"] = _entry(raw["previous"])
    return JournalEntry(**raw)


class Journal:
    """The journal file of one project."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def begin(self, entry: JournalEntry) -> None:
        """Make ``entry`` durable (replacing the one there, atomically)."""
        data = json.dumps(asdict(entry)).encode()
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        self._sync_dir()

    def finish(self) -> None:
        """The restore is over: forget it, durably."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._sync_dir()

    def exists(self) -> bool:
        return self.path.exists()

    def pending(self) -> JournalEntry | None:
        """The entry left there, if any. An unreadable journal file (it is written
        atomically, so only damage makes one) is set aside and not acted on."""
        try:
            raw = json.loads(self.path.read_bytes())
            if raw.get("version") not in (1, VERSION):
                raise ValueError("another version")
            return _entry(raw)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_suffix(".unreadable"))
            return None

    def _sync_dir(self) -> None:
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
