"""The tool executor actor: runs one batch of tool calls at a time, in order.

For each call: parse and validate the arguments, ask the user when the mode requires it,
durably record that the call starts (write-ahead, through the checkpoint writer), run it under
``--tool-timeout``, cut output over the cap, and wrap the result as data. Unknown tools, bad
JSON, schema violations, denials, tool failures and tool crashes all become tool results; none
of them raises.

Cancellation: the batch runs inside ``turn.scope()``. When the turn is cancelled, the running
tool is cancelled (a shell tool kills its process group in its own shielded cleanup), and the
executor still answers with one outcome per call: done, interrupted while running (with the
elapsed time and any output seen), or not started. Nothing is retried or replayed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.config import Mode
from actors.core.data_tags import escape_attribute, escape_data
from actors.core.errors import StorageError, ToolFailed
from actors.core.events import ApprovalRequest, Event, EventSink, ToolCallFinished, ToolCallStarted
from actors.core.mailbox import answer
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE
from actors.core.turn import Turn
from actors.runtime.checkpoint_writer import CheckpointClient
from actors.tools import (
    TOOLS,
    Permission,
    Tool,
    ToolContext,
    parse_arguments,
    validate_arguments,
)

Status = Literal[
    "done", "failed", "denied", "interrupted", "timed_out", "not_started", "over_limit"
]
_TRUNCATION_TAIL = 8 * 1024


@dataclass
class CallOutcome:
    call_id: str
    name: str
    status: Status
    content: str  # the tool message content sent to the model (wrapped, capped)

    @property
    def started(self) -> bool:
        return self.status not in ("not_started", "over_limit", "denied")


@dataclass
class ToolBatch:
    calls: list[dict[str, Any]]
    turn: Turn
    allowed: int  # calls that may still run under --max-tool-calls
    reply: MemoryObjectSendStream[BatchOutcome]


@dataclass
class BatchOutcome:
    outcomes: list[CallOutcome]
    error: str | None = None  # the write-ahead record could not be written: the turn stops
    crash: str | None = None  # the executor itself failed; calls without outcome are open


@dataclass
class _Running:
    """The call in progress, so an interruption can say what it knows."""

    call_id: str = ""
    started_at: float | None = None
    context: ToolContext | None = None


def needs_approval(tool: Tool, mode: Mode) -> bool:
    if mode is Mode.SKIP_PERMISSIONS or tool.permission is Permission.READ:
        return False
    if tool.permission is Permission.EDIT:
        return mode is Mode.DEFAULT
    return True


def cap_output(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and tail with a note."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    tail = min(_TRUNCATION_TAIL, limit // 4)
    head = limit - tail
    return (
        data[:head].decode("utf-8", errors="ignore")
        + f"\n[... output cut: {len(data)} bytes in all, {len(data) - limit} bytes omitted "
        "here ...]\n"
        + data[-tail:].decode("utf-8", errors="ignore")
    )


def wrap_result(name: str, text: str) -> str:
    """Mark a tool's output as data; no data tag inside the output can end or open a block."""
    return f'<tool_result name="{escape_attribute(name)}">\n{escape_data(text)}\n</tool_result>'


def _describe_call(name: str, args: dict[str, Any]) -> str:
    if name == "run_bash":
        return f"run_bash: {args.get('command', '')}"
    if "path" in args:
        size = len(str(args.get("content", args.get("new_string", ""))))
        return f"{name}: {args['path']}" + (f" ({size} chars)" if size else "")
    return f"{name}({json.dumps(args, ensure_ascii=False)[:200]})"


class ToolExecutor:
    """Holds what every call needs; :meth:`run` is the actor."""

    def __init__(
        self,
        *,
        mode: Mode,
        timeout: float,
        max_output_bytes: int,
        make_context: Callable[[], ToolContext],
        writer: CheckpointClient,
        events: EventSink,
        tools: dict[str, Tool] | None = None,
    ) -> None:
        self.mode = mode
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self._make_context = make_context
        self._writer = writer
        self._events = events
        self._tools = TOOLS if tools is None else tools

    async def run(
        self,
        inbox: MemoryObjectReceiveStream[ToolBatch],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve batches one at a time until every sender of ``inbox`` is closed."""
        async with inbox:
            task_status.started()
            try:
                async for batch in inbox:
                    try:
                        outcome = await self.run_batch(batch)
                    except Exception as exc:  # a bug here must not leave calls unanswered
                        outcome = BatchOutcome(
                            [], crash=f"The tool executor failed ({type(exc).__name__}: {exc})."
                        )
                    await answer(batch.reply, outcome)
            finally:
                self._writer.close()

    async def run_batch(self, batch: ToolBatch) -> BatchOutcome:
        outcomes: list[CallOutcome] = []
        running = _Running()
        error = None
        with batch.turn.scope():
            try:
                for index, call in enumerate(batch.calls):
                    if index >= batch.allowed:
                        outcomes.append(self._outcome(
                            call, "over_limit",
                            "Not executed: the session's tool-call limit (--max-tool-calls) "
                            "was reached. Ask the user before going on.",
                        ))
                        continue
                    outcomes.append(await self._run_call(call, running))
            except StorageError as exc:
                error = str(exc)
        for call in batch.calls[len(outcomes):]:
            outcomes.append(self._unfinished(call, running, batch.turn, error))
        return BatchOutcome(outcomes, error)

    def _outcome(self, call: dict[str, Any], status: Status, text: str) -> CallOutcome:
        name = str((call.get("function") or {}).get("name", ""))
        return CallOutcome(
            str(call.get("id")), name, status,
            wrap_result(name, cap_output(text, self.max_output_bytes)),
        )

    def _unfinished(
        self, call: dict[str, Any], running: _Running, turn: Turn, error: str | None
    ) -> CallOutcome:
        """The outcome of a call the batch did not finish: interrupted or never started."""
        reason = turn.reason if turn.cancelled else (error or "the batch stopped")
        if running.call_id != call.get("id") or running.started_at is None:
            return self._outcome(call, "not_started", f"{NOT_STARTED_NOTICE}\n({reason})")
        end = turn.cancelled_at or time.monotonic()
        details = [f"({reason.capitalize()} after {end - running.started_at:.1f} s."]
        if (call.get("function") or {}).get("name") == "run_bash":
            details.append("The command's process group was killed.")
        details[-1] += ")"
        seen = "".join(running.context.progress) if running.context else ""
        if seen:
            details.append(f"Output before the interruption:\n{seen}")
        return self._outcome(call, "interrupted", "\n".join([INTERRUPTED_NOTICE, *details]))

    async def _run_call(self, call: dict[str, Any], running: _Running) -> CallOutcome:
        call_id = str(call.get("id"))
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        raw = function.get("arguments") or "{}"
        running.call_id, running.started_at, running.context = call_id, None, None
        await self._emit(ToolCallStarted(call_id, name, str(raw)))
        outcome = await self._prepare_and_run(call, name, raw, running)
        preview = outcome.content.split("\n", 2)[1] if "\n" in outcome.content else ""
        await self._emit(ToolCallFinished(call_id, name, preview[:200],
                                          outcome.status == "done"))
        return outcome

    async def _prepare_and_run(
        self, call: dict[str, Any], name: str, raw: Any, running: _Running
    ) -> CallOutcome:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools))
            return self._outcome(call, "failed", f"Error: unknown tool '{name}'. Tools: {known}.")
        try:
            args = validate_arguments(tool, parse_arguments(raw))
        except ToolFailed as exc:
            return self._outcome(call, "failed", f"Error: {exc}")
        context = self._make_context()
        try:
            reason = await tool.ask_reason(context, args, self.mode)
        except ToolFailed as exc:
            return self._outcome(call, "failed", f"Error: {exc}")
        if (reason or needs_approval(tool, self.mode)) and not await self._approved(
            tool, args, reason
        ):
            return self._outcome(
                call, "denied", f"Denied: the user did not approve {_describe_call(name, args)}. "
                "Do not retry it unchanged; ask the user what to do instead.",
            )
        await self._writer.mark_started([running.call_id])
        running.context, running.started_at = context, time.monotonic()
        with anyio.move_on_after(self.timeout) as deadline:
            try:
                text = await tool.run(context, args)
                status: Status = "done"
            except ToolFailed as exc:
                text, status = f"Error: {exc}", "failed"
            except Exception as exc:  # a tool bug must not take the harness down
                text, status = f"Error: the tool crashed ({type(exc).__name__}: {exc}).", "failed"
        if deadline.cancelled_caught:
            seen = "".join(context.progress)
            text = (
                f"{INTERRUPTED_NOTICE}\n(Timed out after {self.timeout:g} s (--tool-timeout); "
                "the call was stopped"
                + ("; the command's process group was killed" if name == "run_bash" else "")
                + ".)"
                + (f"\nOutput before the timeout:\n{seen}" if seen else "")
            )
            status = "timed_out"
        running.started_at = None
        return self._outcome(call, status, text)

    async def _approved(self, tool: Tool, args: dict[str, Any], reason: str | None) -> bool:
        if not self._events.listening:
            return False
        reply_send, reply_receive = anyio.create_memory_object_stream[bool](1)
        async with reply_receive:
            description = _describe_call(tool.name, args) + (f" (asks: {reason})" if reason else "")
            request = ApprovalRequest(tool.name, description, reply_send)
            if not await self._emit(request):
                reply_send.close()
                return False
            try:
                return bool(await reply_receive.receive())
            except anyio.EndOfStream:
                return False

    async def _emit(self, event: Event) -> bool:
        return await self._events.send(event)
