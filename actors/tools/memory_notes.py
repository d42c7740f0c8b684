"""Memory-note tools: read_memory and append_memory.

Notes live in the harness's memory directory, never in the project: ``project.md`` for notes
about this project, ``user.md`` for notes about the user. They are Markdown lists, one
``- note`` line per note. The file I/O runs in a worker thread and is short; a cancellation
waits for it to finish (an append is one ``write`` call, so a note is never half-written).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio.to_thread

from actors.core.errors import ToolFailed
from actors.tools._base import Permission, Tool, ToolContext

SCOPES = ("project", "user")


def note_path(memory_dir: Path, scope: str) -> Path:
    if scope not in SCOPES:
        raise ToolFailed(f"Unknown memory scope {scope!r}; use 'project' or 'user'.")
    return memory_dir / f"{scope}.md"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


async def read_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The notes of one scope, or a sentence saying there are none."""
    scope = args["scope"]
    path = note_path(ctx.memory_dir, scope)
    try:
        text = await anyio.to_thread.run_sync(_read, path)
    except OSError as exc:
        raise ToolFailed(f"Cannot read the {scope} memory: {exc.strerror or exc}.") from None
    return text if text.strip() else f"The {scope} memory is empty."


async def append_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Append ``- note`` (made one line) to the scope's note file, created with mode 0600."""
    scope = args["scope"]
    path = note_path(ctx.memory_dir, scope)
    note = " ".join(args["note"].split())
    if not note:
        raise ToolFailed("The note is empty.")
    try:
        await anyio.to_thread.run_sync(_append, path, f"- {note}\n")
    except OSError as exc:
        raise ToolFailed(f"Cannot write the {scope} memory: {exc.strerror or exc}.") from None
    return f"Saved to the {scope} memory."


_SCOPE = {
    "type": "string",
    "enum": list(SCOPES),
    "description": "'project' (this project) or 'user' (the user, across projects).",
}

READ_MEMORY = Tool(
    name="read_memory",
    description=(
        "Read your long-term notes, kept across sessions. Argument: scope: 'project' for "
        "notes about this project, 'user' for notes about the user's preferences."
    ),
    parameters={"type": "object", "properties": {"scope": _SCOPE}, "required": ["scope"]},
    run=read_memory,
    permission=Permission.READ,
)

APPEND_MEMORY = Tool(
    name="append_memory",
    description=(
        "Add a note to your long-term memory, kept across sessions, so that future sessions "
        "know it. Arguments: scope ('project' or 'user'); note (one short fact, stored as a "
        "single '- note' line). Save durable facts and preferences, not progress reports."
    ),
    parameters={
        "type": "object",
        "properties": {
            "scope": _SCOPE,
            "note": {"type": "string", "description": "The fact to remember, one line."},
        },
        "required": ["scope", "note"],
    },
    run=append_memory,
    permission=Permission.READ,
)

MEMORY_TOOLS = (READ_MEMORY, APPEND_MEMORY)
