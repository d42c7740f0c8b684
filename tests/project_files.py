"""What a test project holds on disk, and a two-turn session recorded on it, to compare the
project before and after a rewind."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import anyio

from actors.core.config import Mode
from actors.store import SessionStore, Store
from actors.testing.scripted_server import Reply, ScriptedServer
from tests.runtime import running, settings_for


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


@dataclass
class Recorded:
    """A finished session of two turns and the project's files before, between and after."""

    session_id: str
    store: Store
    start: dict[str, object]
    after_first: dict[str, object]
    end: dict[str, object]


def record_two_turns(tmp_path: Path, script: list[Reply], files: dict[str, str],
                     store: Store | None = None) -> Recorded:
    """Run the user messages "First" and "Second" against ``script`` in the project
    ``tmp_path/project`` holding ``files`` (tools run without asking; the memory directory is
    ``tmp_path/memory``), listing the files before, between and after them."""

    async def go() -> Recorded:
        with ScriptedServer(script) as server:
            settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
            project = settings.sandbox_dir
            for name, text in files.items():
                (project / name).write_text(text)
            used = store or SessionStore(settings.memory_dir)
            start = listing(project)
            async with running(settings, used) as (sup, _rec):
                assert (await sup.run_turn("First")).ok
                after_first = listing(project)
                assert (await sup.run_turn("Second")).ok
                session_id = sup.session_id
            return Recorded(session_id, used, start, after_first, listing(project))

    return anyio.run(go)
