"""What the start imports: the modules loaded when the REPL's first prompt is drawn (in a
pseudo-terminal), and when a session command has run. What only a turn, a command or the
workspace's open needs is imported there, after the prompt (docs/decisions.md, "Nothing the
first prompt does not need runs before it"); the session commands load no REPL, no model
client and no runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import ScriptedServer
from tests.clitools import REPO

pytestmark = pytest.mark.slow  # each test starts the harness

# Runs the harness; writes the names in sys.modules to $DUMP as the REPL's first prompt is
# about to be drawn (AT_PROMPT) or, for a command, at its exit.
DRIVER = """
import atexit, json, os, sys
from repl import startup

startup.pause()

def dump():
    if not os.path.exists(os.environ["DUMP"]):
        with open(os.environ["DUMP"], "w") as f:
            json.dump(sorted(sys.modules), f)

if os.environ.get("AT_PROMPT"):
    from repl.interactive import app

    drawn = app.Repl._after_draw
    def after_draw(self):
        dump()
        drawn(self)
    app.Repl._after_draw = after_draw
atexit.register(dump)
from repl.__main__ import main
sys.argv = ["harness", *sys.argv[1:]]
sys.exit(main())
"""

# Not before a new session's first prompt: the runtime (imported and opened once the prompt
# is drawn) with the model client, the tools and the workspace keeper; the model's SDK and
# HTTP client (imported in the background later), the markdown renderer (as the first turn
# starts), the workspace's snapshot engine (at its open), the REPL's turn-time and
# command-time modules, and what the start used to pull in for one call each.
NOT_AT_THE_PROMPT = [
    "actors.runtime.supervisor", "actors.runtime.tool_executor", "actors.model.client",
    "actors.model._assembly", "actors.tools", "actors.workspace", "actors.workspace.keeper",
    "openai", "httpx", "rich",
    "actors.workspace._workspace", "actors.workspace._snapshot", "actors.workspace._objects",
    "actors.core.compaction", "uuid", "difflib", "secrets",
    "repl.interactive.approvals", "repl.interactive.diff", "repl.interactive.attachments",
    "repl.interactive.keys", "repl.interactive.pager",
    "wcwidth.escape_sequences",  # wcwidth from 0.3 on (pyproject.toml)
]

# Not for a session command: the REPL, the event loop, the runtime, the model client, the
# rules of compaction (a listing only recognises a summary's markers).
NOT_FOR_A_COMMAND = ["prompt_toolkit", "asyncio", "anyio", "openai", "httpx", "rich",
                     "actors.runtime", "actors.model", "actors.tools", "actors.workspace",
                     "actors.core.compaction"]


def _env(memory_dir: Path, dump: Path, **more: str) -> dict[str, str]:
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "test",
           "DUMP": str(dump), **more}
    env.pop("AGENT_HARNESS_STORE", None)
    return env


def _loaded(dump: Path) -> set[str]:
    names: list[str] = json.loads(dump.read_text())
    return set(names)


def test_the_first_prompt_is_drawn_before_what_a_turn_needs_is_imported(
    tmp_path: Path, memory_dir: Path
) -> None:
    dump = tmp_path / "modules.json"
    with ScriptedServer([]) as server:
        child = pexpect.spawn(sys.executable, ["-c", DRIVER, "--base-url", server.base_url],
                              env=_env(memory_dir, dump, AT_PROMPT="1"), cwd=str(tmp_path),
                              encoding="utf-8", timeout=30, dimensions=(40, 160))
        try:
            child.expect_exact("Ctrl-D to exit.")
            child.expect_exact("You:")
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    loaded = _loaded(dump)
    assert {"prompt_toolkit", "repl.interactive.app", "actors.store"} <= loaded
    assert sorted(loaded.intersection(NOT_AT_THE_PROMPT)) == []


@pytest.mark.parametrize("command", ["--list-sessions", "--search", "--info", "--help"])
def test_a_session_command_loads_no_repl_runtime_or_model_client(
    tmp_path: Path, memory_dir: Path, command: str
) -> None:
    with SessionStore(memory_dir) as store:
        sid = store.create_session(messages=[{"role": "user", "content": "fix the parser"}],
                                   project_root=str(tmp_path.resolve()))
    args = {"--search": ["--search", "parser"], "--info": ["--info", sid]}.get(command,
                                                                              [command])
    dump = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=tmp_path,
                          env=_env(memory_dir, dump), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("usage: harness" if command == "--help" else sid) in done.stdout
    loaded = _loaded(dump)
    assert "repl.cli" in loaded
    assert sorted(name for name in loaded if any(
        name == package or name.startswith(package + ".") for package in NOT_FOR_A_COMMAND
    )) == []
