"""Where the workspace keeps its state in the memory directory: cheap to ask (no engine,
no database), so an open can tell whether there is anything to look at.

``<memory-dir>/workspace/`` (0700): ``objects.sqlite3`` (the objects, SQLite), ``cache/``
(stat caches), ``journal/`` (a restore's journal per project), ``locks/`` (a lock per
project). A project is named by a digest of its real path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path


def workspace_home(memory_dir: Path) -> Path:
    """``<memory-dir>/workspace`` and its folders, created 0700."""
    home = memory_dir / "workspace"
    for directory in (home, home / "cache", home / "journal", home / "locks"):
        if not directory.is_dir():
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=0o700)
                os.chmod(directory, 0o700)
    return home


def project_digest(project: str) -> str:
    """The name of a project (its real path) among the workspace's files."""
    return hashlib.sha256(project.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def journal_path(memory_dir: Path, project: Path | str) -> Path:
    """The restore journal of ``project`` (it exists only while a restore may be under way:
    see :mod:`._journal`)."""
    digest = project_digest(os.path.realpath(project))
    return memory_dir / "workspace" / "journal" / f"{digest}.json"
