"""The tool executor (actors/runtime/tool_executor.py) on its own, with a real checkpoint
writer and SQLite store: one outcome and one ``ToolCallFinished`` per call, timeouts and
cancellation on the event loop's clock, and a crash of the executor ending in the store's
recovery of the calls it did not answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.config import Mode
from actors.core.errors import ActorCrashed
from actors.core.events import Event, EventSink, ToolCallFinished, ToolCallStarted
from actors.core.mailbox import ask
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE, Message
from actors.core.planning import Planning
from actors.core.turn import Turn
from actors.runtime.checkpoint_writer import CheckpointClient, Write, run_checkpoint_writer
from actors.runtime.context import WorkingContext
from actors.runtime.recovery import answer_batch, save_batch
from actors.runtime.tool_executor import BatchOutcome, ToolBatch, ToolExecutor, without_effects
from actors.store import SessionStore
from actors.tools import Permission, Tool, ToolContext
from tests.support.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "memory") as opened:
        yield opened


ran: list[str] = []
waiting: list[anyio.Event] = []  # set when the "wait" tool has started


async def note(ctx: ToolContext, args: dict[str, Any]) -> str:
    ran.append("note")
    return "noted"


async def wait_forever(ctx: ToolContext, args: dict[str, Any]) -> str:
    ran.append("wait")
    ctx.progress.append("half done")
    for event in waiting:
        event.set()
    await anyio.Event().wait()
    return "never"


async def broken(ctx: ToolContext, args: dict[str, Any]) -> str:
    ran.append("broken")
    return cast(str, None)  # a tool bug the executor does not expect: not a string


TOOLS = {
    "note": Tool("note", "Note.", NO_ARGS, note),
    "wait": Tool("wait", "Waits.", NO_ARGS, wait_forever),
    "broken": Tool("broken", "Returns nothing.", NO_ARGS, broken),
}


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


@dataclass
class Harness:
    store: SessionStore
    sid: str
    writer: CheckpointClient
    tools: MemoryObjectSendStream[ToolBatch]
    events: list[Event]
    context: WorkingContext

    async def batch(self, calls: list[dict[str, Any]], turn: Turn | None = None,
                    allowed: int = 100) -> BatchOutcome:
        """Save the assistant message with ``calls`` (write-ahead: planned), run them."""
        self.context.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        at, new = self.context.unsaved()  # as the supervisor saves
        await self.writer.append(new, at=at, planned_calls=True)
        self.context.saved_len = at + len(new)
        outcome: BatchOutcome = await ask(
            self.tools, lambda reply: ToolBatch(calls, turn or Turn(), allowed, reply),
            "tool executor",
        )
        return outcome

    def finished(self) -> list[tuple[str, bool, str]]:
        return [(e.call_id, e.ok, e.preview) for e in self.events
                if isinstance(e, ToolCallFinished)]


@asynccontextmanager
async def harness(store: SessionStore, tmp_path: Path, *, tool_timeout: float = 600,
                  mode: Mode = Mode.SKIP_PERMISSIONS) -> AsyncIterator[Harness]:
    ran.clear()
    waiting.clear()
    messages: list[Message] = [{"role": "system", "content": "sys"},
                               {"role": "user", "content": "go"}]
    sid = store.create_session(messages=messages)
    writes, writer_inbox = anyio.create_memory_object_stream[Write](16)
    batches, tools_inbox = anyio.create_memory_object_stream[ToolBatch](1)
    events_send, events_receive = anyio.create_memory_object_stream[Event](100)
    seen: list[Event] = []
    executor = ToolExecutor(
        mode=mode, timeout=tool_timeout, max_output_bytes=32_000, sandbox=tmp_path,
        memory_dir=tmp_path / "memory", store=store.reader,
        writer=CheckpointClient(writes.clone(), sid), events=EventSink(events_send),
        planning=Planning(), tools=TOOLS,
    )

    async def collect() -> None:
        async with events_receive:
            async for event in events_receive:
                seen.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        await tg.start(run_checkpoint_writer, store, writer_inbox)
        await tg.start(executor.run, tools_inbox)
        writer = CheckpointClient(writes, sid)
        context = WorkingContext(messages=list(messages), saved_len=len(messages))
        try:
            yield Harness(store, sid, writer, batches, seen, context)
        finally:
            batches.close()
            writer.close()
            events_send.close()


async def test_every_call_gets_one_outcome_and_one_finished_event(
    store: SessionStore, tmp_path: Path
) -> None:
    async with harness(store, tmp_path) as h:
        batch = await h.batch([call("a", "note"), call("b", "nosuch"), call("c", "note")],
                              allowed=2)
    assert [(o.call_id, o.status) for o in batch.outcomes] == [
        ("a", "done"), ("b", "failed"), ("c", "over_limit")]
    assert batch.error is None and batch.crash is None
    assert [(e.call_id, e.name) for e in h.events if isinstance(e, ToolCallStarted)] == [
        ("a", "note"), ("b", "nosuch")]
    assert h.finished() == [("a", True, "noted"),
                            ("b", False, "Error: unknown tool 'nosuch'. Tools: broken, note, "
                             "wait."),
                            ("c", False, "over limit")]
    assert ran == ["note"]


async def test_a_timeout_is_on_the_event_loops_clock(store: SessionStore, tmp_path: Path) -> None:
    async with harness(store, tmp_path, tool_timeout=120) as h:
        batch = await h.batch([call("a", "wait"), call("b", "note")])
        elapsed = anyio.current_time()
    [waited, noted] = batch.outcomes
    assert waited.status == "timed_out" and "Timed out after 120 s" in waited.content
    assert "half done" in waited.content and noted.status == "done"
    assert elapsed >= 120  # virtual seconds: the test took no such time
    assert h.finished() == [("a", False, "timed out"), ("b", True, "noted")]


async def test_a_cancelled_turn_answers_interrupted_and_not_started(
    store: SessionStore, tmp_path: Path
) -> None:
    turn = Turn()
    async with harness(store, tmp_path) as h:

        started = anyio.Event()
        waiting.append(started)

        async def cancel_when_waiting() -> None:
            await started.wait()
            turn.cancel("interrupted by the user")

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_waiting)
            batch = await h.batch([call("a", "note"), call("b", "wait"), call("c", "note")],
                                  turn)
    assert [(o.call_id, o.status) for o in batch.outcomes] == [
        ("a", "done"), ("b", "interrupted"), ("c", "not_started")]
    interrupted, not_started = batch.outcomes[1].content, batch.outcomes[2].content
    assert INTERRUPTED_NOTICE in interrupted and "half done" in interrupted
    assert NOT_STARTED_NOTICE in not_started
    assert h.finished() == [("a", True, "noted"), ("b", False, "interrupted"),
                            ("c", False, "not started")]
    assert ran == ["note", "wait"]


async def test_a_batch_of_a_turn_cancelled_before_it_starts_runs_nothing(
    store: SessionStore, tmp_path: Path
) -> None:
    turn = Turn()
    turn.cancel("interrupted by the user")
    async with harness(store, tmp_path) as h:
        batch = await h.batch([call("a", "note"), call("b", "note")], turn)
    assert [o.status for o in batch.outcomes] == ["not_started", "not_started"]
    assert ran == [] and not [e for e in h.events if isinstance(e, ToolCallStarted)]


async def test_an_executor_crash_ends_in_the_stores_recovery(
    store: SessionStore, tmp_path: Path
) -> None:
    calls = [call("a", "note"), call("b", "broken"), call("c", "note")]
    async with harness(store, tmp_path) as h:
        batch = await h.batch(calls)
        assert isinstance(batch.crash, ActorCrashed)
        assert "tool executor failed (AttributeError" in str(batch.crash)
        assert [o.call_id for o in batch.outcomes] == ["a"]  # decided before the crash
        answer_batch(h.context, calls, batch)  # as the supervisor settles a batch
        failure = await save_batch(h.context, h.writer)
        next_batch = await h.batch([call("d", "note")])  # the executor goes on serving
    assert failure is None
    results = {m["tool_call_id"]: m["content"] for m in h.context.messages
               if m["role"] == "tool"}
    assert "noted" in results["a"]
    assert results["b"] == INTERRUPTED_NOTICE  # it was started: the outcome is unknown
    assert results["c"] == NOT_STARTED_NOTICE  # only planned: safe to retry
    assert h.context.tool_calls == 1
    saved = store.load_context(h.sid)
    assert [m for m in saved if m["role"] == "tool"][:3] == [
        m for m in h.context.messages if m["role"] == "tool"][:3]
    assert ran == ["note", "broken", "note"]  # c never ran; d did, in the next batch
    assert next_batch.outcomes[0].status == "done"


async def edit(ctx: ToolContext, args: dict[str, Any]) -> str:
    ran.append("edit")
    return "edited"


async def test_a_batch_whose_answer_is_not_saved_runs_only_reads_without_records(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(TOOLS, "edit", Tool("edit", "Edits.", NO_ARGS, edit,
                                            permission=Permission.EDIT))
    started: list[list[str]] = []
    mark_started = store.mark_started
    monkeypatch.setattr(store, "mark_started", lambda sid, ids: (
        started.append(list(ids)), mark_started(sid, ids))[-1])
    calls = [call("a", "note"), call("b", "edit"), call("c", "broken")]
    async with harness(store, tmp_path) as h:
        outcome: BatchOutcome = await ask(
            h.tools, lambda reply: ToolBatch(calls, Turn(), 100, reply, answer_saved=False),
            "tool executor")
        assert [o.status for o in outcome.outcomes] == ["done", "not_started"]
        assert isinstance(outcome.crash, ActorCrashed)  # "broken" is a read with a bug
        # the answer is saved with what was decided; the call left open: outcome unknown
        h.context.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        answer_batch(h.context, calls, outcome)
        assert await save_batch(h.context, h.writer) is None
        assert await h.batch([call("d", "note")])  # an answer saved first: recorded
    assert ran == ["note", "broken", "note"]  # the edit never ran
    assert started == [["d"]]
    results = {m["tool_call_id"]: m["content"] for m in store.load_context(h.sid)
               if m["role"] == "tool"}
    assert "noted" in results["a"] and NOT_STARTED_NOTICE in results["b"]
    assert results["c"] == INTERRUPTED_NOTICE
    assert without_effects([call("a", "note"), call("x", "nosuch")], Mode.DEFAULT, TOOLS)
    assert not without_effects(calls, Mode.SKIP_PERMISSIONS, TOOLS)
