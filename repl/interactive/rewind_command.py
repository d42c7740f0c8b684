"""``\\rewind`` and ``\\resume``: going back in this session, or over to another one.

``\\rewind`` lists the messages you typed in this conversation, newest first (type to
filter); choosing one moves the working context back to just before it, and puts that
message in the prompt to edit and send again. Everything after it is kept as a fork, whose
id is shown (``harness -r ID`` resumes it); the transcript keeps every message.
``\\rewind N`` goes back to before message N without asking.

``\\resume`` opens the resume picker (``\\resume ID``: that session, any unique prefix);
the REPL then leaves this session (saved) and opens the other.
"""

from __future__ import annotations

import anyio

from actors.runtime.rewind import RewindRequest
from actors.store import UserMessage
from repl.interactive.chooser import Chooser, Row
from repl.interactive.commands import CommandContext, Reply, SwitchSession
from repl.interactive.picker import SessionPicker

PREVIEW_CHARS = 900


def _choose(points: list[UserMessage]) -> Chooser:
    by_key = {str(p.number): p for p in points}

    def load(query: str) -> tuple[str, list[Row]]:
        words = query.lower().split()
        rows = [
            Row(str(p.number), f"#{p.number:<5} {' '.join(p.text.split())}", p)
            for p in reversed(points)
            if all(w in p.text.lower() for w in words)
        ]
        return "MESSAGE  WHAT YOU TYPED", rows

    def preview(row: Row) -> list[str]:
        text = by_key[row.key].text[:PREVIEW_CHARS]
        return ["Goes back to just before this message; what follows is kept as a fork:",
                *text.splitlines()]

    return Chooser(title="Rewind to before which message? (type to filter)", load=load,
                   preview=preview, enter_label="rewind")


async def rewind(ctx: CommandContext, argument: str) -> Reply:
    points = await ctx.sup.rewind_points()
    if not points:
        return Reply("Nothing to rewind to: you have not typed anything in this session yet.")
    if argument:
        if not argument.lstrip("#").isdigit():
            return Reply("Usage: \\rewind [N] (N: a message number \\rewind lists)", error=True)
        number = int(argument.lstrip("#"))
    else:
        chosen = await _choose(points).run_async()
        if not isinstance(chosen, Row):
            return Reply("Not rewound.")
        number = int(chosen.key)
    outcome = await ctx.sup.rewind(RewindRequest(before=number))
    typed = next((p.text for p in points if p.number == number), "")
    return Reply(
        f"Rewound to before message {number}: {len(outcome.messages)} messages in context. "
        f"What came after is kept as fork {outcome.fork_id} (harness -r {outcome.fork_id} "
        "resumes it). Your message is back in the prompt to edit.",
        prefill=typed,
    )


async def resume(ctx: CommandContext, argument: str) -> Reply:
    if argument:
        target = await anyio.to_thread.run_sync(ctx.store.resolve_id, argument)
        if target == ctx.view.session_id:
            return Reply("That is this session.")
        raise SwitchSession(target)
    picked = await SessionPicker(ctx.store, ctx.project_root or None,
                                 current=ctx.view.session_id).run_async()
    if picked is None:
        return Reply("Staying in this session.")
    raise SwitchSession(picked.session_id)
