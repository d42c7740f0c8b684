"""Memory-note tools: read_memory and append_memory.

Notes live in the harness's memory directory, never in the project (see
:mod:`actors.core.prompts` for the files): scope ``project`` is this project's notes, scope
``user`` the notes about the user, shared by every project. They are Markdown lists, one
``- note`` line per note, and they reach the system prompt of every later session (as data).
That is why append_memory asks the user in default and acceptEdits modes: a note outlives the
session and speaks to every future one.

The file I/O runs in a worker thread and is short; a cancellation waits for it to finish (an
append is one ``write`` call, so a note is never half-written).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio.to_thread

from actors.core.errors import ToolFailed
from actors.core.prompts import SCOPES, note_path
from actors.tools._base import Permission, Tool, ToolContext

MAX_NOTE_CHARS = 1000
MAX_READ_BYTES = 64 * 1024


def _path(ctx: ToolContext, scope: str) -> Path:
    if scope not in SCOPES:
        raise ToolFailed(f"Unknown memory scope {scope!r}; use 'project' or 'user'.")
    return note_path(ctx.memory_dir, scope, ctx.sandbox)


def _read(ctx: ToolContext, scope: str) -> str:
    try:
        with open(_path(ctx, scope), "rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
    except FileNotFoundError:
        return ""
    text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_READ_BYTES:
        text += f"\n[... cut at {MAX_READ_BYTES // 1024} KB]"
    return text


def _append(ctx: ToolContext, scope: str, line: str) -> None:
    path = _path(ctx, scope)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _note(args: dict[str, Any]) -> str:
    note = " ".join(args["note"].split())
    if not note:
        raise ToolFailed("The note is empty.")
    if len(note) > MAX_NOTE_CHARS:
        raise ToolFailed(
            f"The note is {len(note)} characters long; keep it to one fact under "
            f"{MAX_NOTE_CHARS} characters."
        )
    return note


async def read_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The notes of one scope, or a sentence saying there are none."""
    scope = args["scope"]
    try:
        text = await anyio.to_thread.run_sync(_read, ctx, scope)
    except OSError as exc:
        raise ToolFailed(f"Cannot read the {scope} memory: {exc.strerror or exc}.") from None
    return text if text.strip() else f"The {scope} memory is empty."


async def append_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Append ``- note`` (made one line) to the scope's note file, created with mode 0600."""
    scope = args["scope"]
    note = _note(args)
    try:
        await anyio.to_thread.run_sync(_append, ctx, scope, f"- {note}\n")
    except OSError as exc:
        raise ToolFailed(f"Cannot write the {scope} memory: {exc.strerror or exc}.") from None
    return f"Saved to the {scope} memory."


async def _ask_before_appending(ctx: ToolContext, args: dict[str, Any]) -> str | None:
    """Every note is asked for (but in dangerouslySkipPermissions): it outlives the session."""
    scope = args.get("scope")
    where = "every future session of this project" if scope == "project" else (
        "every future session, in every project"
    )
    return f"a memory note is read by {where}"


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
        "single '- note' line). Save durable facts and preferences, not progress reports. "
        "The user is asked to approve each note."
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
    permission=Permission.EDIT,
    always_ask=_ask_before_appending,
)

MEMORY_TOOLS = (READ_MEMORY, APPEND_MEMORY)
