"""The compactor (actors/runtime/compactor.py) on its own, and the supervisor's rule for
applying its plan (WorkingContext.why_not): a snapshot in, a plan or a reason out, on the
event loop's clock. The model is a small scripted model actor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.budget import Usage
from actors.core.compaction import (
    SUMMARY_OPEN,
    CompactionPlan,
    NoCompaction,
    Split,
    split_point,
)
from actors.core.errors import ServerFailed
from actors.core.mailbox import answer, ask
from actors.core.messages import Message
from actors.core.turn import Turn
from actors.model.client import ModelOutcome, ModelRequest
from actors.runtime.compactor import SUMMARY_PROMPT, CompactAnswer, Compactor, CompactRequest
from actors.runtime.context import WorkingContext
from tests.support.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio
LONG = "A long answer with many details. " * 30


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"question {i}"},
                     {"role": "assistant", "content": LONG}]
    return messages


Answerer = Callable[[ModelRequest], ModelOutcome]


async def scripted_model(
    inbox: MemoryObjectReceiveStream[ModelRequest],
    answerer: Answerer,
    seen: list[ModelRequest],
    delay: float,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A model actor: answers each request after ``delay`` seconds (interrupted when the
    request's turn is cancelled meanwhile, as the real client does)."""
    async with inbox:
        task_status.started()
        async for request in inbox:
            seen.append(request)
            outcome = ModelOutcome(interrupted=True)
            with request.turn.scope() if request.turn else anyio.CancelScope():
                await anyio.sleep(delay)
                outcome = answerer(request)
            await answer(request.reply, outcome)


def summary(text: str) -> Answerer:
    return lambda _: ModelOutcome(message={"role": "assistant", "content": text},
                                  usage=Usage(900, 30))


@asynccontextmanager
async def compactor(
    answerer: Answerer, delay: float = 0
) -> AsyncIterator[tuple[MemoryObjectSendStream[CompactRequest], list[ModelRequest]]]:
    model_send, model_receive = anyio.create_memory_object_stream[ModelRequest](4)
    send, receive = anyio.create_memory_object_stream[CompactRequest](1)
    seen: list[ModelRequest] = []
    async with anyio.create_task_group() as tg:
        await tg.start(scripted_model, model_receive, answerer, seen, delay)
        await tg.start(Compactor(max_context_tokens=24_000, model_inbox=model_send).run,
                       receive)
        try:
            yield send, seen
        finally:
            send.close()


async def plan_for(inbox: MemoryObjectSendStream[CompactRequest], context: WorkingContext,
                   job: Turn | None = None) -> CompactAnswer:
    snapshot = context.snapshot()
    result: CompactAnswer = await ask(
        inbox, lambda reply: CompactRequest(snapshot, job or Turn(), reply), "compactor"
    )
    return result


async def test_a_snapshot_becomes_a_plan() -> None:
    context = WorkingContext(messages=conversation(3), pinned=["use tabs"])
    context.saved_len = len(context.messages)
    async with compactor(summary("They asked three questions.")) as (inbox, seen):
        with anyio.fail_after(5):
            plan = await plan_for(inbox, context)
    assert isinstance(plan, CompactionPlan)
    assert plan.split.cut == 5 and plan.basis == tuple(context.messages[:5])
    assert plan.summary == "They asked three questions."
    assert plan.after_tokens < plan.before_tokens and plan.usage == Usage(900, 30)
    [request] = seen
    assert request.messages[0]["content"] == SUMMARY_PROMPT and request.temperature == 0
    assert context.why_not(plan) is None
    stored = context.compacted_by(plan)
    assert stored[-2:] == context.messages[-2:]
    assert stored[2]["content"].startswith(SUMMARY_OPEN)
    assert "use tabs" in stored[1]["content"]


@pytest.mark.parametrize(
    ("answerer", "reason"),
    [
        (summary("  "), "empty summary"),
        (lambda _: ModelOutcome(error=ServerFailed("HTTP 500", "overloaded")),
         "Compaction failed (HTTP 500"),
        (summary("Much longer than what it summarises. " * 300), "did not reduce"),
    ],
)
async def test_no_plan_and_the_reason(answerer: Answerer, reason: str) -> None:
    context = WorkingContext(messages=conversation(2))
    async with compactor(answerer) as (inbox, _):
        result = await plan_for(inbox, context)
    assert isinstance(result, NoCompaction) and reason in result.reason


async def test_nothing_older_than_the_latest_turn_asks_no_model() -> None:
    async with compactor(summary("x")) as (inbox, seen):
        result = await plan_for(inbox, WorkingContext(messages=conversation(1)))
    assert isinstance(result, NoCompaction) and "Nothing to compact" in result.reason
    assert seen == []


async def test_cancelling_the_job_stops_the_summary_call() -> None:
    job = Turn()
    async with compactor(summary("late"), delay=600) as (inbox, seen):
        start = anyio.current_time()
        async with anyio.create_task_group() as tg:
            results: list[CompactAnswer] = []

            async def request() -> None:
                results.append(await plan_for(inbox, WorkingContext(messages=conversation(2)),
                                              job))

            tg.start_soon(request)
            await anyio.sleep(3)
            job.cancel("the harness is exiting")
        [result] = results
        assert anyio.current_time() - start == pytest.approx(3)  # not the model's 600 s
    assert isinstance(result, NoCompaction) and "cancelled" in result.reason
    assert seen[0].turn is job  # the summary call was bound to the job


def test_a_plan_does_not_apply_once_the_context_moved_on() -> None:
    messages = conversation(3)
    context = WorkingContext(messages=list(messages), saved_len=len(messages))
    plan = CompactionPlan(split=_split(messages), basis=tuple(messages[:5]),
                          summary="s", before_tokens=100, after_tokens=10)
    assert context.why_not(plan) is None
    context.messages.append({"role": "user", "content": "meanwhile"})  # appended: still fits
    assert context.why_not(plan) is None
    recovered = [dict(m) for m in context.messages]  # equal copies (from the store) fit
    context.messages = recovered
    assert context.why_not(plan) is None
    context.messages[3] = {"role": "assistant", "content": "replaced by another compaction"}
    assert "changed during compaction" in (context.why_not(plan) or "")
    unsaved = WorkingContext(messages=list(messages), saved_len=3)
    assert "not saved yet" in (unsaved.why_not(plan) or "")


def test_messages_appended_while_the_store_is_written_are_kept() -> None:
    messages = conversation(3)
    context = WorkingContext(messages=list(messages), saved_len=len(messages))
    plan = CompactionPlan(split=_split(messages), basis=tuple(messages[:5]),
                          summary="s", before_tokens=100, after_tokens=10)
    context.messages.append({"role": "user", "content": "before the write"})
    stored = context.compacted_by(plan)  # what the store gets: the saved part only
    assert stored[-1] == messages[-1]
    context.messages.append({"role": "assistant", "content": "during the write"})
    context.compaction_saved(stored)
    assert [m["content"] for m in context.messages[-2:]] == ["before the write",
                                                            "during the write"]
    assert context.saved_len == len(stored) and context.messages[: len(stored)] == stored


def _split(messages: list[Message]) -> Split:
    split = split_point(messages)
    assert split is not None
    return split
