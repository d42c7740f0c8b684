"""The supervisor: holds the session lease, starts the actors, and runs user turns.

One :class:`Supervisor` per run of the harness. ``Supervisor.open(...)`` takes the lease (a
second process fails at once), creates or resumes the session (resume checks, recovery of
interrupted tool calls), starts the checkpoint writer, the model client, the tool executor and
the compactor in one task group, and yields. :meth:`run_turn` runs one user message through
model → tools → model … and always leaves the saved context valid.

Cancellation:
- :meth:`abort` (Ctrl-C) cancels the current turn. Actors bound to the turn stop and still
  answer: the supervisor then gives every tool call of the batch a result (done, interrupted
  while running, or not started), checkpoints, and returns ``interrupted``. No tool is replayed.
- If the task running the supervisor is cancelled (SIGTERM, the front end exiting), the actors
  are cancelled with it, and the shielded, bounded shutdown runs recovery from the write-ahead
  records, writes the fallback summary, sets the status and releases the lease.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.budget import CHARS_PER_TOKEN, ContextEstimator, UsageTotals
from actors.core.config import Settings
from actors.core.errors import (
    HarnessError,
    ProjectMismatch,
    SessionArchived,
    StorageError,
    UsageError,
)
from actors.core.events import ContextGauge, Event, EventSink, Notice, ToolCallFinished
from actors.core.ids import new_session_id
from actors.core.mailbox import ActorGone, ask
from actors.core.messages import (
    INTERRUPTED_NOTICE,
    NOT_STARTED_NOTICE,
    Message,
    open_calls_at_end,
    tool_calls_of,
    tool_result,
)
from actors.core.planning import Planning
from actors.core.prompts import read_memory_notes, system_prompt
from actors.core.turn import Turn
from actors.model.client import ModelClient, ModelOutcome, ModelRequest
from actors.runtime.checkpoint_writer import CheckpointClient, Write, run_checkpoint_writer
from actors.runtime.compactor import Compactor, CompactRequest, CompactResult
from actors.runtime.lease import hold_lease
from actors.runtime.tool_executor import BatchOutcome, ToolBatch, ToolExecutor
from actors.store import Store
from actors.tools import ToolContext, tool_schemas

SHUTDOWN_SECONDS = 15
TOOL_SCHEMA_TOKENS = len(json.dumps(tool_schemas())) // CHARS_PER_TOKEN
Outcome = Literal["answered", "interrupted", "failed", "limit"]


@dataclass
class TurnResult:
    outcome: Outcome
    text: str = ""  # the final answer (answered) or the reason (otherwise)

    @property
    def ok(self) -> bool:
        return self.outcome == "answered"


def latest_session_of(store: Store, project_root: str) -> str:
    """The id of the most recently updated, unarchived session of this project (--continue)."""
    for item in store.list_sessions():
        if item["project_root"] == project_root:
            return str(item["id"])
    raise UsageError(f"No saved session for this project ({project_root}) to continue.")


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        session_id: str,
        events: MemoryObjectSendStream[Event] | None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.session_id = session_id
        self.events = EventSink(events)  # shared with the actors
        self.messages: list[Message] = []
        self.planning = Planning()
        self.usage = UsageTotals()
        self.tool_calls = 0
        self.pinned: list[str] = []
        self.title = ""
        self.estimator = ContextEstimator()
        self.resumed = False
        self.recovered_calls = 0
        self.crashed_before = False
        self._turn: Turn | None = None
        self._writer: CheckpointClient | None = None
        self._model_inbox: MemoryObjectSendStream[ModelRequest] | None = None
        self._tools_inbox: MemoryObjectSendStream[ToolBatch] | None = None
        self.compactor: Compactor | None = None
        self.context_lock = anyio.Lock()  # a checkpoint and a context replacement never overlap
        self.saved_len = 0  # how many of self.messages the store holds

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        store: Store,
        *,
        events: MemoryObjectSendStream[Event] | None = None,
        resume: str | None = None,
        continue_latest: bool = False,
    ) -> AsyncIterator[Supervisor]:
        """Take the lease, create or resume the session, run the actors; see the module doc."""
        project_root = str(settings.sandbox_dir)
        if continue_latest:
            resume = await anyio.to_thread.run_sync(latest_session_of, store, project_root)
        if resume:
            await anyio.to_thread.run_sync(store.info, resume)  # unknown id: no lock file
        session_id = resume or new_session_id()
        async with hold_lease(store, session_id):
            self = cls(settings, store, session_id, events)
            if resume:
                await anyio.to_thread.run_sync(self._resume, project_root)
            else:
                await anyio.to_thread.run_sync(self._create, project_root)
            self.saved_len = len(self.messages)
            status = "aborted"
            try:
                async with self._actors():
                    if self.crashed_before or self.recovered_calls:
                        await self.notify(
                            f"Session {session_id} was not closed cleanly; "
                            f"{self.recovered_calls} interrupted tool call(s) recovered.",
                            "warning",
                        )
                    yield self
                status = "saved"
            except anyio.get_cancelled_exc_class():
                status = "saved"  # stopped from outside (SIGTERM): a clean exit
                raise
            finally:
                with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
                    await anyio.to_thread.run_sync(self._finish, status)

    def _create(self, project_root: str) -> None:
        notes = read_memory_notes(self.settings.memory_dir, self.settings.sandbox_dir)
        self.messages = [
            {"role": "system", "content": system_prompt(self.settings.sandbox_dir, notes)}
        ]
        self.store.create_session(
            self.session_id, self.messages, project_root=project_root, status="active"
        )
        self.store.checkpoint(self.session_id, self.messages, state=self.state())

    def _resume(self, project_root: str) -> None:
        info = self.store.info(self.session_id)
        if info.archived:
            raise SessionArchived(self.session_id)
        if info.project_root and info.project_root != project_root:
            raise ProjectMismatch(self.session_id, info.project_root)
        self.crashed_before = info.status == "active"  # we hold the lease: its holder died
        before = info.transcript_messages
        self.messages = self.store.recover(self.session_id)
        self.recovered_calls = self.store.info(self.session_id).transcript_messages - before
        state = info.state
        self.planning = Planning.from_state(state)
        self.usage = UsageTotals.from_state(state)
        self.tool_calls = int(state.get("tool_calls", 0))
        self.pinned = [str(p) for p in state.get("pinned", [])]
        self.title = info.title
        self.resumed = True
        self.store.update(self.session_id, status="active")

    def _finish(self, status: str) -> None:
        """Shutdown writes (the actors are gone): recover, fallback summary, status."""
        with contextlib.suppress(HarnessError):
            self.store.recover(self.session_id)
        with contextlib.suppress(HarnessError):
            self.store.ensure_summary(self.session_id)
        with contextlib.suppress(HarnessError):
            self.store.update(self.session_id, status=status)

    @contextlib.asynccontextmanager
    async def _actors(self) -> AsyncIterator[None]:
        settings = self.settings
        writer_send, writer_receive = anyio.create_memory_object_stream[Write](16)
        model_send, model_receive = anyio.create_memory_object_stream[ModelRequest](4)
        tools_send, tools_receive = anyio.create_memory_object_stream[ToolBatch](1)
        compact_send, compact_receive = anyio.create_memory_object_stream[CompactRequest](4)
        self._writer = CheckpointClient(writer_send, self.session_id)
        self._model_inbox, self._tools_inbox = model_send, tools_send
        model = ModelClient(base_url=settings.base_url, api_key=settings.api_key,
                            model=settings.model, timeout=settings.llm_timeout)
        executor = ToolExecutor(
            mode=settings.mode, timeout=settings.tool_timeout,
            max_output_bytes=settings.max_output_bytes, make_context=self._tool_context,
            writer=CheckpointClient(writer_send.clone(), self.session_id),
            events=self.events,
        )
        self.compactor = Compactor(
            settings=settings, model_inbox=model_send.clone(),
            writer=CheckpointClient(writer_send.clone(), self.session_id),
            events=self.events, inbox=compact_send,
        )
        async with anyio.create_task_group() as tg:
            await tg.start(run_checkpoint_writer, self.store, writer_receive)
            await tg.start(model.run, model_receive)
            await tg.start(executor.run, tools_receive)
            await tg.start(self.compactor.run, compact_receive)
            try:
                yield
            finally:
                self.compactor.close()
                for stream in (tools_send, model_send, compact_send, writer_send):
                    stream.close()

    def _tool_context(self) -> ToolContext:
        return ToolContext(
            sandbox=self.settings.sandbox_dir,
            memory_dir=self.settings.memory_dir,
            planning=self.planning,
            store=self.store,
            session_id=self.session_id,
            writer=self._writer,
        )

    # -- state ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Planning and usage state, saved with every checkpoint."""
        return {
            **self.planning.to_state(),
            "tool_calls": self.tool_calls,
            **self.usage.to_state(),
            "pinned": list(self.pinned),
        }

    def context_tokens(self) -> int:
        """Estimated size of the next request: the context plus the tool schemas sent."""
        return self.estimator.estimate(self.messages, overhead=TOOL_SCHEMA_TOKENS)

    async def notify(self, text: str, level: Any = "info") -> None:
        await self._emit(Notice(text, level))

    async def _emit(self, event: Event) -> None:
        await self.events.send(event)

    async def _checkpoint(self, *, planned_calls: bool = False) -> None:
        assert self._writer is not None
        async with self.context_lock:
            snapshot = list(self.messages)
            await self._writer.checkpoint(snapshot, state=self.state(),
                                          planned_calls=planned_calls)
            self.saved_len = len(snapshot)
        await self._emit(ContextGauge(self.context_tokens(), self.settings.max_context_tokens,
                                      self.usage.total_cost_usd))

    # -- the turn -------------------------------------------------------------------------

    def abort(self, reason: str = "interrupted by the user") -> bool:
        """Cancel the running turn (safe to call from any task of this event loop)."""
        if self._turn is None:
            return False
        self._turn.cancel(reason)
        return True

    async def run_turn(self, text: str) -> TurnResult:
        """Run one user message to its end: answered, interrupted, failed or stopped by a limit.

        Storage failures stop the turn before the next model request or tool runs, with the
        cause in the result; the last good checkpoint stays intact.
        """
        if self._turn is not None:
            raise UsageError("A turn is already running.")
        turn = self._turn = Turn()
        try:
            return await self._turn_loop(turn, text)
        except StorageError as exc:
            return TurnResult("failed", f"Could not save the session: {exc} The turn stopped; "
                              "the last saved checkpoint is intact.")
        except ActorGone as exc:
            return TurnResult("failed", str(exc))
        finally:
            turn.cancel("the turn ended")  # nothing of this turn may outlive it
            self._turn = None
            self._answer_unstarted_calls()
            if self.compactor is not None:
                await self.compactor.after_turn(self)

    async def _turn_loop(self, turn: Turn, text: str) -> TurnResult:
        assert self.compactor is not None
        self.messages.append({"role": "user", "content": text})
        await self._checkpoint()
        for _ in range(self.settings.max_turns):
            if turn.cancelled:
                return TurnResult("interrupted", turn.reason)
            limit = self._limit_reached()
            if limit:
                return TurnResult("limit", limit)
            fits = await self.compactor.before_request(self)
            if fits is not None:
                return TurnResult("failed", fits)
            outcome = await self._ask_model(turn)
            if outcome.interrupted:
                if outcome.partial_text:
                    self.messages.append({"role": "assistant", "content":
                                          outcome.partial_text + "\n\n[interrupted by the user]"})
                    await self._checkpoint()
                return TurnResult("interrupted", turn.reason)
            if outcome.error is not None or outcome.message is None:
                return TurnResult("failed", outcome.error or "The model returned nothing.")
            assert outcome.usage is not None
            self.usage.add(outcome.usage, self.settings.price_in, self.settings.price_out)
            self.estimator.record(
                None if outcome.usage.estimated else outcome.usage.prompt_tokens,
                len(self.messages),
            )
            self.messages.append(outcome.message)
            calls = tool_calls_of(outcome.message)
            await self._checkpoint(planned_calls=bool(calls))
            if not calls:
                return TurnResult("answered", str(outcome.message.get("content") or ""))
            batch = await self._run_tools(turn, calls)
            if batch.error is not None:
                raise StorageError(batch.error)
            if turn.cancelled:
                return TurnResult("interrupted", turn.reason)
            if any(o.status == "over_limit" for o in batch.outcomes):
                return TurnResult("limit", self._limit_reached() or "Tool-call limit reached.")
        return TurnResult(
            "limit",
            f"Stopped after {self.settings.max_turns} model requests for this message "
            "(--max-turns). Send another message to go on.",
        )

    def _answer_unstarted_calls(self) -> None:
        """After a turn that stopped between the model's tool calls and their batch (its
        checkpoint failed), answer those calls in memory: they never ran. The next
        checkpoint saves the answers; the in-memory context stays sendable."""
        for call_id in open_calls_at_end(self.messages):
            self.messages.append(tool_result(call_id, NOT_STARTED_NOTICE + "\n(The turn "
                                             "stopped before this call ran: the session could "
                                             "not be saved.)"))

    def _limit_reached(self) -> str | None:
        s = self.settings
        if self.usage.total_cost_usd >= s.max_cost_usd:
            return (f"Stopped: the session has cost ${self.usage.total_cost_usd:.4f}, "
                    f"over --max-cost-usd {s.max_cost_usd:g}.")
        if self.tool_calls >= s.max_tool_calls:
            return (f"Stopped: the session has made {self.tool_calls} tool calls "
                    f"(--max-tool-calls {s.max_tool_calls}).")
        return None

    async def _ask_model(self, turn: Turn) -> ModelOutcome:
        assert self._model_inbox is not None
        messages = list(self.messages)
        tools = tool_schemas()
        return await ask(
            self._model_inbox,
            lambda reply: ModelRequest(messages, reply, tools=tools, turn=turn,
                                       events=self.events),
            "model client",
        )

    async def _run_tools(self, turn: Turn, calls: list[dict[str, Any]]) -> BatchOutcome:
        """Run a batch and give every call exactly one result, whatever happens."""
        assert self._tools_inbox is not None
        allowed = max(0, self.settings.max_tool_calls - self.tool_calls)
        batch: BatchOutcome | None = None
        failure: HarnessError | None = None
        try:
            batch = await ask(
                self._tools_inbox,
                lambda reply: ToolBatch(calls, turn, allowed, reply),
                "tool executor",
            )
        finally:
            # Interruption recovery, shielded: no call stays without a result.
            with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
                failure = await self._record_results(calls, batch)
        if failure is not None:  # results not saved: nothing more may be sent or run
            raise failure
        if batch.crash is not None:
            raise ActorGone(batch.crash)
        return batch

    async def _record_results(
        self, calls: list[dict[str, Any]], batch: BatchOutcome | None
    ) -> HarnessError | None:
        """Append one result per call and checkpoint; the error if that could not be saved
        (returned, not raised: this runs in a ``finally`` that may be unwinding a cancel)."""
        by_id = {o.call_id: o for o in batch.outcomes} if batch else {}
        for call in calls:
            outcome = by_id.get(call["id"])
            if outcome is None:  # no answer for it: the write-ahead record decides, below
                continue
            if outcome.started:
                self.tool_calls += 1
            self.messages.append(tool_result(outcome.call_id, outcome.content))
            if outcome.status in ("interrupted", "not_started", "timed_out", "over_limit"):
                await self._emit(ToolCallFinished(outcome.call_id, outcome.name,
                                                  outcome.status.replace("_", " "), False))
        try:
            await self._checkpoint()
            if open_calls_at_end(self.messages):
                # The executor could not answer for every call (it crashed or is gone): the
                # store's recovery answers "outcome unknown" or "not executed" from the
                # write-ahead records, and the context is taken back from the store.
                assert self._writer is not None
                async with self.context_lock:
                    self.messages = await self._writer.call(lambda s, sid: s.recover(sid))
                    self.saved_len = len(self.messages)
        except HarnessError as exc:
            for call_id in open_calls_at_end(self.messages):  # whether they ran is unknown
                self.messages.append(tool_result(call_id, INTERRUPTED_NOTICE))
            return exc
        return None

    # -- commands -------------------------------------------------------------------------

    async def compact(self) -> CompactResult:
        """Compact now (``\\compact``), waiting for the result."""
        assert self.compactor is not None
        return await self.compactor.compact_now(self)

    async def fork(self) -> str:
        """Checkpoint, then copy this session into a new one; returns the new id."""
        assert self._writer is not None
        await self._checkpoint()
        return await self._writer.call(lambda s, sid: s.fork(sid))

    async def set_title(self, title: str) -> None:
        assert self._writer is not None
        await self._writer.update(title=title.strip())
        self.title = title.strip()

    async def pin(self, text: str) -> None:
        """Keep ``text`` verbatim in the context across compactions (and tell the model now)."""
        self.pinned.append(text.strip())
        self.messages.append({"role": "user", "content": f"[pinned instruction] {text.strip()}"})
        await self._checkpoint()
