"""A turn in the real REPL, in a pseudo-terminal: the live status line, Esc, and the keys
typed while the turn runs (kept for the next prompt, never answering a question)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors.core.messages import INTERRUPTED_NOTICE
from actors.store import SessionStore
from actors.testing.scripted_server import (
    Hang,
    Reply,
    ScriptedServer,
    ToolCall,
    tool_pairing_errors,
)
from tests.support.runtime import pid_alive, wait_for
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow

KEYS = "esc or ctrl-c to interrupt"
ESC = "\x1b"


def bottom(term: Terminal) -> str:
    """The last non-empty line of the screen."""
    lines = [line for line in term.screen() if line.strip()]
    return lines[-1] if lines else ""


def test_status_line_while_waiting_and_while_a_tool_runs_then_gone(
    memory_dir: Path, project: Path, tmp_path: Path, terminals: list[Terminal]
) -> None:
    pid_file = tmp_path / "pid"
    script = [
        Hang(after_headers=False),
        Reply(tool_calls=[ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; sleep 60"})]),
        Reply("Both stopped."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "dangerouslySkipPermissions")
        term.say("are you there?")
        term.expect(r"waiting for the model · \d+s · " + KEYS)
        server.wait_for_requests(1)  # the server holds it without answering
        assert re.search(r"waiting for the model · \d+s · " + KEYS, bottom(term))
        term.child.send(ESC)  # Esc interrupts a request still waiting, like Ctrl-C
        term.expect("Interrupted.", timeout=5)
        term.expect(PROMPT)
        assert KEYS not in term.screen_text()  # the status line is gone
        term.say("run it")
        term.expect(r"\[tool\] run_bash")
        bash = int(wait_for(pid_file))
        term.expect(re.escape(f"running run_bash: echo $$ > {pid_file}; sleep 60") + r" · \d+s")
        assert "running run_bash" in bottom(term)
        term.child.send(ESC)
        term.expect("Interrupted.", timeout=5)
        term.expect(PROMPT)
        assert not pid_alive(bash)
        assert KEYS not in term.screen_text()
        term.say("and now?")
        term.expect("Both stopped.")
        term.expect(PROMPT)
        assert KEYS not in term.screen_text()
        assert term.exit() == 0
        sent = server.requests[-1]["messages"]
    assert tool_pairing_errors(sent) == []
    assert INTERRUPTED_NOTICE in sent[-2]["content"]
    assert SessionStore(memory_dir).info(term.session_id).status == "saved"


def test_esc_interrupts_a_streamed_answer_and_the_session_stays_valid(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply("tick " * 300, chunk_delay=0.05), Reply("Short one.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("count")
        term.expect(r"streaming the answer · \d+s · ~\d+ tokens · " + KEYS)
        term.expect("tick tick")
        term.child.send(ESC)
        term.expect("Interrupted.", timeout=5)
        term.expect(PROMPT)
        term.say("shorter please")
        term.expect("Short one.")
        term.expect(PROMPT)
        assert term.exit() == 0
        sent = server.requests[1]["messages"]
    assert sent[-2]["role"] == "assistant"
    assert sent[-2]["content"].endswith("[interrupted by the user]")
    assert tool_pairing_errors(sent) == []


def test_text_typed_during_a_turn_waits_in_the_next_prompt(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply("slow " * 40, chunk_delay=0.05), Reply("Got the second one.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("first")
        term.expect("slow slow")
        term.child.send("and thenx\x7f the tests")  # typed while the answer streams
        term.expect("next: and then the tests")  # shown in the status line, not echoed
        term.expect(PROMPT)
        term.expect("and then the tests")  # the next prompt holds it
        answer = term.screen_text()
        assert "You: and then the tests" in answer
        term.child.send("\r")
        term.expect("Got the second one.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "and then the tests"}


def test_keys_typed_before_an_approval_never_answer_it(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [
        Reply("Let me write the file now. " * 8, chunk_delay=0.05,
              tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
        Reply("Understood, not written."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("write it")
        term.expect("Let me write")
        term.child.send("y\r")  # typed ahead while the reply streams
        term.expect(re.escape("Allow write_file: a.txt (1 chars)? [y/N/a]"))
        term.say("n")  # the answer given to the question itself
        term.expect("Denied: the user did not approve write_file")
        term.expect("Understood, not written.")
        term.expect(PROMPT)
        assert not (project / "a.txt").exists()
        assert "You: y" in term.screen_text()  # what was typed ahead waits in the prompt
        term.child.sendcontrol("c")  # clear it
        assert term.exit() == 0
    result = server.requests[1]["messages"][-1]
    assert result["role"] == "tool" and "Denied" in result["content"]
