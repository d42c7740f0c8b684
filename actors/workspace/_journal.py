"""The rewind journal: a restore of the project's files is either done or not started.

Before a restore writes anything, it records what it is about to do in the project's
journal file (``<memory-dir>/workspace/journal/<project>.json``, written to a temporary
file, fsynced, renamed, the directory fsynced): the target snapshot, the *undo* snapshot
taken just before (the files as they are, hand edits included), the paths it may create
that ``.gitignore`` hides, and an id. The restore's commit point is the caller's: recording
the rewind (under that id) in the session. After it, the journal is removed.

A journal still there at the next start means the restore was cut short (a kill -9, a power
cut, a failure while putting things back). Recovery asks whether the session recorded the
rewind: if it did, the restore is finished (the files brought to the target again: every
step is idempotent); if not, the files are put back to the undo snapshot and the rewind did
not happen. Either way the journal says which, once, and is removed.

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

VERSION = 1


@dataclass(frozen=True)
class JournalEntry:
    """A restore in progress (see the module doc)."""

    target: str  # hex oid of the snapshot being restored
    undo: str  # hex oid of the snapshot taken just before: the files as they were
    project: str
    session: str = ""
    label: str = ""  # what the rewind was, for the message ("to before message 5")
    touched: tuple[str, ...] = ()  # paths it may create that .gitignore hides
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = field(default_factory=time.time)


class Journal:
    """The journal file of one project."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def begin(self, entry: JournalEntry) -> None:
        """Make ``entry`` durable before anything is restored."""
        data = json.dumps({"version": VERSION, **asdict(entry)}).encode()
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            try:
                os.write(fd, data)
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
        """The restore is over (done, or put back): forget it, durably."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._sync_dir()

    def pending(self) -> JournalEntry | None:
        """The restore cut short, if any. An unreadable journal file (it is written
        atomically, so only damage makes one) is set aside and not acted on."""
        try:
            raw = json.loads(self.path.read_bytes())
            if raw.pop("version") != VERSION:
                raise ValueError("another version")
            raw["touched"] = tuple(raw.get("touched", ()))
            return JournalEntry(**raw)
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
