"""The files half of ``\\rewind`` in the REPL: what to rewind (the conversation, the files,
or both), chosen with the diffstat of what the files would do in view (hand edits flagged),
and ``\\rewind undo`` for the last rewind of files."""

from __future__ import annotations

from actors.core.errors import HarnessError
from actors.workspace import RewindPlan
from repl.interactive.chooser import Chooser, Row
from repl.interactive.command_context import CommandContext, Reply
from repl.rewind import diffstat_lines, plan_report

WHAT = {"both": (True, True), "conversation": (True, False), "files": (False, True)}
USAGE = "Usage: \\rewind [N] [conversation|files|both], or \\rewind undo"


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
    plan = await ctx.sup.plan_files_rewind(0)
    lines = plan_lines(plan, ctx.project_root)
    done = await ctx.sup.rewind_files(plan)
    return Reply("\n".join([f"Undone: the files are back as they were before the rewind to "
                            f"message {plan.target.message} ({done.changed} files).",
                            *lines[1:]]))
