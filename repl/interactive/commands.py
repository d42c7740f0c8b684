"""The REPL's backslash commands. Each returns the text to show; none calls the model
(except ``\\compact``, whose summary call is the point).

Every ``\\command`` can be typed ``/command`` too (the habit from other agents). A line
starting with ``/`` whose first word names no command but holds another ``/`` (``/etc/hosts
is empty``) is a message, not a command. Their names and what each does are
:mod:`repl.interactive.command_names`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from actors.core.errors import HarnessError
from actors.core.previews import clean_title
from repl import listing
from repl.interactive.command_context import CommandContext, ExitRequested, Reply
from repl.interactive.command_names import COMMANDS, MODES
from repl.interactive.sanitize import sanitize
from repl.session_commands import INFO_RECENT, describe

KEYS = """\
Every \\command also works as /command. @path attaches a file (or a directory's file list).
Keys: Enter sends · Alt-Enter or Esc Enter: new line · Up/Down: history · Ctrl-R: search
history · Tab: complete · Shift-Tab: next mode · Esc or Ctrl-C: abort the running turn (text
typed meanwhile waits in the next prompt) · Ctrl-C at the prompt: clear the line (twice on
an empty line: exit) · Ctrl-D: exit"""


def help_text() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name.ljust(width)}  {text}" for name, text in COMMANDS.items()]
    return "Commands:\n" + "\n".join(lines) + "\n" + KEYS


async def _sessions(ctx: CommandContext, argument: str) -> Reply:
    every = argument.strip() in ("--all", "all")
    project = None if every else ctx.project_root
    items = await anyio.to_thread.run_sync(
        lambda: ctx.store.list_sessions(project_root=project, include_empty=False)
    )
    if not items:
        return Reply("No saved sessions" + ("." if every else " for this project."))
    return Reply("\n".join(listing.table(items, with_project=every, mark=ctx.view.session_id,
                                          width=listing.terminal_width())))


async def _info(ctx: CommandContext, argument: str) -> Reply:
    view = ctx.view
    session_id = await _resolve(ctx, argument) if argument else view.session_id
    info = await anyio.to_thread.run_sync(ctx.store.info, session_id)
    recent = await anyio.to_thread.run_sync(ctx.store.recent_messages, session_id, INFO_RECENT)
    lines = describe(info, recent)
    if session_id == view.session_id:
        lines.append(f"Context:      ~{view.tokens} of {view.budget} tokens"
                     + (" (compacting…)" if view.compacting else ""))
        files = await ctx.sup.files_changed(summary=True)
        lines.append(f"Files:        {files[0]}")
        if ctx.settings is not None:  # the settings files as they are now
            from repl.project_config import settings_lines

            lines += await anyio.to_thread.run_sync(settings_lines, ctx.settings)
    return Reply("\n".join(lines))


async def _title(ctx: CommandContext, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\title TEXT", error=True)
    await ctx.sup.set_title(argument)
    return Reply(f"Title set: {clean_title(argument)}")


async def _compact(ctx: CommandContext, _: str) -> Reply:
    result = await ctx.sup.compact()
    return Reply(result.message, error=not result.applied)


async def _resolve(ctx: CommandContext, prefix: str) -> str:
    """A whole session id from any unique prefix of it."""
    resolved: str = await anyio.to_thread.run_sync(ctx.store.resolve_id, prefix)
    return resolved


async def _fork(ctx: CommandContext, argument: str) -> Reply:
    argument = await _resolve(ctx, argument) if argument else ""
    if argument and argument != ctx.view.session_id:
        new_id = await ctx.sup.fork_session(argument)
    else:
        new_id = await ctx.sup.fork()
    source = argument or ctx.view.session_id
    return Reply(f"Forked {source} into {new_id} (a whole copy); \\resume {new_id} goes there, "
                 "you stay here.")


async def _pin(ctx: CommandContext, argument: str) -> Reply:
    if not argument:
        return Reply("Usage: \\pin TEXT", error=True)
    await ctx.sup.pin(argument)
    return Reply("Pinned: kept verbatim across compactions.")


async def _todos(ctx: CommandContext, _: str) -> Reply:
    return Reply(ctx.view.todos)


async def _result(ctx: CommandContext, argument: str) -> Reply:
    if argument and not argument.isdigit():
        return Reply("Usage: \\result [N]", error=True)
    result = ctx.results.get(int(argument) if argument else None)
    if result is None:
        if not ctx.results.count:
            return Reply("No tool results yet in this run.")
        return Reply(f"No result {argument} (this run has results 1 to {ctx.results.count}; "
                     "the oldest are not kept).", error=True)
    status = "" if result.status == "done" else f", {result.status.replace('_', ' ')}"
    header = f"[result {result.number}: {result.name}{status}]"
    return Reply(header + "\n" + result.text, paged=True)


async def _thinking(ctx: CommandContext, _: str) -> Reply:
    text = ctx.reasoning()
    return Reply(text, paged=True) if text else Reply("No reasoning in this run yet.")


def _rules(rules: tuple[str, ...]) -> str:
    return ", ".join(sanitize(r) for r in rules)


async def _approvals(ctx: CommandContext, argument: str) -> Reply:
    view = ctx.view
    if argument == "keep":
        if not view.saved_approvals:
            return Reply("No standing approvals from the last run to keep.")
        await ctx.sup.set_standing_approvals([*view.saved_approvals, *view.approvals])
        kept, view.saved_approvals = view.saved_approvals, ()
        return Reply(f"Kept for this session: {_rules(kept)}.")
    if argument == "clear":
        await ctx.sup.set_standing_approvals([])
        view.saved_approvals = ()
        return Reply("Standing approvals cleared: every action is asked again.")
    if argument:
        return Reply("Usage: \\approvals [keep|clear]", error=True)
    lines = [f"Standing approvals: {_rules(view.approvals) or 'none'}."]
    if view.saved_approvals:
        lines.append(f"From the last run, not in force: {_rules(view.saved_approvals)} "
                     "(\\approvals keep).")
    return Reply("\n".join(lines))


def mode_named(text: str) -> str | None:
    """The mode ``text`` names (any letter case), or None."""
    return next((m for m in MODES if m.lower() == text.strip().lower()), None)


async def _mode(ctx: CommandContext, argument: str) -> Reply:
    from actors.core.config import Mode

    if not argument:
        current = ctx.view.mode
        return Reply(f"Mode: {current}: {MODES.get(current, '')}. \\mode "
                     f"{'|'.join(MODES)} changes it; Shift-Tab cycles.")
    mode = mode_named(argument)
    if mode is None:
        return Reply(f"Unknown mode {sanitize(argument)!r}; the modes: "
                     f"{', '.join(MODES)}.", error=True)
    await ctx.sup.set_mode(Mode(mode))
    return Reply(f"Mode: {mode}: {MODES[mode]} (saved with this session).")


def _listed(name: str, models: list[str]) -> bool:
    """Whether the endpoint lists ``name`` (ollama lists ``gemma4:latest`` for ``gemma4``)."""
    return name in models or (":" not in name and f"{name}:latest" in models)


async def _model(ctx: CommandContext, argument: str) -> Reply:
    models = await ctx.models()
    there = (f" Models there: {', '.join(models)}." if models
             else " The endpoint lists no models.")
    if not argument:
        return Reply(f"Model: {ctx.view.model} at {ctx.endpoint}.{there} \\model NAME "
                     "switches (Tab completes).")
    if len(argument.split()) > 1:
        return Reply("Usage: \\model NAME", error=True)
    if models and not _listed(argument, models):
        return Reply(f"Model {argument!r} is not among the endpoint's models "
                     f"({', '.join(models)}); not switched.", error=True)
    await ctx.sup.set_model(argument)
    return Reply(f"Model: {argument} from the next message on (saved with this session).")


async def _files(ctx: CommandContext, argument: str) -> Reply:
    if argument not in ("", "diff"):
        return Reply("Usage: \\files [diff]", error=True)
    lines = await ctx.sup.files_changed(with_diff=argument == "diff")
    return Reply("\n".join(lines), paged=argument == "diff")


async def _doctor(ctx: CommandContext, _: str) -> Reply:
    from repl.doctor_endpoint import endpoint_report

    if ctx.settings is None:  # pragma: no cover - the REPL always gives its settings
        return Reply("No settings to check the endpoint with.", error=True)
    lines = await endpoint_report(ctx.settings)
    lines.append("The store's checks: harness --doctor, with no session running.")
    return Reply("\n".join(lines), error=any(" PROBLEM " in line for line in lines))


async def _help(ctx: CommandContext, _: str) -> Reply:
    return Reply(help_text())


async def _exit(ctx: CommandContext, _: str) -> Reply:
    raise ExitRequested


async def _rewind(ctx: CommandContext, argument: str) -> Reply:
    from repl.interactive.rewind_command import rewind

    return await rewind(ctx, argument)


async def _resume(ctx: CommandContext, argument: str) -> Reply:
    from repl.interactive.rewind_command import resume

    return await resume(ctx, argument)


HANDLERS: dict[str, Callable[[CommandContext, str], Awaitable[Reply]]] = {
    "\\help": _help,
    "\\sessions": _sessions,
    "\\info": _info,
    "\\title": _title,
    "\\compact": _compact,
    "\\fork": _fork,
    "\\rewind": _rewind,
    "\\resume": _resume,
    "\\pin": _pin,
    "\\todos": _todos,
    "\\result": _result,
    "\\thinking": _thinking,
    "\\approvals": _approvals,
    "\\mode": _mode,
    "\\model": _model,
    "\\files": _files,
    "\\doctor": _doctor,
    "\\exit": _exit,
}


def command_name(line: str) -> str | None:
    """The ``\\command`` a line runs (``/command`` is the same), or None for a message."""
    stripped = line.strip()
    if stripped.startswith("\\"):
        return stripped.split(maxsplit=1)[0]
    if stripped.startswith("/") and len(stripped) > 1:
        word = stripped.split(maxsplit=1)[0]
        name = "\\" + word[1:]
        if name in HANDLERS or "/" not in word[1:]:
            return name
    return None


async def run_command(ctx: CommandContext, line: str) -> Reply:
    """Run one backslash (or slash) command line; user mistakes come back as an error
    reply."""
    name = command_name(line) or line.strip().split(maxsplit=1)[0]
    _, _, argument = line.strip().partition(" ")
    handler = HANDLERS.get(name)
    if handler is None:
        typed = sanitize(line.strip().split(maxsplit=1)[0])
        return Reply(f"Unknown command {typed}; type \\help for the list.", error=True)
    try:
        return await handler(ctx, argument.strip())
    except HarnessError as exc:
        return Reply(str(exc), error=True)
