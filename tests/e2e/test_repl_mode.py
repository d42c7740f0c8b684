"""The permission mode and the model from inside the REPL, in a pseudo-terminal against the
scripted server: ``\\mode`` and Shift-Tab, ``\\model`` with completion from the server's
list, both saved with the session; an edit acceptEdits approved is shown, collapsed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

SHIFT_TAB = "\x1b[Z"


def test_mode_by_shift_tab_and_command_shows_approved_edits_and_is_saved(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    body = "".join(f"line {i}\n" for i in range(30))
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "long.txt", "content": body})]),
              Reply("Written."),
              Reply(tool_calls=[ToolCall("write_file", {"path": "asked.txt", "content": "x"})]),
              Reply("Asked first.")]
    with ScriptedServer(script) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.child.send(SHIFT_TAB)
        term.expect(re.escape("Mode: acceptEdits (Shift-Tab: the next one)"))
        term.say("write the long file")
        term.expect(re.escape("+++ b/long.txt"))
        term.expect(re.escape("… +"))  # collapsed after a dozen lines
        term.expect(re.escape("(approved by acceptEdits; \\mode changes it)"))
        term.expect("Written.")
        term.expect(PROMPT)
        assert "Allow write_file" not in term.screen_text()  # not asked
        assert (project / "long.txt").read_text() == body
        term.say("\\mode nonsense")
        term.expect("Unknown mode 'nonsense'")
        term.say("\\mode default")
        term.expect(re.escape("Mode: default: edits and commands are asked about"))
        term.say("write another")
        term.expect(re.escape("Allow write_file: asked.txt"))
        term.say("y")
        term.expect("Asked first.")
        term.expect(PROMPT)
        term.say("\\mode ACCEPTEDITS")  # any letter case
        term.expect(re.escape("Mode: acceptEdits: edits inside the project"))
        term.expect(PROMPT)
        assert term.exit() == 0
    assert SessionStore(memory_dir).info(term.session_id).state["mode"] == "acceptEdits"
    with ScriptedServer([]) as server:  # a resume takes the session's mode back
        again = start(terminals, memory_dir, project, "-r", term.session_id,
                      "--base-url", server.base_url)
        assert "Mode:             acceptEdits" in again.log.getvalue()
        again.say("\\mode")
        again.expect(re.escape("Mode: acceptEdits: edits inside the project"))
        again.expect(PROMPT)
        assert again.exit() == 0


def test_model_is_switched_with_completion_and_saved(
    memory_dir: Path, project: Path, terminals: list[Terminal]
) -> None:
    models = ["gemma4:latest", "qwen3:8b"]
    with ScriptedServer([Reply("From qwen.")], models=models) as server:
        term = start(terminals, memory_dir, project, "--base-url", server.base_url)
        term.say("\\model")
        term.expect(re.escape(f"Model: gemma4 at {server.base_url}. Models there: "
                              "gemma4:latest, qwen3:8b."))
        term.say("\\model llama9")
        term.expect(re.escape("Model 'llama9' is not among the endpoint's models"))
        term.child.send("\\model qw")
        term.expect(re.escape("qwen3:8b"))  # the completion menu, from the server's list
        term.child.send("\t")  # takes it (drawn by difference: "en3:8b" after "qw")
        term.expect(re.escape("en3:8b"))
        term.child.send("\r")
        term.expect(re.escape("Model: qwen3:8b from the next message on"))
        term.say("hello")
        term.expect("From qwen.")
        term.expect(PROMPT)
        assert server.requests[-1]["model"] == "qwen3:8b"
        assert term.exit() == 0
    assert SessionStore(memory_dir).info(term.session_id).state["model"] == "qwen3:8b"
    with ScriptedServer([], models=models) as server:  # a resume asks the same model
        again = start(terminals, memory_dir, project, "-r", term.session_id,
                      "--base-url", server.base_url)
        assert f"Model:            qwen3:8b at {server.base_url}" in again.log.getvalue()
        assert again.exit() == 0
