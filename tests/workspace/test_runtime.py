"""Workspace snapshots wired through the runtime: a real supervisor against the scripted
server, real tools and real shell commands in a tmp project, on asyncio and trio."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from actors.core.config import Mode
from actors.core.events import Event, EventSink, Notice, ToolCallFinished, ToolCallStarted
from actors.core.ids import new_session_id
from actors.core.mailbox import ask
from actors.runtime.rewind import RewindRequest
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.workspace import Limits, Workspace, open_objects
from actors.workspace._diff import Trees
from actors.workspace._journal import JournalEntry
from actors.workspace.keeper import (
    Request,
    SnapshotRequest,
    Taken,
    WorkspaceClient,
    WorkspaceKeeper,
    describe_changes,
)
from tests.support.runtime import running, settings_for, wait_for

pytestmark = pytest.mark.anyio


def _files(memory: Path, root: bytes) -> dict[str, bytes]:
    objects = open_objects(memory)
    try:
        trees = Trees(objects)
        return {p: objects.load(e.oid) for p, e in trees.files(root) if e.is_content}
    finally:
        objects.close()


async def test_snapshots_at_each_message_and_around_each_side_effecting_call(
    tmp_path: Path,
) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "one\n"})]),
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo two >> a.txt; rm old.txt; mkdir -p made; echo m > made/m.txt"})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
        Reply("Done."),
        Reply("Nothing to do."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        project = settings.sandbox_dir
        (project / "old.txt").write_text("old\n")
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("Make the files")).ok
            (project / "a.txt").write_text("edited by hand\n")
            assert (await sup.run_turn("And now?")).ok
            session = sup.session_id
        server.assert_done()
    objects = open_objects(settings.memory_dir)
    marks = objects.marks.of_session(session)
    objects.close()
    kinds = [(m.kind, m.detail.get("tool", "")) for m in marks]
    assert kinds == [("message", ""), ("before", "write_file"), ("after", "write_file"),
                     ("before", "run_bash"), ("after", "run_bash"), ("message", "")]
    transcript = SessionStore(settings.memory_dir).load_session(session)["transcript"]
    first, second = marks[0].message, marks[-1].message
    assert transcript[first - 1] == {"role": "user", "content": "Make the files"}
    assert transcript[second - 1] == {"role": "user", "content": "And now?"}
    assert _files(settings.memory_dir, marks[0].root) == {"old.txt": b"old\n"}
    assert _files(settings.memory_dir, marks[4].root) == {
        "a.txt": b"one\ntwo\n", "made/m.txt": b"m\n"}
    assert _files(settings.memory_dir, marks[-1].root) == {
        "a.txt": b"edited by hand\n", "made/m.txt": b"m\n"}
    bash_call = next(e.call_id for e in rec.of(ToolCallStarted) if e.name == "run_bash")
    assert marks[3].call_id == marks[4].call_id == bash_call
    objects = open_objects(settings.memory_dir)
    changed = objects.marks.paths([marks[2].seq, marks[4].seq])
    objects.close()
    assert changed[marks[2].seq] == [("a.txt", "added")]
    assert changed[marks[4].seq] == [("a.txt", "modified"), ("made/m.txt", "added"),
                                     ("old.txt", "deleted")]
    told = "The command created made/m.txt; changed a.txt; deleted old.txt."
    at = next(i for i, e in enumerate(rec.events) if isinstance(e, Notice) and e.text == told)
    finished = next(i for i, e in enumerate(rec.events)
                    if isinstance(e, ToolCallFinished) and e.name == "run_bash")
    assert at == finished + 1  # told right after the command's result, once
    assert [n.text for n in rec.of(Notice)].count(told) == 1


async def test_an_interrupted_command_still_records_what_it_changed(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {
            "command": "echo started > half.txt; echo 1 > ready; sleep 60"})]),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        project = settings.sandbox_dir
        async with running(settings) as (sup, _rec):
            async with anyio.create_task_group() as tg:

                async def abort_when_ready() -> None:
                    await anyio.to_thread.run_sync(wait_for, project / "ready")
                    sup.abort()

                tg.start_soon(abort_when_ready)
                with anyio.fail_after(30):
                    result = await sup.run_turn("Start something long")
            assert result.outcome == "interrupted"
            session = sup.session_id
    objects = open_objects(settings.memory_dir)
    marks = objects.marks.of_session(session)
    after = [m for m in marks if m.kind == "after"]
    assert len(after) == 1
    assert objects.marks.paths([after[0].seq])[after[0].seq] == [
        ("half.txt", "added"), ("ready", "added")]
    objects.close()


async def test_snapshots_can_be_turned_off(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS,
                                workspace_snapshots=False)
        async with running(settings) as (sup, _rec):
            assert (await sup.run_turn("Write")).ok
            session = sup.session_id
    assert not (settings.memory_dir / "workspace").exists() or not open_objects(
        settings.memory_dir).marks.of_session(session)


async def test_a_snapshot_that_cannot_be_taken_warns_once_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "y"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        settings.memory_dir.mkdir(parents=True, exist_ok=True)
        (settings.memory_dir / "workspace").write_text("not a directory")
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("Write two files")).ok
    assert (settings.sandbox_dir / "b.txt").read_text() == "y"
    warnings = [n.text for n in rec.of(Notice) if "snapshots are off" in n.text]
    assert len(warnings) == 1


async def test_the_running_session_rewinds_its_files_through_the_keeper(
    tmp_path: Path,
) -> None:
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo b > b.txt; rm a.txt"})]),
        Reply("Done."),
        Reply("Rewound, then?"),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        project = settings.sandbox_dir
        (project / "a.txt").write_text("a\n")
        async with running(settings) as (sup, _rec):
            assert (await sup.run_turn("Change things")).ok
            objects = open_objects(settings.memory_dir)
            first = objects.marks.of_session(sup.session_id)[0].message
            objects.close()
            plan = await sup.plan_files_rewind(first)
            assert {(s.change.path, s.change.status) for s in plan.restore.stats} == {
                ("a.txt", "added"), ("b.txt", "deleted")}
            assert (project / "b.txt").exists()  # planning writes nothing
            outcome = await sup.rewind(RewindRequest(before=first, conversation=False,
                                                     files=True, files_plan=plan))
            done = outcome.files
            assert done is not None and outcome.messages is None
            assert sorted(p.name for p in project.iterdir()) == ["a.txt"]
            assert (await sup.run_turn("What now?")).ok  # the session goes on
            undo = await sup.plan_files_rewind(0)
            assert undo.undo and undo.restore.undo.root == done.mark.root
            await sup.rewind(RewindRequest(undo=True, files_plan=undo))
            assert sorted(p.name for p in project.iterdir()) == ["b.txt"]
            session = sup.session_id
    objects = open_objects(settings.memory_dir)
    kinds = [m.kind for m in objects.marks.of_session(session)]
    objects.close()
    assert kinds == ["message", "before", "after", "rewind", "message", "rewind"]


async def test_an_interrupted_rewind_that_cannot_be_taken_up_is_said_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        settings.memory_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        objects = open_objects(settings.memory_dir)
        workspace = Workspace(settings.sandbox_dir, settings.memory_dir, objects)
        missing = "ab" * 20  # snapshots the store does not have: they cannot be read
        entry = JournalEntry(target=missing, undo="cd" * 20, project=workspace.project,
                             session="another")
        workspace.journal.begin(entry)
        objects.marks.add("another", "rewind", 1, bytes.fromhex(missing), call_id=entry.id,
                          detail={"undo": missing})  # recorded: it must be taken up
        workspace.close()
        objects.close()
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("Write")).ok
    assert (settings.sandbox_dir / "a.txt").read_text() == "x"
    said = [n.text for n in rec.of(Notice) if "could not be taken up now" in n.text]
    assert len(said) == 1 and "is missing" in said[0]
    assert not [n for n in rec.of(Notice) if "snapshots are off" in n.text]
    assert workspace.journal.pending() is not None  # kept for the next start


async def test_the_files_command_shows_what_each_call_changed(tmp_path: Path) -> None:
    from repl.interactive.command_context import CommandContext
    from repl.interactive.commands import run_command
    from repl.interactive.view import SessionView

    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo one > a.txt"})]),
        Reply(tool_calls=[ToolCall("edit_file", {"path": "a.txt", "old_string": "one",
                                                 "new_string": "two"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _rec):
            assert (await sup.run_turn("Write and edit")).ok
            ctx = CommandContext(sup, store, SessionView(session_id=sup.session_id))
            listed = await run_command(ctx, "\\files")
            with_diff = await run_command(ctx, "/files diff")
            wrong = await run_command(ctx, "\\files everything")
            info = await run_command(ctx, "\\info")
    lines = listed.text.splitlines()
    assert lines[0] == "Files changed by tool calls:"
    assert lines[2] == "    A a.txt" and lines[4] == "    M a.txt"
    assert ", run_bash " in lines[1] and ", edit_file " in lines[3]
    assert "      -one" in with_diff.text.splitlines() and with_diff.paged
    assert wrong.error and wrong.text == "Usage: \\files [diff]"
    assert info.text.splitlines()[-1] == (
        "Files:        1 changed by 2 tool calls (\\files lists them)")


async def test_the_supervisor_rewinds_files_then_the_conversation(tmp_path: Path) -> None:
    from actors.core.errors import UsageError

    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": "echo b > b.txt"})]),
        Reply("Done."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.SKIP_PERMISSIONS)
        project = settings.sandbox_dir
        async with running(settings) as (sup, _rec):
            assert (await sup.run_turn("Make b")).ok
            number = (await sup.rewind_points())[0].number
            plan = await sup.plan_files_rewind(number)
            with pytest.raises(UsageError, match="Plan the files' rewind"):
                await sup.rewind(RewindRequest(before=number, files=True))  # no plan shown
            assert (project / "b.txt").exists()
            outcome = await sup.rewind(RewindRequest(before=number, files=True,
                                                     files_plan=plan))
            assert outcome.files_restored == 1 and outcome.fork_id
            assert not (project / "b.txt").exists()
            assert [m["role"] for m in sup.snapshot().messages] == ["system"]
            session = sup.session_id
    objects = open_objects(settings.memory_dir)
    kinds = [m.kind for m in objects.marks.of_session(session)]
    objects.close()
    assert kinds[-2:] == ["rewind", "conversation"]  # both halves recorded


async def test_a_before_asked_right_after_a_walk_is_that_walk_and_later_ones_walk(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    memory = tmp_path / "memory"
    store = SessionStore(memory)
    session = new_session_id()
    store.create_session(session, [{"role": "system", "content": "s"}],
                         project_root=str(project))
    send, receive = anyio.create_memory_object_stream[Request](8)
    keeper = WorkspaceKeeper(project=project, memory_dir=memory, store=store,
                             session_id=session, events=EventSink(None))

    async def before(call_id: str, asked_at: float) -> Taken | None:
        taken: Taken | None = await ask(send, lambda reply: SnapshotRequest(
            "before", call_id, "run_bash", 0, reply, asked_at=asked_at), "keeper")
        return taken

    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run, receive)
        client = WorkspaceClient(send)
        first = await client.snapshot("after", "c0", "run_bash")
        assert first is not None and first.seconds > 0
        (project / "a.txt").write_text("by hand\n")
        # Asked as the next call of a batch is (at once): the last walk again, no walk.
        reused = await before("c1", asked_at=0.0)
        assert reused is not None and (reused.root, reused.seconds) == (first.root, 0.0)
        after = await client.snapshot("after", "c1", "run_bash")
        assert after is not None  # the edit in the gap is told with the call, not lost
        assert [c.path for c in after.changes] == ["a.txt"]
        (project / "b.txt").write_text("b\n")
        # Asked longer after the last walk than it took (a model's answer, an approval).
        walked = await before("c2", asked_at=time.monotonic() + 3600)
        assert walked is not None and walked.root != after.root and walked.seconds > 0
        client.close()
    objects = open_objects(memory)
    kinds = [(m.kind, m.call_id, m.root) for m in objects.marks.of_session(session)]
    objects.close()
    assert kinds == [("after", "c0", first.root), ("before", "c1", first.root),
                     ("after", "c1", after.root), ("before", "c2", walked.root)]
    store.close()


async def test_what_a_command_changed_never_claims_a_deletion_it_did_not_see(
    tmp_path: Path,
) -> None:
    """A command that takes the project past the entry cap: the directory no longer looked
    in is not reported deleted (its files are still there), and the cap is said once."""
    project = tmp_path / "project"
    (project / "bulk" / "deep").mkdir(parents=True)
    for i in range(10):
        (project / "bulk" / f"b{i}.txt").write_text(f"{i}\n")
    (project / "bulk" / "deep" / "x.txt").write_text("x\n")
    memory = tmp_path / "memory"
    store = SessionStore(memory)
    session = new_session_id()
    store.create_session(session, [{"role": "system", "content": "s"}],
                         project_root=str(project))
    send, receive = anyio.create_memory_object_stream[Request](8)
    events_send, events_receive = anyio.create_memory_object_stream[Event](16)
    keeper = WorkspaceKeeper(project=project, memory_dir=memory, store=store,
                             session_id=session, events=EventSink(events_send),
                             limits=Limits(max_entries=20))
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run, receive)
        client = WorkspaceClient(send)
        assert await client.snapshot("before", "c1", "run_bash") is not None
        for i in range(10, 25):  # what the command does: bulk/deep is past the cap now
            (project / "bulk" / f"b{i}.txt").write_text(f"{i}\n")
        after = await client.snapshot("after", "c1", "run_bash")
        client.close()
    events_send.close()
    assert after is not None
    assert {c.status for c in after.changes} == {"added"}
    assert len(after.changes) == 15 and after.unscanned == ("bulk/deep",)
    assert "deleted" not in describe_changes(after.changes)
    async with events_receive:
        said = [e.text for e in [e async for e in events_receive] if isinstance(e, Notice)]
    assert len(said) == 1 and "did not look in 1 directory (bulk/deep)" in said[0]
    objects = open_objects(memory)
    recorded = objects.marks.paths(m.seq for m in objects.marks.of_session(session))
    objects.close()
    assert all(status == "added" for paths in recorded.values() for _p, status in paths)
    store.close()
