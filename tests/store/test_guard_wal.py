"""The write-ahead log watched: a ``-wal`` (or ``-shm``) deleted or replaced behind SQLite's
back stops the write with a clear line, and nothing acknowledged before is lost, not even
after a kill -9 (without the watch, SQLite goes on committing into the orphaned file and a
kill -9 loses everything since its last checkpoint)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.core.errors import StorageError
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer
from tests.support.children import read_line, rest_of
from tests.support.clitools import REPO
from tests.support.stores import wait_until
from tests.support.terminal import PROMPT, Terminal

SYSTEM = {"role": "system", "content": "s"}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def delete(path: Path) -> None:
    path.unlink()


def replace(path: Path) -> None:
    stale = path.with_name(path.name + ".stale")
    shutil.copyfile(path, stale)
    os.replace(stale, path)  # the same bytes, another file


@pytest.mark.parametrize("side", ["-wal", "-shm"])
@pytest.mark.parametrize("tamper", [delete, replace], ids=["deleted", "replaced"])
def test_a_side_file_changed_behind_the_store_stops_the_write(
    memory_dir: Path, side: str, tamper: Callable[[Path], None]
) -> None:
    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[SYSTEM, user("acknowledged")])
    tamper(memory_dir / f"sessions.sqlite3{side}")
    with pytest.raises(StorageError) as stopped:
        store.checkpoint(sid, [SYSTEM, user("acknowledged"), user("not acknowledged")])
    message = str(stopped.value)
    verb = "deleted" if tamper is delete else "replaced"
    assert f"sessions.sqlite3{side} was {verb}" in message
    assert "This change was not saved" in message and "written back" in message
    other = SessionStore(memory_dir)  # another process's view: what was acknowledged
    assert other.load_session(sid)["messages"] == [SYSTEM, user("acknowledged")]
    other.close()
    # The store reopened safely: the next write works and is seen by others.
    store.checkpoint(sid, [SYSTEM, user("acknowledged"), user("again")])
    store.close()
    assert SessionStore(memory_dir).load_session(sid)["messages"][-1] == user("again")


CHILD = """
import sys
from actors.store import SessionStore
store = SessionStore(sys.argv[1])
sid = store.create_session(messages=[{"role": "user", "content": "acknowledged"}])
print(sid, flush=True)
sys.stdin.readline()  # the test deletes the -wal meanwhile
try:
    store.checkpoint(sid, [{"role": "user", "content": "acknowledged"},
                           {"role": "user", "content": "later"}])
    print("acknowledged again", flush=True)
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
sys.stdin.readline()  # killed here with -9
"""


@pytest.mark.slow
def test_a_deleted_wal_then_kill_9_loses_nothing_acknowledged(memory_dir: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(memory_dir)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        sid = read_line(child.stdout).strip()
        assert sid, rest_of(child)
        (memory_dir / "sessions.sqlite3-wal").unlink()
        child.stdin.write("go\n")
        child.stdin.flush()
        answer = read_line(child.stdout)
        assert answer.startswith("StorageError ") and "-wal was deleted" in answer
    finally:
        child.send_signal(signal.SIGKILL)
        rest_of(child)
    store = SessionStore(memory_dir)
    assert store.load_session(sid)["messages"] == [user("acknowledged")]


def title_source(memory_dir: Path, session_id: str) -> str:
    with SessionStore(memory_dir) as store:
        return store.info(session_id).title_source


@pytest.mark.slow
def test_a_wal_deleted_while_the_repl_runs_stops_the_turn_and_kill_9_loses_nothing(
    memory_dir: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedServer([Reply("First answer."), Reply("Never saved.")]) as server:
        terminal = Terminal(memory_dir, project, "--base-url", server.base_url)
        try:
            terminal.say("first question")
            terminal.expect("First answer.")
            terminal.expect(PROMPT)
            # The title call after the first answer writes too: let it land first.
            wait_until(lambda: title_source(memory_dir, terminal.session_id) == "model")
            (memory_dir / "sessions.sqlite3-wal").unlink()
            terminal.say("second question")
            terminal.expect("sessions.sqlite3-wal was deleted by another program")
            terminal.expect(PROMPT)
            shown = terminal.log.getvalue()
        finally:
            terminal.child.kill(signal.SIGKILL)
            terminal.child.close()
    # The request may have gone out while its checkpoint failed; its answer was never shown.
    assert "Never saved." not in shown
    messages = SessionStore(memory_dir).load_session(terminal.session_id)["messages"]
    assert [m["content"] for m in messages if m["role"] != "system"] == [
        "first question", "First answer."]
