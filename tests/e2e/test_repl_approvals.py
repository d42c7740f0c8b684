"""Approvals in the real REPL: the diff of a write or an edit before the question, "always
for this session" for a tool and for a command prefix, kept across a resume only when the
user says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow


def test_the_diff_is_shown_before_a_write_and_an_edit(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    script = [
        Reply(tool_calls=[ToolCall("edit_file", {"path": "calc.py", "old_string": "a - b",
                                                 "new_string": "a + b"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "notes/todo.md",
                                                  "content": "- ship it\n"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "calc.py", "content": "pass\n"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("fix it")
        term.expect(re.escape("Allow edit_file: calc.py (5 chars)? [y/N/a]"))
        screen = term.screen_text()
        assert ("    --- a/calc.py\n    +++ b/calc.py\n    @@ -1,2 +1,2 @@\n"
                "     def add(a, b):\n    -    return a - b\n    +    return a + b\n") in screen
        assert "\x1b[32m+    return a + b\x1b[0m" in term.log.getvalue()  # green on colour
        term.say("y")
        term.expect(re.escape("Allow write_file: notes/todo.md (10 chars)? [y/N/a]"))
        assert "    new file\n    --- /dev/null\n    +++ b/notes/todo.md\n" in term.screen_text()
        term.say("y")
        term.expect(re.escape("Allow write_file: calc.py (5 chars)? [y/N/a]"))
        assert "    -def add(a, b):\n    -    return a + b\n    +pass\n" in term.screen_text()
        term.say("n")
        term.expect("Done.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (project / "notes/todo.md").read_text() == "- ship it\n"


def test_always_for_this_session_stops_the_next_question(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    edits = [Reply(tool_calls=[ToolCall("write_file", {"path": f"f{i}.txt", "content": "x"})])
             for i in range(3)]
    script = [
        *edits[:2], Reply("Two written."),
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo one"})]),
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo two three"})]),
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo four; echo five"})]),
        Reply("Echoed."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("write two files")
        term.expect(re.escape("a: yes, and don't ask again this session for write_file on "
                              "any file"))
        term.expect(re.escape("Allow write_file: f0.txt (1 chars)? [y/N/a]"))
        term.say("a")
        term.expect(re.escape("'write_file' is approved for the rest of this session"))
        term.expect(re.escape("allowed: write_file: f1.txt (1 chars) (standing approval "
                              "'write_file')"))
        term.expect("Two written.")
        term.expect(PROMPT)
        term.say("echo things")
        term.expect(re.escape("Allow run_bash: echo one? [y/N/a]"))
        term.say("a")
        term.expect(re.escape("allowed: run_bash: echo two three (standing approval "
                              "'run_bash: echo')"))
        term.expect(re.escape("Allow run_bash: echo four; echo five? [y/N]"))  # not simple
        term.say("y")
        term.expect("Echoed.")
        term.expect(PROMPT)
        assert term.screen_text().count("Allow write_file") == 1
        term.say("\\approvals")
        term.expect(re.escape("Standing approvals: write_file, run_bash: echo."))
        term.expect(PROMPT)
        assert term.exit() == 0
    assert (project / "f1.txt").exists()
    state = SessionStore(memory_dir).info(term.session_id).state
    assert state["approvals"] == ["write_file", "run_bash: echo"]


def test_a_resume_asks_again_unless_the_approvals_are_kept(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1"})]),
              Reply("One."),
              Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "2"})]),
              Reply("Two."),
              Reply(tool_calls=[ToolCall("write_file", {"path": "c.txt", "content": "3"})]),
              Reply("Three.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("one")
        term.expect(re.escape("Allow write_file: a.txt (1 chars)? [y/N/a]"))
        term.say("a")
        term.expect("One.")
        term.expect(PROMPT)
        assert term.exit() == 0
        again = start(terminals, memory_dir, project, "--base-url", server.base_url,
                      "--resume", term.session_id)
        assert ("Standing approvals of the last run are off (write_file); \\approvals keep "
                "turns them back on.") in again.log.getvalue()
        again.say("two")
        again.expect(re.escape("Allow write_file: b.txt (1 chars)? [y/N/a]"))  # asked again
        again.say("y")
        again.expect("Two.")
        again.expect(PROMPT)
        again.say("/approvals keep")
        again.expect(re.escape("Kept for this session: write_file."))
        again.say("three")
        again.expect(re.escape("allowed: write_file: c.txt (1 chars) (standing approval"))
        again.expect("Three.")
        again.expect(PROMPT)
        assert again.exit() == 0
    assert SessionStore(memory_dir).info(term.session_id).state["approvals"] == ["write_file"]


def test_esc_at_an_approval_question_interrupts_the_turn(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
              Reply("Fine.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("write it")
        term.expect(re.escape("Allow write_file: a.txt (1 chars)? [y/N/a]"))
        term.child.send("\x1b")
        term.expect("Interrupted.")
        term.expect(PROMPT)
        term.say("never mind")
        term.expect("Fine.")
        term.expect(PROMPT)
        assert term.exit() == 0
        sent = server.requests[1]["messages"]
    assert not (project / "a.txt").exists()
    assert tool_pairing_errors(sent) == []
    assert sent[-2]["role"] == "tool" and sent[-1]["content"] == "never mind"


def test_at_80_columns_a_command_and_its_question_are_not_cut_mid_word(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    words = [f"word{i:02}" for i in range(30)]
    command = "echo " + " ".join(words)
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": command})]), Reply("Done.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     columns=80)
        term.say("echo the words")
        term.expect(re.escape('a: yes, and don\'t ask again this session for commands '
                              'starting "echo"'))
        term.expect(r"Allow run_bash: echo word00 .*…\? \[y/N/a\]")
        rows = term.screen()
        question = [row for row in rows if row.startswith("Allow run_bash")]
        assert len(question) == 1 and question[0].endswith("[y/N/a]")
        for word in words:  # the command shown whole, wrapped between words
            assert any(word in row for row in rows), (word, rows)
        term.say("y")
        term.expect("Done.")
        term.expect(PROMPT)
        assert term.exit() == 0
