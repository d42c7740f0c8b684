"""Planning tools: the session's to-do list and scratchpad (``ctx.planning``).

They only touch in-memory state, saved with the next checkpoint; they never await, so a
cancellation cannot interrupt one halfway.
"""

from __future__ import annotations

from typing import Any

from actors.core.planning import MAX_RETRIES, TODO_STATUSES
from actors.tools._base import Permission, Tool, ToolContext


async def todo_append(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Add a pending to-do."""
    todo = ctx.planning.append(args["text"])
    return f"Added to-do {todo.id}: {todo.text}"


async def todo_list(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The to-do list, one ``id. [status] text`` line each."""
    return ctx.planning.render(include_closed=args.get("include_closed", True))


async def todo_update(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Change a to-do's status (Planning.update's retry and escalation rules apply)."""
    return ctx.planning.update(args["id"], args["status"])


async def read_scratchpad(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The scratchpad's text."""
    return ctx.planning.scratchpad or "(the scratchpad is empty)"


async def write_scratchpad(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replace the scratchpad's text."""
    ctx.planning.scratchpad = args["content"]
    return f"Scratchpad saved ({len(args['content'])} characters)."


_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

TODO_APPEND = Tool(
    name="todo_append",
    description=(
        "Add an item to your to-do list for this session; it starts as 'pending'. "
        "Argument: text (what to do). Returns the new item's id."
    ),
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The task to add."}},
        "required": ["text"],
    },
    run=todo_append,
    permission=Permission.READ,
)

TODO_LIST = Tool(
    name="todo_list",
    description=(
        "Show your to-do list, one line per item: 'id. [status] text'. Argument: "
        "include_closed (optional, default true; false hides done and cancelled items)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "include_closed": {
                "type": "boolean",
                "description": "Also show done and cancelled items (default true).",
            }
        },
    },
    run=todo_list,
    permission=Permission.READ,
)

TODO_UPDATE = Tool(
    name="todo_update",
    description=(
        "Set the status of a to-do item. Arguments: id (the item's number); status (one of "
        f"{', '.join(TODO_STATUSES)}). Setting a failed item back to in_progress counts as a "
        f"retry; after {MAX_RETRIES} retries it is refused and you must ask the user how to "
        "proceed instead."
    ),
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "description": "The to-do's id."},
            "status": {"type": "string", "enum": list(TODO_STATUSES)},
        },
        "required": ["id", "status"],
    },
    run=todo_update,
    permission=Permission.READ,
)

READ_SCRATCHPAD = Tool(
    name="read_scratchpad",
    description="Read your scratchpad: free-form notes kept for this session. No arguments.",
    parameters=_NO_ARGS,
    run=read_scratchpad,
    permission=Permission.READ,
)

WRITE_SCRATCHPAD = Tool(
    name="write_scratchpad",
    description=(
        "Replace your scratchpad (free-form notes kept for this session and restored when it "
        "is resumed) with new text. Argument: content (the whole new scratchpad; to add to "
        "it, read it first and include the old text)."
    ),
    parameters={
        "type": "object",
        "properties": {"content": {"type": "string", "description": "The new scratchpad."}},
        "required": ["content"],
    },
    run=write_scratchpad,
    permission=Permission.READ,
)

PLANNING_TOOLS = (TODO_APPEND, TODO_LIST, TODO_UPDATE, READ_SCRATCHPAD, WRITE_SCRATCHPAD)
