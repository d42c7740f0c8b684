"""``\\rewind`` of the project's files in the real REPL, in a pseudo-terminal, against the
scripted server: the choice of what to rewind with the diffstat in view (hand edits
flagged), the files restored (what a shell command created, changed and deleted), and
``\\rewind undo``."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import killed_at
from tests.support.project_files import record_two_turns
from tests.support.terminal import PROMPT, Terminal

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

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
        screen = Terminal(memory, project, "--base-url", server.base_url,
                          "--mode", "dangerouslySkipPermissions", greeted=False)
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
        whole = SessionStore(memory).load_context(sid)
        screen.say("\\rewind 2 both")
        screen.expect(r"Rewound to before message 2: 1 messages in context")
        screen.expect_words("The files are back as they were at message 2")
        screen.expect(PROMPT)
        assert _files(project) == start
        screen.child.send("\x15")  # Ctrl-U: clear the message given back
        # \rewind undo undoes all of it: the files, and the conversation (the REPL goes on
        # in the fork that holds it as it was).
        screen.say("\\rewind undo")
        screen.expect_words("Undone: the files are back as they were before the rewind")
        fork = screen.expect(r"goes on as it was before it, in session (\w+)").group(1)
        screen.expect_words("Resumed with")
        screen.expect(PROMPT)
        assert _files(project) == after
        assert screen.exit() == 0
    context = SessionStore(memory).load_context(sid)
    assert [m["role"] for m in context] == ["system"]  # the rewound one stays rewound
    assert SessionStore(memory).load_context(fork) == whole


def test_a_rewind_cut_short_with_files_changed_since_is_said_and_asked_about(
    tmp_path: Path,
) -> None:
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "for f in a b c d; do echo two > $f.txt; done"})]),
        Reply("Rewritten."),
        Reply("Nothing more."),
    ]
    files = {f"{name}.txt": "one\n" for name in "abcd"}
    recorded = record_two_turns(tmp_path, script, files)
    sid = recorded.session_id
    first = recorded.store.user_messages(sid)[0].number
    recorded.store.close()
    memory, project = tmp_path / "memory", (tmp_path / "project").resolve()
    killed_at("restore#2", "--rewind", sid, "--to", str(first), "--files",
              memory_dir=memory, cwd=project)  # a.txt and b.txt are back to "one"
    (project / "a.txt").write_text("by hand\n")
    with ScriptedServer([]) as server:
        screen = Terminal(memory, project, "-r", sid, "--base-url", server.base_url,
                          greeted=False)
        screen.expect_words("was interrupted, and 1 of its files changed since (a.txt);")
        screen.expect_words("\\rewind finish finishes it")
        screen.expect(PROMPT)
        screen.say("\\rewind")
        screen.expect_words("A rewind of the files was interrupted: what now?")
        screen.expect_words("Finish it (the files changed since stay as they are)")
        screen.child.send(ENTER)
        screen.expect_words("it has been finished (2 more paths), leaving 1 file changed "
                            "since as they are (a.txt)")
        screen.expect(PROMPT)
        assert screen.exit() == 0
    assert _files(project) == {"a.txt": "by hand\n", "b.txt": "one\n", "c.txt": "one\n",
                               "d.txt": "one\n"}
