"""``\\rewind`` and ``\\resume``: going back in this session, or over to another one.

``\\rewind`` lists the messages you typed in this conversation, newest first (type to
filter); choosing one moves the working context back to just before it, and puts that
message in the prompt to edit and send again. Everything after it is kept as a fork, whose
id is shown (``harness -r ID`` resumes it); the transcript keeps every message.
``\\rewind N`` goes back to before message N without asking.

With workspace snapshots, choosing a message then asks what to rewind: the conversation and
the files, the conversation only, or the files only, with the diffstat of what the files
would do in view (edits made by hand since the session last saw them flagged).
``\\rewind N files|both|conversation`` does it without asking; ``\\rewind undo`` undoes
the last rewind: the files back as they were before it, and, when it took the conversation
too, the conversation (the REPL goes on in the fork that holds it as it was). A rewind of the
files that was cut short is finished by ``\\rewind finish`` or put back by ``\\rewind
undo``; ``\\rewind`` asks what to do with one whose files changed since.

``\\resume`` opens the resume picker (``\\resume ID``: that session, any unique prefix);
the REPL then leaves this session (saved) and opens the other.
"""

from __future__ import annotations

import anyio

from actors.runtime.rewind import RewindRequest
from actors.store import UserMessage
from repl.interactive import rewind_files as files_ui
from repl.interactive.chooser import Chooser, Row
from repl.interactive.command_context import CommandContext, Reply, SwitchSession
from repl.interactive.picker import SessionPicker, nothing_to_resume
from repl.session_edits import RunEdits

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
    words = argument.lower().split()
    if words == ["undo"]:
        return await files_ui.undo(ctx)
    if words == ["finish"]:
        return await files_ui.take_up(ctx, "finish")
    found = await files_ui.interrupted(ctx)
    if found is not None and found.pending.recorded and found.changed:
        answered = await files_ui.ask_interrupted(ctx, found)
        if answered is not None:
            return answered
    what = words.pop() if words and words[-1] in files_ui.WHAT else None
    if len(words) > 1 or (words and not words[0].lstrip("#").isdigit()):
        return Reply(files_ui.USAGE, error=True)
    points = await ctx.sup.rewind_points()
    if not points:
        return Reply("Nothing to rewind to: you have not typed anything in this session yet.")
    if words:
        number = int(words[0].lstrip("#"))
    else:
        chosen = await _choose(points).run_async()
        if not isinstance(chosen, Row):
            return Reply("Not rewound.")
        number = int(chosen.key)
    plan, no_files = await files_ui.files_plan(ctx, number)
    asked = what is None and not words  # chosen in the list
    if asked and plan is not None and not plan.restore.empty:  # ask what, diffstat shown
        picked = await files_ui.choose_what(number, plan, ctx.project_root).run_async()
        if not isinstance(picked, Row):
            return Reply("Not rewound.")
        what = picked.key
    what = what or "conversation"  # \rewind N, or nothing in the files to restore
    conversation, files = files_ui.WHAT[what]
    if files and plan is None:
        return Reply(f"The files cannot be rewound: {no_files}", error=True)
    outcome = await ctx.sup.rewind(RewindRequest(before=number, conversation=conversation,
                                                 files=files, files_plan=plan))
    said = files_ui.files_said(outcome.files_restored, number)
    if outcome.messages is None:
        return Reply(said.strip())
    typed = next((p.text for p in points if p.number == number), "")
    note = ""
    if asked and plan is not None and plan.restore.empty:
        note = " The files are as they were then."
    return Reply(
        f"Rewound to before message {number}: {len(outcome.messages)} messages in context. "
        f"What came after is kept as fork {outcome.fork_id} (harness -r {outcome.fork_id} "
        f"resumes it).{said} Your message is back in the prompt to edit.{note}",
        prefill=typed,
    )


async def resume(ctx: CommandContext, argument: str) -> Reply:
    if argument:
        target = await anyio.to_thread.run_sync(ctx.store.resolve_id, argument)
        if target == ctx.view.session_id:
            return Reply("That is this session.")
        raise SwitchSession(target)
    picker = SessionPicker(ctx.store, RunEdits(ctx.sup), ctx.project_root or None,
                           current=ctx.view.session_id)
    if not await anyio.to_thread.run_sync(picker.chooser.first_rows):
        return Reply(nothing_to_resume(ctx.project_root or None, other=True))
    picked = await picker.run_async()
    if picked is None:
        return Reply("Staying in this session.")
    raise SwitchSession(picked.session_id)
