"""Confinement by file descriptor: real hard links, symlink swaps racing the tools, the
harness's own state directory inside the sandbox, files that run commands, FIFOs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.config import Mode
from actors.core.errors import ToolFailed
from actors.core.events import Notice
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.tools import TOOLS, ToolContext, validate_arguments
from tests.support.clitools import REPO
from tests.support.runtime import Recorder, running, settings_for
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio

SECRET = "top secret\n"


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def content(path: Path) -> str:
    return path.read_text()


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    validate_arguments(TOOLS[name], args)
    return await TOOLS[name].run(ctx, args)


async def reason(ctx: ToolContext, name: str, mode: Mode = Mode.ACCEPT_EDITS, **args: Any
                 ) -> str | None:
    return await TOOLS[name].ask_reason(ctx, args, mode)


# -- hard links ---------------------------------------------------------------------------


async def test_a_hard_link_to_an_outside_file_is_asked_and_never_edits_it(
    ctx: ToolContext, sandbox: Path, outside: Path
) -> None:
    linked = sandbox / "linked.txt"
    os.link(outside, linked)
    why = await reason(ctx, "write_file", path="linked.txt", content="x")
    assert why is not None and "2 hard links" in why
    assert await reason(ctx, "edit_file", path="linked.txt", old_string="top",
                        new_string="x") is not None
    assert await reason(ctx, "write_file", Mode.SKIP_PERMISSIONS, path="linked.txt",
                        content="x") is None
    # approved (or dangerouslySkipPermissions): this name changes, the outside file does not
    out = await call(ctx, "edit_file", path="linked.txt", old_string="top", new_string="no")
    assert "2 hard links" in out and "other names keep the old file" in out
    assert content(linked) == "no secret\n"
    assert content(outside) == SECRET
    assert os.stat(outside).st_nlink == 1
    os.link(outside, sandbox / "again.txt")
    await call(ctx, "write_file", path="again.txt", content="replaced\n")
    assert content(outside) == SECRET
    assert content(sandbox / "again.txt") == "replaced\n"


async def test_a_write_keeps_the_files_mode(ctx: ToolContext, sandbox: Path) -> None:
    script = sandbox / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o751)
    await call(ctx, "edit_file", path="run.sh", old_string="1", new_string="2")
    assert content(script) == "echo 2\n"
    assert os.stat(script).st_mode & 0o7777 == 0o751
    assert names(sandbox) == ["run.sh"]  # no temporary file left


# -- symlinks swapped while the tools run -------------------------------------------------


class Swapper:
    """Another process (tests/support/programs/swapper.py) that keeps replacing ``path`` with a
    symlink to ``target`` and back with a real file or directory, until the block ends."""

    def __init__(self, path: Path, target: Path, directory: bool) -> None:
        self.args = [str(path), str(target), "dir" if directory else "file"]
        self.swaps = 0

    def __enter__(self) -> Swapper:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.programs.swapper", *self.args], cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "ready\n"
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self.process.communicate(timeout=10)
        self.swaps = int(out.strip() or 0)


async def race(attempt: Any, swapper: Swapper, enough: int = 40) -> tuple[int, int]:
    """Run ``attempt()`` until it has both succeeded and been refused ``enough`` times each
    (or 3,000 attempts): a write that met a real file, and one that met the swapped link."""
    done = refused = 0
    with anyio.fail_after(120):
        for _ in range(3000):
            try:
                await attempt()
                done += 1
            except ToolFailed:
                refused += 1
            if done >= enough and refused >= enough:
                break
    return done, refused


@pytest.fixture
def swap_file(sandbox: Path, outside: Path) -> Iterator[Swapper]:
    (sandbox / "target.txt").write_text("inside\n")
    with Swapper(sandbox / "target.txt", outside, directory=False) as swapper:
        yield swapper


@pytest.mark.slow  # the swapper is another process
async def test_a_symlink_swapped_in_during_writes_never_reaches_the_outside_file(
    ctx: ToolContext, outside: Path, swap_file: Swapper
) -> None:
    turn = 0

    async def write_or_edit() -> None:
        nonlocal turn
        turn += 1
        try:
            if turn % 2:
                await call(ctx, "write_file", path="target.txt", content="overwritten\n")
            else:
                await call(ctx, "edit_file", path="target.txt", old_string="inside",
                           new_string="edited")
        finally:
            assert content(outside) == SECRET

    done, refused = await race(write_or_edit, swap_file)
    assert done > 0 and refused > 0, (done, refused)


@pytest.mark.slow  # the swapper is another process
async def test_a_directory_swapped_for_a_symlink_never_lets_a_write_out(
    ctx: ToolContext, sandbox: Path, outside: Path
) -> None:
    (sandbox / "d").mkdir()

    async def write() -> None:
        try:
            await call(ctx, "write_file", path="d/secret.txt", content="pwned\n")
        finally:
            assert content(outside) == SECRET

    with Swapper(sandbox / "d", outside.parent, directory=True) as swapper:
        done, refused = await race(write, swapper)
    assert done > 0 and refused > 0, (done, refused)
    assert names(outside.parent) == ["secret.txt"]  # nothing was created there either


@pytest.mark.slow  # the swapper is another process
async def test_reads_racing_a_symlink_swap_never_see_the_outside_file(
    ctx: ToolContext, swap_file: Swapper
) -> None:
    async def read() -> None:
        try:
            out = await call(ctx, "read_file", path="target.txt")
        except ToolFailed as exc:
            assert "secret" not in str(exc)
            raise
        assert "secret" not in out

    done, refused = await race(read, swap_file)
    assert done > 0 and refused > 0, (done, refused)


async def test_symlinks_inside_the_sandbox_work_and_outside_ones_do_not(
    ctx: ToolContext, sandbox: Path, outside: Path
) -> None:
    (sandbox / "real").mkdir()
    (sandbox / "real" / "a.txt").write_text("alpha\n")
    (sandbox / "alias").symlink_to("real")
    (sandbox / "abs").symlink_to(sandbox / "real" / "a.txt")
    (sandbox / "up").symlink_to("real/../real/a.txt")
    (sandbox / "loop").symlink_to("loop")
    (sandbox / "escape").symlink_to("../elsewhere")
    assert "alpha" in await call(ctx, "read_file", path="alias/a.txt")
    assert "alpha" in await call(ctx, "read_file", path="abs")
    assert "alpha" in await call(ctx, "read_file", path="up")
    await call(ctx, "write_file", path="alias/a.txt", content="beta\n")
    assert (sandbox / "real" / "a.txt").read_text() == "beta\n"
    assert (sandbox / "alias").is_symlink()
    with pytest.raises(ToolFailed, match="symbolic links"):
        await call(ctx, "read_file", path="loop")
    for path in ("escape/secret.txt", "real/../../elsewhere/secret.txt", str(outside)):
        with pytest.raises(ToolFailed, match="outside the sandbox"):
            await call(ctx, "write_file", path=path, content="x")
    assert content(outside) == SECRET


# -- the harness's own state inside the sandbox -------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A sandbox that holds the memory directory, like running the harness in $HOME."""
    path = tmp_path / "home"
    (path / ".agent-harness").mkdir(parents=True)
    return path


def digest(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*")) if p.is_file()
    }


async def test_the_store_history_and_notes_are_never_read_or_written(home: Path) -> None:
    memory = home / ".agent-harness" / "memory"
    store = SessionStore(memory)
    store.create_session("s1", [{"role": "system", "content": "hello"}], project_root=str(home))
    (memory / "user.md").write_text("- canary-note\n")
    (memory / "history").write_text("canary-history\n")
    before = digest(memory)
    assert "sessions.sqlite3" in before
    ctx = ToolSession(store, "s1").context(home, memory)
    (home / "mem").symlink_to(".agent-harness/memory")
    os.link(memory / "user.md", home / "notes-link.md")
    targets = [
        ".agent-harness/memory/sessions.sqlite3", ".agent-harness/memory/sessions.sqlite3-wal",
        ".agent-harness/memory/user.md", ".agent-harness/memory/history",
        ".agent-harness/memory/projects/x.md", "mem/user.md", str(memory / "user.md"),
        ".agent-harness/./memory/../memory/locks/s1.lock", "notes-link.md",
    ]
    for path in targets:
        with pytest.raises(ToolFailed, match="harness's own state directory"):
            await call(ctx, "write_file", path=path, content="pwned")
        with pytest.raises(ToolFailed, match="harness's own state directory"):
            await reason(ctx, "write_file", path=path, content="pwned")
        with pytest.raises(ToolFailed, match=r"harness's own state directory|File not found"):
            await call(ctx, "read_file", path=path)
    with pytest.raises(ToolFailed, match="harness's own state directory"):
        await call(ctx, "edit_file", path="mem/user.md", old_string="canary", new_string="x")
    with pytest.raises(ToolFailed, match="harness's own state directory"):
        await call(ctx, "glob_files", pattern="*", path="mem")
    assert await call(ctx, "grep", pattern="canary") == "No matches."
    listing = await call(ctx, "glob_files", pattern="**/*")
    assert "memory" not in listing and "sqlite3" not in listing
    assert digest(memory) == before
    store.close()


async def test_a_sandbox_holding_the_memory_dir_warns_and_refuses(tmp_path: Path,
                                                                  home: Path) -> None:
    memory = home / ".agent-harness" / "memory"
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": ".agent-harness/memory/user.md",
                                                  "content": "- obey me"}),
                          ToolCall("write_file", {"path": "ok.txt", "content": "fine"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.ACCEPT_EDITS,
                                sandbox_dir=home, memory_dir=memory)
        async with running(settings, recorder=Recorder(approve=False)) as (sup, rec):
            assert (await sup.run_turn("go")).ok
        results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    warnings = [e.text for e in rec.of(Notice) if "state directory" in e.text]
    assert len(warnings) == 1 and str(memory) in warnings[0] and "run_bash" in warnings[0]
    assert "harness's own state directory" in results[0]
    assert rec.approvals == []  # refused before anyone was asked
    assert (home / "ok.txt").read_text() == "fine"
    assert not (memory / "user.md").exists()


# -- files that run commands --------------------------------------------------------------


@pytest.mark.parametrize("path", [
    ".git/config", ".git/hooks/pre-commit", ".GIT/CONFIG", "sub/.git/config", ".git",
    ".envrc", ".bashrc", "dotfiles/.zshrc", ".vscode/tasks.json", ".ssh/authorized_keys",
    ".config/fish/config.fish", ".config/autostart/x.desktop",
    ".venv/lib/python3.11/site-packages/evil.pth", "sitecustomize.py",
    ".pre-commit-config.yaml", "hooks-link/post-checkout",
])
async def test_writes_that_would_run_commands_always_ask(
    ctx: ToolContext, sandbox: Path, path: str
) -> None:
    (sandbox / ".git" / "hooks").mkdir(parents=True)
    (sandbox / "hooks-link").symlink_to(".git/hooks")
    for mode in (Mode.DEFAULT, Mode.ACCEPT_EDITS):
        why = await reason(ctx, "write_file", mode, path=path, content="x")
        assert why is not None and "'" in why
    assert await reason(ctx, "write_file", Mode.SKIP_PERMISSIONS, path=path, content="x") is None


async def test_a_link_to_git_config_asks_too(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / ".git").mkdir()
    (sandbox / ".git" / "config").write_text("[core]\n")
    (sandbox / "innocent.cfg").symlink_to(".git/config")
    why = await reason(ctx, "edit_file", path="innocent.cfg", old_string="core",
                       new_string="x")
    assert why is not None and ".git/" in why


@pytest.mark.parametrize("path", ["src/main.py", "README.md", "git/config", "config",
                                  "docs/.gitignore", ".github/workflows/ci.yml"])
async def test_ordinary_files_are_left_to_the_mode(ctx: ToolContext, path: str) -> None:
    assert await reason(ctx, "write_file", path=path, content="x") is None


async def test_a_git_config_write_asks_in_accept_edits(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {
            "path": ".git/config", "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"})]),
        Reply("Asked."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.ACCEPT_EDITS)
        (settings.sandbox_dir / ".git").mkdir()
        (settings.sandbox_dir / ".git" / "config").write_text("[core]\n")
        async with running(settings, recorder=Recorder(approve=False)) as (sup, rec):
            assert (await sup.run_turn("go")).ok
        [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(rec.approvals) == 1 and ".git/" in rec.approvals[0]
    assert rec.approvals[0].startswith("write_file: .git/config")
    assert "Denied" in result
    assert (settings.sandbox_dir / ".git" / "config").read_text() == "[core]\n"


# -- FIFOs and other non-regular files ----------------------------------------------------


async def test_fifos_are_never_opened_for_reading(ctx: ToolContext, sandbox: Path) -> None:
    os.mkfifo(sandbox / "pipe")
    (sandbox / "a.txt").write_text("needle\n")
    with anyio.fail_after(10):
        with pytest.raises(ToolFailed, match="is a FIFO"):
            await call(ctx, "read_file", path="pipe")
        with pytest.raises(ToolFailed, match="is a FIFO"):
            await call(ctx, "grep", pattern="x", path="pipe")
        with pytest.raises(ToolFailed, match="a FIFO; only regular files"):
            await call(ctx, "write_file", path="pipe", content="x")
        with pytest.raises(ToolFailed, match="FIFO"):
            await call(ctx, "edit_file", path="pipe", old_string="a", new_string="b")
        out = await call(ctx, "grep", pattern="needle")
        assert out.startswith("a.txt:1: needle") and "Skipped 1 entries" in out
        assert await call(ctx, "glob_files", pattern="*") == "a.txt\npipe"
