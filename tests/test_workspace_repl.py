"""``\\rewind`` of the project's files in the real REPL, in a pseudo-terminal, against the
scripted server: the choice of what to rewind with the diffstat in view (hand edits
flagged), the files restored (what a shell command created, changed and deleted), and
``\\rewind undo``."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.test_sessions_repl import Screen

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

PROMPT = "You:"
ENTER, DOWN = "\r", "\x1b[B"
GAP = r"(?:\s|\x1b\[\d*C)+"  # a full-screen application may draw spaces as cursor moves


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_rewind_offers_the_files_with_their_diffstat_and_can_be_undone(
    tmp_path: Path,
) -> None:
    memory, project = tmp_path / "memory", tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("one\n")
    (project / "old.txt").write_text("old\n")
    start = _files(project)
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo two >> notes.txt; rm old.txt; echo new > new.txt"})]),
        Reply("Changed the files."),
    ]
    with ScriptedServer(script) as server:
        screen = Screen(memory, project, "--base-url", server.base_url,
                        "--mode", "dangerouslySkipPermissions")
        sid = screen.expect(r"Session:\s+(\w+)").group(1)
        screen.expect(PROMPT)
        screen.say("change the files")
        screen.expect_words("The command created new.txt; changed notes.txt; deleted old.txt.")
        screen.expect("Changed the files.")
        screen.expect(PROMPT)
        (project / "new.txt").write_text("new, and edited by hand\n")
        after = _files(project)
        screen.say("\\rewind")
        screen.expect_words("Rewind to before which message?")
        screen.expect(r"#(\d+)" + GAP + "change" + GAP + "the" + GAP + "files")
        screen.child.send(ENTER)
        screen.expect_words("Rewind what, to before message")
        screen.expect_words("Conversation and files")
        screen.expect_words("The files would change (3):")
        screen.expect(r"new\.txt" + GAP + r"removed" + GAP + r"\+0" + GAP + "-1" + GAP
                      + r"\(changed" + GAP + "since")
        screen.expect(r"notes\.txt" + GAP + "restored")
        screen.expect(r"old\.txt" + GAP + "brought" + GAP + "back")
        screen.child.send(DOWN + DOWN + ENTER)  # files only
        screen.expect_words("The files are back as they were at message")
        screen.expect(PROMPT)
        assert _files(project) == start
        screen.say("\\rewind undo")
        screen.expect_words("Undone: the files are back as they were before the rewind")
        screen.expect(PROMPT)
        assert _files(project) == after  # the hand edit too
        screen.say("\\rewind 2 both")
        screen.expect(r"Rewound to before message 2: 1 messages in context")
        screen.expect_words("The files are back as they were at message 2")
        screen.expect(PROMPT)
        assert _files(project) == start
        screen.child.send("\x15")  # Ctrl-U: clear the message given back
        assert screen.exit() == 0
    context = SessionStore(memory).load_context(sid)
    assert [m["role"] for m in context] == ["system"]
