"""The model client actor (actors/model/client.py) on its own, served through its inbox, on
the event loop's clock: the retry path (backoff waited in virtual seconds, the stream shown so
far voided), the fallback for endpoints without usage chunks, and the --llm-timeout cut.

The endpoint is a chat-completions server in memory: an httpx MockTransport under the
client's connection, answering from a script in OpenAI's streaming format. No socket and no thread,
so the virtual clock only jumps when the client really waits (a backoff, a hanging server).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest

from actors.core.errors import EndpointTimeout, RequestRefused
from actors.core.events import Event, EventSink, Notice, StreamRestarted, TextDelta
from actors.core.mailbox import ask
from actors.model import ModelClient, ModelOutcome, ModelRequest
from actors.testing.scripted_server import Reply, _chunks
from tests.support.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio
BASE_URL = "http://model.test/v1"
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


@dataclass(frozen=True)
class Status:
    code: int
    message: str


@dataclass(frozen=True)
class Cut:
    """Stream ``reply`` but drop the connection after ``chunks`` chunks."""

    reply: Reply
    chunks: int


@dataclass(frozen=True)
class Burst:
    """Stream ``reply`` in one read (a fast server's chunks, arrived together)."""

    reply: Reply


@dataclass(frozen=True)
class Silent:
    """Accept the request and never answer."""


@dataclass(frozen=True)
class Paced:
    """Stream ``reply`` at a model's pace, on the event loop's clock: ``first`` seconds before
    the first chunk, ``every`` seconds between chunks, and ``pauses[n]`` more after chunk n."""

    reply: Reply
    first: float = 0.0
    every: float = 0.0
    pauses: dict[int, float] = field(default_factory=dict)


Step = Reply | Status | Cut | Burst | Silent | Paced


def _sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


class _Body(httpx2.AsyncByteStream):
    def __init__(self, pieces: list[bytes], cut: bool, pace: Paced | None = None) -> None:
        self.pieces, self.cut, self.pace = pieces, cut, pace

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pace = self.pace
        for n, piece in enumerate(self.pieces):
            if pace is not None:
                await anyio.sleep((pace.first if n == 0 else pace.every)
                                  + pace.pauses.get(n - 1, 0.0))
            yield piece
        if self.cut:
            raise httpx2.ReadError("connection reset by peer")


@dataclass
class MemoryEndpoint:
    """Answers each request with the next step; records the request bodies."""

    steps: list[Step]
    bodies: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":  # a list of models
            return httpx2.Response(200, json={"object": "list", "data": []})
        body = json.loads(request.content)
        self.bodies.append(body)
        step = self.steps.pop(0)
        if isinstance(step, Silent):
            await anyio.sleep_forever()
        if isinstance(step, Status):
            return httpx2.Response(step.code, json={"error": {"message": step.message}})
        reply, cut = (step.reply, step.chunks) if isinstance(step, Cut) else (step, None)
        if isinstance(reply, Burst | Paced):
            reply = reply.reply
        chunks = [c for c in _chunks(reply, body)
                  if "stream_options" in body or not c.get("usage")]
        pieces = _sse(chunks)
        if isinstance(step, Burst):
            pieces = [b"".join(pieces)]
        stream = _Body(pieces[:cut] if cut is not None else pieces, cut is not None,
                       step if isinstance(step, Paced) else None)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               stream=stream)


@dataclass
class Served:
    outcome: ModelOutcome
    events: list[Event]
    seconds: float  # on the event loop's clock


async def serve(endpoint: MemoryEndpoint, *, llm_timeout: float = 120,
                saved_after: float | None = None, **timeouts: float) -> Served:
    """One request through the actor's inbox; the events it sent and how long it took.
    ``timeouts``: the client's ``first_token_timeout`` and ``total_timeout``, if given;
    ``saved_after``: the checkpoint of what the request carries commits that many seconds
    after it is sent (its answer waits for it)."""
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint))
    events_send, events_receive = anyio.create_memory_object_stream[Event](10_000)
    sink = EventSink(events_send)
    client = ModelClient(base_url=BASE_URL, api_key="test", model="m", timeout=llm_timeout,
                         http_client=http, events=sink, **timeouts)
    # Made in a worker thread: the virtual clock would jump over that wait, so it happens
    # here, before any deadline exists.
    await client.connect()
    inbox, receive = anyio.create_memory_object_stream[ModelRequest](1)
    seen: list[Event] = []

    async def collect() -> None:
        async with events_receive:
            async for event in events_receive:
                seen.append(event)

    saved = None if saved_after is None else anyio.Event()

    async def commit() -> None:
        assert saved is not None and saved_after is not None
        await anyio.sleep(saved_after)
        saved.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        if saved is not None:
            tg.start_soon(commit)
        async with anyio.create_task_group() as actor:
            await actor.start(client.run, receive)
            start = anyio.current_time()
            async with inbox:
                outcome: ModelOutcome = await ask(
                    inbox, lambda reply: ModelRequest(USER, reply, events=sink, saved=saved),
                    "model client")
            seconds = anyio.current_time() - start
        events_send.close()
    return Served(outcome, seen, seconds)


def text_of(served: Served) -> str:
    assert served.outcome.message is not None, served.outcome.error
    return str(served.outcome.message["content"])


async def test_server_errors_are_retried_with_backoff_on_the_loops_clock() -> None:
    endpoint = MemoryEndpoint([Status(503, "loading model"), Status(503, "loading model"),
                               Reply("Ready now.", usage=(12, 3))])
    served = await serve(endpoint)
    assert text_of(served) == "Ready now." and served.outcome.usage is not None
    assert not served.outcome.usage.estimated
    assert served.seconds == pytest.approx(0.5 + 1.0)  # the backoff, in virtual seconds
    retries = [e.text for e in served.events if isinstance(e, Notice)]
    assert len(retries) == 2 and all("retrying in" in text for text in retries)
    assert len(endpoint.bodies) == 3


async def test_a_stream_cut_midway_is_retried_and_what_was_shown_is_voided() -> None:
    reply = Reply("one two three four five six")
    endpoint = MemoryEndpoint([Cut(reply, chunks=3), reply])
    served = await serve(endpoint)
    assert text_of(served) == "one two three four five six"
    kinds = [type(e) for e in served.events if isinstance(e, TextDelta | StreamRestarted)]
    restart = kinds.index(StreamRestarted)
    assert TextDelta in kinds[:restart] and TextDelta in kinds[restart + 1:]
    assert served.seconds == pytest.approx(0.5)


async def test_the_chunks_of_one_read_are_shown_as_one_piece() -> None:
    text = "one two three four five six"
    one_read = await serve(MemoryEndpoint([Burst(Reply(text))]))
    assert text_of(one_read) == text
    assert [e.text for e in one_read.events if isinstance(e, TextDelta)] == [text]
    read_by_read = await serve(MemoryEndpoint([Reply(text)]))
    deltas = [e.text for e in read_by_read.events if isinstance(e, TextDelta)]
    assert text_of(read_by_read) == text and len(deltas) > 3 and "".join(deltas) == text


async def test_an_endpoint_without_usage_chunks_falls_back_and_estimates() -> None:
    endpoint = MemoryEndpoint([
        Status(400, "Unrecognized request argument supplied: stream_options"),
        Reply("Fine without usage."),
    ])
    served = await serve(endpoint)
    assert text_of(served) == "Fine without usage."
    assert "stream_options" in endpoint.bodies[0] and "stream_options" not in endpoint.bodies[1]
    assert served.outcome.usage is not None and served.outcome.usage.estimated
    assert served.seconds == 0  # a fallback, not a retry: no backoff


async def test_a_refusal_is_not_retried() -> None:
    endpoint = MemoryEndpoint([Status(404, "model 'm' not found"), Reply("unused")])
    served = await serve(endpoint)
    assert isinstance(served.outcome.error, RequestRefused)
    assert len(endpoint.bodies) == 1 and served.seconds == 0


# -- how long the endpoint may keep a request waiting (actors/model/_timeouts.py) ------------

TOKENS = " ".join(f"w{n}" for n in range(2000))  # 2,000 chunks of one word each


async def test_a_long_slow_steady_answer_completes_with_the_default_timeouts() -> None:
    """2,000 tokens at 10 a second: 200 s, longer than --llm-timeout's 120, never silent."""
    served = await serve(MemoryEndpoint([Paced(Reply(TOKENS), first=5, every=0.1)]))
    assert text_of(served) == TOKENS
    assert served.seconds == pytest.approx(5 + 0.1 * 2003, abs=1)  # role, usage, [DONE]


async def test_pauses_shorter_than_llm_timeout_are_waited_out() -> None:
    reply = Reply("one two three four five six")
    served = await serve(MemoryEndpoint([Paced(reply, pauses={2: 100, 4: 110})]))
    assert text_of(served) == "one two three four five six"
    assert served.seconds == pytest.approx(210)


async def test_a_stream_silent_for_longer_than_llm_timeout_fails_with_one_line() -> None:
    reply = Reply("one two three four five six")
    served = await serve(MemoryEndpoint([Paced(reply, every=1, pauses={2: 300})]),
                         llm_timeout=30)
    assert isinstance(served.outcome.error, EndpointTimeout)
    assert str(served.outcome.error) == (
        f"The model endpoint {BASE_URL} gave no answer in time: the answer stopped for 30 s: "
        "after 3 chunks. Raise --llm-timeout if the model pauses that long.")
    assert served.seconds == pytest.approx(2 + 30)  # chunks at 0, 1 and 2 s, then silence
    assert served.outcome.partial_text == "" and not served.outcome.interrupted
    assert len(served.events) >= 1  # the text shown before the stall (one and two)


async def test_the_time_an_answer_waits_for_its_checkpoint_is_not_silence() -> None:
    """The server streams on; the answer's pieces wait 200 s for the checkpoint of what the
    request carries (a slow disk): only the waits for the server count."""
    reply = Reply("one two three four five six")
    served = await serve(MemoryEndpoint([Paced(reply, every=1)]), llm_timeout=30,
                         saved_after=200)
    assert text_of(served) == "one two three four five six"
    assert served.seconds == pytest.approx(200, abs=10)


async def test_the_first_token_may_take_longer_than_llm_timeout() -> None:
    """A long prompt on a CPU: nothing for 500 s, then the answer."""
    served = await serve(MemoryEndpoint([Paced(Reply("Read it all."), first=500)]))
    assert text_of(served) == "Read it all."
    assert served.seconds == pytest.approx(500)


async def test_no_first_token_within_its_timeout_fails_with_one_line() -> None:
    served = await serve(MemoryEndpoint([Silent()]))
    assert isinstance(served.outcome.error, EndpointTimeout)
    assert str(served.outcome.error) == (
        f"The model endpoint {BASE_URL} gave no answer in time: the answer did not begin "
        "within 600 s. A long prompt on a slow machine can take longer: raise "
        "--llm-first-token-timeout.")
    assert served.seconds == pytest.approx(600)
    shorter = await serve(MemoryEndpoint([Silent()]), first_token_timeout=45)
    assert "did not begin within 120 s" in str(shorter.outcome.error)  # not below the silence
    assert shorter.seconds == pytest.approx(120)


async def test_a_total_limit_only_when_asked_for() -> None:
    steady = Paced(Reply(TOKENS), every=0.1)
    served = await serve(MemoryEndpoint([steady]), total_timeout=50)
    assert isinstance(served.outcome.error, EndpointTimeout)
    assert str(served.outcome.error) == (
        f"The model endpoint {BASE_URL} gave no answer in time: no complete answer within "
        "50 s. Raise --llm-total-timeout, or leave it out.")
    assert served.seconds == pytest.approx(50)
