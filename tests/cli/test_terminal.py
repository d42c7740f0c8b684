"""The one output boundary, in a real pseudo-terminal: every command that writes text it did
not make (titles, messages, file names and content the agent made, the model's answer) shows
terminal controls as visible stand-ins, and JSON escapes them; a terminal of 0 columns is of
unknown width; empty listings say so."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import REPO

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil"  # title, clear, CSI, bidi override
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
SYSTEM = {"role": "system", "content": "You are a coding agent."}


def in_terminal(memory_dir: Path, cwd: Path, *args: str, columns: int = 100,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """``harness ARGS`` with a pty as its terminal: (exit status, what the terminal got)."""
    full = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO),
            "TERM": "xterm", "OPENAI_API_KEY": "test", **(env or {})}
    full.pop("AGENT_HARNESS_STORE", None)
    full.pop("COLUMNS", None)
    child = pexpect.spawn(sys.executable, ["-m", "repl", *args], env=full, cwd=str(cwd),
                          encoding="utf-8", timeout=30, dimensions=(40, columns))
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -1), str(child.before)


def assert_clean(shown: str) -> None:
    """Nothing a terminal acts on: no control but newline, carriage return and tab (the pty
    turns each newline into CR LF), no bidi override."""
    found = [c for c in shown if c in RAW or (ord(c) < 0x20 and c not in "\r\n\t")]
    assert not found, (found, shown)


def strings(data: object) -> list[str]:
    """Every string in decoded JSON."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        data = list(data.values())
    if isinstance(data, list):
        return [text for item in data for text in strings(item)]
    return []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def hostile(memory_dir: Path, project: Path) -> str:
    """A session whose title (as an older import could bring it) and messages hold terminal
    controls."""
    with SessionStore(memory_dir) as store:
        sid = store.create_session(messages=[
            SYSTEM,
            {"role": "user", "content": f"look at the zebra {HOSTILE}"},
            {"role": "assistant", "content": f"The zebra says {HOSTILE}"},
        ], project_root=str(project))
        store.update(sid, title=f"Zebra {HOSTILE}")
    return sid


def test_session_commands_show_controls_as_stand_ins(
    memory_dir: Path, project: Path, hostile: str
) -> None:
    for args in (["--list-sessions"], ["--list-sessions", "--all"], ["--search", "zebra"],
                 ["--info", hostile], ["--export", hostile, "--format", "markdown"]):
        status, shown = in_terminal(memory_dir, project, *args)
        assert status == 0, (args, shown)
        assert_clean(shown)
        assert "␛" in shown and "\\x9b" in shown and "\\u202e" in shown, (args, shown)
    for args in (["--list-sessions", "--json"], ["--search", "zebra", "--json"],
                 ["--info", hostile, "--json"], ["--export", hostile]):
        status, shown = in_terminal(memory_dir, project, *args)
        assert status == 0, (args, shown)
        assert_clean(shown)
        assert "\\u009b" in shown and "\\u202e" in shown and "\\u001b" in shown, (args, shown)
        data = json.loads(shown.replace("\r\n", "\n"))  # the same data, escaped
        assert any(HOSTILE in text for text in strings(data))
    status, shown = in_terminal(memory_dir, project, "--info", "zz" + hostile[2:])  # unknown
    assert status == 2
    assert_clean(shown)


def test_a_terminal_of_zero_columns_lists_every_session(
    memory_dir: Path, project: Path, hostile: str
) -> None:
    status, shown = in_terminal(memory_dir, project, "--list-sessions", columns=0)
    assert status == 0
    assert hostile in shown and "Zebra" in shown


def test_titles_are_stored_clean(memory_dir: Path, project: Path, hostile: str) -> None:
    status, shown = in_terminal(memory_dir, project, "--rename", hostile, f"New {HOSTILE} name")
    assert status == 0, shown
    assert_clean(shown)
    with SessionStore(memory_dir) as store:
        title = store.info(hostile).title
    assert title.startswith("New ") and title.endswith(" name")
    assert not any(c in title for c in RAW)


def test_print_mode_and_the_files_the_agent_made(memory_dir: Path, project: Path) -> None:
    name = "evil\x1b[2J\u202e.txt"
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": name,
                                                         "content": f"one {HOSTILE}\n"})]),
              Reply(f"Wrote it {HOSTILE}"),
              Reply(f"Again {HOSTILE}"), Reply(f"Streamed {HOSTILE}")]
    with ScriptedServer(script) as server:
        url = ["--base-url", server.base_url, "--llm-timeout", "30"]
        status, shown = in_terminal(memory_dir, project, "-p", f"hello {HOSTILE}", *url,
                                    "--mode", "dangerouslySkipPermissions")
        assert status == 0, shown
        assert_clean(shown)
        assert "Wrote it ␛]0;pwned␇␛[2J\\x9b31m\\u202eevil" in shown
        sid = re.search(r"Session: (\w+)", shown).group(1)  # type: ignore[union-attr]
        for fmt in ("json", "stream-json"):
            status, shown = in_terminal(memory_dir, project, "-p", "again", "--resume", sid,
                                        *url, "--output-format", fmt)
            assert status == 0, shown
            assert_clean(shown)
            assert "\\u009b31m\\u202eevil" in shown
    assert (project / name).exists()
    with SessionStore(memory_dir) as store:
        title = store.info(sid).title
    assert title.startswith("hello") and not any(c in title for c in RAW)  # provisional
    for args in (["--info", sid, "--files"], ["--info", sid, "--files", "--diff"],
                 ["--info", sid, "--files", "--json"],
                 ["--rewind", sid, "--to", "2", "--files", "--dry-run"],
                 ["--search", "evil", "--files"], ["--doctor"]):
        status, shown = in_terminal(memory_dir, project, *args)
        assert status == 0, (args, shown)
        assert_clean(shown)
    status, shown = in_terminal(memory_dir, project, "--info", sid, "--files", "--diff")
    assert "␛[2J\\u202e.txt" in shown and "one ␛]0;pwned␇" in shown


def test_doctor_with_controls_in_the_memory_directorys_name(tmp_path: Path,
                                                            project: Path) -> None:
    memory_dir = tmp_path / "mem\x1b]0;pwned\x07"
    with SessionStore(memory_dir) as store:
        store.create_session(messages=[SYSTEM, {"role": "user", "content": "hi"}],
                             project_root=str(project))
    status, shown = in_terminal(memory_dir, project, "--doctor")
    assert status == 0, shown
    assert_clean(shown)
    assert "mem␛]0;pwned␇" in shown


def test_empty_listings_in_a_terminal_say_so(memory_dir: Path, project: Path,
                                              hostile: str) -> None:
    with SessionStore(memory_dir) as store:
        store.update(hostile, archived=True)  # everything archived
    for args, said in ((["--list-sessions"], "No saved sessions for this project"),
                       (["--search", "zebra"], "No session matches 'zebra' in this project"),
                       (["--search", "nothing-like-it", "--all"], "No session matches")):
        status, shown = in_terminal(memory_dir, project, *args)
        assert status == 0 and said in shown and "Traceback" not in shown, (args, shown)
    status, shown = in_terminal(memory_dir, project, "--list-sessions", "--include-archived")
    assert status == 0 and hostile in shown and "archived" in shown
