"""What a tool is: a name, a JSON schema, a permission class, and an async function.

A tool's function receives a :class:`ToolContext` and its already-validated arguments and
returns the result text. It reports a failure by raising :class:`ToolFailed` (the message
becomes the tool result). It must let cancellation through: when the turn is aborted or the
call times out, the executor cancels it, and the tool's ``finally`` blocks must leave nothing
running (a shell tool kills its process group, shielded). Output produced before an
interruption can be appended to ``ctx.progress``; the executor reports it to the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.core.config import Mode
from actors.tools._sandbox import Sandbox

if TYPE_CHECKING:
    from actors.core.planning import Planning
    from actors.store import SessionReader


class SessionWriter(Protocol):
    """How a tool writes the running session: through the checkpoint writer, its only writer
    (the runtime's ``CheckpointClient``). Errors come back typed from the hierarchy."""

    async def set_metadata(self, *, summary: str | None = None) -> None: ...


class Permission(Enum):
    """What a tool may do, which decides whether the user is asked first."""

    READ = "read"  # never asks
    EDIT = "edit"  # asks in default mode; auto-approved in acceptEdits (inside the sandbox)
    SHELL = "shell"  # asks in default and acceptEdits modes


@dataclass(frozen=True)
class ProcessGroup:
    """A process group a tool started: its id and its leader's start time (clock ticks since
    boot, from /proc; None where unknown or when the leader had already ended), which tell
    the group apart from a later one that reuses the id."""

    pgid: int
    leader_start_time: int | None


def protected_dirs(memory_dir: Path, store: SessionReader) -> list[Path]:
    """Directories no tool may read or write: the harness's own state (memory notes, input
    history, the SQLite store and its -wal, -shm and lock files)."""
    return [memory_dir, store.memory_dir]


@dataclass
class ToolContext:
    """Everything a tool may touch. One context per call (``progress`` is per call)."""

    sandbox: Path
    memory_dir: Path
    planning: Planning
    store: SessionReader  # saved sessions, read; its directory is protected from every tool
    session_id: str  # the running session
    writer: SessionWriter  # writes of the running session go through it
    progress: list[str] = field(default_factory=list)
    on_process_group: Callable[[ProcessGroup], Awaitable[None]] | None = None
    """Told about each process group a tool starts, as soon as it runs (run_bash)."""

    def protected_dirs(self) -> list[Path]:
        """Directories no tool may read or write (see :func:`protected_dirs`)."""
        return protected_dirs(self.memory_dir, self.store)

    def confined(self) -> Sandbox:
        """The sandbox, walked by file descriptor (blocking: call in a worker thread)."""
        return Sandbox(self.sandbox, self.protected_dirs())


ToolFunction = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]
AskHook = Callable[[ToolContext, dict[str, Any]], Awaitable[str | None]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of an object
    run: ToolFunction
    permission: Permission = Permission.READ
    always_ask: AskHook | None = None
    """Looks at one call before it runs: returns why the user must be asked whatever the mode
    (but dangerouslySkipPermissions), or None to leave it to the mode; raises
    :class:`ToolFailed` to refuse the call before anyone is asked."""
    brief: str = ""
    """The description for a small context (``schema(compact=True)``): one short sentence."""

    async def ask_reason(self, ctx: ToolContext, args: dict[str, Any], mode: Mode) -> str | None:
        """Why this call must be asked in ``mode`` even if the mode would not ask (see
        :attr:`always_ask`). Cancellation: the hook is cancelled with the call."""
        if mode is Mode.SKIP_PERMISSIONS or self.always_ask is None:
            return None
        return await self.always_ask(ctx, args)

    def schema(self, *, compact: bool = False) -> dict[str, Any]:
        """The chat-completions ``tools`` entry for this tool; ``compact``: its brief, and
        its parameters without their descriptions (for a small context)."""
        parameters = self.parameters
        if compact:
            properties = {name: {k: v for k, v in spec.items() if k != "description"}
                          for name, spec in parameters.get("properties", {}).items()}
            parameters = {**parameters, "properties": properties}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (self.brief or self.description) if compact else
                self.description,
                "parameters": parameters,
            },
        }
