"""The harness as an ACP agent: the client's requests made into sessions and turns.

Each session the client creates, loads or resumes is a :class:`~repl.acp.session.ServedSession`
running in a task of the agent's task group, under the ``cwd`` the client gave as its project
directory (the tools are confined to it). Sessions are the store's ordinary sessions: the ACP
``sessionId`` is the session's id, so ``harness --resume ID`` continues one made in an editor
and ``session/load`` one made at the terminal. Nothing here touches a supervisor but through
its session.

Requests (``initialize``, ``session/new``, ``session/load``, ``session/resume``,
``session/list``, ``session/close``, ``session/prompt``) answer their result or a JSON-RPC error
(:mod:`repl.acp.errors`); ``session/cancel`` aborts the session's turn. A session must be open
here (new, loaded or resumed on this connection) before it is prompted.

Cancellation: a request being cancelled (the connection closing) stops waiting; the sessions
are closed by :meth:`HarnessAgent.close_all`, shielded, when the connection ends.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from acp import PROTOCOL_VERSION, Client, RequestError
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    StopReason,
)

from actors.core.config import Settings
from actors.core.errors import ProjectMismatch, UsageError
from actors.core.ids import new_session_id
from actors.core.previews import one_line
from actors.store import ListedSession, Store
from repl.acp.errors import INTERNAL_ERROR, translated
from repl.acp.session import ServedSession
from repl.acp.updates import PromptBlock, prompt_text

log = logging.getLogger("harness.acp")

PAGE = 100  # sessions per session/list answer
STOP_REASONS: dict[str, StopReason] = {
    "answered": "end_turn", "interrupted": "cancelled", "limit": "max_turn_requests"}


def _version() -> str:
    try:
        return version("agent-harness")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class HarnessAgent:
    """The ACP agent (the SDK's ``Agent`` protocol; see the module doc)."""

    def __init__(self, settings: Settings, store: Store, tasks: anyio.abc.TaskGroup) -> None:
        self._settings = dataclasses.replace(settings, preflight=True, auto_title=True)
        self._store = store
        self._tasks = tasks
        self._client: Client | None = None
        self._sessions: dict[str, ServedSession] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    # -- initialisation -------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        """The one protocol version the harness speaks, and what it can do."""
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities()),
            ),
            agent_info=Implementation(name="agent-harness", title="agent-harness",
                                      version=_version()),
        )

    # -- sessions -------------------------------------------------------------------------

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None,
                          **_: Any) -> NewSessionResponse:
        with translated():
            settings = await self._settings_for(cwd, mcp_servers)
            session = await self._start(ServedSession(new_session_id(), settings, self._store,
                                                      self._connected(), new=True))
            return NewSessionResponse(session_id=session.id)

    async def load_session(self, cwd: str, session_id: str,
                           mcp_servers: list[Any] | None = None,
                           **_: Any) -> LoadSessionResponse:
        """Open the session and replay its conversation as updates before answering."""
        with translated():
            session = await self._existing(session_id, cwd, mcp_servers)
            await session.replay()
            return LoadSessionResponse()

    async def resume_session(self, cwd: str, session_id: str,
                             mcp_servers: list[Any] | None = None,
                             **_: Any) -> ResumeSessionResponse:
        """Open the session without a replay (the client shows the conversation already)."""
        with translated():
            session = await self._existing(session_id, cwd, mcp_servers)
            session.known()
            return ResumeSessionResponse()

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """Shut the session down here (saved, its lease released); it stays in the store."""
        with translated():
            session = self._sessions.pop(session_id, None)
            if session is None:
                await anyio.to_thread.run_sync(self._store.info, session_id)  # unknown: said
            else:
                await session.close()
            return CloseSessionResponse()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **_: Any) -> ListSessionsResponse:
        """The sessions someone typed in, most recent first, of the project ``cwd`` or of
        every project; a page at a time."""
        with translated():
            start = _offset(cursor)
            root = None if cwd is None else str(_absolute(cwd).resolve())
            listed = await anyio.to_thread.run_sync(partial(
                self._store.list_sessions, project_root=root, include_empty=False,
                limit=start + PAGE + 1))
            page = listed[start : start + PAGE]
            return ListSessionsResponse(
                sessions=[_info(item) for item in page if item["project_root"]],
                next_cursor=str(start + PAGE) if len(listed) > start + PAGE else None,
            )

    # -- turns ----------------------------------------------------------------------------

    async def prompt(self, prompt: list[PromptBlock], session_id: str,
                     **_: Any) -> PromptResponse:
        """Run one user message to its end; updates stream meanwhile."""
        with translated():
            session = self._open(session_id)
            text, shown = prompt_text(prompt, session.project)
            if not text.strip():
                raise UsageError("The prompt is empty.")
            result = await session.prompt(text, shown)
            if result.outcome == "failed":
                raise RequestError(INTERNAL_ERROR, f"Turn failed: {result.text}")
            return PromptResponse(stop_reason=STOP_REASONS[result.outcome])

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Abort the session's running turn (a notification: nothing is answered)."""
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for %s, which is not open here", session_id)
        else:
            session.cancel()

    # -- the end --------------------------------------------------------------------------

    def abort_all(self) -> None:
        """Abort every running turn (the client has gone: its prompts answer ``cancelled``)."""
        for session in self._sessions.values():
            session.cancel()

    async def close_all(self) -> None:
        """Close every open session (each saved, its lease released), all at once."""
        sessions, self._sessions = list(self._sessions.values()), {}
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.close)

    # -- helpers --------------------------------------------------------------------------

    def _connected(self) -> Client:
        assert self._client is not None, "the connection sets the client first"
        return self._client

    async def _settings_for(self, cwd: str, mcp_servers: list[Any] | None) -> Settings:
        """The run's settings with ``cwd`` as the project directory."""
        if mcp_servers:
            log.warning("%d MCP server(s) ignored: the harness has its own tools",
                        len(mcp_servers))
        path = _absolute(cwd)
        resolved = await anyio.to_thread.run_sync(path.resolve)
        if not await anyio.to_thread.run_sync(resolved.is_dir):
            raise UsageError(f"cwd {cwd} is not a directory.")
        return dataclasses.replace(self._settings, sandbox_dir=resolved)

    async def _start(self, session: ServedSession) -> ServedSession:
        await self._tasks.start(session.run)  # a failure to open is raised here
        self._sessions[session.id] = session
        return session

    async def _existing(self, session_id: str, cwd: str,
                        mcp_servers: list[Any] | None) -> ServedSession:
        """The session, opened here if it is not yet (in project ``cwd``)."""
        settings = await self._settings_for(cwd, mcp_servers)
        session = self._sessions.get(session_id)
        if session is not None and not session.ended.is_set():
            if session.project != settings.sandbox_dir:
                raise ProjectMismatch(session_id, str(session.project))
            return session
        return await self._start(ServedSession(session_id, settings, self._store,
                                               self._connected(), new=False))

    def _open(self, session_id: str) -> ServedSession:
        session = self._sessions.get(session_id)
        if session is None or session.ended.is_set():
            raise UsageError(f"Session '{session_id}' is not open here: session/new, "
                             "session/load or session/resume first.")
        return session


def _absolute(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise UsageError(f"cwd must be an absolute path, not {cwd!r}.")
    return path


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise UsageError(f"Invalid cursor {cursor[:40]!r}: pass back a nextCursor as it came.")
    return int(cursor)


def _info(item: ListedSession) -> SessionInfo:
    title = item["title"] or one_line(item["preview"] or "", 80) or None
    return SessionInfo(
        session_id=item["id"], cwd=item["project_root"], title=title,
        updated_at=item["updated_at"],
        field_meta={"messages": item["messages"], "status": item["status"],
                    "parentId": item["parent_id"], "forkPoint": item["fork_point"]},
    )

