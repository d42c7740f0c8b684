"""No process outlives its call, the supervisor's side: SIGHUP, SIGQUIT and SIGUSR1 stop the
harness as SIGTERM does; signals repeated during the shielded shutdown are ignored; and a
command that survived a kill -9 is stopped by the resume's recovery, which tells the model
whether it was still running. Real signals, real process groups, the real ``harness``."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from actors.core.messages import INTERRUPTED_NOTICE
from actors.store import SessionStore
from actors.store._survivors import HAD_ENDED, STILL_RUNNING
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from tests.support.clitools import REPO
from tests.support.processes import live_members, wait_until_gone
from tests.support.runtime import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]
WAIT_S = 20


def env_for(memory: Path, backend: str = "asyncio") -> dict[str, str]:
    return {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(REPO),
            "AGENT_HARNESS_BACKEND": backend, "OPENAI_API_KEY": "test"}


@contextlib.contextmanager
def harness_running(command: str, tmp_path: Path, backend: str = "asyncio"
                    ) -> Iterator[tuple[subprocess.Popen[str], int, Path, ScriptedServer]]:
    """``harness -p`` running a run_bash ``command`` that writes its group id to a file
    first; yields the process, the group id, the memory dir and the server."""
    project, memory = tmp_path / "project", tmp_path / "memory"
    project.mkdir()
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; "
                                                      + command})]),
              Reply("Resumed and done.")]
    with ScriptedServer(script) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", "run it", "--base-url", server.base_url,
             "--mode", "dangerouslySkipPermissions"],
            cwd=project, env=env_for(memory, backend), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        pgid = 0
        try:
            pgid = int(wait_for(pid_file))
            yield process, pgid, memory, server
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=WAIT_S)
            for pid in live_members(pgid) if pgid else []:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def session_of(memory: Path) -> dict[str, Any]:
    store = SessionStore(memory)
    try:
        [listed] = store.list_sessions()
        return store.load_session(listed["id"])
    finally:
        store.close()


def wait_until_recorded(memory: Path, pgid: int) -> None:
    """Until the write-ahead row of the running call names its process group."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(memory / "sessions.sqlite3")) as raw:
            rows = raw.execute("SELECT pgid FROM tool_calls WHERE phase = 'started'").fetchall()
        if (pgid,) in rows:
            return
        time.sleep(0.02)
    raise AssertionError("the process group was never recorded")


def status(memory: Path) -> str | None:
    with contextlib.closing(sqlite3.connect(memory / "sessions.sqlite3", timeout=5)) as raw:
        row = raw.execute("SELECT status FROM sessions").fetchone()
    return None if row is None else str(row[0])


LOOPING = "sleep 1000 & (while :; do sleep 0.05; done) & while :; do sleep 0.05; done"


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                                    signal.SIGTERM])
def test_a_stopping_signal_leaves_no_process_and_saves_the_session(
    tmp_path: Path, signum: signal.Signals
) -> None:
    with harness_running(LOOPING, tmp_path) as (process, pgid, memory, _):
        wait_until_recorded(memory, pgid)
        process.send_signal(signum)
        _, err = process.communicate(timeout=WAIT_S)
        assert process.returncode == 1, err
        assert "Traceback" not in err and f"stopped by {signum.name}" in err
        assert wait_until_gone(pgid) == []
    session = session_of(memory)
    assert session["status"] == "saved"
    [result] = [m for m in session["messages"] if m["role"] == "tool"]
    assert result["content"].startswith(INTERRUPTED_NOTICE)
    assert tool_pairing_errors(session["messages"]) == []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_signals_repeated_during_the_shutdown_are_ignored(
    tmp_path: Path, backend: str
) -> None:
    # The command ignores SIGTERM, so stopping it takes the whole grace before SIGKILL:
    # signals keep arriving during the shielded shutdown.
    with harness_running("trap '' TERM; " + LOOPING, tmp_path, backend) as (
        process, pgid, memory, _
    ):
        wait_until_recorded(memory, pgid)
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT_S
        sent = 0
        # Until the shutdown has saved the session (after the group was killed), at once.
        while status(memory) != "saved" and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)[sent % 3])
                sent += 1
            time.sleep(0.005)
        _, err = process.communicate(timeout=WAIT_S)
        assert sent > 10  # the grace before SIGKILL alone lasts 0.3 s
        assert process.returncode == 1, (process.returncode, err)  # not killed by a signal
        assert "Traceback" not in err
        assert wait_until_gone(pgid) == []
    assert session_of(memory)["status"] == "saved"


def guardian_of(pgid: int) -> int:
    """The guardian of a run_bash group: the member still running the wrapper script."""
    for pid in live_members(pgid):
        with contextlib.suppress(OSError):
            if b"harness-run_bash" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    raise AssertionError(f"no guardian among {live_members(pgid)}")


@pytest.mark.parametrize("guardian_killed", [True, False], ids=["survivor", "guarded"])
def test_after_kill_9_the_resume_stops_a_survivor_and_says_which(
    tmp_path: Path, guardian_killed: bool
) -> None:
    with harness_running(LOOPING, tmp_path) as (process, pgid, memory, server):
        wait_until_recorded(memory, pgid)
        if guardian_killed:  # nothing is left to end the group when the harness dies
            os.kill(guardian_of(pgid), signal.SIGKILL)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=WAIT_S)
        if guardian_killed:
            time.sleep(0.2)
            assert live_members(pgid), "the command should have survived"
        else:
            assert wait_until_gone(pgid) == []
        session_id = session_of(memory)["id"]
        resumed = subprocess.run(
            [sys.executable, "-m", "repl", "--resume", session_id, "-p", "go on",
             "--base-url", server.base_url],
            cwd=tmp_path / "project", env=env_for(memory), capture_output=True, text=True,
            timeout=60,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert live_members(pgid) == []
        sent = server.requests[-1]["messages"]
    [result] = [m["content"] for m in sent if m["role"] == "tool"]
    first, second = result.split("\n", 1)
    assert first == INTERRUPTED_NOTICE
    assert second == (STILL_RUNNING.format(pgid=pgid) if guardian_killed else HAD_ENDED)
    assert tool_pairing_errors(sent) == []
    assert session_of(memory)["status"] == "saved"


def test_sighup_of_the_repl_during_a_command_leaves_nothing_running(tmp_path: Path) -> None:
    from tests.support.terminal import Terminal

    project, memory = tmp_path / "project", tmp_path / "memory"
    project.mkdir()
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; " + LOOPING
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": command})])]
    with ScriptedServer(script) as server:
        terminal = Terminal(memory, project, "--base-url", server.base_url,
                            "--mode", "dangerouslySkipPermissions")
        pgid = 0
        try:
            terminal.say("loop forever")
            pgid = int(wait_for(pid_file))
            wait_until_recorded(memory, pgid)
            terminal.child.kill(signal.SIGHUP)  # the terminal is closed
            terminal.child.expect(pexpect.EOF, timeout=WAIT_S)
            terminal.child.close()
            assert terminal.child.signalstatus is None, terminal.log.getvalue()[-2000:]
            assert wait_until_gone(pgid) == []
        finally:
            if terminal.child.isalive():
                terminal.child.terminate(force=True)
            for pid in live_members(pgid) if pgid else []:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    session = session_of(memory)
    assert session["status"] == "saved"
    assert tool_pairing_errors(session["messages"]) == []
