"""The memory-note tools on a real memory directory."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ToolFailed
from actors.core.planning import Planning
from actors.tools import TOOLS, ToolContext, validate_arguments

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path) -> ToolContext:
    return ToolContext(sandbox=sandbox, memory_dir=memory_dir, planning=Planning())


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
    path = memory_dir / "project.md"
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
