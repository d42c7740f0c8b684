"""``harness --acp`` driven as an editor drives it: the ACP SDK's client side talking to the
real harness in a subprocess, the model a scripted server.

A session made over ACP is an ordinary session (listed, loaded, resumed, continued in print
mode, and the reverse); a prompt streams its updates and asks permission for what needs it;
a cancel during a tool is the safe recovery of Ctrl-C; a kill -9 loses nothing that was
acknowledged; stdin closing ends the agent cleanly. The agent runs on asyncio (the SDK's
loop), so these tests do too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.core import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)
from acp.stdio import spawn_agent_process

from actors.core.messages import INTERRUPTED_NOTICE
from actors.store import SessionStore
from actors.testing.scripted_server import (
    Hang,
    Reply,
    ScriptedServer,
    ToolCall,
    tool_pairing_errors,
)
from tests.support.children import read_line
from tests.support.clitools import REPO, harness
from tests.support.runtime import pid_alive, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.anyio]  # each test starts the harness


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the ACP SDK's loop


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


class Editor:
    """The client side: records every update, answers permission requests with
    :attr:`answer` (an option id, or None: "cancelled")."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.answer: str | None = "allow"
        self.arrived = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        self.arrived.set()

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption],
                                 **_: Any) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer))

    def of(self, kind: type, session_id: str | None = None) -> list[Any]:
        return [u for s, u in self.updates
                if isinstance(u, kind) and session_id in (None, s)]

    def text(self, session_id: str) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk, session_id))

    async def wait_for(self, kind: type, count: int = 1) -> list[Any]:
        with anyio.fail_after(30):
            while len(self.of(kind)) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.of(kind)


def _env(memory_dir: Path) -> dict[str, str]:
    return {"AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO),
            "OPENAI_API_KEY": "test"}


@contextlib.asynccontextmanager
async def agent(
    editor: Editor, server: ScriptedServer, memory_dir: Path, cwd: Path, log: Path,
    *extra: str,
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """``harness --acp`` started as an editor starts it, initialized; stderr into ``log``.
    Leaving closes its stdin and waits for it to end."""
    with log.open("ab") as err:
        async with spawn_agent_process(
            editor, sys.executable, "-m", "repl", "--acp", "--base-url", server.base_url,
            "--llm-timeout", "30", *extra, env=_env(memory_dir), cwd=cwd,
            transport_kwargs={"stderr": err.fileno(), "shutdown_timeout": 30},
        ) as (conn, proc):
            answer = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert answer.protocol_version == PROTOCOL_VERSION
            yield conn, proc


def _clean(log: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing but protocol on stdout (the SDK logs a line it cannot parse), no traceback on
    stderr."""
    assert "Traceback" not in log.read_text()
    assert not [r for r in caplog.records if "JSON-RPC" in r.getMessage()]


def _print_mode(memory_dir: Path, cwd: Path, server: ScriptedServer, *args: str
                ) -> subprocess.CompletedProcess[str]:
    return harness(*args, "--base-url", server.base_url, "--llm-timeout", "30",
                   memory_dir=memory_dir, cwd=cwd, env={"OPENAI_API_KEY": "test"})


async def test_a_session_made_in_an_editor_goes_on_in_print_mode(
    memory_dir: Path, project: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    editor, log = Editor(), tmp_path / "stderr"
    editor.answer = "always"
    long = "Written: " + "ok " * 2000  # 2,000 updates: every one is out before the answer
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "hi"})]),
              Reply(long),
              Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "ho"})]),
              Reply("Also written.")]
    with ScriptedServer(script) as server:
        async with agent(editor, server, memory_dir, project, log) as (conn, proc):
            made = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = made.session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("write a.txt")])
            assert done.stop_reason == "end_turn"
            assert editor.text(sid) == long
            await conn.prompt(session_id=sid, prompt=[text_block("and b.txt")])
            listed = await conn.list_sessions(cwd=str(project))
        assert proc.returncode == 0  # stdin closed: a clean end
    assert (project / "a.txt").read_text() == "hi" and (project / "b.txt").read_text() == "ho"
    # the permission request named the call the client was told about, with its options;
    # "always" made a standing approval: the second write was not asked about
    first, second = editor.of(ToolCallStart, sid)
    assert (first.kind, first.title, first.status) == ("edit", "write_file: a.txt",
                                                        "in_progress")
    assert first.locations[0].path == str(project / "a.txt")
    assert first.content[0].new_text == "hi"  # the change, as a diff
    [(asked, options)] = editor.asked
    assert asked.tool_call_id == first.tool_call_id and asked.title == first.title
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    ends = editor.of(ToolCallProgress, sid)
    assert [(e.tool_call_id, e.status) for e in ends] == [(first.tool_call_id, "completed"),
                                                         (second.tool_call_id, "completed")]
    # an ordinary session of the store: listed, saved, its lease released
    assert [(s.session_id, s.cwd) for s in listed.sessions] == [(sid, str(project))]
    info = SessionStore(memory_dir).info(sid)
    assert info.status == "saved" and info.project_root == str(project)
    files = harness("--info", sid, "--files", memory_dir=memory_dir, cwd=project)
    assert "a.txt" in files.stdout and "b.txt" in files.stdout  # snapshotted: undoable
    with ScriptedServer([Reply("Still here.")]) as server:
        result = _print_mode(memory_dir, project, server, "--resume", sid, "-p", "and now?")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Still here.\n"
        sent = server.requests[0]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant"] * 2 + [
        "user"]
    assert sent[1]["content"] == "write a.txt" and tool_pairing_errors(sent) == []
    _clean(log, caplog)


async def test_cancel_during_a_tool_recovers_as_ctrl_c_does(
    memory_dir: Path, project: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    editor, log, pid_file = Editor(), tmp_path / "stderr", tmp_path / "pid"
    script = [Reply(tool_calls=[ToolCall("run_bash",
                                         {"command": f"echo $$ > {pid_file}; sleep 30"})]),
              Reply("Fine, stopped.")]
    with ScriptedServer(script) as server:
        async with agent(editor, server, memory_dir, project, log) as (conn, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            async with anyio.create_task_group() as tg:
                outcome: list[str] = []

                async def ask() -> None:
                    answer = await conn.prompt(session_id=sid, prompt=[text_block("sleep")])
                    outcome.append(answer.stop_reason)

                tg.start_soon(ask)
                bash = int(await anyio.to_thread.run_sync(wait_for, pid_file))
                await conn.cancel(session_id=sid)
            assert outcome == ["cancelled"]
            assert not pid_alive(bash)  # the command's process group was killed
            [end] = editor.of(ToolCallProgress, sid)
            assert end.status == "failed" and end.raw_output == {"status": "interrupted"}
            assert INTERRUPTED_NOTICE in end.content[0].content.text
            again = await conn.prompt(session_id=sid, prompt=[text_block("what now?")])
            assert again.stop_reason == "end_turn"
            sent = server.requests[-1]["messages"]
    assert tool_pairing_errors(sent) == []
    assert INTERRUPTED_NOTICE in next(m for m in sent if m["role"] == "tool")["content"]
    # not a simple command: no "always" is offered for it
    assert [[o.kind for o in options] for _, options in editor.asked] == [
        ["allow_once", "reject_once"]]
    _clean(log, caplog)


async def test_a_terminal_session_is_listed_loaded_and_resumed_in_an_editor(
    memory_dir: Path, project: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo made here"})]),
              Reply("It printed it.")]
    with ScriptedServer(script) as server:
        made = _print_mode(memory_dir, project, server, "-p", "run echo",
                           "--mode", "dangerouslySkipPermissions")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.split()[1]
    log = tmp_path / "stderr"
    editor = Editor()
    with ScriptedServer([Reply("Loaded and answering.")]) as server:
        async with agent(editor, server, memory_dir, project, log) as (conn, _):
            listed = await conn.list_sessions(cwd=str(project))
            assert [s.session_id for s in listed.sessions] == [sid]
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            replayed = [u for _, u in editor.updates]
            assert [type(u) for u in replayed] == [UserMessageChunk, ToolCallStart,
                                                    ToolCallProgress, AgentMessageChunk]
            assert replayed[0].content.text == "run echo"
            assert replayed[1].title == "run_bash: echo made here"
            assert replayed[2].status == "completed"
            assert "made here" in replayed[2].content[0].content.text
            assert replayed[3].content.text == "It printed it."
            answer = await conn.prompt(session_id=sid, prompt=[text_block("and?")])
            assert answer.stop_reason == "end_turn"
    # resumed: no replay, and the turn goes on from where it was
    editor = Editor()
    with ScriptedServer([Reply("Resumed.")]) as server:
        async with agent(editor, server, memory_dir, project, log) as (conn, _):
            await conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[])
            assert editor.updates == []
            await conn.prompt(session_id=sid, prompt=[text_block("once more")])
            assert editor.text(sid) == "Resumed."
            sent = server.requests[0]["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users == ["run echo", "and?", "once more"] and tool_pairing_errors(sent) == []
    _clean(log, caplog)


async def test_kill_9_during_a_prompt_loses_nothing_acknowledged(
    memory_dir: Path, project: Path, tmp_path: Path
) -> None:
    editor, log, pid_file = Editor(), tmp_path / "stderr", tmp_path / "pid"
    script = [Reply("Starting. ", tool_calls=[ToolCall(
        "run_bash", {"command": f"echo $$ > {pid_file}; exec sleep 30"})])]
    with ScriptedServer(script) as server:
        async with agent(editor, server, memory_dir, project, log,
                         "--mode", "dangerouslySkipPermissions") as (conn, proc):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            async def ask() -> None:
                with contextlib.suppress(ConnectionError):  # the agent dies meanwhile
                    await conn.prompt(session_id=sid, prompt=[text_block("sleep, please")])

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                [start] = await editor.wait_for(ToolCallStart)  # acknowledged: on disk
                bash = int(await anyio.to_thread.run_sync(wait_for, pid_file))
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                tg.cancel_scope.cancel()
    # the command's guardian ends its group with the harness
    assert await anyio.to_thread.run_sync(_ended, bash)
    with ScriptedServer([Reply("Recovered.")]) as server:
        result = _print_mode(memory_dir, project, server, "--resume", sid, "-p", "well?")
        assert result.returncode == 0, result.stderr
        sent = server.requests[0]["messages"]
    assert tool_pairing_errors(sent) == []
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "user"]
    assert sent[1]["content"] == "sleep, please"
    assert sent[2]["tool_calls"][0]["id"] == start.tool_call_id
    assert sent[3]["content"].startswith(INTERRUPTED_NOTICE)
    assert "not closed cleanly" in result.stderr


def _ended(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not pid_alive(pid)


def _raw_agent(server: ScriptedServer, memory_dir: Path, cwd: Path, *extra: str
               ) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "repl", "--acp", "--base-url", server.base_url, *extra],
        cwd=cwd, env={**os.environ, **_env(memory_dir)}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _request(n: int, method: str, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                       "params": params}).encode() + b"\n"


def test_bad_requests_are_errors_and_never_tracebacks(memory_dir: Path, project: Path) -> None:
    lines = [
        b"not json at all\n",
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}\n',
        b"[1, 2, 3]\n",
        b'{"jsonrpc": "2.0", "id": 2, "method": 42}\n',
        b'{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": "cwd"}\n',
        _request(4, "initialize", protocolVersion=1),
        _request(5, "no/such/method"),
        _request(6, "session/new", cwd="relative/dir", mcpServers=[]),
        _request(7, "session/new", cwd=str(project / "missing"), mcpServers=[]),
        _request(8, "session/new", mcpServers=[]),
        _request(9, "session/prompt", sessionId="nosuch", prompt=[{"type": "text",
                                                                  "text": "hi"}]),
        _request(10, "session/load", sessionId="nosuch", cwd=str(project), mcpServers=[]),
        _request(11, "session/load", sessionId="../../etc", cwd=str(project), mcpServers=[]),
        _request(12, "session/list", cursor="not a cursor"),
        b'{"jsonrpc": "2.0", "id": 13, "method": "session/prompt", "params": {"sessionId": '
        b'"x", "prompt": [{"type": "text", "text": "\\ud800"}]}}\n',
        b'{"jsonrpc": "2.0", "id": 14, "method": "session/list", "params": {"cwd": 1e400}}\n',
        b'{"jsonrpc": "2.0", "id": 15, "method": "session/list", "params": ' + b"[" * 5000
        + b"]" * 5000 + b"}\n",
        b'{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}}\n',
        _request(16, "session/list"),
    ]
    with ScriptedServer([]) as server:
        proc = _raw_agent(server, memory_dir, project)
        out, err = proc.communicate(b"".join(lines), timeout=60)
    assert proc.returncode == 0, err
    answers = [json.loads(line) for line in out.splitlines()]  # nothing else on stdout
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    codes = {n: by_id[n]["error"]["code"] for n in by_id if "error" in by_id[n]}
    assert codes == {2: -32600, 3: -32600, 5: -32601, 6: -32602, 7: -32602, 8: -32602,
                     9: -32602, 10: -32002, 11: -32602, 12: -32602, 13: -32600, 14: -32600}
    assert by_id[4]["result"]["agentCapabilities"]["loadSession"] is True
    assert by_id[16]["result"] == {"sessions": []}
    nulls = [a["error"]["code"] for a in answers if a["id"] is None]
    # not JSON, cut short, not an object, nested 5,000 deep (its id cannot be read)
    assert nulls == [-32700, -32700, -32600, -32700]
    assert "No saved session with id 'nosuch'" in by_id[10]["error"]["message"]
    assert "lone surrogate" in by_id[13]["error"]["message"]
    assert "Traceback" not in err.decode()
    assert all(line.startswith("harness: ") for line in err.decode().splitlines())


def test_stdin_closing_during_a_prompt_ends_the_agent_cleanly(
    memory_dir: Path, project: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[ToolCall("run_bash",
                                         {"command": f"echo $$ > {pid_file}; sleep 30"})])]
    with ScriptedServer(script) as server:
        proc = _raw_agent(server, memory_dir, project, "--mode", "dangerouslySkipPermissions")
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_request(1, "initialize", protocolVersion=1)
                         + _request(2, "session/new", cwd=str(project), mcpServers=[]))
        proc.stdin.flush()
        answers = {a["id"]: a for a in (json.loads(read_line(proc.stdout)) for _ in range(2))}
        sid = answers[2]["result"]["sessionId"]
        proc.stdin.write(_request(3, "session/prompt", sessionId=sid,
                                  prompt=[{"type": "text", "text": "sleep"}]))
        proc.stdin.flush()
        bash = int(wait_for(pid_file))
        out, err = proc.communicate(timeout=60)  # stdin closed: the editor went away
    assert proc.returncode == 0, err
    last = json.loads(out.splitlines()[-1])
    assert last == {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}
    assert not pid_alive(bash)
    assert "Traceback" not in err.decode()
    store = SessionStore(memory_dir)
    assert store.info(sid).status == "saved"  # the shutdown ran
    messages = store.load_session(sid)["messages"]
    assert tool_pairing_errors(messages) == []
    assert INTERRUPTED_NOTICE in messages[-1]["content"]
    with ScriptedServer([Reply("Free.")]) as server:  # the lease was released
        assert _print_mode(memory_dir, project, server, "--resume", sid,
                           "-p", "next").returncode == 0


def test_sigterm_during_a_prompt_saves_and_answers_cancelled(
    memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Hang()]) as server:
        proc = _raw_agent(server, memory_dir, project)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_request(1, "session/new", cwd=str(project), mcpServers=[]))
        proc.stdin.flush()
        sid = json.loads(read_line(proc.stdout))["result"]["sessionId"]
        proc.stdin.write(_request(2, "session/prompt", sessionId=sid,
                                  prompt=[{"type": "text", "text": "wait"}]))
        proc.stdin.flush()
        server.wait_for_requests(1, timeout=15)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err.decode()
    answers = [json.loads(line) for line in out.splitlines()]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}
    store = SessionStore(memory_dir)
    assert store.info(sid).status == "saved"
    assert store.load_session(sid)["messages"][-1]["content"] == "wait"


@pytest.mark.parametrize("closed", ["<&-", ">&-"])
def test_started_without_stdin_or_stdout_is_a_usage_mistake(
    memory_dir: Path, project: Path, closed: str
) -> None:
    """fd 0 or 1 closed at the start may be the store's file by now: never taken."""
    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[{"role": "system", "content": "s"}])
    result = subprocess.run(
        ["sh", "-c", f'exec "$0" -m repl --acp {closed}', sys.executable], cwd=project,
        env={**os.environ, **_env(memory_dir)}, stdin=subprocess.DEVNULL,
        capture_output=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        "harness: --acp needs the editor's stdin and stdout (it was started without stdin "
        "or stdout).")
    assert SessionStore(memory_dir).info(sid).id == sid
