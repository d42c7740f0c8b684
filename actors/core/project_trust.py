"""A project's configuration is used once the user approved it: approvals by content hash,
kept in the user's memory directory, never in the project.

A cloned repository can hold a configuration that runs commands (``.agent-harness/
settings.json`` with hooks; any other project file that starts programs can use the same
mechanism). The user approves a file's exact content: :func:`approve` records the SHA-256 of
the bytes beside the file's absolute path, and :func:`is_approved` answers for the bytes read
now, so a changed file (a pull, a checkout, a model's edit) is not used until approved again.
The interactive prompt asks once per content; print mode, ``--acp`` and other runs without a
terminal never ask: they go on without the file and say so in one line naming
``harness --trust-project``, which approves the project's file as it is.

The approvals live in ``approved-project-files.json`` in the memory directory (0600, the
directory 0700): the harness's own state, which no file tool may read or write, so a model
cannot approve what it wrote. Writes replace the file atomically (a temporary file renamed
over it); two harnesses approving at the same moment may lose one approval, which is then
asked again. A damaged approvals file approves nothing (and is replaced at the next
approval).

Everything here blocks (file I/O): call it in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

__all__ = ["APPROVALS_NAME", "APPROVE_COMMAND", "approvals_path", "approve", "is_approved",
           "not_approved"]

APPROVALS_NAME = "approved-project-files.json"
APPROVE_COMMAND = "harness --trust-project"
_MAX_BYTES = 4 * 1024 * 1024
_VERSION = 1


def approvals_path(memory_dir: Path) -> Path:
    return memory_dir.expanduser() / APPROVALS_NAME


def _key(path: Path) -> str:
    return os.path.abspath(path)


def _approvals(memory_dir: Path) -> dict[str, str]:
    """The recorded approvals, path -> digest (empty when missing or damaged)."""
    try:
        with open(approvals_path(memory_dir), "rb") as file:
            data = file.read(_MAX_BYTES + 1)
        value = json.loads(data) if len(data) <= _MAX_BYTES else None
    except (OSError, ValueError, RecursionError):
        return {}
    files = value.get("files") if isinstance(value, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def is_approved(memory_dir: Path, path: Path, digest: str) -> bool:
    """Whether the user approved the file at ``path`` with content of SHA-256 ``digest``."""
    return _approvals(memory_dir).get(_key(path)) == digest


def approve(memory_dir: Path, path: Path, digest: str) -> None:
    """Record the user's approval of ``path`` with content ``digest`` (replacing an earlier
    one of the same path). Raises ``OSError`` when it cannot be written."""
    directory = memory_dir.expanduser()
    for missing in [*reversed([d for d in (directory, *directory.parents) if not d.exists()])]:
        with contextlib.suppress(FileExistsError):  # 0700 whatever the umask, as the store's
            missing.mkdir(mode=0o700)
            os.chmod(missing, 0o700)
    approvals = _approvals(memory_dir)
    approvals[_key(path)] = digest
    text = json.dumps({"version": _VERSION, "files": approvals}, indent=1, sort_keys=True)
    import tempfile  # here: the start of a run that approves nothing does not load it

    fd, temporary = tempfile.mkstemp(prefix=".approvals.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, approvals_path(memory_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def not_approved(path: Path, what: str) -> str:
    """The line a run without a terminal says of a project file it leaves out: ``what`` it
    would have done, and the command that approves it."""
    return (f"{path} is not approved, so {what}; after reading it, approve it as it is with: "
            f"{APPROVE_COMMAND}")
