"""The real ``harness -p`` process: output streams, signals, kill -9 and resume, the lease.

Each test runs on both event-loop backends of the harness (AGENT_HARNESS_BACKEND)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.core.messages import INTERRUPTED_NOTICE, NO_ANSWER_NOTICE
from actors.store import SessionStore
from actors.store._survivors import HAD_ENDED
from actors.testing.scripted_server import (
    Hang,
    Reply,
    ScriptedServer,
    ToolCall,
    tool_pairing_errors,
)
from tests.support.children import read_line, rest_of
from tests.support.clitools import REPO, harness
from tests.support.runtime import pid_alive, wait_for

pytestmark = pytest.mark.slow  # every test here starts a Python process


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def args_for(server: ScriptedServer, *extra: str) -> list[str]:
    return ["--base-url", server.base_url, "--llm-timeout", "30", *extra]


def env_for(backend: str) -> dict[str, str]:
    return {"AGENT_HARNESS_BACKEND": backend, "OPENAI_API_KEY": "test"}


class Running:
    """A harness process started in the background, read line by line from stderr."""

    def __init__(self, argv: list[str], memory_dir: Path, cwd: Path, backend: str) -> None:
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir),
               "PYTHONPATH": str(REPO), **env_for(backend)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "repl", *argv], cwd=cwd, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        first = read_line(self.proc.stderr)
        assert first.startswith("Session: "), first + rest_of(self.proc)
        self.session_id = first.split()[1]

    def finish(self, timeout: float = 20) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err


@pytest.fixture
def started() -> Iterator[list[Running]]:
    runs: list[Running] = []
    yield runs
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
        run.proc.communicate(timeout=30)


def test_print_mode_prints_only_the_answer(
    backend: str, memory_dir: Path, project: Path
) -> None:
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "1"})]),
              Reply("Final answer.")]
    with ScriptedServer(script) as server:
        result = harness("-p", "do it", *args_for(server), memory_dir=memory_dir, cwd=project,
                         env=env_for(backend))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Final answer.\n"
    assert result.stderr.startswith("Session: ")
    assert "[denied] write_file: x.txt" in result.stderr  # default mode cannot ask
    assert not (project / "x.txt").exists()
    sid = result.stderr.split()[1]
    assert SessionStore(memory_dir).info(sid).status == "saved"


def test_prompt_from_stdin_and_failed_turn_exit_1(
    backend: str, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("Piped.")]) as server:
        result = harness(*args_for(server), memory_dir=memory_dir, cwd=project,
                         input="from a pipe", env=env_for(backend))
        assert result.stdout == "Piped.\n"
        assert server.requests[0]["messages"][-1]["content"] == "from a pipe"
    with ScriptedServer([]) as server:  # every request fails with HTTP 500... until timeout
        result = harness("-p", "hi", "--base-url", server.base_url, "--llm-timeout", "1",
                         memory_dir=memory_dir, cwd=project, env=env_for(backend))
    assert result.returncode == 1 and "Turn failed" in result.stderr
    assert "Traceback" not in result.stderr


def test_kill_9_during_a_tool_then_resume_is_valid(
    backend: str, memory_dir: Path, project: Path, tmp_path: Path, started: list[Running]
) -> None:
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[
        ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; exec sleep 30"}),
        ToolCall("write_file", {"path": "later.txt", "content": "x"}),
    ])]
    with ScriptedServer(script) as server:
        run = Running(["-p", "go", *args_for(server, "--mode", "dangerouslySkipPermissions")],
                      memory_dir, project, backend)
        started.append(run)
        child = int(wait_for(pid_file))
        run.proc.send_signal(signal.SIGKILL)
        run.finish()
    deadline = time.monotonic() + 10  # the command's guardian kills its group: nothing is left
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(child)
    with ScriptedServer([Reply("Recovered.")]) as server:
        result = harness("--resume", run.session_id, "-p", "what happened?", *args_for(server),
                         memory_dir=memory_dir, cwd=project, env=env_for(backend))
        assert result.returncode == 0, result.stderr
        sent = server.requests[0]["messages"]
    assert tool_pairing_errors(sent) == []
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    bash_id, write_id = sorted(results)
    # the first line is the exact notice; the second says the guardian had ended the group
    assert results[bash_id] in (INTERRUPTED_NOTICE, f"{INTERRUPTED_NOTICE}\n{HAD_ENDED}")
    assert results[write_id].startswith("Not executed")
    assert not (project / "later.txt").exists()
    assert "not closed cleanly" in result.stderr


def test_kill_9_during_a_model_stream_then_resume(
    backend: str, memory_dir: Path, project: Path, started: list[Running]
) -> None:
    with ScriptedServer([Reply("word " * 200, chunk_delay=0.05)]) as server:
        run = Running(["-p", "tell me", *args_for(server)], memory_dir, project, backend)
        started.append(run)
        server.wait_for_requests(1, timeout=15)
        time.sleep(0.3)
        run.proc.send_signal(signal.SIGKILL)
        run.finish()
    with ScriptedServer([Reply("Again.")]) as server:
        result = harness("--resume", run.session_id, "-p", "once more", *args_for(server),
                         memory_dir=memory_dir, cwd=project, env=env_for(backend))
        sent = server.requests[0]["messages"]
    assert result.returncode == 0, result.stderr
    assert "was not closed cleanly; no tool call was left open." in result.stderr
    # the message killed unanswered says so in the assistant's place
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert sent[2]["content"] == NO_ANSWER_NOTICE
    assert tool_pairing_errors(sent) == []


def test_second_process_is_refused_while_the_first_runs(
    backend: str, memory_dir: Path, project: Path, started: list[Running]
) -> None:
    with ScriptedServer([Hang()]) as server:
        run = Running(["-p", "wait", *args_for(server)], memory_dir, project, backend)
        started.append(run)
        server.wait_for_requests(1, timeout=15)
        second = harness("--resume", run.session_id, "-p", "me too", *args_for(server),
                         memory_dir=memory_dir, cwd=project, env=env_for(backend))
        assert second.returncode == 2
        assert second.stderr.strip() == (
            f"harness: Session '{run.session_id}' is in use by another process "
            f"(pid {run.proc.pid})."
        )
        run.proc.send_signal(signal.SIGTERM)
        code, out, _ = run.finish()
    assert code == 1 and out == ""
    info = SessionStore(memory_dir).info(run.session_id)
    assert info.status == "saved" and info.summary  # SIGTERM: clean exit, fallback summary


def test_sigint_during_a_tool_aborts_and_kills_the_command(
    backend: str, memory_dir: Path, project: Path, tmp_path: Path, started: list[Running]
) -> None:
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[
        ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; sleep 30"})])]
    with ScriptedServer(script) as server:
        run = Running(["-p", "go", *args_for(server, "--mode", "dangerouslySkipPermissions")],
                      memory_dir, project, backend)
        started.append(run)
        bash = int(wait_for(pid_file))
        run.proc.send_signal(signal.SIGINT)
        code, out, err = run.finish()
    assert code == 1 and "Interrupted" in err and out == ""
    assert not pid_alive(bash)
    messages = SessionStore(memory_dir).load_session(run.session_id)["messages"]
    assert tool_pairing_errors(messages) == []
    assert INTERRUPTED_NOTICE in messages[-1]["content"]
