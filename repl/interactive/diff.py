"""The change an approval is about, shown before the question: a unified diff for write_file
(against the file as it is now, or all lines added for a new file) and edit_file (the one
replacement applied to the file as it is now), the full command for run_bash.

The lines are sanitised, coloured when the terminal has colour (added green, removed red,
hunk headers cyan) and at most :data:`MAX_LINES` (then ``… +N more lines``). Files are read
by the tools' rules (:mod:`repl.interactive.project_files`), at most :data:`READ_LIMIT`.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Callable
from typing import Any

from actors.core.errors import ToolFailed
from repl.interactive.project_files import FileRead
from repl.interactive.sanitize import sanitize
from repl.interactive.terminal import Capabilities

MAX_LINES = 80
READ_LIMIT = 2 * 1024 * 1024
Reader = Callable[[str, int], FileRead]


def _current(read: Reader, path: str) -> tuple[str | None, str]:
    """(the file's text, or None for a new file; a note when it cannot be diffed)."""
    try:
        current = read(path, READ_LIMIT)
    except ToolFailed as exc:
        return "", str(exc)
    if current.missing:
        return None, ""
    if current.size > READ_LIMIT:
        return "", f"'{path}' is {current.size:,} bytes; the diff is not shown."
    try:
        return current.data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return "", f"'{path}' is not UTF-8 text; the diff is not shown."


def change_lines(tool: str, args: dict[str, Any], read: Reader, caps: Capabilities, *,
                 width: int | None = None, max_lines: int = MAX_LINES) -> list[str]:
    """What the approval of this call would do, as lines to show (without newlines); a
    command's lines are wrapped at words to ``width`` columns (a wrapped part indented
    further than the command's own next line); a diff longer than ``max_lines`` ends with
    how many lines more it has."""
    if tool == "run_bash":
        command = sanitize(str(args.get("command", "")))
        out = []
        for i, line in enumerate(command.split("\n")):
            parts = textwrap.wrap(line, max(width - 2, 20), subsequent_indent="    ",
                                  break_on_hyphens=False) if width else [line]
            for j, part in enumerate(parts or [""]):
                lead = (caps.style("bold", "$ ") if i == 0 else "  ") if j == 0 else "  "
                out.append(lead + part)
        return out
    if tool not in ("write_file", "edit_file") or not isinstance(args.get("path"), str):
        return []
    path = args["path"]
    before, note = _current(read, path)
    if note:
        return [sanitize(note)]  # it names the path, which the model wrote
    if tool == "write_file":
        after = str(args.get("content", ""))
        header = "new file" if before is None else ""
    else:
        old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
        if before is None:
            return [sanitize(f"'{path}' does not exist; the edit will fail.")]
        count = before.count(old) if old else 0
        if count != 1:
            where = "not found in" if count == 0 else f"found {count} times in"
            header = f"old_string {where} '{path}': the edit will fail. The change asked for:"
            before, after = old, new
        else:
            after, header = before.replace(old, new, 1), ""
    lines = list(difflib.unified_diff(
        (before or "").splitlines(), after.splitlines(),
        fromfile="/dev/null" if before is None else f"a/{path}", tofile=f"b/{path}",
        lineterm="", n=3,
    ))
    shown = [_colour(sanitize(line), caps) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(caps.style("dim", f"… +{len(lines) - max_lines} more lines"))
    if not lines:
        shown = ["(no change)"]
    return ([sanitize(header)] if header else []) + shown


def _colour(line: str, caps: Capabilities) -> str:
    if line.startswith(("+++", "---")):
        return caps.style("bold", line)
    if line.startswith("+"):
        return caps.style("green", line)
    if line.startswith("-"):
        return caps.style("red", line)
    if line.startswith("@@"):
        return caps.style("cyan", line)
    return line
