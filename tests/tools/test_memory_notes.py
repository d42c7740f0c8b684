"""The memory-note tools on a real memory directory."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from actors.core.config import Mode
from actors.core.errors import ToolFailed
from actors.core.prompts import note_path, read_memory_notes
from actors.tools import TOOLS, ToolContext, validate_arguments
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    validate_arguments(TOOLS[name], args)
    return await TOOLS[name].run(ctx, args)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def listing(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


async def test_empty_memory(ctx: ToolContext) -> None:
    assert await call(ctx, "read_memory", scope="project") == "The project memory is empty."
    assert await call(ctx, "read_memory", scope="user") == "The user memory is empty."


async def test_append_creates_a_private_file_and_reads_back(
    ctx: ToolContext, memory_dir: Path, sandbox: Path
) -> None:
    await call(ctx, "append_memory", scope="project", note="Tests run with pytest -q")
    await call(ctx, "append_memory", scope="project", note="Uses anyio,\n  not asyncio directly")
    path = note_path(memory_dir, "project", sandbox)
    assert path.parent == memory_dir / "projects" and path.name.startswith("project-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    expected = "- Tests run with pytest -q\n- Uses anyio, not asyncio directly\n"
    assert path.read_text() == expected
    assert await call(ctx, "read_memory", scope="project") == expected
    assert await call(ctx, "read_memory", scope="user") == "The user memory is empty."
    assert listing(sandbox) == []  # nothing written into the project


async def test_append_starts_a_new_line(ctx: ToolContext, memory_dir: Path) -> None:
    write(memory_dir / "user.md", "- prefers tabs")  # no final newline
    await call(ctx, "append_memory", scope="user", note="likes short answers")
    assert (memory_dir / "user.md").read_text() == "- prefers tabs\n- likes short answers\n"


async def test_bad_notes_and_scopes(ctx: ToolContext, memory_dir: Path) -> None:
    with pytest.raises(ToolFailed, match="empty"):
        await call(ctx, "append_memory", scope="user", note=" \n ")
    with pytest.raises(ToolFailed, match="must be one of project, user"):
        await call(ctx, "read_memory", scope="global")
    assert listing(memory_dir.parent) == [memory_dir.parent / "project"]


async def test_project_notes_are_kept_per_project(
    ctx: ToolContext, memory_dir: Path, sandbox: Path, tmp_path: Path,
    session: ToolSession,
) -> None:
    other = tmp_path / "other" / "project"  # same directory name, another project
    other.mkdir(parents=True)
    other_ctx = session.context(other, memory_dir)
    await call(ctx, "append_memory", scope="project", note="this project uses tabs")
    await call(other_ctx, "append_memory", scope="project", note="the other uses spaces")
    await call(other_ctx, "append_memory", scope="user", note="likes short answers")
    assert await call(ctx, "read_memory", scope="project") == "- this project uses tabs\n"
    assert await call(other_ctx, "read_memory", scope="project") == "- the other uses spaces\n"
    assert read_memory_notes(memory_dir, sandbox) == {
        "project": "- this project uses tabs", "user": "- likes short answers",
    }
    assert read_memory_notes(memory_dir, other)["project"] == "- the other uses spaces"
    # a symlink to the project names the same project
    (tmp_path / "alias").symlink_to(sandbox)
    assert note_path(memory_dir, "project", tmp_path / "alias") == note_path(
        memory_dir, "project", sandbox
    )


async def test_the_old_shared_project_file_is_not_read(memory_dir: Path, sandbox: Path) -> None:
    write(memory_dir / "project.md", "- a note from some other project")
    assert read_memory_notes(memory_dir, sandbox) == {}


async def test_append_memory_is_asked_in_every_mode_but_skip(ctx: ToolContext) -> None:
    tool = TOOLS["append_memory"]
    args = {"scope": "user", "note": "prefers tabs"}
    for mode in (Mode.DEFAULT, Mode.ACCEPT_EDITS):
        reason = await tool.ask_reason(ctx, args, mode)
        assert reason is not None and "every future session" in reason
    assert await tool.ask_reason(ctx, args, Mode.SKIP_PERMISSIONS) is None


async def test_a_long_note_is_refused(ctx: ToolContext, memory_dir: Path) -> None:
    with pytest.raises(ToolFailed, match="one fact"):
        await call(ctx, "append_memory", scope="user", note="x" * 5000)
    assert not (memory_dir / "user.md").exists()
