"""The tools the model can call, by name.

``TOOLS`` maps each name to its :class:`Tool`; ``tool_schemas()`` gives the chat-completions
``tools`` entries (``compact``: the :data:`COMPACT_TOOLS` alone, briefly described, for a
context of at most 8,192 tokens); ``parse_arguments()`` decodes a call's JSON arguments
within bounds, and ``validate_arguments()`` checks a call's arguments against a tool's
schema (the executor calls it before asking approval and running the tool).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.core.errors import UsageError
from actors.tools._arguments import parse_arguments
from actors.tools._base import Permission, Tool, ToolContext, protected_dirs
from actors.tools._sandbox import Sandbox, sandbox_warnings
from actors.tools._schema import validate_arguments
from actors.tools.files import FILE_TOOLS
from actors.tools.memory_notes import MEMORY_TOOLS
from actors.tools.planning_tools import PLANNING_TOOLS
from actors.tools.session_tools import SESSION_TOOLS
from actors.tools.shell import RUN_BASH

if TYPE_CHECKING:
    from actors.store import SessionReader

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (*FILE_TOOLS, RUN_BASH, *PLANNING_TOOLS, *MEMORY_TOOLS, *SESSION_TOOLS)
}


# What a small context offers: the tools a coding task cannot do without. The others (to-dos,
# scratchpad, memory notes, past sessions) still run if the model calls them.
COMPACT_TOOLS = ("read_file", "glob_files", "grep", "write_file", "edit_file", "run_bash")


def startup_warnings(sandbox: Path, memory_dir: Path, store: SessionReader) -> list[str]:
    """Warnings for the start of a session about where the tools run (blocking: use a thread)."""
    return sandbox_warnings(sandbox, protected_dirs(memory_dir, store))


def tool_schemas(names: Iterable[str] | None = None, *, compact: bool = False
                 ) -> list[dict[str, Any]]:
    """The ``tools`` entries of the named tools (all of them by default; with ``compact``,
    :data:`COMPACT_TOOLS`), in the order given; ``compact``: briefly described.

    An unknown name raises :class:`UsageError` naming it and the known tools.
    """
    default = COMPACT_TOOLS if compact else TOOLS
    chosen = list(default) if names is None else list(names)
    unknown = [name for name in chosen if name not in TOOLS]
    if unknown:
        raise UsageError(f"Unknown tool(s): {', '.join(unknown)}; available: {', '.join(TOOLS)}.")
    return [TOOLS[name].schema(compact=compact) for name in chosen]


__all__ = [
    "COMPACT_TOOLS",
    "TOOLS",
    "Permission",
    "Sandbox",
    "Tool",
    "ToolContext",
    "parse_arguments",
    "project_sandbox",
    "sandbox_warnings",
    "startup_warnings",
    "tool_schemas",
    "validate_arguments",
]


def project_sandbox(sandbox: Path, memory_dir: Path, store: SessionReader) -> Sandbox:
    """The project as the tools see it (paths by descriptor, the harness's state protected),
    for the front end's own reads: approval diffs, ``@path`` attachments."""
    return Sandbox(sandbox, protected_dirs(memory_dir, store))
