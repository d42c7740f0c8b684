"""What the real REPL writes, in a pseudo-terminal: markdown rendered (with colour, without
it under NO_COLOR), control characters from outside never reaching the terminal (REPL and
print mode), and ``@path`` attachments in the request the server receives."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from actors.core.messages import SHOWN
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import REPO
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow

ANSWER = ("# Release notes\n\nThe parser is **faster** and *safer*.\n\n- one\n- two\n\n"
          "| name | value |\n|---|---|\n| speed | 2x |\n\n"
          "```python\ndef parse(text):\n    return text.split()\n```\n")
BOLD, ITALIC = "\x1b[1m", "\x1b[3m"
HIGHLIGHT = re.compile(r"\x1b\[38;5;\d+")  # pygments' 256-colour highlighting
HOSTILE = "Look\x1b[2J here\x1b]0;pwned\x07\rYou: rm -rf /"
DRAWN_PROMPT = re.escape("\x1b[0m" + PROMPT)  # as prompt_toolkit draws it, not the fake one


def test_markdown_is_rendered_on_a_terminal(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    with ScriptedServer([Reply(ANSWER, chunk_delay=0.005)]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("what changed?")
        term.expect("safer")
        term.expect(PROMPT)
        raw = term.log.getvalue()
        assert f"{BOLD}faster" in raw and f"{ITALIC}safer" in raw and HIGHLIGHT.search(raw)
        screen = term.screen_text()
        assert "Assistant:\nRelease notes\n" in screen  # a heading, without its #
        assert "The parser is faster and safer." in screen
        assert " • one\n • two" in screen
        assert re.search(r" name +value", screen) and "|" not in screen.split("Release")[1]
        assert " def parse(text):" in screen and "```" not in screen
        assert term.exit() == 0


def test_no_colour_under_no_color_and_word_wrapped(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    long = "A sentence that goes on and on " * 10
    with ScriptedServer([Reply(ANSWER + "\n" + long)]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url,
                     env={"NO_COLOR": "1"})
        start_at = len(term.log.getvalue())
        term.say("what changed?")
        term.expect("on and on")
        term.expect(PROMPT)
        raw = term.log.getvalue()[start_at:]
        assert BOLD not in raw and ITALIC not in raw and not HIGHLIGHT.search(raw)
        assert not re.search(r"\x1b\[3[0-7]m", raw)
        screen = term.screen_text()
        assert "The parser is faster and safer." in screen and "**" not in screen
        wrapped = [line for line in screen.split("\n") if "goes on" in line]
        assert len(wrapped) == 2 and all(line.endswith(("on", "and", "goes", "that", "A",
                                                        "sentence")) for line in wrapped)
        assert term.exit() == 0


def test_print_mode_stays_plain_text_on_a_terminal(memory_dir: Path, project: Path) -> None:
    with ScriptedServer([Reply(ANSWER + HOSTILE)]) as server:
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir),
               "PYTHONPATH": str(REPO), "TERM": "xterm", "OPENAI_API_KEY": "test"}
        env.pop("NO_COLOR", None)
        child = pexpect.spawn(sys.executable, ["-m", "repl", "--base-url", server.base_url,
                                               "-p", "what changed?"],
                              env=env, cwd=str(project), encoding="utf-8", timeout=15)
        child.expect(pexpect.EOF)
        child.close()
        output = child.before
    assert child.exitstatus == 0
    assert "The parser is **faster** and *safer*." in output  # as the model wrote it
    assert BOLD not in output and not HIGHLIGHT.search(output)
    assert "Look␛[2J here␛]0;pwned␇␍You: rm -rf /" in output
    assert "\x1b[2J" not in output and "\x1b]0;" not in output


def test_control_characters_from_outside_never_reach_the_terminal(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    (project / "evil.txt").write_text("old\x1b]0;title\x07\n")
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": r"printf 'out\033[2J\033]0;t\007'"})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "evil.txt"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "evil.txt",
                                                  "content": "new\x1b[2J\n"})]),
        Reply(HOSTILE, reasoning="thinking\x1b[2J hard"),
    ]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        start_at = len(term.log.getvalue())
        term.say("go")
        term.expect(re.escape("Allow run_bash: printf"))
        term.say("y")
        term.expect(re.escape("Allow write_file: evil.txt"))  # the diff of the file's content
        term.say("y")
        term.expect(r"rm -rf /")
        term.expect(DRAWN_PROMPT)  # the real prompt (the fake "You:" line matches PROMPT)
        raw = term.log.getvalue()[start_at:]
        assert "\x1b[2J" not in raw and "\x1b]0;" not in raw and "\x07" not in raw
        screen = term.screen_text()
        assert "→ exit status 0" in screen and "out␛[2J␛]0;t␇" in screen  # command output
        assert "old␛]0;title␇" in screen.split("[tool] read_file")[1]  # a file read
        assert "-old␛]0;title␇\n    +new␛[2J" in screen  # the diff in the approval
        assert "Thinking: thinking␛[2J hard" in screen  # the model's reasoning
        assert "Assistant: Look␛[2J here␛]0;pwned␇␍You: rm -rf /" in screen  # and its answer
        assert term.exit() == 0
    assert (project / "evil.txt").read_text() == "new\x1b[2J\n"  # the file itself is exact


def test_at_path_attaches_the_file_and_the_transcript_keeps_what_was_typed(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text("")
    with ScriptedServer([Reply("It subtracts.")]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("what is wrong in @calc.py and @src?")
        term.expect(re.escape("attached calc.py (32 bytes)"))
        term.expect(re.escape("attached the file list of src/ (1 entries)"))
        term.expect("It subtracts.")
        term.expect(PROMPT)
        assert term.exit() == 0
    typed = "what is wrong in @calc.py and @src?"
    sent = server.requests[0]["messages"][-1]
    assert sent == {"role": "user", "content": (
        f'{typed}\n\n<attached_file path="calc.py">\ndef add(a, b):\n    return a - b\n'
        '</attached_file>\n\n<attached_file path="src" kind="directory">\nmain.py\n'
        "</attached_file>")}
    saved = SessionStore(memory_dir).load_session(term.session_id)
    user = [m for m in saved["messages"] if m["role"] == "user"][-1]
    assert user[SHOWN] == typed and user["content"] == sent["content"]


def test_reasoning_is_one_dimmed_line_and_thinking_shows_it_whole(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    reasoning = "Let me think.\nThe user wants the version.\nIt is in pyproject."
    with ScriptedServer([Reply("Version 2.", reasoning=reasoning)]) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("which version?")
        term.expect("Version 2.")
        term.expect(PROMPT)
        screen = term.screen_text()
        assert "Thinking: Let me think. (+2 lines: \\thinking)\nAssistant: Version 2." in screen
        assert "The user wants" not in screen  # collapsed
        assert "\x1b[2mThinking: Let me think." in term.log.getvalue()  # dimmed
        term.say("/thinking")
        term.expect("It is in pyproject.")
        term.expect(PROMPT)
        assert reasoning in term.screen_text()
        assert term.exit() == 0


# Runs the harness with prompt_toolkit's stdout proxy (what the REPL prints while its prompt
# is shown goes through it, written above the prompt by the proxy's flush thread) observed:
# its writes above a running prompt, each close (on the event loop, when the prompt is
# done), and any pause the flush thread takes between writes. Such a pause is made to last
# until a close begins: the close waits for the flush thread, so a paused thread holds the
# event loop for as long as the pause (prompt_toolkit's default is 0.2 s).
OBSERVED = """
import os, sys, threading, time
import prompt_toolkit.patch_stdout as patched

def note(line):
    with open(os.environ["PROXY_LOG"], "a") as log:
        log.write(line + "\\n")

closing = threading.Event()

class Clock:
    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds):
        if seconds > 0:
            closing.wait()
            note(f"pause of {seconds} s, waited for by a close")
        else:
            time.sleep(seconds)

patched.time = Clock()
write_and_flush, close = patched.StdoutProxy._write_and_flush, patched.StdoutProxy.close

def observed_write(self, loop, text):
    if loop is not None:
        note("write above the prompt")
    write_and_flush(self, loop, text)

def observed_close(self):
    closing.set()
    close(self)
    closing.clear()
    note("close")

patched.StdoutProxy._write_and_flush = observed_write
patched.StdoutProxy.close = observed_close
from repl.__main__ import main
sys.argv = ["harness", *sys.argv[1:]]
sys.exit(main())
"""


def test_a_notice_above_the_prompt_does_not_hold_the_message_sent_next(
    tmp_path: Path, memory_dir: Path
) -> None:
    """A notice printed above the prompt (here the start's: the project directory holds the
    memory directory) goes through the stdout proxy, whose flush thread must not pause
    after it: the prompt's close, when the message is sent, waits for that thread on the
    event loop, and the message would wait as long."""
    memory_dir.mkdir(mode=0o700)  # in the project directory: a notice after the prompt
    log = tmp_path / "proxy.log"
    log.touch()
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "test",
           "PROXY_LOG": str(log)}
    env.pop("AGENT_HARNESS_STORE", None)
    with ScriptedServer([Reply("Pong.")]) as server:
        child = pexpect.spawn(sys.executable, ["-c", OBSERVED, "--base-url", server.base_url],
                              env=env, cwd=str(tmp_path), encoding="utf-8", timeout=15,
                              dimensions=(40, 160))
        try:
            child.expect_exact("Ctrl-D to exit.")
            child.expect_exact(PROMPT)
            child.expect_exact("contains the harness's state directory")
            child.send("ping\r")
            child.expect_exact("Pong.")
            child.expect_exact(PROMPT)
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    events = log.read_text().splitlines()
    assert "write above the prompt" in events and "close" in events  # what is observed
    assert [event for event in events if event.startswith("pause")] == []
