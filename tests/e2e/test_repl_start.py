"""The REPL's start and exit in a pseudo-terminal: keys pressed before the first prompt reach
it (Ctrl-D too: a resume of a big session exits at once), the exit saves the session, and a
new session's prompt comes before its store and supervisor open (a failure to open either
ends the run with one line), with the run's signals held from before it is drawn."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path
from typing import Any

import pexpect
import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer
from tests.support.stores import info_of
from tests.support.terminal import PROMPT, Terminal

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

BIG = 10_000  # messages of the resumed session


def big_session(memory_dir: Path, project: Path) -> tuple[str, int]:
    """A session of about :data:`BIG` messages (questions, tool calls, answers): its id and
    its number of messages."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    n = 0
    while len(messages) < BIG:
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "m{n}.py"}}'}}
        messages += [
            {"role": "user", "content": f"Question {n}: what does m{n}.py do?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"def f{n}(): pass\n" * 8},
            {"role": "assistant", "content": f"Answer {n}: it defines f{n}."},
        ]
        n += 1
    with SessionStore(memory_dir) as store:
        return store.create_session(messages=messages, project_root=str(project)), len(messages)


@pytest.fixture
def started(memory_dir: Path, project: Path) -> Any:
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        screen = Terminal(memory_dir, project, *args, greeted=False)
        screen.child.delaybeforesend = None  # a key is sent the moment it is asked for
        opened.append(screen)
        return screen

    yield start
    for screen in opened:
        if screen.child.isalive():
            screen.child.terminate(force=True)


def test_ctrl_d_during_a_big_resumes_greeting_exits_and_saves(
    started: Any, memory_dir: Path, project: Path
) -> None:
    sid, count = big_session(memory_dir, project)
    with ScriptedServer([]) as server:
        screen = started("--resume", sid, "--base-url", server.base_url)
        screen.expect(r"Session:\s+" + sid)  # the greeting has begun; the prompt is not up
        screen.child.sendcontrol("d")  # the terminal's cooked mode would have eaten it
        screen.expect(f"Saved session {sid}.", timeout=30)
        screen.expect(pexpect.EOF, timeout=30)
        screen.child.close()
        assert screen.child.exitstatus == 0
    info = info_of(memory_dir, sid)
    assert info.transcript_messages == count and info.status != "active"
    assert not server.requests  # nothing was sent


def test_text_typed_before_the_prompt_is_its_text(
    started: Any, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("Done.")]) as server:
        screen = started("--base-url", server.base_url)
        screen.expect(r"Session:\s+\w+")
        screen.send("fix the parser")  # typed while the greeting prints
        screen.ready()
        screen.expect("fix the parser")  # in the prompt, not lost, not echoed twice
        screen.send("\r")
        screen.expect("Done.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
        assert server.requests[0]["messages"][-1]["content"] == "fix the parser"


def test_a_new_session_is_prompted_for_before_its_supervisor_opens(
    started: Any, memory_dir: Path, project: Path
) -> None:
    """The greeting and the prompt come first; a message sent at once waits for the open,
    and the session holds it."""
    with ScriptedServer([Reply("Hello.")]) as server:
        screen = started("--base-url", server.base_url)
        sid = screen.session()
        screen.ready()
        screen.say("hi")  # the supervisor may still be opening
        screen.expect("Hello.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
    assert server.requests[0]["messages"][-1]["content"] == "hi"
    info = info_of(memory_dir, sid)
    assert info.user_messages == 1 and info.project_root == str(project)


def test_a_store_setting_naming_no_store_is_a_usage_mistake_before_the_prompt(
    started: Any, memory_dir: Path
) -> None:
    """A ``--store`` that is neither SQLite's nor a PostgreSQL URL is not SQLite by the
    store's rule: the store is opened first, its one line said before any prompt, exit 2."""
    memory_dir.mkdir(mode=0o700)
    with ScriptedServer([]) as server:
        screen = started("--store", "mysql://db/team", "--base-url", server.base_url)
        screen.expect(r"harness: Unknown session store 'mysql'")
        screen.expect(pexpect.EOF)
        screen.child.close()
        assert screen.child.exitstatus == 2
        shown = screen.log.getvalue()
        assert "Session:" not in shown and PROMPT not in shown and "Traceback" not in shown
        assert not server.requests


def _ends_after_the_prompt(screen: Any, server: ScriptedServer, line: str) -> None:
    """The first prompt shows, then the run ends with ``line``, exit status 1, no traceback
    and no request."""
    screen.ready()
    screen.expect(line)
    screen.expect(pexpect.EOF)
    screen.child.close()
    assert screen.child.exitstatus == 1
    assert "Traceback" not in screen.log.getvalue()
    assert not server.requests


def test_a_new_session_that_cannot_be_created_ends_the_run_with_one_line(
    started: Any, memory_dir: Path
) -> None:
    """The store refuses the new session after the prompt is up (a trigger stands for a
    failing disk): the prompt goes, the error is one line, the exit status 1."""
    with SessionStore(memory_dir):
        pass
    db = sqlite3.connect(memory_dir / "sessions.sqlite3")
    db.execute("CREATE TRIGGER refuse BEFORE INSERT ON sessions "
               "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    db.commit()
    db.close()
    with ScriptedServer([]) as server:
        screen = started("--base-url", server.base_url)
        _ends_after_the_prompt(screen, server, r"harness: Session store error: refused by the test")


@pytest.mark.parametrize("store", [None, "sqlite", " "])
def test_a_store_that_cannot_open_ends_a_new_sessions_run_with_one_line(
    started: Any, memory_dir: Path, store: str | None
) -> None:
    """A new session's store is opened after its first prompt is drawn (the memory
    directory exists): a database that is not one ends the run there, with the store's one
    line and exit status 1, as a session that cannot be created does. So it is with a
    ``--store`` that names SQLite by the store's rule (actors.store.is_sqlite_url)."""
    memory_dir.mkdir(mode=0o700)
    (memory_dir / "sessions.sqlite3").write_bytes(b"not a database, " * 64)
    given = [] if store is None else ["--store", store]
    with ScriptedServer([]) as server:
        screen = started(*given, "--base-url", server.base_url)
        _ends_after_the_prompt(screen, server,
                               r"harness: The session store \S+sessions\.sqlite3 is damaged")


def test_a_stopping_signal_the_moment_the_first_prompt_shows_ends_the_run(
    started: Any, memory_dir: Path
) -> None:
    """The REPL's own handlers come after the first prompt (with anyio); a SIGTERM sent
    the moment it shows is held until then and ends the run as it does later: not a death
    by the signal, not lost (the prompt would stay). Sent a few times: the moment varies."""
    memory_dir.mkdir(mode=0o700)
    with ScriptedServer([]) as server:
        for _ in range(3):
            screen = started("--base-url", server.base_url)
            screen.ready()
            screen.child.kill(signal.SIGTERM)
            screen.expect(pexpect.EOF, timeout=30)
            screen.child.close()
            assert screen.child.signalstatus is None and screen.child.exitstatus == 0
            assert "Traceback" not in screen.log.getvalue()
