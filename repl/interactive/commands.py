"""The REPL's backslash commands. Each returns the text to show; none calls the model
(except ``\\compact``, whose summary call is the point)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from actors.core.errors import HarnessError
from actors.runtime.supervisor import Supervisor
from actors.store import Store
from repl.interactive.view import SessionView
from repl.session_commands import describe, session_line

COMMANDS: dict[str, str] = {
    "\\help": "show the commands and key bindings",
    "\\sessions": "list saved sessions with summary previews",
    "\\info": "this session's id, title, counts, compactions and usage (or \\info ID)",
    "\\title": "\\title TEXT: name this session",
    "\\compact": "summarise older turns now",
    "\\fork": "copy this session (or \\fork ID) into a new one; you stay here",
    "\\pin": "\\pin TEXT: an instruction kept verbatim across compactions",
    "\\todos": "show the to-do list",
    "\\exit": "leave (also Ctrl-D)",
}
TAKES_SESSION_ID = ("\\info", "\\fork")

KEYS = """\
Keys: Enter sends · Alt-Enter or Esc Enter: new line · Up/Down: history · Ctrl-R: search
history · Tab: complete · Ctrl-C: abort the running turn / clear the line (twice on an empty
line: exit) · Ctrl-D: exit"""


class ExitRequested(Exception):
    """``\\exit`` was typed."""


@dataclass
class Reply:
    text: str
    error: bool = False


@dataclass
class CommandContext:
    """What a command may use: the supervisor's commands, the store to read other sessions,
    and what the events said about this one."""

    sup: Supervisor
    store: Store
    view: SessionView


def help_text() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name.ljust(width)}  {text}" for name, text in COMMANDS.items()]
    return "Commands:\n" + "\n".join(lines) + "\n" + KEYS


async def _sessions(ctx: CommandContext, _: str) -> Reply:
    items = await anyio.to_thread.run_sync(ctx.store.list_sessions)
    if not items:
        return Reply("No saved sessions.")
    current = ctx.view.session_id
    marked = [("* " if i["id"] == current else "  ") + session_line(i) for i in items]
    return Reply("\n".join(marked))


async def _info(ctx: CommandContext, argument: str) -> Reply:
    view = ctx.view
    info = await anyio.to_thread.run_sync(ctx.store.info, argument or view.session_id)
    lines = describe(info)
    if not argument or argument == view.session_id:
        lines.append(f"Context:      ~{view.tokens} of {view.budget} tokens"
                     + (" (compacting…)" if view.compacting else ""))
    return Reply("\n".join(lines))


async def _title(ctx: CommandContext, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\title TEXT", error=True)
    await ctx.sup.set_title(argument)
    return Reply(f"Title set: {argument}")


async def _compact(ctx: CommandContext, _: str) -> Reply:
    result = await ctx.sup.compact()
    return Reply(result.message, error=not result.applied)


async def _fork(ctx: CommandContext, argument: str) -> Reply:
    if argument and argument != ctx.view.session_id:
        new_id = await anyio.to_thread.run_sync(ctx.store.fork, argument)
    else:
        new_id = await ctx.sup.fork()
    return Reply(f"Fork created: {new_id} (resume it separately)")


async def _pin(ctx: CommandContext, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\pin TEXT", error=True)
    await ctx.sup.pin(argument)
    return Reply("Pinned: kept verbatim across compactions.")


async def _todos(ctx: CommandContext, _: str) -> Reply:
    return Reply(ctx.view.todos)


async def _help(ctx: CommandContext, _: str) -> Reply:
    return Reply(help_text())


async def _exit(ctx: CommandContext, _: str) -> Reply:
    raise ExitRequested


HANDLERS: dict[str, Callable[[CommandContext, str], Awaitable[Reply]]] = {
    "\\help": _help,
    "\\sessions": _sessions,
    "\\info": _info,
    "\\title": _title,
    "\\compact": _compact,
    "\\fork": _fork,
    "\\pin": _pin,
    "\\todos": _todos,
    "\\exit": _exit,
}


async def run_command(ctx: CommandContext, line: str) -> Reply:
    """Run one backslash command line; user mistakes come back as an error reply."""
    name, _, argument = line.strip().partition(" ")
    handler = HANDLERS.get(name)
    if handler is None:
        return Reply(f"Unknown command {name}; type \\help for the list.", error=True)
    try:
        return await handler(ctx, argument.strip())
    except HarnessError as exc:
        return Reply(str(exc), error=True)
