"""Tool results in the real REPL: the failure mark and exit status, ``+N lines`` and the
whole result through ``\\result``, errors and denials whole, the denial's reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow


def test_a_failed_command_shows_the_mark_and_its_exit_status(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo oops >&2; exit 3"})]),
              Reply(tool_calls=[ToolCall("run_bash", {"command": "echo fine"})]),
              Reply("Checked.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "dangerouslySkipPermissions")
        term.say("run the tests")
        term.expect("Checked.")
        term.expect(PROMPT)
        screen = term.screen_text()
        assert re.search(r"  ✗ exit status 3\n    oops\n", screen)
        assert re.search(r"  → exit status 0\n    fine\n", screen)
        assert "\x1b[31m✗" in term.log.getvalue()  # red on a colour terminal
        assert term.exit() == 0


def test_a_long_result_shows_how_many_lines_more_and_result_shows_it_all(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "seq 1 3000"})]),
              Reply("Counted.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "dangerouslySkipPermissions")
        term.say("count")
        term.expect(re.escape("… +2997 lines (\\result 1 shows all)"))
        term.expect("Counted.")
        term.expect(PROMPT)
        screen = term.screen_text()
        assert re.search(r"  → exit status 0\n    1\n    2\n    3\n    … \+2997", screen)
        start_at = len(term.log.getvalue())
        term.say("/result")  # PAGER=cat here; less by default
        term.expect(r"\r\n3000\r\n")
        term.expect(PROMPT)
        shown = term.log.getvalue()[start_at:]
        assert "[result 1: run_bash]" in shown
        numbers = re.findall(r"^(\d+)\r$", shown, re.MULTILINE)
        assert numbers == [str(n) for n in range(1, 3001)]
        term.say("\\result 7")
        term.expect(re.escape("No result 7 (this run has results 1 to 1"))
        term.expect(PROMPT)
        assert term.exit() == 0


def test_the_result_is_paged_by_less_when_taller_than_the_screen(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "seq 1 300"})]), Reply("Ok.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "dangerouslySkipPermissions", env={"PAGER": "less"})
        term.say("count")
        term.expect("Ok.")
        term.expect(PROMPT)
        term.say("\\result")
        term.expect(r"\r\n37\r\n")  # the first screen
        term.child.send("G")  # to the end
        term.expect("300")
        term.child.send("q")
        term.expect(PROMPT)
        assert term.exit() == 0


def test_errors_and_denials_are_shown_whole_and_a_reason_reaches_the_model(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    (project / "calc.py").write_text("x = 1\nx = 1\n")
    script = [
        Reply(tool_calls=[ToolCall("edit_file", {"path": "calc.py", "old_string": "x = 1",
                                                 "new_string": "x = 2"})]),
        Reply(tool_calls=[ToolCall("run_bash", {"command": "rm -rf build"})]),
        Reply("Understood."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "acceptEdits")
        term.say("clean up")
        term.expect(re.escape("Allow run_bash: rm -rf build? [y/N/a]"))
        term.say("keep the build directory, run make clean instead")
        term.expect("Understood.")
        term.expect(PROMPT)
        screen = term.screen_text()
        assert "✗ Error: old_string occurs 2 times in calc.py; include more surrounding " \
               "context so that it matches exactly one place." in screen
        assert "✗ Denied: the user did not approve run_bash: rm -rf build. The user's reason: " \
               "keep the build directory, run make clean instead. Do not retry it " \
               "unchanged; ask the user what to do instead." in screen.replace("\n    ", " ")
        assert term.exit() == 0
    denial = server.requests[2]["messages"][-1]["content"]
    assert "The user's reason: keep the build directory, run make clean instead." in denial
