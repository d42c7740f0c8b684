"""Finding and continuing sessions in the real REPL, in a pseudo-terminal, against the
scripted server: the resume picker (filter, preview, resume, fork, archive, rename), the
replay on resume, ``\\resume``, ``\\rewind``, titles from the model, and ``harness PROMPT``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from actors.core.budget import UsageTotals
from actors.core.messages import pairing_problems
from actors.store import SessionStore
from actors.testing.scripted_server import Hang, Reply, ScriptedServer, ToolCall
from tests.support.stores import info_of, wait_until
from tests.support.terminal import PROMPT, Terminal

pytestmark = pytest.mark.slow  # every test here starts the harness in a pty

ENTER, ESC, DOWN = "\r", "\x1b", "\x1b[B"
CTRL_F, CTRL_X, CTRL_R = "\x06", "\x18", "\x12"
SYSTEM = {"role": "system", "content": "You are a coding agent."}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def screens() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for screen in opened:
        if screen.child.isalive():
            screen.child.terminate(force=True)


@pytest.fixture
def start(screens: list[Terminal], memory_dir: Path, project: Path) -> Any:
    def starting(*args: str) -> Terminal:
        screen = Terminal(memory_dir, project, *args, greeted=False)
        screens.append(screen)
        return screen

    return starting


def seed_sessions(memory_dir: Path, project: Path) -> dict[str, str]:
    """Three sessions of this project (oldest first) and one elsewhere; topic -> id."""
    store = SessionStore(memory_dir)
    made = {}
    for topic in ("parser", "cache", "deploy"):
        call = {"id": f"c_{topic}", "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "{topic}.py"}}'}}
        made[topic] = store.create_session(messages=[
            SYSTEM,
            {"role": "user", "content": f"Look at the {topic} code"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"contents of {topic}.py"},
            {"role": "assistant", "content": f"The {topic} code needs a rewrite."},
        ], project_root=str(project))
    made["elsewhere"] = store.create_session(messages=[
        SYSTEM, {"role": "user", "content": "Another project's work"}],
        project_root=str(project.parent / "other"))
    store.close()
    return made


# -- the picker -----------------------------------------------------------------------------


def test_picker_filters_previews_and_resumes_with_the_replay(
    start: Any, memory_dir: Path, project: Path
) -> None:
    made = seed_sessions(memory_dir, project)
    with ScriptedServer([Reply("Resumed fine.")]) as server:
        screen = start("-r", "--base-url", server.base_url)
        screen.expect("Resume a session of this project")
        screen.expect(made["deploy"])  # most recent first, under the cursor
        screen.expect(r"Assistant: The deploy code needs a rewrite\.")  # its preview
        screen.send("cache")  # full-text search behind the filter
        # The match and its message number (the screen is redrawn by difference: a cell
        # already showing the right character is skipped with a cursor move).
        screen.expect(r"#\d+:(?:\s|\x1b\[\d*C)+The(?:\s|\x1b\[\d*C)+cache")
        screen.expect(r"Assistant: The cache code needs a rewrite\.")
        screen.send(ENTER)
        assert screen.session() == made["cache"]
        screen.expect("Where you left off:")
        screen.expect(r"You: Look at the cache code")
        screen.expect(re.escape('[tool] read_file({"path": "cache.py"})'))
        screen.expect(r"→ contents of cache\.py")
        screen.expect(r"Assistant: The cache code needs a rewrite\.")
        screen.ready()
        screen.say("go on")
        screen.expect("Resumed fine.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
    assert made["elsewhere"] not in screen.log.getvalue()  # another project's: not offered


def test_picker_all_shows_every_project(start: Any, memory_dir: Path, project: Path) -> None:
    made = seed_sessions(memory_dir, project)
    screen = start("-r", "--all", "--base-url", "http://127.0.0.1:9/v1")
    screen.expect("Resume a session of every project")
    screen.expect("PROJECT")
    screen.expect(made["elsewhere"])
    screen.send(ESC)
    screen.expect("No session chosen.")
    screen.child.expect(pexpect.EOF)


def test_picker_keys_fork_archive_rename(start: Any, memory_dir: Path, project: Path) -> None:
    made = seed_sessions(memory_dir, project)
    screen = start("-r", "--base-url", "http://127.0.0.1:9/v1")
    screen.expect(made["deploy"])
    screen.send(CTRL_X)  # archive the highlighted one (deploy)
    screen.expect("Archived")  # (the screen is redrawn by difference: check the store)
    wait_until(lambda: info_of(memory_dir, made["deploy"]).archived)
    screen.send(CTRL_R)  # rename the next one, now highlighted (cache)
    screen.expect("New title: ")
    screen.send("\x15Cache work" + ENTER)  # Ctrl-U clears the old title first
    screen.expect("Renamed")
    wait_until(lambda: info_of(memory_dir, made["cache"]).title == "Cache work")
    screen.send(ESC)
    screen.expect("No session chosen.")
    screen.child.expect(pexpect.EOF)
    store = SessionStore(memory_dir)
    assert store.info(made["deploy"]).archived
    assert (store.info(made["cache"]).title, store.info(made["cache"]).title_source) == (
        "Cache work", "user")
    with ScriptedServer([]) as server:
        again = start("-r", "--base-url", server.base_url)
        again.expect(made["cache"])
        again.send(DOWN)  # parser
        again.send(CTRL_F)  # fork it and resume the fork
        forked = again.expect(r"Forked (\w+) into (\w+)\.")
        assert forked.group(1) == made["parser"]
        assert again.session() == forked.group(2)
        again.expect(f"Forked from {made['parser']}")
        again.ready()
        assert again.exit() == 0
    fork = SessionStore(memory_dir).info(forked.group(2))
    assert fork.parent_id == made["parser"]


def test_picker_with_nothing_to_pick_says_so_in_one_line(
    start: Any, memory_dir: Path, project: Path
) -> None:
    screen = start("-r", "--base-url", "http://127.0.0.1:9/v1")  # no session at all
    screen.expect(pexpect.EOF)  # type: ignore[arg-type]
    screen.child.close()
    shown = screen.log.getvalue()
    assert screen.child.exitstatus == 2, shown
    assert "Traceback" not in shown
    assert "harness: No saved session of this project to resume" in shown
    made = seed_sessions(memory_dir, project)
    with SessionStore(memory_dir) as store:
        for topic in ("parser", "cache", "deploy"):
            store.update(made[topic], archived=True)
    again = start("-r", "--base-url", "http://127.0.0.1:9/v1")  # everything archived
    again.expect("No saved session of this project to resume")
    again.expect(pexpect.EOF)  # type: ignore[arg-type]
    again.child.close()
    assert again.child.exitstatus == 2


def test_picker_no_match_and_everything_archived_show_an_empty_list(
    start: Any, memory_dir: Path, project: Path
) -> None:
    made = seed_sessions(memory_dir, project)
    screen = start("-r", "--base-url", "http://127.0.0.1:9/v1")
    screen.expect(made["deploy"])
    screen.send("zebra")  # matches nothing
    screen.expect_words("(nothing matches)")
    screen.send("\x7f" * 5 + "deploy")  # one match, archived: the list is empty again
    screen.expect(r"#\d+:")
    screen.send(CTRL_X)
    screen.expect_words("(nothing matches)")  # (drawn before or after the status line)
    screen.send(ESC)
    screen.expect("No session chosen.")
    screen.child.expect(pexpect.EOF)
    shown = screen.log.getvalue()
    assert f"Archived {made['deploy']}" in shown
    assert "Unhandled exception" not in shown and "Traceback" not in shown


def test_resume_and_rewind_in_a_fresh_repl_with_nothing_to_offer(
    start: Any, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("One.")]) as server:
        screen = start("--base-url", server.base_url)
        screen.session()
        screen.ready()
        screen.say("\\resume")  # no other session: said, and the REPL goes on
        screen.expect("No other saved session of this project to resume")
        screen.expect(PROMPT)
        screen.say("first")
        screen.expect("One.")
        screen.expect(PROMPT)
        screen.say("\\rewind")
        screen.expect("Rewind to before which message?")
        screen.send("zebra")
        screen.expect_words("(nothing matches)")
        screen.send(ESC)
        screen.expect("Not rewound.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
    shown = screen.log.getvalue()
    assert "Traceback" not in shown and "Unhandled exception" not in shown


def test_forks_are_marked_in_the_picker_and_in_sessions(
    start: Any, memory_dir: Path, project: Path
) -> None:
    made = seed_sessions(memory_dir, project)
    with SessionStore(memory_dir) as store:
        fork = store.fork(made["parser"], 2)
    screen = start("-r", "--base-url", "http://127.0.0.1:9/v1")
    screen.expect_words(f"↳ fork of {made['parser']} at 2 · Look at the parser code")
    screen.send(ENTER)  # the newest: the fork
    assert screen.session() == fork
    screen.ready()
    screen.say("\\sessions")
    screen.expect(re.escape(f"* {fork}") + r".*↳ fork of " + made["parser"] + " at 2 · ")
    screen.expect(PROMPT)
    assert screen.exit() == 0


def test_the_picker_the_replay_and_info_show_attachments_and_results_as_labels(
    start: Any, memory_dir: Path, project: Path
) -> None:
    call = {"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    with SessionStore(memory_dir) as store:
        sid = store.create_session(messages=[
            {"role": "system", "content": "The whole long system prompt."},
            {"role": "user", "content": 'look at @a.py please\n\n<attached_file path="a.py">'
             "\nSECRET_FILE_BODY\n</attached_file>", "shown": "look at @a.py please"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content":
             '<tool_result name="read_file">\n     1\tprint(1)\n     2\tmore\n</tool_result>'},
            {"role": "assistant", "content": "It prints 1."},
        ], project_root=str(project))
    screen = start("-r", "--base-url", "http://127.0.0.1:9/v1")
    screen.expect_words("You: look at @a.py please [attached: a.py]")  # the preview
    screen.send(ENTER)
    assert screen.session() == sid
    screen.expect("Where you left off:")
    screen.expect(re.escape("You: look at @a.py please [attached: a.py]"))
    screen.expect(re.escape("→ 1 print(1) (+1 line)"))
    screen.ready()
    screen.say("\\info")
    screen.expect(re.escape("You: look at @a.py please [attached: a.py]"))
    screen.expect(r"Context:\s+~")
    screen.expect(PROMPT)
    assert screen.exit() == 0
    shown = screen.log.getvalue()
    for hidden in ("SECRET_FILE_BODY", "attached_file", "tool_result", "long system prompt"):
        assert hidden not in shown, hidden


def test_resume_command_switches_sessions(start: Any, memory_dir: Path, project: Path) -> None:
    made = seed_sessions(memory_dir, project)
    with ScriptedServer([Reply("Here first."), Reply("There now.")]) as server:
        screen = start("--base-url", server.base_url)
        first = screen.session()
        screen.ready()
        screen.say("hello")
        screen.expect("Here first.")
        screen.expect(PROMPT)
        screen.say("\\resume " + made["parser"][:5])  # any unique prefix
        screen.expect(f"Saved session {first}.")
        assert screen.session() == made["parser"]
        screen.expect("You: Look at the parser code")
        screen.ready()
        screen.say("\\resume")  # the picker, without the session we are in
        screen.expect("Resume a session of this project")
        screen.expect(first)
        screen.send(ENTER)  # the most recent: the first session
        screen.expect(f"Saved session {made['parser']}.")
        assert screen.session() == first
        screen.ready()
        screen.say("still here?")
        screen.expect("There now.")
        screen.expect(PROMPT)
        assert screen.exit() == 0


# -- rewind ---------------------------------------------------------------------------------


def test_rewind_goes_back_and_keeps_the_rest_as_a_fork(
    start: Any, memory_dir: Path, project: Path
) -> None:
    script = [
        Reply("Sure, noted."),
        Reply(tool_calls=[ToolCall("read_file", {"path": "README.md"})]),
        Reply("The README says hello."),
        Reply("A different answer."),
    ]
    (project / "README.md").write_text("hello")
    with ScriptedServer(script, check_tool_pairing=True) as server:
        screen = start("--base-url", server.base_url, "--mode", "dangerouslySkipPermissions")
        sid = screen.session()
        screen.ready()
        screen.say("remember the word kiwi")
        screen.expect("Sure, noted.")
        screen.expect(PROMPT)
        screen.say("read the readme")
        screen.expect("The README says hello.")
        screen.expect(PROMPT)
        store = SessionStore(memory_dir)
        before = store.load_session(sid)
        screen.say("\\rewind")
        screen.expect("Rewind to before which message?")
        screen.expect(r"#(\d+)\s+read the readme")  # the newest first, under the cursor
        screen.expect(r"#(\d+)\s+remember the word kiwi")
        screen.send(ENTER)
        rewound = screen.expect(r"Rewound to before message (\d+): (\d+) messages in context\. "
                                r"What came after is kept as fork (\w+)")
        fork_id = rewound.group(3)
        screen.expect(PROMPT)
        screen.expect("read the readme")  # given back in the prompt, to edit
        screen.send("\x15")  # Ctrl-U: clear it
        screen.say("what word did I say?")
        screen.expect("A different answer.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
        server.assert_done()
        sent = server.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "remember the word kiwi", "what word did I say?"]
    after = SessionStore(memory_dir).load_session(sid)
    assert after["transcript"][: len(before["transcript"])] == before["transcript"]  # unchanged
    assert pairing_problems(after["messages"]) == []
    tail = SessionStore(memory_dir).load_session(fork_id)
    assert tail["messages"] == before["messages"] and tail["parent_id"] == sid


def test_rewind_with_a_number_and_nothing_to_rewind(
    start: Any, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("One."), Reply("Two.")]) as server:
        screen = start("--base-url", server.base_url)
        sid = screen.session()
        screen.ready()
        screen.say("\\rewind")
        screen.expect("Nothing to rewind to")
        screen.say("first")
        screen.expect("One.")
        screen.expect(PROMPT)  # typed sooner, "second" would wait in the next prompt's text
        screen.say("second")
        screen.expect("Two.")
        screen.expect(PROMPT)
        screen.say("\\rewind 3")  # an answer, not something typed
        screen.expect("Message 3 is not one you typed")
        screen.say("\\rewind 4")
        screen.expect(r"Rewound to before message 4: 3 messages in context")
        screen.expect(PROMPT)
        screen.expect("second")  # given back in the prompt
        screen.send("\x15")  # Ctrl-U clears it (Ctrl-D on a line with text does not exit)
        assert screen.exit() == 0
    context = SessionStore(memory_dir).load_context(sid)
    assert [m["content"] for m in context[1:]] == ["first", "One."]


# -- titles, the first message, resume ------------------------------------------------------


def test_the_model_titles_a_session_and_its_cost_is_counted(
    start: Any, memory_dir: Path, project: Path
) -> None:
    titles = [Reply("“Login Bug Fix.”", usage=(300, 8))]
    with ScriptedServer([Reply("Fixed.", usage=(1000, 20))], titles=titles) as server:
        screen = start("--base-url", server.base_url, "--price-in", "1")
        sid = screen.session()
        screen.ready()
        screen.say("please fix the login bug in auth.py")
        screen.expect("Fixed.")
        screen.expect(PROMPT)
        server.wait_for_title_requests(1)
        wait_until(lambda: title_of(memory_dir, sid) == ("Login Bug Fix", "model"))
        screen.say("\\info")
        screen.expect_words("Title: Login Bug Fix (model)")
        screen.expect(r"Context:\s+~")  # the last line of \info (whose messages hold "You:")
        screen.expect(PROMPT)
        assert screen.exit() == 0
        asked = server.title_requests[0]["messages"]
    assert "please fix the login bug" in asked[1]["content"] and "Fixed." in asked[1]["content"]
    usage = UsageTotals.from_state(SessionStore(memory_dir).info(sid).state)
    assert usage.calls == 2 and usage.total_tokens_in == 1300  # the title call counted
    assert usage.total_cost_usd == pytest.approx(1.3)


def test_the_title_call_never_blocks_and_never_replaces_the_users_title(
    start: Any, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("One."), Reply("Two.")], titles=[Hang()]) as server:
        screen = start("--base-url", server.base_url)
        sid = screen.session()
        screen.ready()
        screen.say("first question here")
        screen.expect("One.")
        server.wait_for_title_requests(1)  # asked, and hanging
        assert title_of(memory_dir, sid) == ("first question here", "provisional")
        screen.say("\\title My own name")
        screen.expect("Title set: My own name")
        screen.say("second question")  # the prompt is free while the title call hangs
        screen.expect("Two.")
        screen.expect(PROMPT)
        assert screen.exit() == 0  # leaving cancels the hanging call
    assert title_of(memory_dir, sid) == ("My own name", "user")
    assert len(server.title_requests) == 1  # once a title is the user's, none is asked


def test_a_prompt_on_the_command_line_is_the_first_message(
    start: Any, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("Starting on it.")]) as server:
        screen = start("fix the failing test", "--base-url", server.base_url)
        sid = screen.session()
        screen.expect("You: fix the failing test")
        screen.expect("Starting on it.")
        screen.expect(PROMPT)
        assert screen.exit() == 0
        assert server.requests[0]["messages"][-1]["content"] == "fix the failing test"
    assert SessionStore(memory_dir).info(sid).user_messages == 1


def test_continue_shows_where_you_left_off(start: Any, memory_dir: Path, project: Path) -> None:
    made = seed_sessions(memory_dir, project)
    screen = start("-c", "--base-url", "http://127.0.0.1:9/v1")
    assert screen.session() == made["deploy"]
    screen.expect("Resumed with 5 messages in context.")
    screen.expect("Where you left off:")
    screen.expect(r"Assistant: The deploy code needs a rewrite\.")
    screen.ready()
    assert screen.exit() == 0


def test_opening_a_session_leaves_when_it_was_last_used(
    start: Any, memory_dir: Path, project: Path
) -> None:
    made = seed_sessions(memory_dir, project)
    before = info_of(memory_dir, made["parser"]).updated_at
    screen = start("-r", made["parser"], "--base-url", "http://127.0.0.1:9/v1")
    assert screen.session() == made["parser"]
    screen.ready()
    assert screen.exit() == 0
    assert info_of(memory_dir, made["parser"]).updated_at == before
    again = start("-c", "--base-url", "http://127.0.0.1:9/v1")  # still the latest worked in
    assert again.session() == made["deploy"]
    again.ready()
    assert again.exit() == 0


def test_a_new_session_whose_message_got_no_answer_is_not_kept(
    start: Any, memory_dir: Path, project: Path
) -> None:
    screen = start("--base-url", "http://127.0.0.1:9/v1", "--llm-timeout", "5")
    sid = screen.session()
    screen.ready()
    screen.say("hello")
    screen.expect("Error: Cannot reach the model endpoint")
    screen.expect(PROMPT)
    assert screen.exit() == 0
    assert f"Nothing was answered, so session {sid} was not kept" in screen.log.getvalue()
    with SessionStore(memory_dir) as store:
        assert not store.exists(sid)


def title_of(memory_dir: Path, session_id: str) -> tuple[str, str]:
    with SessionStore(memory_dir) as store:
        info = store.info(session_id)
    return info.title, info.title_source
