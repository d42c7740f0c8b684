"""Request/reply over memory channels: how the supervisor talks to its actors.

A request carries its own reply stream (buffer 1). The actor answers with
``async with reply: await reply.send(result)``; :func:`ask` sends the request and waits for
that answer, turning a reply stream closed without an answer (the actor shut down or was
cancelled) into :class:`ActorGone`. An actor whose work failed answers with the exception
object (from the one hierarchy) instead of a result; :func:`ask` raises it in the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.errors import ActorGone, HarnessError

R = TypeVar("R")
Q = TypeVar("Q")

__all__ = ["ActorGone", "answer", "ask"]


async def ask(
    inbox: MemoryObjectSendStream[Q],
    make_request: Callable[[MemoryObjectSendStream[R | HarnessError]], Q],
    actor: str,
) -> R:
    """Send ``make_request(reply)`` to ``inbox`` and wait for the one answer.

    An answer that is a :class:`HarnessError` is raised here; a closed inbox or a reply
    stream closed without an answer raises :class:`ActorGone`.

    Cancellation: waiting for the answer is cancellable like any await (a request the inbox
    has room for is handed over at once, with no await before it); the actor still answers
    into a closed stream, which it ignores.
    """
    reply_send, reply_receive = anyio.create_memory_object_stream[R | HarnessError](1)
    async with reply_receive:
        try:
            request = make_request(reply_send)
            try:  # room in the inbox: handed over without a trip through the event loop
                inbox.send_nowait(request)
            except anyio.WouldBlock:
                await inbox.send(request)
        except BaseException as exc:  # cancelled, or the actor is gone: nobody will answer
            reply_send.close()
            if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
                raise ActorGone(f"The {actor} is not running.") from None
            raise
        try:
            result = await reply_receive.receive()
        except anyio.EndOfStream:
            raise ActorGone(f"The {actor} stopped without answering.") from None
    if isinstance(result, HarnessError):
        raise result
    return result


async def answer(reply: MemoryObjectSendStream[R], result: R) -> bool:
    """Send the one answer and close ``reply``; False if the caller stopped waiting."""
    async with reply:
        try:
            reply.send_nowait(result)  # a reply stream holds its one answer
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        except anyio.WouldBlock:
            await reply.send(result)
    return True
