"""Interruption recovery of one tool batch: every call gets exactly one result, saved.

After every batch, in a shielded ``finally``, the supervisor settles it in memory with
:func:`answer_batch` (the executor's answer, or ``None`` when there is none: the turn was
cancelled while asking, or the executor is gone) and saves it with :func:`save_batch`; a
batch of reads that every call answered is saved with the next request instead. The calls
the answer covers get their results; the calls it does not cover (the executor crashed or
never answered) are answered by the store's recovery from the write-ahead records:
"outcome unknown" for a call recorded as started, "not executed" for one only planned.
Nothing is replayed.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Any

from actors.core.errors import HarnessError
from actors.core.messages import INTERRUPTED_NOTICE, Message, open_calls_at_end, tool_result
from actors.runtime.checkpoint_writer import CheckpointClient
from actors.runtime.context import WorkingContext
from actors.runtime.tool_executor import BatchOutcome


def answer_batch(
    context: WorkingContext,
    calls: list[dict[str, Any]],
    batch: BatchOutcome | None,
) -> None:
    """Append the results the executor answered (``batch``; None: no answer) to ``context``,
    in memory. The calls it does not cover stay open: :func:`save_batch` has the store's
    recovery answer them."""
    by_id = {o.call_id: o for o in batch.outcomes} if batch is not None else {}
    for call in calls:
        outcome = by_id.get(call["id"])
        if outcome is None:  # no answer for it: the write-ahead record decides, below
            continue
        if outcome.started:
            context.tool_calls += 1
        context.messages.append(tool_result(outcome.call_id, outcome.content))


async def save_batch(context: WorkingContext, writer: CheckpointClient) -> HarnessError | None:
    """Checkpoint what ``context`` holds unsaved; recover the calls left open at its end.

    Returns the error when the results could not be saved (then the open calls are answered
    "outcome unknown" in memory, so the context stays sendable); it does not raise, because
    it runs while a cancel may be unwinding. The caller holds the context's lock.
    """
    try:
        at, new = context.unsaved()
        await writer.append(new, at=at, state=context.state())
        context.saved_len = at + len(new)
        if open_calls_at_end(context.messages):
            recovered: MutableSequence[Message] = await writer.recover()
            context.messages, context.saved_len = recovered, len(recovered)
    except HarnessError as exc:
        for call_id in open_calls_at_end(context.messages):  # whether they ran is unknown
            context.messages.append(tool_result(call_id, INTERRUPTED_NOTICE))
        return exc
    return None
