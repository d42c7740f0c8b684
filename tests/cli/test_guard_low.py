"""The low items of the trust boundaries: an empty ``--resume`` is a mistake, commands on
unknown ids leave no lock files, and the harness's own files are private whatever the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from actors.testing.scripted_server import Reply, ScriptedServer
from tests.support.clitools import REPO, harness

pytestmark = pytest.mark.slow  # every test here starts the harness

UNKNOWN = "nosuchsession"


@pytest.mark.parametrize("args", [["--resume", ""], ["--resume", "  "],
                                  ["--resume", "", "-p", "hello"]])
def test_an_empty_resume_is_a_mistake_not_a_new_session(
    memory_dir: Path, args: list[str]
) -> None:
    with ScriptedServer([Reply("A new session must not start.")]) as server:
        result = harness(*args, "--base-url", server.base_url, memory_dir=memory_dir,
                         input="")
        requests = len(server.requests)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--resume needs a session id" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert requests == 0
    assert harness("--list-sessions", "--all", memory_dir=memory_dir).stdout == \
        "No saved sessions.\n"


@pytest.mark.parametrize("args", [
    ["--rename", UNKNOWN, "title"], ["--fork", UNKNOWN], ["--archive", UNKNOWN],
    ["--unarchive", UNKNOWN], ["--delete", UNKNOWN, "--yes"], ["--info", UNKNOWN],
    ["--export", UNKNOWN], ["--compact", UNKNOWN], ["--resume", UNKNOWN, "-p", "hi"],
])
def test_commands_on_an_unknown_id_leave_no_lock_file(
    memory_dir: Path, args: list[str]
) -> None:
    assert harness("--list-sessions", memory_dir=memory_dir).returncode == 0
    before = sorted((memory_dir / "sessions").iterdir())
    result = harness(*args, "--base-url", "http://127.0.0.1:9/v1", memory_dir=memory_dir)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert UNKNOWN in result.stderr
    assert sorted((memory_dir / "sessions").iterdir()) == before == []


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_harness_files_are_private_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("AGENT_HARNESS_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), PROMPT_TOOLKIT_NO_CPR="1",
               TERM="xterm", OPENAI_API_KEY="test")
    with ScriptedServer([Reply("Hello from the model.")]) as server:
        printed = subprocess.run(
            ["sh", "-c", 'umask 000; exec "$0" -m repl -p hello --base-url "$1"',
             sys.executable, server.base_url],
            cwd=project, env=env, capture_output=True, text=True, timeout=60,
        )
        assert printed.returncode == 0, printed.stderr
        repl = pexpect.spawn("sh", ["-c", 'umask 000; exec "$0" -m repl --base-url "$1"',
                                    sys.executable, server.base_url],
                             env=env, cwd=str(project), encoding="utf-8", timeout=30)
        repl.expect("You:")
        repl.sendcontrol("d")
        repl.expect(pexpect.EOF)
        repl.close()
    state = home / ".agent-harness"
    memory = state / "memory"
    assert mode(state) == 0o700 and mode(memory) == 0o700
    assert mode(memory / "sessions") == 0o700
    files = [memory / "sessions.sqlite3", memory / "history", memory / "store.lock",
             *(memory / "sessions").glob("*.lock"), *memory.glob("sessions.sqlite3-*")]
    assert len(files) >= 4
    assert {path.name: mode(path) for path in files} == {path.name: 0o600 for path in files}
