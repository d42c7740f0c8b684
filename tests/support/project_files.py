"""What a test project holds on disk, and a two-turn session recorded on it, to compare the
project before and after a rewind."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from actors.core.config import Mode
from actors.store import SessionStore, Store
from actors.testing.scripted_server import Reply, ScriptedServer
from actors.workspace import RestorePlan, Workspace
from tests.support.runtime import running, settings_for


def listing(root: Path) -> dict[str, object]:
    """Everything under ``root`` as it is on disk: content, links, modes (no .git)."""
    found: dict[str, object] = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = "dir"
                if os.path.islink(path):
                    dirs.remove(name)
            else:
                found[rel] = (Path(path).read_bytes(), bool(st.st_mode & 0o100))
    return found


def exact(root: Path) -> dict[str, object]:
    """Everything under ``root`` byte for byte, with every permission bit (no .git)."""
    found: dict[str, object] = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                found[rel] = (Path(path).read_bytes(), stat.S_IMODE(st.st_mode))
    return found


def restore(workspace: Workspace, shown: RestorePlan,
            since: bytes | None = None) -> RestorePlan:
    """A restore's steps, unrecorded (the workspace alone: no session): lock, plan again
    and journal, write, end. The plan carried out."""
    entry, fresh = workspace.begin_restore(shown, since=since)
    workspace.apply_restore(entry, fresh.changes)
    workspace.end_restore(entry)
    return fresh


@dataclass
class Recorded:
    """A finished session of two turns and the project's files before, between and after."""

    session_id: str
    store: Store
    start: dict[str, object]
    after_first: dict[str, object]
    end: dict[str, object]


def record_two_turns(tmp_path: Path, script: list[Reply], files: dict[str, str],
                     store: Store | None = None,
                     look: Callable[[Path], dict[str, object]] = listing) -> Recorded:
    """Run the user messages "First" and "Second" against ``script`` in the project
    ``tmp_path/project`` holding ``files`` (tools run without asking; the memory directory is
    ``tmp_path/memory``), listing the files (``look``) before, between and after them."""

    async def go() -> Recorded:
        with ScriptedServer(script) as server:
            settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
            project = settings.sandbox_dir
            for name, text in files.items():
                (project / name).write_text(text)
            used = store or SessionStore(settings.memory_dir)
            start = look(project)
            async with running(settings, used) as (sup, _rec):
                assert (await sup.run_turn("First")).ok
                after_first = look(project)
                assert (await sup.run_turn("Second")).ok
                session_id = sup.session_id
            return Recorded(session_id, used, start, after_first, look(project))

    return anyio.run(go)
