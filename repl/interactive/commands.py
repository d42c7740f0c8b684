"""The REPL's backslash commands. Each returns the text to show; none calls the model
(except ``\\compact``, whose summary call is the point)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from actors.core.errors import HarnessError
from actors.runtime.supervisor import Supervisor
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


def help_text() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name.ljust(width)}  {text}" for name, text in COMMANDS.items()]
    return "Commands:\n" + "\n".join(lines) + "\n" + KEYS


async def _sessions(sup: Supervisor, _: str) -> Reply:
    items = await anyio.to_thread.run_sync(sup.store.list_sessions)
    if not items:
        return Reply("No saved sessions.")
    marked = [("* " if i["id"] == sup.session_id else "  ") + session_line(i) for i in items]
    return Reply("\n".join(marked))


async def _info(sup: Supervisor, argument: str) -> Reply:
    info = await anyio.to_thread.run_sync(sup.store.info, argument or sup.session_id)
    lines = describe(info)
    if not argument or argument == sup.session_id:
        lines.append(f"Context:      ~{sup.context_tokens()} of {sup.settings.max_context_tokens}"
                     " tokens" + (" (compacting…)" if sup.compactor and sup.compactor.running
                                  else ""))
    return Reply("\n".join(lines))


async def _title(sup: Supervisor, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\title TEXT", error=True)
    await sup.set_title(argument)
    return Reply(f"Title set: {argument}")


async def _compact(sup: Supervisor, _: str) -> Reply:
    result = await sup.compact()
    return Reply(result.message, error=not result.applied)


async def _fork(sup: Supervisor, argument: str) -> Reply:
    if argument and argument != sup.session_id:
        new_id = await anyio.to_thread.run_sync(sup.store.fork, argument)
    else:
        new_id = await sup.fork()
    return Reply(f"Fork created: {new_id} (resume it separately)")


async def _pin(sup: Supervisor, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\pin TEXT", error=True)
    await sup.pin(argument)
    return Reply("Pinned: kept verbatim across compactions.")


async def _todos(sup: Supervisor, _: str) -> Reply:
    return Reply(sup.planning.render())


async def _help(sup: Supervisor, _: str) -> Reply:
    return Reply(help_text())


async def _exit(sup: Supervisor, _: str) -> Reply:
    raise ExitRequested


HANDLERS: dict[str, Callable[[Supervisor, str], Awaitable[Reply]]] = {
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


async def run_command(sup: Supervisor, line: str) -> Reply:
    """Run one backslash command line; user mistakes come back as an error reply."""
    name, _, argument = line.strip().partition(" ")
    handler = HANDLERS.get(name)
    if handler is None:
        return Reply(f"Unknown command {name}; type \\help for the list.", error=True)
    try:
        return await handler(sup, argument.strip())
    except HarnessError as exc:
        return Reply(str(exc), error=True)
