"""The files half of ``\\rewind`` in the REPL: what to rewind (the conversation, the files,
or both), chosen with the diffstat of what the files would do in view (hand edits flagged);
``\\rewind undo`` for the last rewind (its files, and its conversation when it took it:
the REPL goes on in the fork that holds the conversation as it was); and a rewind of the
files that was cut short: ``\\rewind finish``, ``\\rewind undo``, or, when ``\\rewind``
finds one with files changed since, the question of what to do with it."""

from __future__ import annotations

from actors.core.errors import HarnessError
from actors.runtime.rewind import RewindRequest
from actors.workspace import Interrupted, RewindPlan
from repl.interactive.chooser import Chooser, Row
from repl.interactive.command_context import CommandContext, Reply, SwitchSession
from repl.rewind import diffstat_lines, plan_report

WHAT = {"both": (True, True), "conversation": (True, False), "files": (False, True)}
USAGE = "Usage: \\rewind [N] [conversation|files|both], \\rewind undo or \\rewind finish"


async def files_plan(ctx: CommandContext, number: int) -> tuple[RewindPlan | None, str]:
    """The plan of the files' rewind to ``number``, or None and why not."""
    try:
        return await ctx.sup.plan_files_rewind(number), ""
    except HarnessError as exc:
        return None, str(exc)


def plan_lines(plan: RewindPlan, project: str) -> list[str]:
    report = plan_report(plan, project)
    if not report["files"]:
        return ["The files are as they were then: nothing to restore.",
                *diffstat_lines(report, done=False)]
    return [f"The files would change ({len(report['files'])}):",
            *diffstat_lines(report, done=False)]


def choose_what(number: int, plan: RewindPlan, project: str) -> Chooser:
    rows = [
        Row("both", "Conversation and files"),
        Row("conversation", "Conversation only (the files stay as they are)"),
        Row("files", "Files only (the conversation stays as it is)"),
    ]
    conversation = [f"The conversation goes back to before message {number}; what came "
                    "after is kept as a fork."]

    def preview(row: Row) -> list[str]:
        if row.key == "conversation":
            return [*conversation, "The files stay as they are."]
        files = plan_lines(plan, project)
        return [*conversation, *files] if row.key == "both" else files

    return Chooser(title=f"Rewind what, to before message {number}?",
                   load=lambda _query: ("", rows), preview=preview, enter_label="rewind")


def files_said(restored: int | None, number: int) -> str:
    if restored is None:
        return ""
    if not restored:
        return " The files were already as they were then."
    return (f" The files are back as they were at message {number} ({restored} files); "
            "\\rewind undo puts them back as they were just before.")


async def undo(ctx: CommandContext) -> Reply:
    """``\\rewind undo``: the last rewind undone (one cut short: what it wrote put back)."""
    found = await interrupted(ctx)
    if found is not None and found.pending.recorded:
        return await take_up(ctx, "put_back")
    plan = await ctx.sup.plan_files_rewind(0)
    lines = plan_lines(plan, ctx.project_root)
    outcome = await ctx.sup.rewind(RewindRequest(undo=True, files_plan=plan))
    files = outcome.files
    assert files is not None
    said = "\n".join([f"Undone: the files are back as they were before the rewind to "
                      f"message {plan.target.message} ({files.changed} files).", *lines[1:]])
    if outcome.resume:
        raise SwitchSession(outcome.resume, said + (
            "\nThat rewind took the conversation too: it goes on as it was before it, in "
            f"session {outcome.resume} (this one stays rewound)."))
    return Reply(said)


async def interrupted(ctx: CommandContext) -> Interrupted | None:
    """The rewind of the project's files that was cut short, if any."""
    try:
        return await ctx.sup.interrupted_rewind()
    except HarnessError:  # snapshots are off: nothing to take up from here
        return None


async def take_up(ctx: CommandContext, action: str) -> Reply:
    """``\\rewind finish`` (``finish``) or putting back what it wrote (``put_back``)."""
    if action == "finish":
        outcome = await ctx.sup.rewind(RewindRequest(interrupted="finish"))
        assert outcome.finished is not None
        return Reply(str(outcome.finished).replace(
            f"`harness --rewind {outcome.finished.interrupted.session_id} --undo`",
            "\\rewind undo"))
    outcome = await ctx.sup.rewind(RewindRequest(interrupted="put_back"))
    assert outcome.files is not None
    return Reply(f"What the interrupted rewind wrote was put back ({outcome.files.changed} "
                 "paths); files changed since it are as they were.")


async def ask_interrupted(ctx: CommandContext, found: Interrupted) -> Reply | None:
    """A rewind cut short with files changed since: ask what to do with it first (None:
    leave it, go on with the ``\\rewind`` asked)."""
    rows = [Row("finish", "Finish it (the files changed since stay as they are)"),
            Row("put_back", "Put back what it wrote (the files changed since stay too)"),
            Row("leave", "Leave it for now")]
    lines = [found.refusal(repl=True)]
    picked = await Chooser(title="A rewind of the files was interrupted: what now?",
                           load=lambda _query: ("", rows), preview=lambda _row: lines,
                           enter_label="choose").run_async()
    if not isinstance(picked, Row) or picked.key == "leave":
        return None
    return await take_up(ctx, picked.key)
