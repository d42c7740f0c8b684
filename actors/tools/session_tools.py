"""Session tools: list_sessions, search_sessions, read_session, write_session_summary.

They see the sessions of the current project (the sandbox directory) only: another
project's transcripts may hold its secrets, and a model working here has no business reading
them unasked. ``all_projects`` widens list_sessions and search_sessions, and read_session of
another project's session is allowed, but those calls ask the user first in every mode but
dangerouslySkipPermissions (:attr:`Tool.always_ask`). A session without a recorded project
counts as another project's.

They read through the store's read-only face (:class:`~actors.store.SessionReader`) in a
worker thread, and write the summary through the checkpoint writer. A store call is not
cancellable: a cancellation waits for the call (one short transaction) to finish. The store's
usage and storage errors (bad or unknown id, session locked, disk failure) become
:class:`ToolFailed` with the store's message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread

from actors.core.errors import HarnessError, StorageError, ToolFailed, UsageError
from actors.tools._base import Permission, Tool, ToolContext

MAX_LISTED = 50
SEARCH_POOL = 500  # matches fetched before keeping the current project's best MAX_LISTED
SUMMARY_CHARS = 200
READ_SESSION_CHARS = 12_000

T = TypeVar("T")


async def _call(function: Callable[..., T], *args: Any) -> T:
    try:
        return await anyio.to_thread.run_sync(function, *args)
    except (UsageError, StorageError) as exc:
        raise ToolFailed(str(exc)) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _same_project(ctx: ToolContext, project_root: object) -> bool:
    """Whether ``project_root`` (as recorded with a session) is the current project."""
    if not isinstance(project_root, str) or not project_root:
        return False
    return os.path.realpath(project_root) == os.path.realpath(ctx.sandbox)


def _session_line(item: Mapping[str, Any], with_project: bool = False) -> str:
    fields = [
        item["id"],
        _one_line(item.get("title") or "") or "(untitled)",
        item.get("status", ""),
        item.get("updated_at", ""),
        _one_line(item.get("summary") or "")[:SUMMARY_CHARS],
    ]
    if with_project:
        fields.insert(1, item.get("project_root") or "(no project)")
    return " | ".join(fields)


def _others_note(hidden: int) -> str:
    if not hidden:
        return ""
    return (
        f"\n[{hidden} more in other projects, not shown; all_projects=true shows them "
        "(the user is asked).]"
    )


async def list_sessions(ctx: ToolContext, args: dict[str, Any]) -> str:
    """One line per saved session of this project (or every project), most recent first."""
    every = bool(args.get("all_projects", False))
    sessions = await _call(ctx.store.list_sessions)
    mine = sessions if every else [s for s in sessions if _same_project(ctx, s["project_root"])]
    note = _others_note(len(sessions) - len(mine))
    if not mine:
        return "No saved sessions in this project." + note
    lines = [_session_line(s, every) for s in mine[:MAX_LISTED]]
    if len(mine) > MAX_LISTED:
        lines.append(f"[{len(mine) - MAX_LISTED} older sessions not shown; search instead.]")
    return "\n".join(lines) + note


async def search_sessions(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Sessions of this project (or every project) containing every word of the query, best
    first, each with a snippet."""
    query = args["query"]
    every = bool(args.get("all_projects", False))
    store = ctx.store
    found = await _call(lambda: store.search_sessions(query, limit=SEARCH_POOL))
    mine = found if every else [s for s in found if _same_project(ctx, s.get("project_root"))]
    note = _others_note(len(found) - len(mine))
    if not mine:
        return f"No sessions match {query!r}" + (" in this project." if not every else ".") + note
    return "\n".join(
        f"{_session_line(s, every)} | {_one_line(s.get('snippet', ''))}"
        for s in mine[:MAX_LISTED]
    ) + note


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(
            part["text"] for part in content if isinstance(part, dict) and "text" in part
        )
    parts = [content] if isinstance(content, str) and content else []
    for call in message.get("tool_calls") or []:
        function = (call or {}).get("function") or {}
        parts.append(f"[tool call {function.get('name', '?')}({function.get('arguments', '')})]")
    return "\n".join(parts) or "(empty)"


def format_session(record: Mapping[str, Any]) -> str:
    """A session's summary and up to :data:`READ_SESSION_CHARS` characters of transcript."""
    transcript = "\n".join(
        f"{m.get('role', '?')}: {_message_text(m)}"
        for m in record.get("transcript") or []
        if isinstance(m, dict)
    )
    summary = (record.get("summary") or "").strip() or "(no summary)"
    if len(transcript) > READ_SESSION_CHARS:
        transcript = transcript[:READ_SESSION_CHARS] + (
            f"\n[... transcript cut at {READ_SESSION_CHARS} characters]"
        )
    return f"Summary:\n{summary}\n\nTranscript:\n{transcript or '(empty)'}"


async def read_session(ctx: ToolContext, args: dict[str, Any]) -> str:
    """A saved session's summary and transcript."""
    record = await _call(ctx.store.load_session, args["session_id"])
    return format_session(record)


async def _ask_for_other_projects(ctx: ToolContext, args: dict[str, Any]) -> str | None:
    """list/search with ``all_projects`` ask: other projects' sessions are theirs."""
    if args.get("all_projects"):
        return "reads the sessions of every project, not only this one"
    return None


async def _ask_for_another_project(ctx: ToolContext, args: dict[str, Any]) -> str | None:
    """read_session of a session of another project asks (None for this project's)."""
    if args["session_id"] == ctx.session_id:
        return None
    try:
        info = await anyio.to_thread.run_sync(ctx.store.info, args["session_id"])
    except (UsageError, StorageError):
        return None  # the call fails with the store's message when it runs
    if _same_project(ctx, info.project_root):
        return None
    return f"reads a session of another project ({info.project_root or 'no project recorded'})"


async def write_session_summary(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Set the current session's summary."""
    summary = args["summary"].strip()
    if not summary:
        raise ToolFailed("The summary is empty.")
    try:  # through the checkpoint writer, the session's only writer
        await ctx.writer.set_metadata(summary=summary)
    except HarnessError as exc:
        raise ToolFailed(str(exc)) from None
    return "Saved session summary."


_LINE = "'id | title | status | updated_at | summary start'"

_ALL_PROJECTS = {
    "type": "boolean",
    "description": "Also other projects' sessions (default false; the user is asked).",
}

LIST_SESSIONS = Tool(
    name="list_sessions",
    description=(
        f"List this project's saved sessions, most recently updated first (at most "
        f"{MAX_LISTED}), one line each: {_LINE}. Argument: all_projects (optional; true lists "
        "every project's sessions, with the project after the id, and asks the user). Use "
        "read_session to see one."
    ),
    parameters={"type": "object", "properties": {"all_projects": _ALL_PROJECTS}},
    run=list_sessions,
    permission=Permission.READ,
    always_ask=_ask_for_other_projects,
)

SEARCH_SESSIONS = Tool(
    name="search_sessions",
    description=(
        "Find this project's saved sessions containing every word of a query "
        "(case-insensitive; titles, summaries and whole transcripts are searched). "
        "Arguments: query; all_projects (optional; true searches every project's sessions "
        f"and asks the user). One line per session, best match first: {_LINE} | a snippet "
        "around the match."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "all_projects": _ALL_PROJECTS,
        },
        "required": ["query"],
    },
    run=search_sessions,
    permission=Permission.READ,
    always_ask=_ask_for_other_projects,
)

READ_SESSION = Tool(
    name="read_session",
    description=(
        "Read a saved session: its summary, then its transcript as 'role: text' lines (tool "
        f"calls shown in brackets), cut at {READ_SESSION_CHARS} characters. Argument: "
        "session_id (from list_sessions or search_sessions). Reading another project's "
        "session asks the user."
    ),
    parameters={
        "type": "object",
        "properties": {"session_id": {"type": "string", "description": "The session's id."}},
        "required": ["session_id"],
    },
    run=read_session,
    permission=Permission.READ,
    always_ask=_ask_for_another_project,
)

WRITE_SESSION_SUMMARY = Tool(
    name="write_session_summary",
    description=(
        "Write the summary of the current session (replacing any earlier one), so that it "
        "can be found and resumed later. Argument: summary (what was asked, what was done, "
        "what is left)."
    ),
    parameters={
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "The session's summary."}},
        "required": ["summary"],
    },
    run=write_session_summary,
    permission=Permission.READ,
)

SESSION_TOOLS = (LIST_SESSIONS, SEARCH_SESSIONS, READ_SESSION, WRITE_SESSION_SUMMARY)
