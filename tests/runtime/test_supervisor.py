"""The supervisor and its actors against the scripted server, on asyncio and trio."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.config import Mode
from actors.core.errors import ProjectMismatch, SessionArchived, SessionLocked
from actors.core.events import (
    ApprovalRequest,
    CompactionState,
    Notice,
    SessionOpened,
    StreamRestarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE
from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.store.sqlite import DB_NAME
from actors.testing.scripted_server import (
    Drop,
    Fail,
    Hang,
    Reply,
    ScriptedServer,
    ToolCall,
    tool_pairing_errors,
)
from tests.support.runtime import Recorder, pid_alive, running, settings_for, wait_for

pytestmark = pytest.mark.anyio


def tool_messages(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def assert_every_request_valid(server: ScriptedServer) -> None:
    for request in server.requests:
        if request["messages"][0]["content"].startswith("Summarize"):
            continue
        assert tool_pairing_errors(request["messages"]) == []


async def test_multi_step_tool_conversation(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "hello"})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}),
                          ToolCall("todo_append", {"text": "check the notes"})]),
        Reply("The file says hello.", usage=(120, 8)),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, price_in=1.0, price_out=2.0)
        async with running(settings) as (sup, rec):
            result = await sup.run_turn("Write and read a note")
        server.assert_done()
    assert result.ok and result.text == "The file says hello."
    assert (settings.sandbox_dir / "notes.txt").read_text() == "hello"
    assert "".join(e.text for e in rec.of(TextDelta)) == "The file says hello."
    assert [e.name for e in rec.of(ToolCallStarted)] == ["write_file", "read_file", "todo_append"]
    assert_every_request_valid(server)
    third = server.requests[2]["messages"]
    assert third[-1]["role"] == "tool" and third[-1]["content"].startswith(
        '<tool_result name="todo_append">')
    assert "1\thello" in tool_messages(third)["call_1_0"]
    assert server.requests[0]["tools"] and server.requests[0]["stream"] is True
    record = SessionStore(settings.memory_dir).load_session(sup.session_id)
    assert record["status"] == "saved"
    assert record["state"]["tool_calls"] == 3 and record["state"]["calls"] == 3
    assert record["state"]["todos"][0]["text"] == "check the notes"
    assert record["state"]["total_tokens_in"] >= 120
    assert record["state"]["total_cost_usd"] > 0.12
    assert record["summary"]  # the fallback summary was written on exit
    assert record["project_root"] == str(settings.sandbox_dir)


def wait_for_group(memory_dir: Path, timeout: float = 15) -> None:
    """Block until a started call's process group is durably recorded (read apart)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(memory_dir / DB_NAME)) as conn:
            if conn.execute("SELECT 1 FROM tool_calls WHERE pgid IS NOT NULL").fetchone():
                return
        time.sleep(0.01)
    raise AssertionError("no process group was recorded")


async def test_abort_during_a_tool_batch_recovers_without_replay(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"echo started; echo $$ > {pid_file}; sleep 30; echo finished"
    script = [
        Reply(tool_calls=[ToolCall("run_bash", {"command": command}),
                          ToolCall("write_file", {"path": "never.txt", "content": "x"})]),
        Reply("Understood."),
    ]

    bash_started = anyio.Event()

    def note_start(event: Any, sup: Supervisor) -> None:
        if isinstance(event, ToolCallStarted) and event.name == "run_bash":
            bash_started.set()

    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings, recorder=Recorder(on_event=note_start)) as (sup, _), \
                anyio.create_task_group() as tg:

            async def abort_once_running() -> None:
                await bash_started.wait()
                await anyio.to_thread.run_sync(wait_for, pid_file)  # "started" was printed
                # The tool reads its output once the group is recorded (a worker thread's
                # write, during which every task is blocked too); then it waits for more.
                await anyio.to_thread.run_sync(wait_for_group, settings.memory_dir)
                await anyio.wait_all_tasks_blocked()
                sup.abort()

            tg.start_soon(abort_once_running)
            with anyio.fail_after(10):
                result = await sup.run_turn("Run it")
            assert result.outcome == "interrupted"
            results = tool_messages(list(sup.snapshot().messages))
            bash, write = results["call_0_0"], results["call_0_1"]
            assert INTERRUPTED_NOTICE in bash and "process group was killed" in bash
            assert "started" in bash and "finished" not in bash
            assert NOT_STARTED_NOTICE in write
            assert not pid_alive(int(pid_file.read_text()))
            second = await sup.run_turn("What happened?")
            assert second.ok
        server.assert_done()
    assert not (settings.sandbox_dir / "never.txt").exists()  # not replayed, never ran
    assert_every_request_valid(server)
    saved = SessionStore(settings.memory_dir).load_session(sup.session_id)["messages"]
    assert tool_messages(saved)["call_0_1"] == write


async def test_abort_during_a_streamed_answer(tmp_path: Path) -> None:
    script = [Reply("one two three four five six seven eight nine ten " * 4, chunk_delay=0.05),
              Reply("Fine.")]

    def abort_on_text(event: Any, sup: Supervisor) -> None:
        if isinstance(event, TextDelta):
            sup.abort()

    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings, recorder=Recorder(on_event=abort_on_text)) as (sup, rec):
            with anyio.fail_after(10):
                result = await sup.run_turn("Talk")
            assert result.outcome == "interrupted"
            last = sup.snapshot().messages[-1]
            assert last["role"] == "assistant" and last["content"].endswith(
                "[interrupted by the user]")
            assert last["content"].startswith("one")
            rec.on_event = None
            assert (await sup.run_turn("Go on")).ok
    assert_every_request_valid(server)


def abort_at(text: str) -> Recorder:
    """A recorder that aborts the turn when a notice containing ``text`` arrives."""

    def abort(event: Any, sup: Supervisor) -> None:
        if isinstance(event, Notice) and text in event.text:
            sup.abort()

    return Recorder(on_event=abort)


async def test_abort_during_the_wait_before_a_retry(tmp_path: Path) -> None:
    with ScriptedServer([Fail(503)] * 5 + [Reply("Later.")]) as server:
        settings = settings_for(tmp_path, server.base_url, retry_backoff=30.0)
        async with running(settings, recorder=abort_at("retrying in 8 s")) as (sup, _):
            with anyio.fail_after(10):  # a hang guard: the five tries wait 32 s
                result = await sup.run_turn("Hello")
            assert result.outcome == "interrupted"
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "Hello"}
        assert len(server.requests) == 1


async def test_abort_while_the_turn_waits_for_a_failing_compaction(tmp_path: Path) -> None:
    """The next request would pass the budget, so the turn compacts first and waits; the
    summary request fails and waits to be retried in the compaction's own cancel scope, not
    the turn's: an abort then ends the turn at once (before, it waited for all five tries);
    the compaction goes on in the background."""
    summarising = threading.Event()
    script = [Reply("o" * 6000, usage=(3500, 1500)),
              Fail(500, expect=lambda _body: summarising.set()), *[Fail(500)] * 4]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=5000,
                                retry_backoff=30.0)
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("h" * 5000)).ok

            async def abort_in_the_summarys_retry_wait() -> None:
                assert await anyio.to_thread.run_sync(summarising.wait, 10)
                await anyio.sleep(0.1)  # its failure is answered: the wait has begun
                sup.abort()

            with anyio.fail_after(10):  # a hang guard: the summary's retries wait 32 s
                async with anyio.create_task_group() as tg:
                    tg.start_soon(abort_in_the_summarys_retry_wait)
                    result = await sup.run_turn("m" * 6000)
            assert result.outcome == "interrupted"
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "m" * 6000}
            assert rec.of(CompactionState)[-1].running  # still going


async def test_endpoint_errors_are_retried_then_reported(tmp_path: Path) -> None:
    script = [Fail(503), Drop(after_chunks=2, reply=Reply("partial answer here")),
              Reply("Recovered."), Fail(400, "bad request: model not found")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            first = await sup.run_turn("Hello")
            assert first.ok and first.text == "Recovered."
            assert any("retrying" in n.text for n in rec.of(Notice))
            assert rec.of(StreamRestarted)
            second = await sup.run_turn("Again")
            assert second.outcome == "failed"
            assert "HTTP 400" in second.text and "model not found" in second.text
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "Again"}
        server.assert_done()


async def test_a_hanging_endpoint_fails_within_the_first_token_timeout(tmp_path: Path) -> None:
    with ScriptedServer([Hang()]) as server:
        settings = settings_for(tmp_path, server.base_url, llm_timeout=0.5,
                                llm_first_token_timeout=1.0)
        async with running(settings) as (sup, _):
            with anyio.fail_after(10):
                result = await sup.run_turn("Hello?")
    assert result.outcome == "failed"
    assert "the answer did not begin within 1 s" in result.text


async def test_bad_tool_calls_become_results(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[
            ToolCall("read_file", "{not json"),
            ToolCall("launch_rockets", {}),
            ToolCall("read_file", {"path": 42}),
            ToolCall("read_file", {"path": "../../etc/passwd"}),
            ToolCall("edit_file", {"path": "missing.txt", "old_string": "a", "new_string": "b"}),
        ]),
        Reply("I see the errors."),
    ]
    with ScriptedServer(script) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            assert (await sup.run_turn("Try things")).ok
    results = list(tool_messages(server.requests[1]["messages"]).values())
    assert "not valid JSON" in results[0]
    assert "unknown tool 'launch_rockets'" in results[1]
    assert "path" in results[2] and "Error" in results[2]
    assert "outside the sandbox" in results[3]
    assert "Error" in results[4]
    assert_every_request_valid(server)


async def test_approvals_in_default_mode(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1"})]),
        Reply("Denied, fine."),
        Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "2"}),
                          ToolCall("read_file", {"path": "b.txt"})]),
        Reply("Written."),
    ]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.DEFAULT)
        recorder = Recorder(approve=False)
        async with running(settings, recorder=recorder) as (sup, rec):
            assert (await sup.run_turn("write a")).ok
            assert "Denied" in list(tool_messages(list(sup.snapshot().messages)).values())[-1]
            rec.approve = True
            assert (await sup.run_turn("write b")).ok
    assert not (settings.sandbox_dir / "a.txt").exists()
    assert (settings.sandbox_dir / "b.txt").read_text() == "2"
    assert rec.approvals == ["write_file: a.txt (1 chars)", "write_file: b.txt (1 chars)"]


async def test_accept_edits_still_asks_for_shell(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1"}),
                                ToolCall("run_bash", {"command": "echo hi"})]),
              Reply("ok")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.ACCEPT_EDITS)
        async with running(settings, recorder=Recorder(approve=False)) as (sup, rec):
            assert (await sup.run_turn("go")).ok
    assert (settings.sandbox_dir / "a.txt").exists()  # the answer "no" to its showing: moot
    assert rec.approvals == ["run_bash: echo hi"]
    [shown] = [e for e in rec.of(ApprovalRequest) if e.approved]  # the edit, shown
    assert shown.tool == "write_file" and shown.arguments["path"] == "a.txt"
    asked = [e.call_id for e in rec.events
             if isinstance(e, ApprovalRequest) and not e.approved]
    bash = [e.call_id for e in rec.events
            if isinstance(e, ToolCallStarted) and e.name == "run_bash"]
    assert asked == bash and asked[0]  # the question names the call it is about


async def test_tool_timeout_kills_the_command(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo begin; sleep 20"})]),
              Reply("Too slow.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, tool_timeout=0.5)
        async with running(settings) as (sup, rec):
            with anyio.fail_after(10):
                assert (await sup.run_turn("go")).ok
    [result] = tool_messages(server.requests[1]["messages"]).values()
    assert "Timed out after 0.5 s" in result and "begin" in result
    [finished] = rec.of(ToolCallFinished)  # one line for one call
    assert (finished.call_id, finished.ok, finished.preview) == ("call_0_0", False, "timed out")


async def test_large_output_is_cut_with_a_note(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "head -c 100000 /dev/zero | "
                                                      "tr '\\0' a; echo; echo THE-END"})]),
              Reply("Long.")]
    with ScriptedServer(script) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            assert (await sup.run_turn("go")).ok
    [result] = tool_messages(server.requests[1]["messages"]).values()
    assert len(result.encode()) < 33_000 and "output cut" in result and "THE-END" in result


async def test_limits_stop_the_loop(tmp_path: Path) -> None:
    loop = [Reply(tool_calls=[ToolCall("todo_list", {})]) for _ in range(3)]
    with ScriptedServer(loop) as server:
        settings = settings_for(tmp_path, server.base_url, max_turns=3)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("loop forever")
        server.assert_done()
    assert result.outcome == "limit" and "--max-turns" in result.text
    assert_every_request_valid(server)

    batch = [Reply(tool_calls=[ToolCall("todo_list", {}) for _ in range(3)])]
    with ScriptedServer(batch) as server:
        settings = settings_for(tmp_path, server.base_url, max_tool_calls=2)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("three calls")
    assert result.outcome == "limit" and "--max-tool-calls" in result.text
    assert "tool-call limit" in list(tool_messages(list(sup.snapshot().messages)).values())[-1]

    with ScriptedServer([Reply("pricey", usage=(1000, 1000))]) as server:
        settings = settings_for(tmp_path, server.base_url, price_in=1.0, max_cost_usd=0.5)
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("first")).ok
            result = await sup.run_turn("second")
        server.assert_done()
    assert result.outcome == "limit" and "--max-cost-usd" in result.text


async def test_resume_restores_state_and_refuses_what_it_must(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("todo_append", {"text": "finish the port"}),
                                ToolCall("write_scratchpad", {"content": "halfway"})]),
              Reply("Noted.", usage=(50, 5)),
              Reply("Still here.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            assert (await sup.run_turn("plan")).ok
            session_id = sup.session_id
            with pytest.raises(SessionLocked):
                async with Supervisor.open(settings, SessionStore(settings.memory_dir),
                                           resume=session_id):
                    pass
        async with running(settings, store, resume=session_id) as (again, _):
            restored = again.snapshot()
            assert restored.planning.todos[0].text == "finish the port"
            assert restored.planning.scratchpad == "halfway"
            assert restored.tool_calls == 2 and restored.usage.calls == 2
            assert (await again.run_turn("continue")).ok
        async with running(settings, store, continue_latest=True) as (latest, _):
            assert latest.session_id == session_id
        server.assert_done()
    assert server.requests[2]["messages"][:5] == server.requests[1]["messages"][:5]

    store.update(session_id, archived=True)
    with pytest.raises(SessionArchived):
        async with Supervisor.open(settings, store, resume=session_id):
            pass
    store.update(session_id, archived=False)
    elsewhere = settings_for(tmp_path / "other", server.base_url,
                             memory_dir=settings.memory_dir)
    with pytest.raises(ProjectMismatch):
        async with Supervisor.open(elsewhere, store, resume=session_id):
            pass
    assert store.info(session_id).status == "saved"  # refused resumes change nothing


async def test_resume_of_a_session_with_open_calls(tmp_path: Path) -> None:
    with ScriptedServer([Reply("Resumed fine.")]) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        sid = store.create_session(messages=[
            {"role": "system", "content": "sys"}, {"role": "user", "content": "go"},
        ], project_root=str(settings.sandbox_dir), status="active")
        calls = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "run_bash", "arguments": json.dumps({"command": "true"})}}
            for i in (1, 2)]}
        store.checkpoint(sid, [*store.load_context(sid), calls], planned_calls=True)
        store.mark_started(sid, ["c1"])
        async with running(settings, store, resume=sid) as (sup, rec):
            assert (await sup.run_turn("and now?")).ok
    [opened] = rec.of(SessionOpened)
    assert opened.resumed and opened.crashed_before and opened.recovered_calls == 2
    assert any("not closed cleanly" in n.text for n in rec.of(Notice))
    sent = server.requests[0]["messages"]
    assert tool_pairing_errors(sent) == []
    assert tool_messages(sent) == {"c1": INTERRUPTED_NOTICE, "c2": NOT_STARTED_NOTICE}


async def test_model_written_summary_goes_through_the_writer(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("write_session_summary",
                                         {"summary": "Goal: X. Done: Y. Next: Z."})]),
              Reply("Summarised.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("wrap up")).ok
            assert "Saved session summary." in sup.snapshot().messages[-2]["content"]
    info = SessionStore(settings.memory_dir).info(sup.session_id)
    assert info.summary == "Goal: X. Done: Y. Next: Z."  # not replaced by the fallback


# -- the lease of one run --------------------------------------------------------------------

class GatedLeaseStore(SessionStore):
    """A real SQLite store whose next lease, once taken (a real flock), waits for ``gate``
    before it returns: a test can cancel the opening task while the lease is being taken."""

    def __init__(self, memory_dir: Path) -> None:
        super().__init__(memory_dir)
        self.armed = False
        self.taken = threading.Event()
        self.gate = threading.Event()

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        with super().lease(session_id):
            if self.armed:
                self.armed = False
                self.taken.set()
                self.gate.wait(10)
            yield


async def test_a_cancel_while_the_lease_is_taken_leaves_it_free(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, "http://127.0.0.1:9/v1")  # never asked: no turn runs
    store = GatedLeaseStore(settings.memory_dir)
    sid = store.create_session(project_root=str(settings.sandbox_dir))
    store.armed = True

    held_after_open_raised: list[bool] = []

    async def open_and_stay() -> None:
        try:
            async with Supervisor.open(settings, store, resume=sid):
                await anyio.sleep_forever()
        finally:  # released by the open itself, not later by the garbage collector
            held_after_open_raised.append(store.is_leased_here(sid))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(open_and_stay)
            await anyio.to_thread.run_sync(store.taken.wait, 10)
            tg.cancel_scope.cancel()  # arrives while the worker thread is taking the lease
            store.gate.set()
    assert held_after_open_raised == [False]
    assert store.info(sid).status != "active"
    async with Supervisor.open(settings, SessionStore(settings.memory_dir), resume=sid) as sup:
        assert sup.session_id == sid  # free again, in this process too


async def test_two_opens_of_one_session_in_one_process(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, "http://127.0.0.1:9/v1")
    store = SessionStore(settings.memory_dir)
    sid = store.create_session(project_root=str(settings.sandbox_dir))
    refused: list[SessionLocked] = []
    opened: list[str] = []
    second_done = anyio.Event()

    async def open_one() -> None:
        try:
            async with Supervisor.open(settings, store, resume=sid) as sup:
                opened.append(sup.session_id)
                await second_done.wait()  # hold it until the other open has finished
        except SessionLocked as exc:
            refused.append(exc)
            second_done.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(open_one)
            tg.start_soon(open_one)
    assert opened == [sid]
    [refusal] = refused
    assert "this process" in str(refusal)
    assert not store.is_leased_here(sid)


async def test_mode_and_model_are_saved_and_restored_but_never_skip_permissions(
    tmp_path: Path,
) -> None:
    with ScriptedServer([Reply("a"), Reply("b"), Reply("c"), Reply("d")]) as server:
        settings = settings_for(tmp_path, server.base_url, mode=Mode.DEFAULT)
        async with running(settings) as (sup, rec):
            await sup.set_model("other:7b")
            await sup.set_mode(Mode.ACCEPT_EDITS)
            assert (await sup.run_turn("hi")).ok
            sid = sup.session_id
        assert server.requests[-1]["model"] == "other:7b"
        async with running(settings, resume=sid) as (sup, rec):  # taken back
            opened = await rec.wait_for(SessionOpened)
            assert (opened.mode, opened.model) == ("acceptEdits", "other:7b")
            await sup.set_mode(Mode.SKIP_PERMISSIONS)
            assert (await sup.run_turn("again")).ok
        assert server.requests[-1]["model"] == "other:7b"
        async with running(settings, resume=sid) as (sup, rec):  # never silently
            opened = await rec.wait_for(SessionOpened)
            assert opened.mode == "default"
            notice = await rec.wait_for(Notice, lambda n: "dangerouslySkip" in n.text)
            assert "runs in default now" in notice.text
            assert (await sup.run_turn("once more")).ok
        chosen = replace(settings, model="cli-model", mode=Mode.ACCEPT_EDITS,
                         chosen=frozenset({"model", "mode"}))
        async with running(chosen, resume=sid) as (sup, rec):  # the command line wins
            opened = await rec.wait_for(SessionOpened)
            assert (opened.mode, opened.model) == ("acceptEdits", "cli-model")
            assert (await sup.run_turn("last")).ok
        assert server.requests[-1]["model"] == "cli-model"
