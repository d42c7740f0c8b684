"""The checkpoint writer (actors/runtime/checkpoint_writer.py) on its own, against a real
SQLite store: arrival order, typed errors in its answers, and cancellation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from actors.core.errors import ActorCrashed, ActorGone, ContextConflict, SessionNotFound
from actors.runtime.checkpoint_writer import (
    INDEX_BACKLOG,
    INDEX_IDLE_SECONDS,
    CheckpointClient,
    Write,
    run_checkpoint_writer,
)
from actors.store import SessionStore
from tests.stores import pending_index
from tests.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio
SYSTEM = {"role": "system", "content": "sys"}


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "memory") as opened:
        yield opened


async def test_writes_land_in_order_and_errors_come_back_typed(store: SessionStore) -> None:
    sid = store.create_session(messages=[SYSTEM])
    send, receive = anyio.create_memory_object_stream[Write](16)
    async with anyio.create_task_group() as tg:
        await tg.start(run_checkpoint_writer, store, receive)
        client = CheckpointClient(send, sid)
        first = [SYSTEM, {"role": "user", "content": "one"}]
        second = [*first, {"role": "assistant", "content": "two"}]
        async with anyio.create_task_group() as callers:  # queued together, served in order
            callers.start_soon(client.checkpoint, first)
            await anyio.lowlevel.checkpoint()
            callers.start_soon(client.checkpoint, second)
        with pytest.raises(ContextConflict):  # does not extend the saved context
            await client.checkpoint([SYSTEM, {"role": "user", "content": "rewritten"}])
        other = CheckpointClient(send.clone(), "nosuchsession")
        with pytest.raises(SessionNotFound):
            await other.update(title="x")
        other.close()
        with pytest.raises(ActorCrashed, match=r"checkpoint writer failed \(ZeroDivisionError"):
            await client.call(lambda s, _: 1 // 0)
        await client.update(title="still serving")
        client.close()
    assert store.load_context(sid) == second
    assert store.info(sid).title == "still serving"


async def test_a_cancelled_writer_refuses_queued_writes(store: SessionStore) -> None:
    sid = store.create_session(messages=[SYSTEM])
    started, gate = threading.Event(), threading.Event()
    ran: list[str] = []
    outcomes: dict[str, str] = {}

    def slow(s: Any, _: str) -> None:
        started.set()
        gate.wait(10)
        ran.append("slow")
        s.update(sid, title="slow write landed")

    async def write(name: str, operation: Any) -> None:
        try:
            await client.call(operation)
            outcomes[name] = "answered"
        except ActorGone:
            outcomes[name] = "ActorGone"

    send, receive = anyio.create_memory_object_stream[Write](16)
    client = CheckpointClient(send, sid)
    async with anyio.create_task_group() as callers, anyio.create_task_group() as writer:
        await writer.start(run_checkpoint_writer, store, receive)
        callers.start_soon(write, "slow", slow)
        await anyio.to_thread.run_sync(started.wait, 10)
        for name in ("queued-1", "queued-2"):
            callers.start_soon(write, name, lambda s, _, name=name: ran.append(name))
        await anyio.wait_all_tasks_blocked()  # both queued behind the slow one
        writer.cancel_scope.cancel()
        gate.set()
    assert ran == ["slow"]  # the write that had started finished; the queued ones never ran
    assert store.info(sid).title == "slow write landed"
    # the one that landed says so (its answer needs no wait); the refused ones are gone
    assert outcomes == {"slow": "answered", "queued-1": "ActorGone", "queued-2": "ActorGone"}
    send.close()


async def test_the_index_catches_up_when_the_writer_is_idle(store: SessionStore) -> None:
    sid = store.create_session(messages=[SYSTEM])
    send, receive = anyio.create_memory_object_stream[Write](16)
    async with anyio.create_task_group() as tg:
        await tg.start(run_checkpoint_writer, store, receive)
        client = CheckpointClient(send, sid)
        await client.append([{"role": "user", "content": "platypus"}], at=1)
        assert pending_index(store) == 1  # the checkpoint itself wrote no postings
        await anyio.sleep(INDEX_IDLE_SECONDS * 2)  # idle: the writer started indexing
        await client.update(title="served after the batch under way")
        assert pending_index(store) == 0 and store.unindexed == 0
        # a backlog is indexed at once after the write that made it, idle or not
        many = [{"role": "user", "content": f"echidna {i}"} for i in range(INDEX_BACKLOG)]
        await client.append(many, at=2)
        await client.update(title="after the backlog")  # served after one batch at most
        assert pending_index(store) == 0
        await client.append([{"role": "user", "content": "last words"}], at=2 + INDEX_BACKLOG)
        client.close()  # closing: the writer catches up before it ends
    assert pending_index(store) == 0
    assert [r["id"] for r in store.search_sessions("echidna 3")] == [sid]
