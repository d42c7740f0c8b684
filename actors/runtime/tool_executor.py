"""The tool executor actor: runs one batch of tool calls at a time, in order.

For each call: parse and validate the arguments, ask the user when the mode requires it,
durably record that the call starts (write-ahead, through the checkpoint writer; a command's
process group too, once it runs; not in a batch of reads, :func:`without_effects`, whose
answer the supervisor saves with its results), run it under ``--tool-timeout``, cut output
over the cap, and wrap the result as data. Unknown tools, bad JSON, schema violations, denials, tool
failures and tool crashes all become tool results; none of them raises.

The executor owns the session's planning state (to-dos, scratchpad): the planning tools
change it from the executor's task, and every batch's answer carries a copy when it changed,
which the supervisor saves with the next checkpoint. It emits one ``ToolCallStarted`` per call
it begins and exactly one ``ToolCallFinished`` per call of the batch, whatever its outcome.

Errors: a write-ahead record that cannot be written stops the batch with the
:class:`StorageError` object in the answer; a bug in the executor itself is answered as
:class:`ActorCrashed`, with the outcomes decided before it (the other calls are then answered
from the write-ahead records by the store's recovery).

The user's hooks (:mod:`actors.hooks`) run around each call whose arguments are valid:
``PreToolUse`` before the approval question (it may block the call, whose result then says
why, change its arguments, allow it without a question or ask for one where the mode would
not; ``continue: false`` stops the turn after it), ``PostToolUse`` after a call that ran
(what it says for the model follows the result, as ``<hook_output>``). Their outcomes reach
the supervisor in ``BatchOutcome.hook_records``.

Cancellation: the batch runs inside ``turn.scope()``. When the turn is cancelled, the running
tool is cancelled (a shell tool kills its process group in its own shielded cleanup), and the
executor still answers with one outcome per call: done, interrupted while running (with the
elapsed time and any output seen), or not started. Nothing is retried or replayed.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.config import Mode
from actors.core.data_tags import wrap_result
from actors.core.errors import ActorCrashed, StorageError, ToolFailed
from actors.core.events import (
    ApprovalRequest,
    Denied,
    EventSink,
    Notice,
    ToolCallFinished,
    ToolCallStarted,
)
from actors.core.mailbox import answer
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE
from actors.core.planning import Planning
from actors.core.turn import Turn
from actors.hooks import Hooks, HookTable, PostToolUse, PreToolUse, Verdict
from actors.runtime.checkpoint_writer import CheckpointClient
from actors.store import SessionReader
from actors.tools import (
    TOOLS,
    Permission,
    Tool,
    ToolContext,
    parse_arguments,
    validate_arguments,
)
from actors.tools._base import ProcessGroup
from actors.workspace.keeper import SNAPSHOT_TOOLS, WorkspaceClient, describe_changes

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
    text: str = ""  # the same, capped but not wrapped (for the front end)

    @property
    def started(self) -> bool:
        return self.status not in ("not_started", "over_limit", "denied")


@dataclass
class ToolBatch:
    calls: list[dict[str, Any]]
    turn: Turn
    allowed: int  # calls that may still run under --max-tool-calls
    reply: MemoryObjectSendStream[BatchOutcome]
    # The store holds the answer that planned the calls: each call's "started" record is
    # written before it runs. False only for a batch :func:`without_effects` accepts, whose
    # answer is saved with its results: no record is written, and a call with effects is
    # refused (not started).
    answer_saved: bool = True
    mode: Mode | None = None  # the permission mode for this batch (None: the executor's)


@dataclass
class BatchOutcome:
    """One outcome per call decided; with ``error`` or ``crash`` the rest are open."""

    outcomes: list[CallOutcome] = field(default_factory=list)
    error: StorageError | None = None  # a write-ahead record could not be written
    crash: ActorCrashed | None = None  # the executor itself failed
    planning: Planning | None = None  # a copy of the planning state, when the batch changed it
    hook_records: list[dict[str, Any]] = field(default_factory=list)  # what the hooks did


@dataclass
class _Running:
    """The call in progress, so an interruption can say what it knows."""

    call_id: str = ""
    started_at: float | None = None
    context: ToolContext | None = None
    changed: str = ""  # what a command did to the project's files, told after its result
    records: list[dict[str, Any]] = field(default_factory=list)  # the batch's hook records
    outcome: CallOutcome | None = None  # decided (a PostToolUse hook may still be running)
    stop: str | None = None  # a hook of this call stopped the turn (``continue: false``)


def needs_approval(tool: Tool, mode: Mode) -> bool:
    if mode is Mode.SKIP_PERMISSIONS or tool.permission is Permission.READ:
        return False
    if tool.permission is Permission.EDIT:
        return mode is Mode.DEFAULT
    return True


def shows_approved_change(tool: Tool, mode: Mode) -> bool:
    """Whether a call approved by the mode itself is still shown to the user before it runs
    (an edit in acceptEdits: its diff)."""
    return mode is Mode.ACCEPT_EDITS and tool.permission is Permission.EDIT


def has_no_effects(tool: Tool | None, mode: Mode) -> bool:
    """Whether running a call of ``tool`` changes nothing a replay would repeat: a read
    (``Permission.READ``) that never waits for the user (no ``always_ask`` in this mode) and
    takes no workspace snapshot. An unknown tool (None) runs nothing."""
    if tool is None:
        return True
    return (tool.permission is Permission.READ and tool.name not in SNAPSHOT_TOOLS
            and (tool.always_ask is None or mode is Mode.SKIP_PERMISSIONS))


def without_effects(calls: list[dict[str, Any]], mode: Mode,
                    tools: dict[str, Tool] | None = None) -> bool:
    """Whether a whole batch :func:`has_no_effects`: then it needs no write-ahead record,
    and the answer that planned it may be saved with its results (one commit), since a
    crash before that commit loses only an answer nothing was done for."""
    known = TOOLS if tools is None else tools
    return all(has_no_effects(known.get(str((call.get("function") or {}).get("name", ""))),
                              mode) for call in calls)


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


def _describe_call(name: str, args: dict[str, Any]) -> str:
    if name == "run_bash":
        return f"run_bash: {args.get('command', '')}"
    if "path" in args:
        size = len(str(args.get("content", args.get("new_string", ""))))
        return f"{name}: {args['path']}" + (f" ({size} chars)" if size else "")
    return f"{name}({json.dumps(args, ensure_ascii=False)[:200]})"


class ToolExecutor:
    """Holds what every call needs and the planning state; :meth:`run` is the actor."""

    def __init__(
        self,
        *,
        mode: Mode,
        timeout: float,
        max_output_bytes: int,
        sandbox: Path,
        memory_dir: Path,
        store: SessionReader,
        writer: CheckpointClient,
        events: EventSink,
        planning: Planning,
        tools: dict[str, Tool] | None = None,
        workspace: WorkspaceClient | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.mode = mode
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self._sandbox = sandbox
        self._memory_dir = memory_dir
        self._store = store
        self._writer = writer
        self._events = events
        self._planning = planning
        self._tools = TOOLS if tools is None else tools
        self._workspace = workspace  # snapshots before and after side-effecting calls
        self._hooks = hooks or Hooks(HookTable(), session_id=writer.session_id,
                                     project=sandbox, events=events)

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
                    outcome = BatchOutcome()
                    before = self._planning.to_state()
                    try:
                        await self.run_batch(batch, outcome)
                    except Exception as exc:  # a bug here must not leave calls unanswered
                        outcome.crash = ActorCrashed(
                            f"The tool executor failed ({type(exc).__name__}: {exc})."
                        )
                    if self._planning.to_state() != before:
                        outcome.planning = self._planning.copy()
                    await answer(batch.reply, outcome)
            finally:
                self._writer.close()
                if self._workspace is not None:
                    self._workspace.close()

    async def run_batch(self, batch: ToolBatch, outcome: BatchOutcome) -> None:
        """Decide one outcome per call of ``batch`` into ``outcome`` (see the module doc)."""
        outcomes = outcome.outcomes
        running = _Running()
        if batch.mode is not None:  # \\mode changed it since the last batch
            self.mode = batch.mode
        with batch.turn.scope():
            try:
                for index, call in enumerate(batch.calls):
                    if index >= batch.allowed:
                        outcomes.append(await self._finished(self._outcome(
                            call, "over_limit",
                            "Not executed: the session's tool-call limit (--max-tool-calls) "
                            "was reached. Ask the user before going on.",
                        )))
                        continue
                    outcomes.append(await self._run_call(call, running, batch.answer_saved,
                                                         outcome.hook_records))
                    if running.stop is not None:  # the rest of the batch is not started
                        batch.turn.cancel(running.stop)
            except StorageError as exc:
                outcome.error = exc
        for call in batch.calls[len(outcomes):]:
            unfinished = self._unfinished(call, running, batch.turn, outcome.error)
            outcomes.append(await self._finished(unfinished))

    async def _finished(self, outcome: CallOutcome) -> CallOutcome:
        """Tell the front end how a call ended (once per call, whatever the outcome)."""
        if outcome.status in ("done", "failed", "denied"):  # the result's first line
            lines = outcome.content.split("\n", 2)
            preview = lines[1] if len(lines) > 1 else ""
        else:
            preview = outcome.status.replace("_", " ")
        await self._events.send(ToolCallFinished(outcome.call_id, outcome.name, preview[:200],
                                                 outcome.status == "done", outcome.text,
                                                 outcome.status))
        return outcome

    def _outcome(self, call: dict[str, Any], status: Status, text: str) -> CallOutcome:
        name = str((call.get("function") or {}).get("name", ""))
        capped = cap_output(text, self.max_output_bytes)
        return CallOutcome(str(call.get("id")), name, status, wrap_result(name, capped), capped)

    def _unfinished(
        self, call: dict[str, Any], running: _Running, turn: Turn, error: StorageError | None
    ) -> CallOutcome:
        """The outcome of a call the batch did not finish: interrupted or never started."""
        reason = turn.reason if turn.cancelled else (str(error or "") or "the batch stopped")
        if running.call_id == call.get("id") and running.outcome is not None:
            return running.outcome  # it ran; its PostToolUse hook was cut short
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

    async def _run_call(self, call: dict[str, Any], running: _Running,
                        answer_saved: bool, records: list[dict[str, Any]]) -> CallOutcome:
        call_id = str(call.get("id"))
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        raw = function.get("arguments") or "{}"
        running.call_id, running.started_at, running.context = call_id, None, None
        running.outcome = None
        running.records = records
        await anyio.lowlevel.checkpoint()  # a call of a cancelled turn is never announced
        await self._events.send(ToolCallStarted(call_id, name, str(raw)))
        outcome = await self._finished(
            await self._prepare_and_run(call, name, raw, running, answer_saved))
        if running.changed:
            await self._events.send(Notice(f"The command {running.changed}."))
            running.changed = ""
        return outcome

    async def _prepare_and_run(
        self, call: dict[str, Any], name: str, raw: Any, running: _Running, answer_saved: bool
    ) -> CallOutcome:
        tool = self._tools.get(name)
        if not answer_saved and not has_no_effects(tool, self.mode):
            return self._outcome(call, "not_started", f"{NOT_STARTED_NOTICE}\n(The answer "
                                 "that asked for it was not saved before the batch.)")
        if tool is None:
            known = ", ".join(sorted(self._tools))
            return self._outcome(call, "failed", f"Error: unknown tool '{name}'. Tools: {known}.")
        try:
            args = validate_arguments(tool, parse_arguments(raw))
        except ToolFailed as exc:
            return self._outcome(call, "failed", f"Error: {exc}")
        before = await self._hook(PreToolUse(name, dict(args), running.call_id), running)
        if before.blocked:
            return self._outcome(call, "denied", f"Blocked by a PreToolUse hook: "
                                 f"{before.feedback}\nDo not retry it unchanged.")
        if before.stop is not None:
            return self._outcome(call, "denied", "Not run: a PreToolUse hook stopped the "
                                 "turn" + (f" ({before.stop})." if before.stop else "."))
        if before.updated_input is not None:
            try:
                args = validate_arguments(tool, before.updated_input)
            except ToolFailed as exc:
                return self._outcome(call, "failed", "Error: a PreToolUse hook changed the "
                                     f"arguments into ones the tool refuses: {exc}")
        context = ToolContext(
            sandbox=self._sandbox, memory_dir=self._memory_dir, planning=self._planning,
            store=self._store, session_id=self._writer.session_id, writer=self._writer,
            on_process_group=partial(self._record_group, running.call_id),
        )
        try:
            reason = await tool.ask_reason(context, args, self.mode)
        except ToolFailed as exc:
            return self._outcome(call, "failed", f"Error: {exc}")
        if before.decision == "ask" and not reason:
            reason = "a PreToolUse hook asks for your approval"
        if before.decision == "allow":
            pass  # a hook of the user's allowed it: no question
        elif not reason and shows_approved_change(tool, self.mode):
            await self._approved(tool, args, None, running.call_id, approved=True)  # shown
        elif reason or needs_approval(tool, self.mode):
            approval = await self._approved(tool, args, reason, running.call_id)
            if approval is not True:
                said = ""
                if isinstance(approval, Denied) and approval.reason.strip():
                    said = f" The user's reason: {approval.reason.strip()}"
                    said += "" if said.endswith((".", "!", "?")) else "."
                return self._outcome(
                    call, "denied",
                    f"Denied: the user did not approve {_describe_call(name, args)}.{said} "
                    "Do not retry it unchanged; ask the user what to do instead.",
                )
        workspace = self._workspace if name in SNAPSHOT_TOOLS else None
        if workspace is not None:  # the files as they are before it runs, kept first
            await workspace.snapshot("before", running.call_id, name)
        if answer_saved:  # else a read: a replay would change nothing
            await self._writer.mark_started([running.call_id])
        running.context, running.started_at = context, time.monotonic()
        try:
            with anyio.move_on_after(self.timeout) as deadline:
                try:
                    text = await tool.run(context, args)
                    status: Status = "done"
                except ToolFailed as exc:
                    text, status = f"Error: {exc}", "failed"
                except Exception as exc:  # a tool bug must not take the harness down
                    text = f"Error: the tool crashed ({type(exc).__name__}: {exc})."
                    status = "failed"
            if deadline.cancelled_caught:
                seen = "".join(context.progress)
                text = (
                    f"{INTERRUPTED_NOTICE}\n(Timed out after {self.timeout:g} s "
                    "(--tool-timeout); the call was stopped"
                    + ("; the command's process group was killed" if name == "run_bash"
                       else "")
                    + ".)"
                    + (f"\nOutput before the timeout:\n{seen}" if seen else "")
                )
                status = "timed_out"
            running.started_at = None
            outcome = running.outcome = self._outcome(call, status, text)
            if status == "done":  # before the snapshot: what a formatter hook changes is
                outcome = await self._post_tool_use(outcome, args, running)  # the call's
        except BaseException:  # interrupted: what it changed is recorded, not waited for
            if workspace is not None:
                workspace.note("after", running.call_id, name)
            raise
        if workspace is not None:  # done, failed or timed out: what it changed, recorded
            taken = await workspace.snapshot("after", running.call_id, name)
            if taken is not None and taken.changes and name == "run_bash":
                running.changed = describe_changes(taken.changes)
        return outcome

    async def _post_tool_use(self, outcome: CallOutcome, args: dict[str, Any],
                             running: _Running) -> CallOutcome:
        """The PostToolUse hooks of a call that ran; what they say for the model follows
        its result."""
        after = await self._hook(PostToolUse(outcome.name, dict(args), outcome.call_id,
                                             outcome.text), running)
        said = "\n\n".join(filter(None, (after.feedback, after.context)))
        if not said:
            return outcome
        block = after.for_model("PostToolUse", said)
        return replace(outcome, content=f"{outcome.content}\n{block}",
                       text=f"{outcome.text}\n{block}")

    async def _hook(self, event: PreToolUse | PostToolUse, running: _Running) -> Verdict:
        """Run the hooks of ``event``; what they did goes to the batch's records, and a
        ``continue: false`` stops the turn once this call has its outcome."""
        verdict = await self._hooks.fire(event, self.mode.value)
        running.records.extend(verdict.records)
        if verdict.stop is not None and running.stop is None:
            running.stop = f"stopped by a {event.name} hook" + (
                f": {verdict.stop}" if verdict.stop else "")
        return verdict

    async def _record_group(self, call_id: str, group: ProcessGroup) -> None:
        """Write-ahead: the process group a started call runs in, so recovery after a kill -9
        can stop what survived. Not being able to record it does not stop the command (the
        guardian in its group still ends it with the harness)."""
        with contextlib.suppress(StorageError):
            await self._writer.mark_process_group(call_id, group.pgid,
                                                  group.leader_start_time)

    async def _approved(
        self, tool: Tool, args: dict[str, Any], reason: str | None, call_id: str, *,
        approved: bool = False,
    ) -> bool | Denied:
        """True if the user approved; False or a :class:`Denied` (with a reason) if not.
        ``approved``: the mode approved it; the front end only shows the change (its answer,
        once it has, is not a decision)."""
        if not self._events.listening:
            return approved
        reply_send, reply_receive = anyio.create_memory_object_stream[bool | Denied](1)
        async with reply_receive:
            description = _describe_call(tool.name, args) + (f" (asks: {reason})" if reason else "")
            request = ApprovalRequest(tool.name, description, reply_send, dict(args),
                                      reason or "", call_id, approved=approved)
            if not await self._events.send(request):
                reply_send.close()
                return False
            try:
                answer = await reply_receive.receive()
            except anyio.EndOfStream:
                return False
            return answer if isinstance(answer, Denied) else answer is True
