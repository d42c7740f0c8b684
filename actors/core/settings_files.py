"""The settings files: the user's and the project's, read once at a session's open as hostile
input.

Two files, in Claude Code's shape (an object whose keys are settings: ``{"hooks": {...}}``):

- the **user's**, ``settings.json`` in the harness's home, the directory the memory directory
  lives in (``~/.agent-harness/settings.json``; with ``--memory-dir DIR``, ``DIR/../``);
- the **project's**, ``.agent-harness/settings.json`` in the project directory. A cloned
  repository can hold one, so it is used only once the user approved its content
  (:mod:`actors.core.project_trust`); a project file that is the user's own file (the
  project is the home's parent) counts as the user's.

Each file is read whole into memory (at most :data:`MAX_BYTES`; a FIFO, a device or a
directory is not read), hashed (the approval is of these bytes: what is parsed is what was
approved) and decoded as strict JSON (no ``NaN``; Python's own bounds on integers and
nesting). A file that cannot be used gives one line naming it (:attr:`SettingsFile.problem`)
and the run goes on without it; a missing file is no problem. The fields are checked by
whoever reads them (the hooks: :func:`actors.hooks.hook_table`), each bad field one line
naming the file and the field, the rest of the file still used.

Everything here blocks (file I/O): call it in a worker thread. Pure otherwise: nothing is
cached, so each open reads the files as they are.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from actors.core.project_trust import is_approved

__all__ = [
    "COMMAND_KEYS",
    "MAX_BYTES",
    "Loaded",
    "SettingsFile",
    "harness_home",
    "load_json_file",
    "project_settings_path",
    "read_settings",
    "user_settings_path",
]

MAX_BYTES = 1024 * 1024
SETTINGS_NAME = "settings.json"
PROJECT_DIR = ".agent-harness"
COMMAND_KEYS = ("hooks",)
"""The keys of a settings file that make the harness run commands: a project file holding
any of them is used only once approved (and the REPL asks)."""

Scope = Literal["user", "project"]


def harness_home(memory_dir: Path) -> Path:
    """The harness's home: the directory the memory directory is in (``~/.agent-harness``)."""
    return memory_dir.expanduser().parent


def user_settings_path(memory_dir: Path) -> Path:
    return harness_home(memory_dir) / SETTINGS_NAME


def project_settings_path(project: Path) -> Path:
    return project / PROJECT_DIR / SETTINGS_NAME


@dataclass(frozen=True)
class Loaded:
    """A JSON file as read: its top-level object, the SHA-256 of its bytes, or why not."""

    data: Mapping[str, Any] = field(default_factory=dict)
    digest: str | None = None  # None: no file, or it could not be read
    exists: bool = False
    problem: str | None = None  # one line, without the file's name


def load_json_file(path: Path, *, max_bytes: int = MAX_BYTES) -> Loaded:
    """``path`` read as hostile input (see the module doc). A missing file is ``Loaded()``."""
    try:
        data = _read_bounded(path, max_bytes)
    except FileNotFoundError:
        return Loaded()
    except NotADirectoryError:
        return Loaded()
    except _NotRegular as exc:
        return Loaded(exists=True, problem=str(exc))
    except OSError as exc:
        return Loaded(exists=True, problem=f"cannot be read ({exc.strerror or exc})")
    import hashlib  # here: a start without settings files imports neither (the REPL's start)
    import json

    digest = hashlib.sha256(data).hexdigest()
    if len(data) > max_bytes:
        return Loaded(exists=True, digest=digest,
                      problem=f"is larger than {max_bytes // 1024} KB")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        return Loaded(exists=True, digest=digest, problem="is not UTF-8 text")
    except json.JSONDecodeError as exc:
        return Loaded(exists=True, digest=digest,
                      problem=f"is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                              f"{exc.msg})")
    except (ValueError, RecursionError) as exc:  # NaN, a 5,000-digit integer, deep nesting
        reason = "nests too deep" if isinstance(exc, RecursionError) else str(exc)
        return Loaded(exists=True, digest=digest, problem=f"cannot be decoded ({reason})")
    if not isinstance(value, dict):
        return Loaded(exists=True, digest=digest,
                      problem=f"holds {type(value).__name__}, not a JSON object")
    return Loaded(data=value, digest=digest, exists=True)


@dataclass(frozen=True)
class SettingsFile:
    """One settings file as a session's open found it."""

    scope: Scope
    path: Path
    loaded: Loaded
    approved: bool  # the user's: always; the project's: its content was approved

    @property
    def data(self) -> Mapping[str, Any]:
        """What the session uses of it: nothing unless approved and readable."""
        return self.loaded.data if self.approved else {}

    @property
    def problem(self) -> str | None:
        """Why the file is not used, in one line naming it (None: used, or no file)."""
        return None if self.loaded.problem is None else f"{self.path}: {self.loaded.problem}"

    @property
    def runs_commands(self) -> bool:
        """Whether the file holds a setting that runs commands (:data:`COMMAND_KEYS`)."""
        return any(self.loaded.data.get(key) for key in COMMAND_KEYS)

    @property
    def waiting_for_approval(self) -> bool:
        """A project file that would run commands and whose content is not approved."""
        return self.scope == "project" and not self.approved and self.runs_commands


def read_settings(memory_dir: Path, project: Path) -> tuple[SettingsFile, ...]:
    """The user's file, then the project's (left out when it is the user's own file)."""
    user_path = user_settings_path(memory_dir)
    files = [SettingsFile("user", user_path, load_json_file(user_path), approved=True)]
    project_path = project_settings_path(project)
    if os.path.realpath(project_path) != os.path.realpath(user_path):
        loaded = load_json_file(project_path)
        approved = loaded.digest is not None and is_approved(memory_dir, project_path,
                                                             loaded.digest)
        files.append(SettingsFile("project", project_path, loaded, approved))
    return tuple(files)


class _NotRegular(OSError):
    pass


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not valid JSON")


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of the regular file at ``path`` (symlinks followed:
    a settings file may be a link to a dotfiles repository)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise _NotRegular(f"is {kind}")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
