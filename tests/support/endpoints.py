"""Talking to a model client actor directly in tests: one request, its outcome and events,
with the retry sleep recorded instead of waited for."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.events import Event, EventSink
from actors.core.mailbox import ask
from actors.model import ModelClient, ModelOutcome, ModelRequest

USER: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "list_files", "description": "List files.",
    "parameters": {"type": "object", "properties": {}}}}]


@dataclass
class Asked:
    outcome: ModelOutcome
    events: list[Event]
    sleeps: list[float] = field(default_factory=list)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def error(self) -> str:
        assert self.outcome.error is not None, f"no error: {self.outcome}"
        return str(self.outcome.error)


class Recorded:
    """An injected sleep: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await anyio.lowlevel.checkpoint()


async def ask_model(
    base_url: str,
    *,
    model: str = "gemma4",
    messages: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    llm_timeout: float = 20.0,
    requests: int = 1,
) -> list[Asked]:
    """Send ``requests`` requests, one after another, to one actor; their outcomes."""
    sleep = Recorded()
    client = ModelClient(base_url=base_url, api_key="test", model=model, timeout=llm_timeout,
                         sleep=sleep)
    inbox, receive = anyio.create_memory_object_stream[ModelRequest](1)
    asked: list[Asked] = []
    async with anyio.create_task_group() as tg:
        await tg.start(client.run, receive)
        for _ in range(requests):
            events_send, events_receive = anyio.create_memory_object_stream[Event](1000)
            before = len(sleep.delays)
            make = partial(_request, list(messages or USER), tools, EventSink(events_send))
            outcome = await ask(inbox, make, "model client")
            events_send.close()
            async with events_receive:
                events = [e async for e in events_receive]
            asked.append(Asked(outcome, events, sleep.delays[before:]))
        inbox.close()
    return asked


def _request(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, sink: EventSink,
    reply: MemoryObjectSendStream[ModelOutcome],
) -> ModelRequest:
    return ModelRequest(messages, reply, tools=tools, events=sink)


async def ask_once(base_url: str, **kwargs: Any) -> Asked:
    return (await ask_model(base_url, **kwargs))[0]
