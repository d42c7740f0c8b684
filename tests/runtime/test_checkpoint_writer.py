"""The checkpoint writer (actors/runtime/checkpoint_writer.py) on its own, against a real
SQLite store: arrival order, typed errors in its answers, and cancellation."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path

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
from tests.support.stores import pending_index
from tests.support.virtual_time import BACKENDS, on_virtual_time

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
        one = {"role": "user", "content": "one"}
        two = {"role": "assistant", "content": "two"}
        async with anyio.create_task_group() as callers:  # queued together, served in order
            callers.start_soon(lambda: client.append([one], at=1))
            await anyio.lowlevel.checkpoint()
            callers.start_soon(lambda: client.append([two], at=2))
        with pytest.raises(ContextConflict):  # the store holds 3 messages, not 2
            await client.append([{"role": "user", "content": "rewritten"}], at=2)
        other = CheckpointClient(send.clone(), "nosuchsession")
        with pytest.raises(SessionNotFound):
            await other.set_metadata(title="x")
        other.close()
        with pytest.raises(ActorCrashed, match=r"checkpoint writer failed \(TypeError"):
            await client.append([object()], at=3)  # a bug: a message that is not one
        await client.set_metadata(title="still serving")
        client.close()
    assert store.load_context(sid) == [SYSTEM, one, two]
    assert store.info(sid).title == "still serving"


async def test_a_cancelled_writer_refuses_queued_writes(store: SessionStore) -> None:
    sid = store.create_session(messages=[SYSTEM])
    started = threading.Event()
    store.db.connection.set_trace_callback(  # the writer's thread begins its transaction
        lambda sql: started.set() if sql.startswith("BEGIN IMMEDIATE") else None)
    holder = sqlite3.connect(store.db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another connection holds the write lock: it waits
    outcomes: dict[str, str] = {}

    async def write(name: str, request: Callable[[], Awaitable[None]]) -> None:
        try:
            await request()
            outcomes[name] = "answered"
        except ActorGone:
            outcomes[name] = "ActorGone"

    async def slow() -> None:
        await client.append([{"role": "user", "content": "slow write landed"}], at=1)

    send, receive = anyio.create_memory_object_stream[Write](16)
    client = CheckpointClient(send, sid)
    async with anyio.create_task_group() as callers, anyio.create_task_group() as writer:
        await writer.start(run_checkpoint_writer, store, receive)
        callers.start_soon(write, "slow", slow)
        await anyio.to_thread.run_sync(started.wait, 10)
        for name in ("queued-1", "queued-2"):
            callers.start_soon(write, name, partial(client.set_metadata, title=name))
        await anyio.wait_all_tasks_blocked()  # both queued behind the slow one
        writer.cancel_scope.cancel()
        holder.execute("COMMIT")  # the lock is free: the write under way goes on
    holder.close()
    store.db.connection.set_trace_callback(None)
    # the write that had started finished; the queued ones never ran
    assert [m["content"] for m in store.load_context(sid)] == ["sys", "slow write landed"]
    assert store.info(sid).title_source == "provisional"  # not a queued one's title
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
        await client.set_metadata(title="served after the batch under way")
        assert pending_index(store) == 0 and store.unindexed == 0
        # a backlog is indexed at once after the write that made it, idle or not
        many = [{"role": "user", "content": f"echidna {i}"} for i in range(INDEX_BACKLOG)]
        await client.append(many, at=2)
        await client.set_metadata(title="after the backlog")  # served after one batch at most
        assert pending_index(store) == 0
        await client.append([{"role": "user", "content": "last words"}], at=2 + INDEX_BACKLOG)
        client.close()  # closing: the writer catches up before it ends
    assert pending_index(store) == 0
    assert [r["id"] for r in store.search_sessions("echidna 3")] == [sid]
