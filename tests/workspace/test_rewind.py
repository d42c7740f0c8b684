"""Rewinding a session's files headless: a real session (scripted server, real tools and
shell commands in a tmp project), then ``harness --rewind ID --to N --files``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.errors import UsageError
from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.workspace import Workspace, apply_rewind, open_objects, plan_rewind
from actors.workspace._housekeeping import collect
from repl.cli import main
from tests.support.children import read_line
from tests.support.project_files import listing, record_two_turns
from tests.support.runtime import settings_for

REPO = Path(__file__).resolve().parents[2]


class Session:
    """A finished session of two user messages and what the files were at each point."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.memory = tmp_path / "memory"
        self.project = tmp_path / "project"
        self.id = ""
        self.at: dict[str, dict[str, object]] = {}
        self.numbers: list[int] = []

    def cli(self, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
        status = main([*args, "--memory-dir", str(self.memory), "--sandbox-dir",
                       str(self.project)])
        out, err = capsys.readouterr()
        return status, out, err


def _run_session(tmp_path: Path) -> Session:
    session = Session(tmp_path)
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo two >> notes.txt; rm old.txt; mkdir -p src/new; "
                       "echo code > src/new/mod.py"})]),
        Reply("First done."),
        Reply(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "rewritten\n"}),
                          ToolCall("run_bash", {"command": "rm -r src; echo x > extra.txt"})]),
        Reply("Second done."),
    ]

    recorded = record_two_turns(tmp_path, script, {"notes.txt": "one\n", "old.txt": "old\n"})
    session.id = recorded.session_id
    session.at = {"start": recorded.start, "after first": recorded.after_first,
                  "end": recorded.end}
    transcript = SessionStore(session.memory).load_session(session.id)["transcript"]
    session.numbers = [i + 1 for i, m in enumerate(transcript) if m["role"] == "user"]
    return session


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return _run_session(tmp_path)


def test_rewind_files_to_a_message_then_undo(session: Session,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    first, second = session.numbers
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 "--dry-run", capsys=capsys)
    assert status == 0
    assert "Would rewind the files of session" in out and "Nothing was changed" in out
    assert listing(session.project) == session.at["end"]  # a dry run writes nothing
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 capsys=capsys)
    assert status == 0, out
    assert listing(session.project) == session.at["start"]  # created, changed, deleted
    assert f"To undo: harness --rewind {session.id} --undo" in out
    status, out, _ = session.cli("--rewind", session.id, "--to", str(second), "--files",
                                 capsys=capsys)
    assert status == 0
    assert listing(session.project) == session.at["after first"]
    status, _out, _ = session.cli("--rewind", session.id, "--undo", capsys=capsys)
    assert status == 0
    assert listing(session.project) == session.at["start"]
    status, _out, _ = session.cli("--rewind", session.id, "--undo", capsys=capsys)
    assert status == 0  # an undo is a rewind too: undone in turn
    assert listing(session.project) == session.at["after first"]


def test_the_diffstat_comes_first_and_hand_edits_are_flagged(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second = session.numbers
    (session.project / "extra.txt").write_text("the user kept working on this\n")
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 "--dry-run", "--json", capsys=capsys)
    assert status == 0
    report: dict[str, Any] = json.loads(out)
    files = {f["path"]: f for f in report["files"]}
    assert files["notes.txt"]["action"] == "restored"
    assert files["old.txt"]["action"] == "brought back"
    assert files["extra.txt"]["action"] == "removed"
    assert files["extra.txt"]["hand_edited"] is True
    assert files["notes.txt"]["hand_edited"] is False
    assert report["dry_run"] is True and report["done"] is False
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 capsys=capsys)
    assert "extra.txt  removed  +0 -1  (changed since the session last saw it)" in out
    assert "1 changed since the session last saw them (by hand?); a copy was kept first." in out
    session.cli("--rewind", session.id, "--undo", capsys=capsys)
    assert (session.project / "extra.txt").read_text() == "the user kept working on this\n"


def test_user_mistakes_exit_2_with_one_line(session: Session,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    first, _second = session.numbers
    cases = [
        (["--rewind", session.id, "--to", "1", "--files"], "No snapshot of the files was "
         f"taken at message 1 of session {session.id}; messages with one (what you typed): "
         f"{', '.join(map(str, session.numbers))}."),
        (["--rewind", session.id, "--to", str(first)], "Say what to rewind"),
        (["--rewind", session.id, "--files"], "needs --to N"),
        (["--to", str(first), "--files"], "--to and --files/--conversation/--both go with "
         "--rewind ID"),
        (["--dry-run"], "--dry-run goes with --rewind ID"),
        (["--rewind", session.id, "--to", "99", "--files"], f"Session {session.id} has no "
         "message 99 (its messages are numbered 1 to"),
        (["--rewind", "nosuchsession", "--to", "2", "--files"], "nosuchsession"),
        (["--rewind", session.id, "--undo"], "has no rewind of files to undo"),
    ]
    for argv, said in cases:
        status, out, err = session.cli(*argv, capsys=capsys)
        assert status == 2, (argv, out, err)
        assert said in err and err.count("\n") == 1, (argv, err)
        assert listing(session.project) == session.at["end"]


@pytest.mark.slow
def test_a_running_session_is_not_rewound_behind_its_back(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second = session.numbers
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.programs.lease_holder", str(session.memory),
         session.id],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "AGENT_HARNESS_STORE": "sqlite"},
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        assert read_line(holder.stdout) == "held\n"
        status, _out, err = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                        capsys=capsys)
        holder.stdin.close()
        holder.wait(timeout=30)
    assert status == 2 and "is in use by another process" in err
    assert listing(session.project) == session.at["end"]


def test_info_export_and_search_show_what_each_call_changed(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = session.numbers
    status, out, _ = session.cli("--info", session.id, "--files", capsys=capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "Files changed by tool calls:"
    bash_calls = [i for i, line in enumerate(lines) if ", run_bash " in line]
    assert len(bash_calls) == 2
    assert lines[bash_calls[0]].startswith(f"  message {first + 1}, run_bash ")
    assert lines[bash_calls[0] + 1 : bash_calls[0] + 4] == [
        "    M notes.txt", "    D old.txt", "    A src/new/mod.py"]
    assert "    A extra.txt" in lines and "    D src/new/mod.py" in lines
    status, out, _ = session.cli("--info", session.id, "--files", "--diff", capsys=capsys)
    assert "      +two" in out.splitlines() and "      -old" in out.splitlines()
    status, out, _ = session.cli("--info", session.id, "--files", "--json", capsys=capsys)
    calls = json.loads(out)["calls"]
    assert [c["tool"] for c in calls] == ["run_bash", "write_file", "run_bash"]
    assert calls[1]["message"] > second
    assert calls[1]["paths"] == [{"path": "notes.txt", "status": "modified"}]

    status, out, _ = session.cli("--search", "src", "--files", capsys=capsys)
    assert out.startswith(f"{session.id} | ") and out.rstrip().endswith("2 calls changed src")
    status, out, _ = session.cli("--search", "no/such/path.txt", "--files", capsys=capsys)
    assert out == "No session's tool calls changed no/such/path.txt.\n"

    status, out, _ = session.cli("--export", session.id, "--files", capsys=capsys)
    record = json.loads(out)
    assert [c["tool"] for c in record["files_changed"]] == ["run_bash", "write_file",
                                                            "run_bash"]
    status, out, _ = session.cli("--export", session.id, "--files", "--format", "markdown",
                                 capsys=capsys)
    assert "## Files changed by tool calls" in out and "    D old.txt" in out


def test_doctor_reports_and_collects_the_snapshots_of_deleted_sessions(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = session.cli("--doctor", capsys=capsys)
    assert status == 0
    assert "Workspace snapshots: " in out and f"largest: {session.id} " in out
    assert "deleted session(s)" not in out
    assert session.cli("--delete", session.id, "--yes", capsys=capsys)[0] == 0
    status, out, _ = session.cli("--doctor", capsys=capsys)
    assert "1 deleted session(s) still have snapshots" in out
    objects = open_objects(session.memory)
    before = objects.usage()
    objects.close()
    status, out, _ = session.cli("--doctor", "--repair", capsys=capsys)
    assert status == 0
    assert "Workspace snapshots collected: 1 deleted session(s)" in out
    objects = open_objects(session.memory)
    try:
        assert objects.marks.of_session(session.id) == []
        # Just taken: within the grace period, so a snapshot being taken is never lost.
        assert objects.usage().objects == before.objects
        done = collect(objects, lambda _sid: False, grace_seconds=-10)
        assert done.collected.kept == 0 and objects.usage().objects == 0
    finally:
        objects.close()


def test_a_fork_rewinds_to_the_snapshots_taken_before_it(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second = session.numbers
    fork_id = SessionStore(session.memory).fork(session.id)
    status, _out, err = session.cli("--rewind", fork_id, "--to", str(first), "--files",
                                   capsys=capsys)
    assert status == 0, err
    assert listing(session.project) == session.at["start"]


def _context(session: Session) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = SessionStore(session.memory).load_context(session.id)
    return messages


def test_rewind_the_conversation_or_both(session: Session,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    first, second = session.numbers
    context = _context(session)
    status, out, _ = session.cli("--rewind", session.id, "--to", str(second), "--both",
                                 "--dry-run", capsys=capsys)
    assert status == 0 and "The conversation would go back to before message" in out
    assert _context(session) == context and listing(session.project) == session.at["end"]

    status, out, _ = session.cli("--rewind", session.id, "--to", str(second),
                                 "--conversation", "--json", capsys=capsys)
    report = json.loads(out)
    assert status == 0 and report["conversation"]["rewound"] is True
    assert _context(session) == context[: second - 1]  # the context ends before it
    assert listing(session.project) == session.at["end"]  # the files stay
    fork = report["conversation"]["fork_id"]
    assert SessionStore(session.memory).load_context(fork) == context  # nothing lost

    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--both",
                                 capsys=capsys)
    assert status == 0, out
    assert listing(session.project) == session.at["start"]
    assert [m["role"] for m in _context(session)] == ["system"]
    assert "The conversation now ends before message" in out
    status, _out, err = session.cli("--rewind", session.id, "--to", "3", "--both",
                                    capsys=capsys)
    assert status == 2 and "is not one you typed" in err


def test_a_rewind_of_both_cut_between_its_halves_is_finished_by_the_next_command(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second = session.numbers
    store = SessionStore(session.memory)
    context = _context(session)
    objects = open_objects(session.memory, store)
    workspace = Workspace(session.project, session.memory, objects)
    apply_rewind(workspace, plan_rewind(workspace, session.id, first),
                 with_conversation=True)  # what a kill -9 after the files' half leaves
    workspace.close()
    objects.close()
    assert _context(session) == context
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 "--dry-run", capsys=capsys)
    assert status == 0  # a dry run says what the next command does, and does nothing
    assert (f"A rewind of session {session.id} to message {first} was interrupted after its "
            "files were rewound; the next command finishes it") in out
    assert _context(session) == context
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 capsys=capsys)
    assert status == 0
    assert (f"A rewind of session {session.id} to message {first} was interrupted after its "
            "files were rewound; it has been finished: the conversation now ends before "
            f"message {first} too (what came after is kept in session ") in out
    assert _context(session) == context[: first - 1]
    assert listing(session.project) == session.at["start"]
    status, out, _ = session.cli("--rewind", session.id, "--to", str(first), "--files",
                                 "--dry-run", capsys=capsys)
    assert status == 0 and "was interrupted" not in out  # said once
    assert _context(session) == context[: first - 1]


def test_a_session_without_a_project_is_tied_to_the_first_it_is_resumed_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older record (no project recorded) resumed in A gets A; from B it can neither be
    resumed nor rewound, and A's snapshots never reach B."""
    memory = tmp_path / "memory"
    store = SessionStore(memory)
    session = "older-record"
    store.create_session(session, [{"role": "system", "content": "older"}])
    store.close()
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    (b / "mine.txt").write_text("b's own\n")
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]),
              Reply("Done.")]

    async def resume_in_a() -> None:
        with ScriptedServer(script) as server:
            settings = settings_for(tmp_path / "run", server.base_url, memory_dir=memory,
                                    sandbox_dir=a)
            a.mkdir()
            (a / "a.txt").write_text("a's own\n")
            async with Supervisor.open(settings, SessionStore(memory), resume=session) as sup:
                assert (await sup.run_turn("Write x")).ok

    anyio.run(resume_in_a)
    assert SessionStore(memory).info(session).project_root == str(a.resolve())
    typed = SessionStore(memory).user_messages(session)[0].number
    before_b = listing(b)
    status = main(["--rewind", session, "--to", str(typed), "--files", "--memory-dir",
                   str(memory), "--sandbox-dir", str(b)])
    err = capsys.readouterr().err
    assert status == 2 and f"belongs to the project {a.resolve()}" in err
    assert err.count("\n") == 1
    assert listing(b) == before_b
    status = main(["-p", "hi", "--resume", session, "--memory-dir", str(memory),
                   "--sandbox-dir", str(b), "--base-url", "http://127.0.0.1:9"])
    assert status == 2 and "belongs to another project" in capsys.readouterr().err
    # The snapshots themselves say where they were taken.
    objects = open_objects(memory)
    workspace = Workspace(b, memory, objects)
    try:
        with pytest.raises(UsageError, match="belong to the project"):
            plan_rewind(workspace, session, typed)
    finally:
        workspace.close()
        objects.close()
    status = main(["--rewind", session, "--to", str(typed), "--files", "--memory-dir",
                   str(memory), "--sandbox-dir", str(a)])
    assert status == 0, capsys.readouterr().err
    assert listing(a) == {"a.txt": (b"a's own\n", False)}
