"""Session tools: list_sessions, search_sessions, read_session, write_session_summary.

They call the synchronous :class:`Store` in a worker thread. A store call is not
cancellable: a cancellation waits for the call (one short transaction) to finish. The store's
usage and storage errors (bad or unknown id, session locked, disk failure) become
:class:`ToolFailed` with the store's message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread

from actors.core.errors import HarnessError, StorageError, ToolFailed, UsageError
from actors.tools._base import Permission, Tool, ToolContext

if TYPE_CHECKING:
    from actors.store import Store

MAX_LISTED = 50
SUMMARY_CHARS = 200
READ_SESSION_CHARS = 12_000

T = TypeVar("T")


def _store(ctx: ToolContext) -> Store:
    if ctx.store is None:
        raise ToolFailed("No session store is available in this run.")
    return ctx.store


async def _call(function: Callable[..., T], *args: Any) -> T:
    try:
        return await anyio.to_thread.run_sync(function, *args)
    except (UsageError, StorageError) as exc:
        raise ToolFailed(str(exc)) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _session_line(item: dict[str, Any]) -> str:
    return " | ".join(
        [
            item["id"],
            _one_line(item.get("title") or "") or "(untitled)",
            item.get("status", ""),
            item.get("updated_at", ""),
            _one_line(item.get("summary") or "")[:SUMMARY_CHARS],
        ]
    )


async def list_sessions(ctx: ToolContext, args: dict[str, Any]) -> str:
    """One line per saved session, most recent first."""
    sessions = await _call(_store(ctx).list_sessions)
    if not sessions:
        return "No saved sessions."
    lines = [_session_line(s) for s in sessions[:MAX_LISTED]]
    if len(sessions) > MAX_LISTED:
        lines.append(f"[{len(sessions) - MAX_LISTED} older sessions not shown; search instead.]")
    return "\n".join(lines)


async def search_sessions(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Sessions containing every word of the query, best first, each with a snippet."""
    query = args["query"]
    store = _store(ctx)
    found = await _call(lambda: store.search_sessions(query, limit=MAX_LISTED))
    if not found:
        return f"No sessions match {query!r}."
    return "\n".join(f"{_session_line(s)} | {_one_line(s.get('snippet', ''))}" for s in found)


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


def format_session(record: dict[str, Any]) -> str:
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
    record = await _call(_store(ctx).load_session, args["session_id"])
    return format_session(record)


async def write_session_summary(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Set the current session's summary."""
    store = _store(ctx)
    if ctx.session_id is None:
        raise ToolFailed("This run has no saved session to summarise.")
    summary = args["summary"].strip()
    if not summary:
        raise ToolFailed("The summary is empty.")
    if ctx.writer is not None:  # the running harness: the checkpoint writer writes
        try:
            await ctx.writer.update(summary=summary)
        except HarnessError as exc:
            raise ToolFailed(str(exc)) from None
        return "Saved session summary."
    session_id = ctx.session_id
    await _call(lambda: store.update(session_id, summary=summary))
    return "Saved session summary."


_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
_LINE = "'id | title | status | updated_at | summary start'"

LIST_SESSIONS = Tool(
    name="list_sessions",
    description=(
        f"List saved sessions, most recently updated first (at most {MAX_LISTED}), one line "
        f"each: {_LINE}. No arguments. Use read_session to see one."
    ),
    parameters=_NO_ARGS,
    run=list_sessions,
    permission=Permission.READ,
)

SEARCH_SESSIONS = Tool(
    name="search_sessions",
    description=(
        "Find saved sessions containing every word of a query (case-insensitive; titles, "
        f"summaries and whole transcripts are searched). Argument: query. One line per "
        f"session, best match first: {_LINE} | a snippet around the match."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "required": ["query"],
    },
    run=search_sessions,
    permission=Permission.READ,
)

READ_SESSION = Tool(
    name="read_session",
    description=(
        "Read a saved session: its summary, then its transcript as 'role: text' lines (tool "
        f"calls shown in brackets), cut at {READ_SESSION_CHARS} characters. Argument: "
        "session_id (from list_sessions or search_sessions)."
    ),
    parameters={
        "type": "object",
        "properties": {"session_id": {"type": "string", "description": "The session's id."}},
        "required": ["session_id"],
    },
    run=read_session,
    permission=Permission.READ,
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
