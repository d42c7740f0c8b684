"""The project's instructions: the ``AGENTS.md`` files a new session's system prompt carries.

Read from the project directory and from every directory between it and the root of its git
repository (the nearest ancestor holding a ``.git`` entry; without one, the project alone),
the repository's root first and the project's own last, as :mod:`actors.core.prompts` shows
them. Each is read the way the file tools read (:class:`actors.tools.Sandbox`, rooted at the
repository's root): by file descriptor, a symlink followed only while it stays inside, the
harness's own state never, only regular files, at most :data:`MAX_BYTES` (the prompt takes far
less: :func:`actors.core.prompts.fit_instructions`). A file that exists but cannot be read so
is left out with one line saying why (:attr:`Found.problems`), never an error.

Blocking (file I/O): call it in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors.core.errors import ToolFailed
from actors.core.prompts import INSTRUCTIONS_NAME, Instructions
from actors.tools import Sandbox

MAX_BYTES = 256 * 1024  # read of one file; the prompt keeps at most INSTRUCTIONS_CHARS of all


@dataclass
class Found:
    """The project's instructions, nearest last, and the files left out (one line each)."""

    files: list[Instructions] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def git_root(project: Path) -> Path:
    """The root of the git repository ``project`` is in (the project itself when none)."""
    for directory in (project, *project.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return project


def read_instructions(project: Path, protected: Sequence[Path]) -> Found:
    """The ``AGENTS.md`` files of ``project`` (see the module doc); ``protected``: the
    harness's own directories, which are never read."""
    project = Path(os.path.abspath(project))
    root = git_root(project)
    found = Found()
    try:
        sandbox = Sandbox(root, protected)
    except ToolFailed as exc:
        found.problems.append(str(exc))
        return found
    levels = len(project.relative_to(root).parts)
    for up in range(levels, -1, -1):  # the repository's root first, the project last
        directory = project.parents[up - 1] if up else project
        inside = os.path.relpath(directory / INSTRUCTIONS_NAME, root)
        shown = "/".join([".."] * up + [INSTRUCTIONS_NAME])
        if not os.path.lexists(directory / INSTRUCTIONS_NAME):
            continue
        try:
            with sandbox.open_file(inside) as (fd, _st, _place):
                data = _read(fd)
        except ToolFailed as exc:
            found.problems.append(f"{shown} was not read: {exc}")
            continue
        except OSError as exc:
            found.problems.append(f"{shown} was not read: {exc.strerror or exc}.")
            continue
        text = data[:MAX_BYTES].decode("utf-8", errors="replace")
        omitted = len(data) - MAX_BYTES if len(data) > MAX_BYTES else 0
        if text.strip():
            found.files.append(Instructions(shown, text, omitted))
    return found


def _read(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BYTES:
        chunk = os.read(fd, MAX_BYTES + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
