"""The REPL end to end: the real ``harness`` in a pseudo-terminal against the scripted server."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from actors.core.messages import INTERRUPTED_NOTICE
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from tests.support.runtime import pid_alive, wait_for
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow  # every test here starts a Python process

UP = "\x1b[A"


def test_streamed_answer_history_and_ctrl_d(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([Reply("Streaming works fine.", chunk_delay=0.02)]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("first question")
        term.expect("Assistant: Streaming works fine.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert SessionStore(memory_dir).info(term.session_id).status == "saved"
    history = (memory_dir / "history")
    assert "first question" in history.read_text()
    assert oct(history.stat().st_mode & 0o777) == "0o600"
    with ScriptedServer([]) as server:
        again = start(terminals, memory_dir, project, "--base-url", server.base_url)
        again.child.send(UP)
        again.expect("first question")
        again.child.sendcontrol("c")  # clears the recalled line
        again.child.sendcontrol("c")  # and a second Ctrl-C on the empty line exits
        again.child.expect(pexpect.EOF)
        again.child.close()
        assert again.child.exitstatus == 0
        assert server.requests == []
    assert not SessionStore(memory_dir).exists(again.session_id)  # nothing typed: not kept


def test_ctrl_c_ends_a_history_search(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([Reply("Answered.")]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("first question")
        term.expect("Answered.")
        term.expect(PROMPT)
        term.child.sendcontrol("r")
        term.child.send("first")
        term.expect("I-search backward")
        term.child.sendcontrol("c")  # ends the search
        term.say("\\todos")  # the next command runs (the search would have swallowed it)
        term.expect("No to-dos.")
        term.expect(PROMPT)
        assert "I-search" not in term.screen_text()
        assert term.exit() == 0


def test_completion_of_commands_and_session_ids(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    store = SessionStore(memory_dir)
    other = store.create_session(messages=[{"role": "user", "content": "rewrite the parser"}],
                                 project_root=str(project))
    store.update(other, title="Parser rewrite")
    with ScriptedServer([]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.child.send("\\fo\t")
        term.expect(re.escape("\\fork") + ".{0,40}copy this session")
        term.child.sendcontrol("c")
        term.child.send("\\info \t")
        term.expect(f"{other}.{{0,40}}Parser rewrite")
        term.child.send(other + "\r")
        term.expect("Title:        Parser rewrite")
        term.say("\\bogus")
        term.expect("Unknown command \\\\bogus; type \\\\help")
        term.expect(PROMPT)
        assert term.exit() == 0
        assert server.requests == []  # no command called the model


def test_ctrl_c_during_a_long_command(
    memory_dir: Path, project: Path, tmp_path: Path, terminals: list[Terminal]
) -> None:
    pid_file = tmp_path / "pid"
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; sleep 60"})]),
        Reply("Next answer."),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     "--mode", "dangerouslySkipPermissions")
        term.say("run the long thing")
        term.expect(r"\[tool\] run_bash")
        bash = int(wait_for(pid_file))
        term.child.sendintr()
        term.expect("Interrupted.", timeout=5)
        term.expect(PROMPT)
        assert not pid_alive(bash)
        term.say("and now?")
        term.expect("Next answer.")
        term.expect(PROMPT)
        assert term.exit() == 0
        sent = server.requests[1]["messages"]
    assert tool_pairing_errors(sent) == []
    assert INTERRUPTED_NOTICE in sent[-2]["content"]


def test_ctrl_c_during_a_streamed_answer(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply("tick " * 300, chunk_delay=0.05), Reply("Short one.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("count")
        term.expect("tick tick")
        term.child.sendintr()
        term.expect("Interrupted.", timeout=5)
        term.expect(PROMPT)
        term.say("shorter please")
        term.expect("Short one.")
        term.expect(PROMPT)
        assert term.exit() == 0
        sent = server.requests[1]["messages"]
    assert sent[-2]["role"] == "assistant" and sent[-2]["content"].endswith(
        "[interrupted by the user]")


def test_approval_is_asked_inline(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
              Reply("Asked.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("write it")
        term.expect(re.escape("Allow write_file: a.txt (1 chars)? [y/N/a]"))
        term.say("y")
        term.expect("Asked.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert (project / "a.txt").read_text() == "x"


def test_title_info_fork_compact(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply("First answer. " + "Some detail. " * 80), Reply("Second answer."),
              Reply("Summary: the user asked two questions.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("question one")
        term.expect("First answer.")
        term.expect(PROMPT)  # keys typed before it would wait in the next prompt
        term.say("question two")
        term.expect("Second answer.")
        term.say("\\title Cache investigation")
        term.expect("Title set: Cache investigation")
        term.say("\\info")
        term.expect("Title:        Cache investigation")
        term.expect("Compactions:  0")
        term.say("\\compact")
        term.expect(r"Context compacted: \d+ -> \d+ tokens")
        term.say("\\info")
        term.expect(r"Compactions:  1 \(last: \d+ -> \d+ tokens")
        term.say("\\fork")
        term.expect(r"Forked \w+ into (\w+) \(a whole copy\); \\resume \w+ goes there")
        fork_id = term.child.match.group(1)
        term.expect(PROMPT)
        assert term.exit() == 0
        server.assert_done()
    store = SessionStore(memory_dir)
    fork = store.info(fork_id)
    assert fork.parent_id == term.session_id and fork.title == "Cache investigation"
    assert len(store.info(term.session_id).compactions) == 1
    summary_request = server.requests[2]
    assert summary_request["temperature"] == 0 and summary_request["max_tokens"] == 1024


def test_help_sessions_todos_pin(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("\\help")
        term.expect("Alt-Enter or Esc Enter: new line")
        term.say("/help")  # the habit from other agents: /command is \\command
        term.expect("Every \\\\command also works as /command")
        term.say("/todos")
        term.expect("No to-dos.")
        term.say("\\todos")
        term.expect("No to-dos.")
        term.say("\\pin Always run the linter before committing.")
        term.expect("Pinned: kept verbatim across compactions.")
        term.say("\\sessions")  # listed once something was typed (the pin)
        term.expect(re.escape(f"* {term.session_id}  just now"))
        term.expect(PROMPT)
        assert term.exit() == 0
        assert server.requests == []
    state = SessionStore(memory_dir).info(term.session_id).state
    assert state["pinned"] == ["Always run the linter before committing."]


def test_multi_line_input_with_escape_enter(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([Reply("Two lines received.")]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.child.send("first line")
        term.child.send("\x1b\r")  # Esc then Enter: a new line, not a send
        term.child.send("second line\r")
        term.expect("Two lines received.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert server.requests[0]["messages"][-1]["content"] == "first line\nsecond line"


def test_ctrl_c_during_a_slow_compaction_leaves_it_in_the_background(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    script = [Reply("First answer. " + "Some detail. " * 80), Reply("Second answer."),
              Reply("Summary of the first turn.", chunk_delay=0.5), Reply("Third.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("one")
        term.expect("First answer.")
        term.expect(PROMPT)
        term.say("two")
        term.expect("Second answer.")
        term.expect(PROMPT)
        term.say("\\compact")
        server.wait_for_requests(3)
        term.child.sendintr()
        term.expect("goes on in the background")
        term.expect(PROMPT)
        term.expect("Context compacted", timeout=20)  # announced when it lands
        term.say("three")
        term.expect("Third.")
        term.expect(PROMPT)
        assert term.exit() == 0
    assert len(SessionStore(memory_dir).info(term.session_id).compactions) == 1


def test_backslash_exit_and_sigterm_leave_the_session_saved(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([Reply("One answer.")]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("hello")
        term.expect("One answer.")
        term.expect(PROMPT)
        term.say("\\exit")
        term.expect(f"Saved session {term.session_id}")
        term.child.expect(pexpect.EOF)
        term.child.close()
        assert term.child.exitstatus == 0
        other = start(terminals, memory_dir, project, "--base-url", server.base_url)
        other.say("\\pin keep it short")  # something typed: the session is kept
        other.expect("Pinned")
        other.expect(PROMPT)
        other.child.kill(15)  # SIGTERM at the prompt
        other.child.expect(pexpect.EOF)
    store = SessionStore(memory_dir)
    for session_id in (term.session_id, other.session_id):
        info = store.info(session_id)
        assert info.status == "saved" and info.summary  # the fallback summary was written
        assert not store.is_running_elsewhere(session_id)  # the lease was released
