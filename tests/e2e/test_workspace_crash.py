"""Kill -9 at each point of a snapshot and of a rewind of both: the project's files and the
session's conversation are exactly as they were before, or as the rewind leaves them after,
and the next command says which.

A real session (scripted server, real run_bash commands in a tmp project) on SQLite and on
PostgreSQL; then real ``harness`` subprocesses started with ``AGENT_HARNESS_TEST_PAUSE_AT``
(:mod:`actors.workspace._crashpoints`): each says ``at point X`` on stderr and blocks there,
and the test sends it SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.workspace._crashpoints import ENV
from tests.support.children import READ_TIMEOUT, read_line
from tests.support.clitools import REPO, harness
from tests.support.project_files import exact, listing, record_two_turns
from tests.support.stores import Stores

pytestmark = pytest.mark.slow


class Session:
    """A session of two user messages, each with a shell command changing the project, and
    what the files and the context were at each point."""

    def __init__(self, tmp_path: Path, stores: Stores) -> None:
        self.stores = stores
        self.memory = tmp_path / "memory"
        self.project = (tmp_path / "project").resolve()
        self.id = ""
        self.files: dict[str, dict[str, object]] = {}
        self.context: list[dict[str, Any]] = []
        self.first = self.second = 0

    def load_context(self) -> list[dict[str, Any]]:
        store = self.stores.open(self.memory)
        try:
            messages: list[dict[str, Any]] = store.load_context(self.id)
            return messages
        finally:
            store.close()

    def env(self, point: str = "") -> dict[str, str]:
        return {**self.stores.env, ENV: point}

    def run(self, *args: str, point: str = "") -> subprocess.CompletedProcess[str]:
        """The harness to its end (no crash point reached)."""
        return harness(*args, memory_dir=self.memory, cwd=self.project, env=self.env(point))

    @contextlib.contextmanager
    def killed_at(self, point: str, *args: str) -> Iterator[str]:
        """Start the harness, wait until it says it is at ``point``, SIGKILL it; yields what
        it printed on stderr before."""
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(self.memory),
               "PYTHONPATH": str(REPO), **self.env(point)}
        with subprocess.Popen(
            [sys.executable, "-m", "repl", *args], cwd=self.project, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stderr is not None
            said = []
            try:
                deadline = time.monotonic() + READ_TIMEOUT
                while True:
                    line = read_line(proc.stderr, max(deadline - time.monotonic(), 0.1))
                    assert line, f"it ended without reaching {point}: {''.join(said)}"
                    if line == f"at point {point.partition('#')[0]}\n":
                        break
                    said.append(line)
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
            yield "".join(said)


def _make_session(tmp_path: Path, stores: Stores) -> Session:
    session = Session(tmp_path, stores)
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo two >> notes.txt; rm old.txt; mkdir -p src/new; "
                       "echo code > src/new/mod.py"})]),
        Reply("First done."),
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo three > notes.txt; rm -r src; echo x > extra.txt"})]),
        Reply("Second done."),
    ]

    recorded = record_two_turns(tmp_path, script, {"notes.txt": "one\n", "old.txt": "old\n"},
                                stores.open(tmp_path / "memory"))
    session.id = recorded.session_id
    session.files = {"first": recorded.start, "second": recorded.after_first,
                     "end": recorded.end}
    session.first, session.second = (
        m.number for m in recorded.store.user_messages(session.id))
    session.context = session.load_context()
    return session


@pytest.fixture
def session(tmp_path: Path, stores: Stores) -> Session:
    return _make_session(tmp_path, stores)


def _resume(session: Session, server: ScriptedServer, text: str,
            point: str = "") -> subprocess.CompletedProcess[str]:
    return session.run("-p", text, "--resume", session.id, "--base-url", server.base_url,
                       "--mode", "dangerouslySkipPermissions", point=point)


def test_kill_during_a_snapshot_loses_nothing_and_every_point_still_rewinds(
    session: Session,
) -> None:
    with ScriptedServer([
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo new > made.txt; "
                                                           "rm notes.txt"})]),
        Reply("Recovered."),
    ]) as server:
        # The third snapshot of the run: the one after the command (message, before, after).
        with session.killed_at("snapshot#3", "-p", "Third", "--resume", session.id,
                               "--base-url", server.base_url,
                               "--mode", "dangerouslySkipPermissions"):
            pass
        after_command = listing(session.project)
        assert "made.txt" in after_command and "notes.txt" not in after_command
        result = _resume(session, server, "Fourth")
        assert result.returncode == 0, result.stderr
        assert "1 interrupted tool call was answered as interrupted" in result.stderr
    assert listing(session.project) == after_command  # a snapshot never writes a file
    for to, files in ((session.first, "first"), (session.second, "second")):
        result = session.run("--rewind", session.id, "--to", str(to), "--files")
        assert result.returncode == 0, result.stderr
        assert listing(session.project) == session.files[files]
    store = session.stores.open(session.memory)
    third = [m.number for m in store.user_messages(session.id)][2]
    store.close()
    result = session.run("--rewind", session.id, "--to", str(third), "--files")
    assert result.returncode == 0, result.stderr
    assert listing(session.project) == session.files["end"]  # as Third found them


def test_kill_during_the_files_of_a_rewind_of_both_is_finished_by_the_next_open(
    session: Session,
) -> None:
    with session.killed_at("restore#2", "--rewind", session.id, "--to", str(session.first),
                           "--both"):
        pass
    half = exact(session.project)
    assert listing(session.project) not in (session.files["end"], session.files["first"])
    result = session.run("--rewind", session.id, "--to", str(session.first), "--both",
                         "--dry-run")
    assert result.returncode == 0, result.stderr
    said = result.stdout
    assert (f"A rewind of the files of session {session.id} to message {session.first} was "
            "interrupted; finishing it would write") in said
    assert "the next command finishes it" in said and "Nothing was changed" in said
    assert exact(session.project) == half  # a dry run changes nothing, pending ones included
    assert session.load_context() == session.context
    with ScriptedServer([Reply("From the start.")]) as server:
        result = _resume(session, server, "Again")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert "was interrupted; it has been finished" in said  # its files
    assert "it has been finished: the conversation now ends before message" in said
    assert listing(session.project) == session.files["first"]
    assert session.load_context()[: session.first - 1] == session.context[: session.first - 1]
    result = session.run("--rewind", session.id, "--undo")  # rolled forward, still undoable
    assert result.returncode == 0, result.stderr
    assert listing(session.project) == session.files["end"]


def test_kill_between_the_halves_is_rolled_forward_at_the_next_open(session: Session) -> None:
    with session.killed_at("rewind-between", "--rewind", session.id, "--to",
                           str(session.second), "--both"):
        pass
    assert listing(session.project) == session.files["second"]  # the files are rewound,
    assert session.load_context() == session.context  # the conversation not yet
    with ScriptedServer([Reply("From before the second message.")]) as server:
        result = _resume(session, server, "Instead")
        assert result.returncode == 0, result.stderr
        [request] = server.requests
    said = result.stdout + result.stderr
    assert (f"A rewind of session {session.id} to message {session.second} was interrupted "
            "after its files were rewound; it has been finished: the conversation now ends "
            f"before message {session.second} too") in said
    before_second = session.context[: session.second - 1]
    assert request["messages"] == [*before_second, {"role": "user", "content": "Instead"}]
    assert listing(session.project) == session.files["second"]
    result = session.run("--rewind", session.id, "--to", str(session.first), "--files",
                         "--dry-run")
    assert result.returncode == 0 and "interrupted" not in result.stdout  # said once


def test_kills_during_the_roll_forward_still_end_in_the_rewind_done_once(
    session: Session,
) -> None:
    with session.killed_at("rewind-between", "--rewind", session.id, "--to",
                           str(session.second), "--both"):
        pass
    before_second = session.context[: session.second - 1]
    # Killed before the roll-forward changed anything: as before it.
    with ScriptedServer([]) as server, session.killed_at(
        "roll-forward", "-p", "Instead", "--resume", session.id, "--base-url",
        server.base_url, "--mode", "dangerouslySkipPermissions",
    ):
        pass
    assert session.load_context() == session.context
    # Killed after the conversation was rewound, before that was recorded: rewound once.
    with session.killed_at("roll-forward-rewound", "--rewind", session.id, "--to",
                           str(session.second), "--conversation"):
        pass
    assert session.load_context() == before_second
    assert listing(session.project) == session.files["second"]
    # The next command finds the conversation rewound and only records it: never twice.
    result = session.run("--rewind", session.id, "--to", str(session.second),
                         "--conversation")
    assert result.returncode == 0, result.stderr
    assert "it has been finished: the conversation now ends before message" in result.stdout
    assert session.load_context() == before_second
    assert listing(session.project) == session.files["second"]
    with ScriptedServer([Reply("Fine.")]) as server:
        result = _resume(session, server, "Instead")
        assert result.returncode == 0, result.stderr
        assert "interrupted" not in result.stdout + result.stderr
        [request] = server.requests
    assert request["messages"] == [*before_second, {"role": "user", "content": "Instead"}]
