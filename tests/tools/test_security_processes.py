"""No process outlives its call, even when the harness is killed with -9; commands do not get
the harness's secrets; the exit status reaches the model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.tools import TOOLS, ToolContext
from actors.tools._base import ProcessGroup
from tests.support.clitools import REPO
from tests.support.processes import live_members, wait_until_gone
from tests.support.runtime import running, settings_for, wait_for
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_kill_9_of_the_harness_leaves_no_process_of_the_command(
    backend: str, tmp_path: Path
) -> None:
    project, memory = tmp_path / "project", tmp_path / "memory"
    project.mkdir()
    pid_file = tmp_path / "pid"
    # a looping leader, a background job, a subshell, and a process that ignores SIGTERM
    command = (
        f"echo $$ > {pid_file}; sleep 1000 & (while :; do sleep 0.05; done) & "
        "(trap '' TERM; sleep 1000) & while :; do sleep 0.05; done"
    )
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": command})])]
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(REPO),
           "AGENT_HARNESS_BACKEND": backend, "OPENAI_API_KEY": "test"}
    with ScriptedServer(script) as server:
        harness = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", "loop", "--base-url", server.base_url,
             "--mode", "dangerouslySkipPermissions"],
            cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            pgid = int(wait_for(pid_file))
            deadline = time.monotonic() + 10
            while len(live_members(pgid)) < 5 and time.monotonic() < deadline:
                time.sleep(0.02)  # the leader, the guardian and the three jobs
            assert len(live_members(pgid)) >= 5, live_members(pgid)
            harness.send_signal(signal.SIGKILL)
            harness.wait(10)
            assert wait_until_gone(pgid) == []
        finally:
            if harness.poll() is None:
                harness.kill()
                harness.wait(10)
            for pid in live_members(int(pid_file.read_text())) if pid_file.exists() else []:
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_host_killed_with_9_takes_its_command_group_with_it(tmp_path: Path) -> None:
    """The same with the smallest host: a process running only the tool."""
    pid_file = tmp_path / "pid"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path), f"echo $$ > {pid_file}; exec sleep 1000"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL,
    )
    try:
        pgid = int(wait_for(pid_file))
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_until_gone(pgid) == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)


HOST = """
import sys, anyio
from pathlib import Path
from actors.tools import TOOLS
from tests.support.tool_context import tool_session
with tool_session(Path(sys.argv[1]) / "store") as session:
    ctx = session.context(Path(sys.argv[1]), Path(sys.argv[1]) / "m")
    anyio.run(TOOLS["run_bash"].run, ctx, {"command": sys.argv[2]})
"""


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


@pytest.mark.anyio
async def test_commands_do_not_see_the_harness_secrets(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://model")
    monkeypatch.setenv("AGENT_HARNESS_STORE", "postgresql://u:pw@db/x")
    monkeypatch.setenv("AGENT_HARNESS_MEMORY_DIR", "/somewhere")
    monkeypatch.setenv("PROJECT_SETTING", "kept")
    out = await TOOLS["run_bash"].run(ctx, {"command": "env"})
    assert "sk-secret" not in out and "pw@db" not in out and "OPENAI" not in out
    assert "AGENT_HARNESS" not in out
    assert "PROJECT_SETTING=kept" in out and "PATH=" in out


@pytest.mark.anyio
async def test_the_process_group_is_reported_as_soon_as_it_runs(ctx: ToolContext) -> None:
    seen: list[ProcessGroup] = []

    async def record(group: ProcessGroup) -> None:
        seen.append(group)

    ctx.on_process_group = record
    # (a command that has already ended when it is looked at has no start time: None)
    out = await TOOLS["run_bash"].run(ctx, {"command": "echo $$; sleep 0.3"})
    [group] = seen
    assert out == f"exit status 0\n{group.pgid}"
    assert isinstance(group.leader_start_time, int) and group.leader_start_time > 0


@pytest.mark.anyio
async def test_the_model_is_told_the_exit_status(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo nope; exit 1"}),
                                ToolCall("run_bash", {"command": "true"})]),
              Reply("Failed.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("try")).ok
        sent = server.requests[1]["messages"]
    failed, passed = [m["content"] for m in sent if m["role"] == "tool"]
    assert failed == '<tool_result name="run_bash">\nexit status 1\nnope\n</tool_result>'
    assert passed == '<tool_result name="run_bash">\nexit status 0\n</tool_result>'
    assert SessionStore(settings.memory_dir).load_session(sup.session_id)["status"] == "saved"
