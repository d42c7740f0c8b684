"""What the start imports: the modules loaded when the REPL's first prompt is drawn (in a
pseudo-terminal), and when a session command has run. What only a turn, a command or the
workspace's open needs is imported there, after the prompt (docs/decisions.md, "Nothing the
first prompt does not need runs before it"); so are anyio, the runtime's events and the REPL's
runtime side ("A new session's first prompt is drawn before anyio is imported") and the store
("The store of a new session's REPL is opened after its first prompt"); the session commands
load no REPL, no model client and no runtime."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import REPO

pytestmark = pytest.mark.slow  # each test starts the harness

# Runs the harness; writes the names in sys.modules to $DUMP once the REPL's first prompt
# is drawn (AT_PROMPT: prompt_toolkit's renderer has written the first frame) or, for a
# command, at its exit.
DRIVER = """
import atexit, json, os, sys
from repl import startup

startup.pause()

def dump():
    if not os.path.exists(os.environ["DUMP"]):
        with open(os.environ["DUMP"], "w") as f:
            json.dump(sorted(sys.modules), f)

if os.environ.get("AT_PROMPT"):
    from prompt_toolkit.renderer import Renderer

    render = Renderer.render
    def first_render(self, *args, **kwargs):
        render(self, *args, **kwargs)
        dump()
    Renderer.render = first_render
atexit.register(dump)
from repl.__main__ import main
sys.argv = ["harness", *sys.argv[1:]]
sys.exit(main())
"""

# Not before a new session's first prompt: the runtime (imported and opened once the prompt
# is drawn) with the model client, the tools and the workspace keeper; the model's SDK and
# HTTP client (imported in the background later), the markdown renderer (as the first turn
# starts), the workspace's snapshot engine (at its open), the REPL's turn-time and
# command-time modules, and what the start used to pull in for one call each; anyio (with
# its asyncio backend), the runtime's events and the REPL's side of them (the renderer, the
# commands); and, but at a first start, the store (opened with the supervisor).
NOT_AT_THE_PROMPT = [
    "actors.runtime.supervisor", "actors.runtime.tool_executor", "actors.model.client",
    "actors.model._assembly", "actors.tools", "actors.workspace", "actors.workspace.keeper",
    "openai", "httpx", "rich",
    "actors.workspace._workspace", "actors.workspace._snapshot", "actors.workspace._objects",
    "actors.core.compaction", "uuid", "difflib", "secrets",
    "repl.interactive.approvals", "repl.interactive.diff", "repl.interactive.attachments",
    "repl.interactive.keys", "repl.interactive.pager",
    "wcwidth.escape_sequences",  # wcwidth from 0.3 on (pyproject.toml)
    "anyio", "anyio._backends._asyncio", "sniffio", "actors.core.events",
    "repl.interactive.app", "repl.interactive.render", "repl.interactive.results",
    "repl.interactive.commands", "repl.interactive.command_context", "repl.session_commands",
]
# The store: opened before the first prompt only at a first start (it makes the memory
# directory, private, where the history file goes).
STORE = ["actors.store", "actors.store.sqlite", "sqlite3", "actors.core.messages"]

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


@pytest.mark.parametrize("first_start", [False, True])
def test_the_first_prompt_is_drawn_before_what_a_turn_needs_is_imported(
    tmp_path: Path, memory_dir: Path, first_start: bool
) -> None:
    if not first_start:
        memory_dir.mkdir(mode=0o700)
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
    assert {"prompt_toolkit", "asyncio", "repl.interactive.prompt"} <= loaded
    assert sorted(loaded.intersection(NOT_AT_THE_PROMPT)) == []
    if first_start:
        assert set(STORE) <= loaded
    else:
        assert sorted(loaded.intersection(STORE)) == []


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


# What no run imports at all: the openai SDK's package (its type definitions took 0.7-1 s of
# the first request); the requests go through the HTTP client under it.
NEVER = ["openai"]


def test_print_mode_with_a_tool_call_never_imports_the_sdk(tmp_path: Path,
                                                           memory_dir: Path) -> None:
    dump = tmp_path / "modules.json"
    steps = [Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]), Reply("Read.")]
    (tmp_path / "notes.txt").write_text("a note\n")
    with ScriptedServer(steps) as server:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, "-p", "read notes.txt", "--base-url",
             server.base_url], cwd=tmp_path, env=_env(memory_dir, dump), capture_output=True,
            text=True, timeout=60)
        server.assert_done()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Read."
    loaded = _loaded(dump)
    assert "actors.model.client" in loaded
    assert sorted(loaded.intersection(NEVER)) == []


def test_the_repl_after_a_turn_never_imports_the_sdk(tmp_path: Path, memory_dir: Path) -> None:
    dump = tmp_path / "modules.json"
    with ScriptedServer([Reply("Hello there.")]) as server:
        child = pexpect.spawn(sys.executable, ["-c", DRIVER, "--base-url", server.base_url],
                              env=_env(memory_dir, dump), cwd=str(tmp_path),
                              encoding="utf-8", timeout=30, dimensions=(40, 160))
        try:
            child.expect_exact("You:")
            child.send("hello\r")
            child.expect_exact("Hello there.")
            child.expect_exact("You:")
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    loaded = _loaded(dump)
    assert "actors.model.client" in loaded
    assert sorted(loaded.intersection(NEVER)) == []


def test_doctor_checks_the_endpoint_without_the_sdk(tmp_path: Path, memory_dir: Path) -> None:
    dump = tmp_path / "modules.json"
    with ScriptedServer([Reply("OK")]) as server:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, "--doctor", "--base-url", server.base_url],
            cwd=tmp_path, env=_env(memory_dir, dump), capture_output=True, text=True,
            timeout=60)
    assert done.returncode == 0, done.stderr
    assert "tools:" in done.stdout
    loaded = _loaded(dump)
    assert "actors.model.doctor" in loaded
    assert sorted(loaded.intersection(NEVER)) == []


def test_an_unreachable_endpoint_is_reported_without_the_http_library(
    tmp_path: Path, memory_dir: Path
) -> None:
    """Nothing listens: a TCP connection refused says so before the HTTP library (and its
    client) is imported or built."""
    dump = tmp_path / "modules.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "-p", "hello", "--base-url", f"http://127.0.0.1:{port}/v1"],
        cwd=tmp_path, env=_env(memory_dir, dump), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "connection refused" in done.stderr
    loaded = _loaded(dump)
    assert sorted(name for name in loaded if name.split(".")[0] in (
        "openai", "httpx2", "httpx", "httpcore2", "httpcore")) == []
