"""Request/reply between actors (actors/core/mailbox.py) on its own, on the event loop's
clock: answers, typed errors in answers, ActorGone, and cancelled callers."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import anyio.abc
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.errors import ActorGone, HarnessError, StorageError
from actors.core.mailbox import answer, ask
from tests.support.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


@dataclass
class Square:
    n: int
    reply: MemoryObjectSendStream[int | HarnessError]


async def squarer(
    inbox: MemoryObjectReceiveStream[Square],
    answered: list[bool] | None = None,
    delay: float = 0,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A small actor: answers n*n after ``delay``; a negative n is a typed failure; 0 closes
    the reply without answering. Records whether each answer reached its caller."""
    async with inbox:
        task_status.started()
        async for request in inbox:
            await anyio.sleep(delay)
            if request.n == 0:
                request.reply.close()
                continue
            result: int | HarnessError = (
                StorageError("No space left on device") if request.n < 0 else request.n ** 2
            )
            delivered = await answer(request.reply, result)
            if answered is not None:
                answered.append(delivered)


async def test_ask_gets_the_answer() -> None:
    send, receive = anyio.create_memory_object_stream[Square](1)
    async with anyio.create_task_group() as tg, send:
        await tg.start(squarer, receive)
        with anyio.fail_after(1):
            result: int = await ask(send, lambda reply: Square(7, reply), "squarer")
    assert result == 49


async def test_an_error_in_the_answer_is_raised_typed_in_the_caller() -> None:
    send, receive = anyio.create_memory_object_stream[Square](1)
    async with anyio.create_task_group() as tg, send:
        await tg.start(squarer, receive)
        with anyio.fail_after(1), pytest.raises(StorageError, match="No space left"):
            await ask(send, lambda reply: Square(-1, reply), "squarer")
        again: int = await ask(send, lambda reply: Square(3, reply), "squarer")
    assert again == 9  # the actor goes on serving


async def test_a_closed_inbox_is_actor_gone() -> None:
    send, receive = anyio.create_memory_object_stream[Square](1)
    receive.close()
    with pytest.raises(ActorGone, match="The squarer is not running"):
        await ask(send, lambda reply: Square(2, reply), "squarer")
    send.close()


async def test_a_reply_closed_without_an_answer_is_actor_gone() -> None:
    send, receive = anyio.create_memory_object_stream[Square](1)
    async with anyio.create_task_group() as tg, send:
        await tg.start(squarer, receive)
        with anyio.fail_after(1), pytest.raises(ActorGone, match="stopped without answering"):
            await ask(send, lambda reply: Square(0, reply), "squarer")


async def test_a_caller_that_stops_waiting_does_not_break_the_actor() -> None:
    send, receive = anyio.create_memory_object_stream[Square](1)
    answered: list[bool] = []
    async with anyio.create_task_group() as tg, send:
        await tg.start(squarer, receive, answered, 30)
        start = anyio.current_time()
        with anyio.move_on_after(5) as scope:
            await ask(send, lambda reply: Square(4, reply), "squarer")
        assert scope.cancelled_caught and anyio.current_time() - start == pytest.approx(5)
        with anyio.fail_after(60):  # the next request waits for the first one's 30 s
            result: int = await ask(send, lambda reply: Square(5, reply), "squarer")
    assert result == 25
    assert answered == [False, True]  # the abandoned answer was dropped, not raised


async def test_a_caller_cancelled_while_the_inbox_is_full_leaves_no_answer_pending() -> None:
    send, receive = anyio.create_memory_object_stream[Square](0)  # nobody receives yet
    with anyio.move_on_after(1):
        await ask(send, lambda reply: Square(6, reply), "squarer")
    send.close()
    async with receive:  # nothing was queued: the request never entered the inbox
        assert [request async for request in receive] == []
