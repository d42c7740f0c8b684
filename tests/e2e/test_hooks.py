"""Hooks and the project's settings with the real ``harness`` command: a project's hooks do
not run before the user approves them (print mode says so; ``--trust-project`` approves; a
change asks again; the interactive prompt asks), a hook's process group is gone after a
kill -9 of the harness, and the README's example blocks ``rm -rf`` as written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import REPO, harness
from tests.support.processes import live_members, wait_until_gone
from tests.support.runtime import wait_for

pytestmark = [
    pytest.mark.slow,  # every test here starts the harness
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]
NOT_APPROVED = ("is not approved, so its hooks do not run; after reading it, approve it as it "
                "is with: harness --trust-project")


def project_hooks(project: Path, hooks: dict[str, object]) -> Path:
    path = project / ".agent-harness" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks}))
    return path


def start_hook(command: str) -> dict[str, object]:
    return {"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}


def test_a_projects_hooks_do_not_run_before_approval(tmp_path: Path) -> None:
    project, memory, marker = tmp_path / "project", tmp_path / "memory", tmp_path / "ran"
    project.mkdir()
    settings = project_hooks(project, start_hook(f"touch {marker}"))
    with ScriptedServer([Reply("one"), Reply("two"), Reply("three")]) as server:
        def ask() -> subprocess.CompletedProcess[str]:
            return harness("-p", "hi", "--base-url", server.base_url, memory_dir=memory,
                           cwd=project)

        first = ask()
        assert first.returncode == 0 and not marker.exists()
        assert f"harness: {settings} {NOT_APPROVED}" in first.stderr.splitlines()

        approved = harness("--trust-project", memory_dir=memory, cwd=project)
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith(f"Approved {settings} as it is now")
        assert f"  SessionStart: touch {marker}" in approved.stdout
        assert not marker.exists()  # approving runs nothing

        doctor = harness("--doctor", "--base-url", "http://127.0.0.1:9", memory_dir=memory,
                         cwd=project)
        assert (f"Settings (project): {settings}: approved; SessionStart: 1 command (*: 1)"
                in doctor.stdout.splitlines())
        assert f"Settings (user):    {tmp_path / 'settings.json'}: none" in doctor.stdout

        second = ask()
        assert second.returncode == 0 and marker.exists()
        assert NOT_APPROVED not in second.stderr

        marker.unlink()
        project_hooks(project, start_hook(f"touch {marker}; echo changed"))
        third = ask()
        assert third.returncode == 0 and not marker.exists()
        assert NOT_APPROVED in third.stderr
    assert not list(project.glob(".agent-harness/*approv*"))  # never kept in the project


def test_trust_project_with_nothing_or_a_bad_file_is_one_line(tmp_path: Path) -> None:
    project, memory = tmp_path / "project", tmp_path / "memory"
    project.mkdir()
    nothing = harness("--trust-project", memory_dir=memory, cwd=project)
    assert (nothing.returncode, nothing.stdout) == (2, "")
    assert nothing.stderr == (f"harness: No {project}/.agent-harness/settings.json: nothing to "
                              "approve in this project.\n")
    (project / ".agent-harness").mkdir()
    (project / ".agent-harness" / "settings.json").write_text('{"hooks": ')
    bad = harness("--trust-project", memory_dir=memory, cwd=project)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert "is not valid JSON (line 1, column 11" in bad.stderr


def test_the_interactive_prompt_asks_once_per_content(tmp_path: Path) -> None:
    project, memory, marker = tmp_path / "project", tmp_path / "memory", tmp_path / "ran"
    project.mkdir()
    project_hooks(project, start_hook(f"echo ran > {marker}"))
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(REPO),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "test"}
    env.pop("AGENT_HARNESS_STORE", None)

    def repl(answer: str | None, runs: bool) -> None:
        child = pexpect.spawn(sys.executable, ["-m", "repl", "--base-url", "http://127.0.0.1:9"],
                              env=env, cwd=str(project), encoding="utf-8", timeout=20,
                              dimensions=(40, 160))
        try:
            if answer is not None:
                child.expect(re.escape("Run this project's hooks? (approved until the file "
                                       "changes) [y/N] "))
                assert f"SessionStart: echo ran > {marker}" in (child.before or "")
                child.send(answer + "\r")
            child.expect("You:")
            if runs:  # the session opens once the prompt is drawn; its hooks run then
                wait_for(marker)
            child.send("\\exit\r")
            child.expect(pexpect.EOF)
        finally:
            child.terminate(force=True)

    repl("n", runs=False)
    assert not marker.exists()
    repl("y", runs=True)
    marker.unlink()
    repl(None, runs=True)  # approved: not asked again, and it runs


def test_a_hooks_process_group_is_gone_after_kill_9_of_the_harness(tmp_path: Path) -> None:
    project, memory, pid_file = tmp_path / "project", tmp_path / "memory", tmp_path / "pid"
    project.mkdir()
    (tmp_path / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": f"sleep 300 & echo $$ > {pid_file}; "
                                                  "sleep 300; wait"}]}]}}))
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(REPO),
           "OPENAI_API_KEY": "test"}
    with ScriptedServer([Reply("never asked")]) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", "hi", "--base-url", server.base_url],
            cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            pgid = int(wait_for(pid_file))
            assert len(live_members(pgid)) >= 3  # bash, its two sleeps (and the guardian)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
            assert wait_until_gone(pgid) == []
        finally:
            process.kill()
            process.wait()
        assert server.requests == []


def readme_example() -> str:
    readme = (REPO / "README.md").read_text()
    marker = "<!-- hooks example: block rm -rf"
    block = readme[readme.index(marker):]
    return block[block.index("```json\n") + len("```json\n"):block.index("\n```\n")]


def test_the_readmes_example_blocks_rm_rf_as_written(tmp_path: Path) -> None:
    project, memory = tmp_path / "project", tmp_path / "memory"
    (project / "build").mkdir(parents=True)
    (tmp_path / "settings.json").write_text(readme_example())  # ~/.agent-harness/settings.json
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "rm -rf build"}, id="c1"),
                                ToolCall("run_bash", {"command": "ls"}, id="c2")]),
              Reply("I left build/ alone.")]
    with ScriptedServer(script) as server:
        done = harness("-p", "clean the build", "--base-url", server.base_url,
                       "--mode", "dangerouslySkipPermissions", memory_dir=memory, cwd=project)
        sent = server.requests[1]["messages"]
    assert done.returncode == 0, done.stderr
    assert (project / "build").is_dir()
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results["c1"] == ('<tool_result name="run_bash">\nBlocked by a PreToolUse hook: '
                             "rm -rf is not allowed here; delete files one by one.\nDo not "
                             "retry it unchanged.\n</tool_result>")
    assert results["c2"] == '<tool_result name="run_bash">\nexit status 0\nbuild\n</tool_result>'
    assert "PreToolUse hook (run_bash)" in done.stderr
