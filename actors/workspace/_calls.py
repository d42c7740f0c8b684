"""What each tool call of a session did to the project's files, from its marks: the paths
(and, on demand, the diffs) of every call, and of every rewind. ``--info ID --files``,
``--export ID --files`` and the REPL's ``\\files`` show it.

Blocking (it reads the object store); call it from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.workspace._diff import Trees, diff, unified
from actors.workspace._marks import Mark
from actors.workspace._objects import ObjectStore


@dataclass(frozen=True)
class CallFiles:
    """One tool call that changed files (or a rewind), and the paths it changed."""

    message: int
    call_id: str
    tool: str
    paths: list[tuple[str, str]]  # (path, added | modified | deleted)
    mark: Mark
    before: bytes | None  # the snapshot before it (for the diff)

    def as_json(self) -> dict[str, Any]:
        return {"message": self.message, "call_id": self.call_id, "tool": self.tool,
                "paths": [{"path": p, "status": s} for p, s in self.paths]}


def calls_changing_files(objects: ObjectStore, session_id: str) -> list[CallFiles]:
    """The session's calls (and rewinds) that changed files, in order."""
    marks = objects.marks.of_session(session_id)
    shown = [m for m in marks if m.kind in ("after", "rewind")]
    paths = objects.marks.paths(m.seq for m in shown)
    before = {m.call_id: m.root for m in marks if m.kind == "before"}
    undo = {m.seq: bytes.fromhex(str(m.detail["undo"])) for m in shown
            if m.kind == "rewind" and m.detail.get("undo")}
    found = []
    for mark in shown:
        if mark.seq not in paths:
            continue
        tool = "rewind" if mark.kind == "rewind" else str(mark.detail.get("tool", ""))
        start = undo.get(mark.seq) if mark.kind == "rewind" else before.get(mark.call_id)
        found.append(CallFiles(mark.message, mark.call_id, tool, paths[mark.seq], mark, start))
    return found


def call_lines(calls: list[CallFiles], objects: ObjectStore | None = None) -> list[str]:
    """The calls as lines for people; with ``objects``, each change's unified diff too."""
    if not calls:
        return ["Files changed by tool calls: none recorded."]
    lines = ["Files changed by tool calls:"]
    letters = {"added": "A", "modified": "M", "deleted": "D"}
    trees = Trees(objects) if objects is not None else None
    for call in calls:
        who = "rewind" if call.tool == "rewind" else f"{call.tool} {call.call_id}"
        lines.append(f"  message {call.message}, {who}:")
        for path, status in call.paths:
            lines.append(f"    {letters.get(status, '?')} {path}")
        if trees is not None:
            for change in diff(trees, call.before, call.mark.root):
                if not change.is_dir:
                    lines.extend("      " + line for line in
                                 unified(trees, change).rstrip("\n").split("\n"))
    return lines


def calls_json(calls: list[CallFiles], objects: ObjectStore | None = None
               ) -> list[dict[str, Any]]:
    """The calls as JSON (``--info ID --files --json``); with ``objects``, each call's
    unified diff too (``--diff``)."""
    trees = Trees(objects) if objects is not None else None
    items = []
    for call in calls:
        item = call.as_json()
        if trees is not None:
            item["diff"] = "".join(unified(trees, c) for c in diff(trees, call.before,
                                                                   call.mark.root)
                                   if not c.is_dir)
        items.append(item)
    return items


def call_summary(calls: list[CallFiles]) -> str:
    """One line: how many files the session's tool calls changed, by how many calls."""
    tools = [c for c in calls if c.tool != "rewind"]
    if not tools:
        return "none changed by tool calls"
    paths = {p for c in tools for p, _status in c.paths}
    return (f"{len(paths)} changed by {len(tools)} tool call{'s' if len(tools) != 1 else ''} "
            "(\\files lists them)")
