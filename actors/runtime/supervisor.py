"""The supervisor: holds the session lease and the working context, starts the actors, and
runs user turns.

One :class:`Supervisor` per run of the harness. ``Supervisor.open(...)`` takes the lease (a
second process, or a second run in this process, fails at once), creates or resumes the session
(resume checks, recovery of interrupted tool calls), starts the checkpoint writer, the model
client, the tool executor and the compactor in one task group, and yields. :meth:`run_turn`
runs one user message through model → tools → model … and always leaves the saved context
valid.

The supervisor alone owns the working context (:class:`~actors.runtime.context.WorkingContext`)
and the lease; the actors get requests through their inboxes and answer on reply streams. The
compactor gets a snapshot and answers with a plan, which the supervisor applies (or not) under
its own rule. The front end learns what it shows from events: :class:`SessionOpened` first,
then ``ContextGauge`` after every checkpoint, ``CompactionState``, ``TitleChanged`` and
``PlanningChanged`` as they happen. Its commands are the public methods.

Cancellation:
- :meth:`abort` (Ctrl-C) cancels the current turn. Actors bound to the turn stop and still
  answer: the supervisor then gives every tool call of the batch a result (done, interrupted
  while running, or not started), checkpoints, and returns ``interrupted``. No tool is replayed.
- A background compaction has its own cancellation; leaving cancels it, and nothing of it is
  applied unless its write completed.
- If the task running the supervisor is cancelled (SIGTERM, the front end exiting), the actors
  are cancelled with it, and the shielded, bounded shutdown runs recovery from the write-ahead
  records, writes the fallback summary, sets the status and releases the lease.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.budget import (
    SMALL_CONTEXT_TOKENS,
    UsageTotals,
    estimate_fixed,
    estimate_message,
    estimate_tools,
)
from actors.core.compaction import CompactionPlan, CompactResult, NoCompaction, split_point
from actors.core.config import Mode, Settings
from actors.core.errors import (
    ActorGone,
    HarnessError,
    LimitReached,
    ProjectMismatch,
    SessionArchived,
    StorageError,
    UsageError,
)
from actors.core.events import (
    ApprovalsChanged,
    CompactionState,
    ContextGauge,
    Event,
    EventSink,
    Notice,
    PlanningChanged,
    SessionOpened,
    SettingsChanged,
    TitleChanged,
)
from actors.core.ids import new_session_id
from actors.core.mailbox import ask
from actors.core.messages import (
    NO_ANSWER_NOTICE,
    NOT_STARTED_NOTICE,
    PINNED_PREFIX,
    SHOWN,
    Message,
    open_calls_at_end,
    tool_calls_of,
    tool_result,
)
from actors.core.previews import clean_title, own_user_text
from actors.core.prompts import fit_instructions, read_memory_notes, system_prompt
from actors.core.stored import StoredMessages
from actors.core.titles import provisional_title
from actors.core.turn import Turn
from actors.hooks import (
    HookEvent,
    Hooks,
    HookTable,
    PreCompact,
    SessionEnd,
    SessionStart,
    Stop,
    UserPromptSubmit,
    Verdict,
    load_hooks,
)
from actors.model import (
    ModelClient,
    ModelOutcome,
    ModelRequest,
    RetryPolicy,
)
from actors.runtime.checkpoint_writer import CheckpointClient, Write, run_checkpoint_writer
from actors.runtime.compactor import CompactAnswer, Compactor, CompactRequest
from actors.runtime.context import ContextSnapshot, WorkingContext
from actors.runtime.instructions import read_instructions
from actors.runtime.lease import hold_lease
from actors.runtime.recovery import answer_batch, save_batch
from actors.runtime.rewind import RewindOutcome, RewindRequest, at_open, carry_out
from actors.runtime.rewind import check as rewind_check
from actors.runtime.titler import ask_for_title
from actors.runtime.tool_executor import (
    BatchOutcome,
    ToolBatch,
    ToolExecutor,
    without_effects,
)
from actors.store import Compaction, Store, UserMessage, timestamp
from actors.store import Rewound as ConversationRewound
from actors.tools import startup_warnings, tool_schemas
from actors.workspace.keeper import Request, WorkspaceClient, WorkspaceKeeper

if TYPE_CHECKING:  # the workspace's engine is imported once it is opened (after the prompt)
    from actors.workspace import Finished, Interrupted, ObjectStore, RewindPlan, Rewound

SHUTDOWN_SECONDS = 15
REPLAY_MESSAGES = 12  # the end of the context a resumed session shows before the prompt
Outcome = Literal["answered", "interrupted", "failed", "limit"]


@dataclass
class TurnResult:
    outcome: Outcome
    text: str = ""  # the final answer (answered) or the reason (otherwise)
    usage: UsageTotals | None = None  # what this turn used (model calls, tokens, cost)

    @property
    def ok(self) -> bool:
        return self.outcome == "answered"


def latest_session_of(store: Store, project_root: str) -> str:
    """The id of the most recently updated, unarchived session of this project that the user
    typed something in (--continue)."""
    for item in store.list_sessions(project_root=project_root, include_empty=False, limit=1):
        return str(item["id"])
    raise UsageError(f"No saved session for this project ({project_root}) to continue.")


def _restored_choices(settings: Settings, mode: str, model: str
                      ) -> tuple[Mode, str, str | None]:
    """The mode and the model a resumed session runs with: what it saved, unless the
    command line chose (``--mode``, ``--model``); dangerouslySkipPermissions is never taken
    back silently (the notice says how). The notice, if any."""
    chosen_model = model if model and "model" not in settings.chosen else settings.model
    if not mode or "mode" in settings.chosen or mode == settings.mode.value:
        return settings.mode, chosen_model, None
    try:
        saved = Mode(mode)
    except ValueError:
        return settings.mode, chosen_model, None
    if saved is Mode.SKIP_PERMISSIONS:
        return settings.mode, chosen_model, (
            f"This session last ran in {saved.value}; it runs in {settings.mode.value} now "
            f"(\\mode {saved.value} to go back, or --mode on the command line).")
    return saved, chosen_model, None


def _not_closed_cleanly(session_id: str, recovered: int) -> str:
    if recovered == 0:
        return f"Session {session_id} was not closed cleanly; no tool call was left open."
    calls = "1 interrupted tool call was" if recovered == 1 else (
        f"{recovered} interrupted tool calls were")
    return (f"Session {session_id} was not closed cleanly; {calls} answered as interrupted "
            "(nothing was run again).")


def _unanswered(messages: Sequence[Message]) -> bool:
    """Whether the context ends with a message the user typed that got no answer (its
    request failed, or was interrupted before any text came)."""
    if not messages:
        return False
    if isinstance(messages, StoredMessages) and messages.role(len(messages) - 1) != "user":
        return False  # read from the stored text: nothing parsed
    last = messages[-1]
    text = own_user_text(last)
    return text is not None and not str(last.get("content") or "").startswith(PINNED_PREFIX)


def _nothing_to_keep(messages: Sequence[Message]) -> bool:
    """Whether ``messages`` hold no answer of the model (a tool call is one) and no pin:
    nothing but messages that failed."""
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant" and content != NO_ANSWER_NOTICE:
            return False
        if isinstance(content, str) and content.startswith(PINNED_PREFIX):
            return False
    return True


@dataclass
class _Compaction:
    """The compaction in flight (at most one at a time)."""

    job: Turn = field(default_factory=Turn)  # its cancellation
    done: anyio.Event = field(default_factory=anyio.Event)
    announced: anyio.Event = field(default_factory=anyio.Event)  # CompactionState(True) sent
    result: CompactResult | None = None
    waiting: int = 0  # callers waiting for the result; with none, it is announced


@dataclass
class _Actors:
    """The inboxes of the running actors and the task group they run in."""

    writer: CheckpointClient
    model: MemoryObjectSendStream[ModelRequest]
    tools: MemoryObjectSendStream[ToolBatch]
    compactor: MemoryObjectSendStream[CompactRequest]
    workspace: WorkspaceClient
    tasks: anyio.abc.TaskGroup


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        session_id: str,
        events: MemoryObjectSendStream[Event] | None,
    ) -> None:
        self.session_id = session_id
        self._settings = settings
        self._store = store
        self._events = EventSink(events)  # shared with the actors
        # A small budget gets the compact system prompt and tools (actors.core.prompts);
        # so does a small context the model client learns from the server (small_tools).
        self._small = settings.max_context_tokens <= SMALL_CONTEXT_TOKENS
        # The tools of this run, one list for every request (the model client keeps their
        # JSON while it is the same list).
        self._tools = tool_schemas(compact=self._small)
        self._small_tools = None if self._small else tool_schemas(compact=True)
        self._context = WorkingContext(overhead=estimate_tools(self._tools))
        self._context_lock = anyio.Lock()  # a checkpoint and a context replacement never overlap
        self._turn: Turn | None = None
        self._actors: _Actors | None = None
        self._compaction: _Compaction | None = None
        self._created = False  # this run created the session (removed if nothing was typed)
        self._title_source = ""  # where the title came from (actors.core.titles)
        self._titling: Turn | None = None  # the title call in flight, if any
        self._last_failed = False  # the last turn failed (not interrupted, not answered)
        # The permission mode and the model in force: the run's settings, or what a resumed
        # session saved (\\mode, \\model change them; saved in the context's state).
        self._mode = settings.mode
        self._model = settings.model
        self._choice_notice: str | None = None  # a saved choice that was not restored
        # The user's message of the running turn until it is saved: (what the model gets,
        # what the user typed), for what follows its checkpoint (_save_step).
        self._typed: tuple[str, str] | None = None
        # What the open found of interrupted rewinds (actors.runtime.rewind.at_open): what to
        # say, and the workspace objects it opened, handed to the keeper.
        self._rewind_said: tuple[str, ...] = ()
        self._workspace_objects: ObjectStore | None = None
        self._interactive = False  # the REPL: a rewind left for the user is said, not refused
        # The user's hooks (read with the settings files at the open), what the open has to
        # say (settings and AGENTS.md files left out or cut), how the session started (the
        # SessionStart hooks' source), and what hooks gave the model for the next message.
        self._hooks = Hooks(HookTable(), session_id=session_id, project=settings.sandbox_dir,
                            events=self._events)
        self._open_said: list[str] = []
        self._start_source: Literal["startup", "resume", "fork"] = "startup"
        self._hook_context: list[str] = []

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
        new_id: str | None = None,
        interactive: bool = False,
    ) -> AsyncIterator[Supervisor]:
        """Take the lease, create or resume the session, run the actors; see the module doc.
        ``new_id``: the id of the session to create (the front end may have shown it
        already); None: a fresh one. ``interactive`` (the REPL): a rewind of the project's
        files left for the user at the open is said; otherwise it is refused (one line)."""
        project_root = str(settings.sandbox_dir)
        if continue_latest:
            resume = await anyio.to_thread.run_sync(latest_session_of, store, project_root)
        if resume:
            await anyio.to_thread.run_sync(store.info, resume)  # unknown id: no lock file
        session_id = resume or new_id or new_session_id()
        async with hold_lease(store, session_id):
            self = cls(settings, store, session_id, events)
            self._interactive = interactive
            self._hooks, self._open_said = await anyio.to_thread.run_sync(
                load_hooks, settings, session_id, self._events)
            if resume:
                opened = await anyio.to_thread.run_sync(self._resume, project_root)
            else:
                opened = await anyio.to_thread.run_sync(self._create, project_root)
            status = "aborted"
            ended: Literal["prompt_input_exit", "other"] = "other"
            try:
                async with self._running_actors():
                    await self._events.send(opened)
                    for line in (*self._rewind_said, *self._open_said):
                        await self.notify(line, "warning")
                    if self._choice_notice:
                        await self.notify(self._choice_notice, "warning")
                    if opened.crashed_before or opened.recovered_calls:
                        await self.notify(_not_closed_cleanly(session_id,
                                                              opened.recovered_calls),
                                          "warning")
                    await self._events.send(PlanningChanged(self._context.planning.render()))
                    await self._gauge()
                    for warning in await anyio.to_thread.run_sync(
                        startup_warnings, settings.sandbox_dir, settings.memory_dir, store.reader
                    ):
                        await self.notify(warning, "warning")
                    await self._session_started(self._start_source)
                    yield self
                status, ended = "saved", "prompt_input_exit"
            except anyio.get_cancelled_exc_class():
                status = "saved"  # stopped from outside (SIGTERM): a clean exit
                raise
            finally:
                end = SessionEnd(ended)  # its hooks' own timeouts, and a grace to report
                with anyio.move_on_after(self._hooks.longest(end) + SHUTDOWN_SECONDS,
                                         shield=True):
                    await self._hook(end)
                with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
                    await anyio.to_thread.run_sync(self._finish, status)

    def _create(self, project_root: str) -> SessionOpened:
        self._rewinds_at_open(resumed=False)  # before the session exists: a refusal leaves none
        settings = self._settings
        notes = read_memory_notes(settings.memory_dir, settings.sandbox_dir)
        found = read_instructions(settings.sandbox_dir, [settings.memory_dir,
                                                         self._store.memory_dir])
        instructions = fit_instructions(found.files, compact=self._small)
        self._context.instructions = [doc.as_state() for doc in instructions]
        self._open_said += found.problems + [
            f"{doc.path} is cut to fit the prompt: {doc.omitted:,} of its "
            f"{len(doc.text) + doc.omitted:,} characters are left out." for doc in instructions
            if doc.omitted]
        messages = [
            {"role": "system", "content": system_prompt(settings.sandbox_dir, notes,
                                                        compact=self._small,
                                                        instructions=instructions)}
        ]
        with contextlib.suppress(HarnessError):  # runs that died before anything was typed
            self._store.remove_abandoned()
        self._store.create_session(
            self.session_id, messages, project_root=project_root, status="active"
        )
        self._created = True
        self._context.messages = messages
        self._context.mode, self._context.model = self._mode.value, self._model
        self._store.checkpoint(self.session_id, messages, state=self._context.state())
        self._context.saved_len = len(messages)
        return SessionOpened(self.session_id, "", resumed=False, context_messages=len(messages),
                             mode=self._mode.value, model=self._model)

    def _resume(self, project_root: str) -> SessionOpened:
        info = self._store.info(self.session_id)
        if info.archived:
            raise SessionArchived(self.session_id)
        if info.project_root and info.project_root != project_root:
            raise ProjectMismatch(self.session_id, info.project_root)
        if not info.project_root:  # an older record: its snapshots are this project's now
            self._store.update(self.session_id, project_root=project_root)
        if self._rewinds_at_open(resumed=True):  # the context may have moved back
            info = self._store.info(self.session_id)
        before = info.transcript_messages
        messages = self._store.recover(self.session_id)
        recovered = self._store.info(self.session_id).transcript_messages - before
        self._context = WorkingContext.restored(messages, info.state,
                                                overhead=estimate_tools(self._tools))
        self._mode, self._model, self._choice_notice = _restored_choices(
            self._settings, self._context.mode, self._context.model)
        self._context.mode, self._context.model = self._mode.value, self._model
        self._title_source = info.title_source
        self._start_source = "fork" if info.state.get("forked") else "resume"
        self._store.update(self.session_id, status="active")
        recent = self._store.recent_messages(self.session_id, REPLAY_MESSAGES)
        return SessionOpened(
            self.session_id, info.title, resumed=True, context_messages=len(messages),
            recovered_calls=recovered,
            crashed_before=info.status == "active",  # we hold the lease: its holder died
            saved_approvals=tuple(str(r) for r in info.state.get("approvals", [])),
            recent=tuple(recent), parent_id=info.parent_id, fork_point=info.fork_point,
            mode=self._mode.value, model=self._model,
        )

    def _rewinds_at_open(self, *, resumed: bool) -> bool:
        """Interrupted rewinds, taken up before the context is read (see
        :func:`actors.runtime.rewind.at_open`); whether there was anything to say."""
        opened = at_open(self._store, self._settings.memory_dir, self.session_id,
                         self._settings.sandbox_dir, resumed=resumed,
                         interactive=self._interactive)
        self._workspace_objects, self._rewind_said = opened.objects, opened.said
        return bool(opened.said)

    def _finish(self, status: str) -> None:
        """Shutdown writes (the actors are gone): recover, fallback summary, usage, status.
        A session this run created in which nothing was typed, or whose messages all failed
        (no answer, no pin; its last turn failed: not interrupted), is removed instead: it
        is no work to go back to, and ``--continue`` would pick it."""
        if self._created:
            with contextlib.suppress(HarnessError):
                if (self._store.info(self.session_id).user_messages == 0
                        or (self._last_failed and _nothing_to_keep(self._context.messages))):
                    self._store.delete(self.session_id)
                    return
        with contextlib.suppress(HarnessError):
            self._store.recover(self.session_id)
        with contextlib.suppress(HarnessError):  # a title call's cost, after the last turn
            self._store.update(self.session_id, state=self._context.state())
        with contextlib.suppress(HarnessError):
            self._store.ensure_summary(self.session_id)
        with contextlib.suppress(HarnessError):
            self._store.update(self.session_id, status=status)

    @contextlib.asynccontextmanager
    async def _running_actors(self) -> AsyncIterator[None]:
        settings = self._settings
        writer_send, writer_receive = anyio.create_memory_object_stream[Write](16)
        model_send, model_receive = anyio.create_memory_object_stream[ModelRequest](4)
        tools_send, tools_receive = anyio.create_memory_object_stream[ToolBatch](1)
        compact_send, compact_receive = anyio.create_memory_object_stream[CompactRequest](1)
        files_send, files_receive = anyio.create_memory_object_stream[Request](32)
        workspace = WorkspaceClient(files_send)
        model = ModelClient(base_url=settings.base_url, api_key=settings.api_key,
                            model=self._model, timeout=settings.llm_timeout,
                            first_token_timeout=settings.llm_first_token_timeout,
                            total_timeout=settings.llm_total_timeout,
                            answer_limit=settings.max_answer_bytes,
                            events=self._events, preflight=settings.preflight,
                            context_budget=settings.max_context_tokens,
                            fixed_tokens=(
                                estimate_fixed(self._context.messages, self._tools),
                                None if self._small_tools is None
                                else estimate_fixed(self._context.messages, self._small_tools)),
                            retry=RetryPolicy(first_backoff=settings.retry_backoff))
        executor = ToolExecutor(
            mode=self._mode, timeout=settings.tool_timeout,
            max_output_bytes=settings.max_output_bytes, sandbox=settings.sandbox_dir,
            memory_dir=settings.memory_dir, store=self._store.reader,
            writer=CheckpointClient(writer_send.clone(), self.session_id),
            events=self._events, planning=self._context.planning.copy(),
            workspace=workspace.clone(), hooks=self._hooks,
        )
        keeper = WorkspaceKeeper(project=settings.sandbox_dir, memory_dir=settings.memory_dir,
                                 store=self._store.reader, session_id=self.session_id,
                                 events=self._events, enabled=settings.workspace_snapshots,
                                 retention_days=settings.snapshot_retention_days,
                                 objects=self._workspace_objects,
                                 quota=settings.snapshot_quota_bytes)
        self._workspace_objects = None  # the keeper's from here
        compactor = Compactor(max_context_tokens=settings.max_context_tokens,
                              model_inbox=model_send.clone())
        async with anyio.create_task_group() as tg:
            await tg.start(run_checkpoint_writer, self._store, writer_receive)
            await tg.start(model.run, model_receive)
            await tg.start(executor.run, tools_receive)
            await tg.start(compactor.run, compact_receive)
            await tg.start(keeper.run, files_receive)
            self._actors = _Actors(CheckpointClient(writer_send, self.session_id), model_send,
                                   tools_send, compact_send, workspace, tg)
            try:
                yield
            finally:
                if self._compaction is not None:
                    self._compaction.job.cancel("the harness is exiting")
                if self._titling is not None:
                    self._titling.cancel("the harness is exiting")
                for stream in (tools_send, model_send, compact_send, writer_send):
                    stream.close()
                workspace.close()

    def _running(self) -> _Actors:
        if self._actors is None:
            raise ActorGone("The session's actors are not running.")
        return self._actors

    # -- what others may see --------------------------------------------------------------

    def snapshot(self) -> ContextSnapshot:
        """A read-only copy of the working context (for inspection; changing it changes
        nothing)."""
        return self._context.snapshot()

    async def notify(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        await self._events.send(Notice(text, level))

    async def _gauge(self) -> None:
        await self._events.send(ContextGauge(self._context.tokens(),
                                             self._settings.max_context_tokens,
                                             self._context.usage.total_cost_usd))

    async def _hook(self, event: HookEvent) -> Verdict:
        """Run the hooks of ``event`` (:mod:`actors.hooks`) and keep what they did in the
        session's state (saved with the next checkpoint)."""
        verdict = await self._hooks.fire(event, self._mode.value)
        self._context.log_hooks(verdict.records)
        return verdict

    async def _session_started(self, source: Literal["startup", "resume", "fork", "compact"]
                               ) -> None:
        """``SessionStart``: what its hooks say for the model goes with the next message."""
        verdict = await self._hook(SessionStart(source, self._model))
        if verdict.context:
            self._hook_context.append(verdict.for_model("SessionStart", verdict.context))

    async def _checkpoint(self, *, planned_calls: bool = False,
                          taken: anyio.Event | None = None) -> int:
        """Save the context; the number the latest message got in the transcript (as --info
        numbers them). ``taken`` is set once the writer's thread has the write."""
        writer = self._running().writer
        context = self._context
        async with self._context_lock:
            at, new = context.unsaved()
            number = await writer.append(new, at=at, state=context.state(),
                                         planned_calls=planned_calls, taken=taken)
            context.saved_len = at + len(new)
        await self._gauge()
        return number

    async def _save_step(self, taken: anyio.Event | None = None) -> None:
        """Checkpoint what the turn added; once the user's message is saved, note it for the
        workspace's snapshot (taken while the model thinks) and announce the provisional
        title the store set in that checkpoint. ``taken``: see :meth:`_checkpoint`."""
        typed = self._typed
        number = await self._checkpoint(taken=taken)
        if typed is None:
            return
        self._typed = None
        self._running().workspace.note("message", message=number)
        text, shown = typed
        if not self._title_source and text.strip():
            self._title_source = "provisional"
            await self._events.send(TitleChanged(provisional_title(shown), "provisional"))

    async def _save_pending(self) -> None:
        """Save what the turn added and no request carried yet (before a compaction, or as
        the turn stops without asking the model again)."""
        if self._context.saved_len < len(self._context.messages):
            await self._save_step()

    # -- the turn -------------------------------------------------------------------------

    def abort(self, reason: str = "interrupted by the user") -> bool:
        """Cancel the running turn (safe to call from any task of this event loop)."""
        if self._turn is None:
            return False
        self._turn.cancel(reason)
        return True

    async def run_turn(self, text: str, *, shown: str | None = None) -> TurnResult:
        """Run one user message to its end: answered, interrupted, failed or stopped by a limit.

        ``text`` is the message the model gets; ``shown``, when it differs, is what the user
        typed (``@path`` attachments make the difference): the transcript keeps it beside the
        message for showing, and no request carries it.

        Storage failures stop the turn before the next model request or tool runs, with the
        cause in the result; the last good checkpoint stays intact.
        """
        if self._turn is not None:
            raise UsageError("A turn is already running.")
        turn = self._turn = Turn()
        before = replace(self._context.usage)
        result = TurnResult("failed", "The turn did not end.")
        try:
            result = await self._turn_loop(turn, text, shown)
        except LimitReached as exc:
            result = TurnResult("limit", str(exc))
        except StorageError as exc:
            result = TurnResult("failed", f"Could not save the session: {exc} The turn "
                                "stopped; the last saved checkpoint is intact.")
        except HarnessError as exc:  # an actor gone or crashed
            result = TurnResult("failed", str(exc))
        finally:
            turn.cancel("the turn ended")  # nothing of this turn may outlive it
            self._turn = None
            self._answer_unstarted_calls()
            await self._after_turn()
        result.usage = self._context.usage.minus(before)
        self._last_failed = result.outcome in ("failed", "limit")
        if result.ok:
            self._start_title(shown or text, result.text)
        return result

    async def _turn_loop(self, turn: Turn, text: str, shown: str | None) -> TurnResult:
        context = self._context
        with turn.scope():  # Ctrl-C stops the hooks (their process groups killed)
            verdict = await self._hook(UserPromptSubmit(shown if shown is not None else text))
        if turn.cancelled:
            return TurnResult("interrupted", turn.reason)
        if verdict.blocked or verdict.stop is not None:  # the prompt is not sent, nor kept
            why = verdict.feedback if verdict.blocked else verdict.stop
            return TurnResult("failed", "A UserPromptSubmit hook blocked the message"
                              + (f": {why}" if why else "."))
        if verdict.context:
            self._hook_context.append(verdict.for_model("UserPromptSubmit", verdict.context))
        if self._hook_context:  # the model reads it with the message; the user's text is kept
            shown = text if shown is None else shown
            text = "\n\n".join([text, *self._hook_context])
            self._hook_context = []
        message = {"role": "user", "content": text}
        if shown is not None and shown != text:
            message[SHOWN] = shown
        if _unanswered(context.messages):  # the last message failed: say so in its place
            context.messages.append({"role": "assistant", "content": NO_ANSWER_NOTICE})
        context.messages.append(message)
        self._typed = (text, shown or text)  # saved with the first request (_ask_model)
        try:
            return await self._steps(turn)
        except LimitReached:
            await self._save_pending()
            raise

    async def _steps(self, turn: Turn) -> TurnResult:
        """Model requests and tool batches until an answer, a failure or a limit. What a
        step adds is saved with the next request (:meth:`_ask_model`) or before the step
        ends the turn (a failure to save raises :class:`StorageError`)."""
        context = self._context
        stopped = False  # the turn goes on because a Stop hook said so
        for _ in range(self._settings.max_turns):
            if turn.cancelled:
                await self._save_pending()
                return TurnResult("interrupted", turn.reason)
            self._check_limits()
            fits = await self._fit_budget(turn)
            if turn.cancelled:  # while it waited for a compaction (which goes on)
                await self._save_pending()
                return TurnResult("interrupted", turn.reason)
            if fits is not None:
                return TurnResult("failed", fits)
            outcome = await self._ask_model(turn)
            if outcome.interrupted:
                if outcome.partial_text:
                    text = outcome.partial_text + "\n\n[interrupted by the user]"
                    context.messages.append({"role": "assistant", "content": text})
                    await self._checkpoint()
                return TurnResult("interrupted", turn.reason)
            if outcome.error is not None or outcome.message is None:
                return TurnResult("failed", str(outcome.error or "The model returned nothing."))
            assert outcome.usage is not None
            context.usage.add(outcome.usage, self._settings.price_in, self._settings.price_out)
            context.estimator.record(
                None if outcome.usage.estimated else outcome.usage.prompt_tokens,
                len(context.messages),
            )
            if outcome.reasoning_only:  # nothing to save: the context still ends with the user
                await self._checkpoint()
                return TurnResult("failed", outcome.reasoning_only_reason())
            context.messages.append(outcome.message)
            calls = tool_calls_of(outcome.message)
            if outcome.cut_tool_calls:  # arguments may be incomplete: answered, never run
                context.messages.extend(tool_result(c["id"], outcome.cut_call_result)
                                        for c in calls)
                await self._checkpoint()
                return TurnResult("failed", outcome.cut_calls_reason)
            if not calls:
                more = await self._stop_hook(turn, outcome.message, stopped)
                if more is not None:  # a Stop hook asked the turn to go on, and said why
                    context.messages.append({"role": "user", "content": more})
                    stopped = True
                    continue
                await self._checkpoint()
                if outcome.cut:
                    await self.notify(outcome.cut_notice, "warning")
                return TurnResult("answered", str(outcome.message.get("content") or ""))
            # A batch of reads is run at once and its answer saved with its results, in one
            # commit, with the next request; any other batch's answer is saved first, with
            # its calls recorded as planned (see tool_executor.without_effects).
            answer_saved = not without_effects(calls, self._mode)
            if answer_saved:
                await self._checkpoint(planned_calls=True)
            batch = await self._run_tools(turn, calls, answer_saved=answer_saved)
            if batch.error is not None:
                raise batch.error
            if turn.cancelled:
                await self._save_pending()
                return TurnResult("interrupted", turn.reason)
            if any(o.status == "over_limit" for o in batch.outcomes):
                self._check_limits()
                raise LimitReached("Tool-call limit reached.")
        raise LimitReached(
            f"Stopped after {self._settings.max_turns} model requests for this message "
            "(--max-turns). Send another message to go on."
        )

    async def _stop_hook(self, turn: Turn, answer: Message, active: bool) -> str | None:
        """``Stop``: the feedback that makes the turn go on (as the model gets it), or None."""
        with turn.scope():
            verdict = await self._hook(Stop(active, str(answer.get("content") or "")))
        if turn.cancelled or not verdict.blocked or verdict.stop is not None:
            return None
        return verdict.for_model("Stop", verdict.feedback)

    def _answer_unstarted_calls(self) -> None:
        """After a turn that stopped between the model's tool calls and their batch (its
        checkpoint failed), answer those calls in memory: they never ran. The next
        checkpoint saves the answers; the in-memory context stays sendable."""
        messages = self._context.messages
        for call_id in open_calls_at_end(messages):
            messages.append(tool_result(call_id, NOT_STARTED_NOTICE + "\n(The turn stopped "
                                        "before this call ran: the session could not be "
                                        "saved.)"))

    def _check_limits(self) -> None:
        """Raise :class:`LimitReached` when a session limit stops the turn."""
        s, context = self._settings, self._context
        if context.usage.total_cost_usd >= s.max_cost_usd:
            raise LimitReached(f"Stopped: the session has cost ${context.usage.total_cost_usd:.4f}"
                               f", over --max-cost-usd {s.max_cost_usd:g}.")
        if context.tool_calls >= s.max_tool_calls:
            raise LimitReached(f"Stopped: the session has made {context.tool_calls} tool calls "
                               f"(--max-tool-calls {s.max_tool_calls}).")

    async def _ask_model(self, turn: Turn) -> ModelOutcome:
        """The model's answer to the context. What the context holds unsaved (the user's
        message; a batch of reads with the answer that asked for it) is checkpointed while
        the request goes out: nothing of the answer is shown or used before that checkpoint
        is durable (:attr:`ModelRequest.saved`), and when it fails the request is cancelled
        (with the turn) and its error raised here."""
        inbox = self._running().model
        # The context's own message objects (a copy of the sequence: what this request
        # holds): the model client recognises those it has encoded before, takes stored rows
        # not yet parsed as stored, and leaves out the keys only the harness reads; new dicts
        # here (or a list, which parses every stored row) would make it encode them again.
        context = self._context.messages
        messages = context.copy() if isinstance(context, StoredMessages) else list(context)
        tools = self._tools

        def request(saved: anyio.Event | None
                    ) -> Callable[[MemoryObjectSendStream[Any]], ModelRequest]:
            return lambda reply: ModelRequest(messages, reply, tools=tools, turn=turn,
                                              events=self._events, saved=saved,
                                              small_tools=self._small_tools,
                                              model=self._model)

        if self._context.saved_len == len(context):
            outcome: ModelOutcome = await ask(inbox, request(None), "model client")
            return outcome
        taken, saved = anyio.Event(), anyio.Event()
        failed: list[HarnessError] = []

        async def save() -> None:
            try:
                await self._save_step(taken)
            except HarnessError as exc:
                failed.append(exc)
                turn.cancel("the session could not be saved")  # the answer is dropped
            finally:
                taken.set()
                saved.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(save)
            # The write goes to the writer's thread first: building and sending the request
            # holds the event loop for a while, and the commit runs meanwhile.
            await taken.wait()
            outcome = await ask(inbox, request(saved), "model client")
        if failed:
            raise failed[0]
        return outcome

    async def _run_tools(self, turn: Turn, calls: list[dict[str, Any]], *,
                         answer_saved: bool = True) -> BatchOutcome:
        """Run a batch and give every call exactly one result, whatever happens (saved with
        the answer that planned the calls when that is not saved yet: ``answer_saved``)."""
        inbox = self._running().tools
        allowed = max(0, self._settings.max_tool_calls - self._context.tool_calls)
        batch: BatchOutcome | None = None
        failure: HarnessError | None = None
        try:
            batch = await ask(inbox, lambda reply: ToolBatch(calls, turn, allowed, reply,
                                                             answer_saved, self._mode),
                              "tool executor")
        finally:
            # Interruption recovery, shielded: no call stays without a result.
            with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
                failure = await self._record_results(
                    calls, batch, defer=not answer_saved and not turn.cancelled)
        if failure is not None:  # results not saved: nothing more may be sent or run
            raise failure
        assert batch is not None
        if batch.crash is not None:
            raise batch.crash
        return batch

    async def _record_results(
        self, calls: list[dict[str, Any]], batch: BatchOutcome | None, *, defer: bool = False
    ) -> HarnessError | None:
        """Settle the batch in the context and save it (see :mod:`.recovery`); the error if
        that could not be saved (returned, not raised: this runs in a ``finally`` that may
        be unwinding a cancel). With ``defer`` (a batch of reads, whose answer is not saved
        yet), a batch that answered every call is saved with the next request instead."""
        writer = self._running().writer
        if batch is not None:
            self._context.log_hooks(batch.hook_records)
        if batch is not None and batch.planning is not None:
            self._context.planning = batch.planning
            await self._events.send(PlanningChanged(batch.planning.render()))
        async with self._context_lock:
            answer_batch(self._context, calls, batch)
            if (defer and batch is not None and batch.error is None and batch.crash is None
                    and not open_calls_at_end(self._context.messages)):
                return None
            failure = await save_batch(self._context, writer)
        await self._gauge()
        return failure

    # -- compaction -----------------------------------------------------------------------

    def _over(self, fraction: float) -> bool:
        return self._context.tokens() > self._settings.max_context_tokens * fraction

    async def _after_turn(self) -> None:
        """Start a background compaction if the context passed the threshold."""
        if (
            self._compaction is None
            and self._actors is not None
            and self._over(self._settings.compact_threshold)
            and split_point(self._context.messages) is not None  # else nothing to summarise
        ):
            await self._start_compaction("auto")

    async def _fit_budget(self, turn: Turn) -> str | None:
        """Make sure the next request fits the hard budget; a message if it cannot.

        Cancellation: the waits for a compaction (its summary request, retries and their
        waits included, runs in a cancel scope of its own, not the turn's) are in the
        turn's scope, so aborting the turn stops waiting at once; the compaction goes on in
        the background and announces its result when it lands. The caller checks
        ``turn.cancelled``."""
        if not self._over(1.0):
            return None
        await self._save_pending()  # a compaction applies to what the store holds
        if self._compaction is not None:
            await self.notify("Waiting for the compaction to finish…")
            with turn.scope():
                await self._result_of(self._compaction)
        if self._over(1.0) and not turn.cancelled:
            with turn.scope():
                result = await self.compact(trigger="auto")
            if turn.cancelled:
                return None
            if self._over(1.0):
                return self._over_budget(result.message)
        return None

    def _over_budget(self, why: str) -> str:
        """Why the turn stopped before an oversized request, and what would help: a message
        that needs more than the budget holds beside the system prompt and the tools is
        made no smaller by any compaction (it keeps the latest message whole)."""
        budget = self._settings.max_context_tokens
        messages = self._context.messages
        fixed = self._context.overhead + (estimate_message(messages[0]) if messages else 0)
        last = next((estimate_message(m) for m in reversed(messages)
                     if m.get("role") == "user"), 0)
        if fixed + last > budget:
            return (f"Your message needs about {last:,} tokens and the system prompt and tools "
                    f"{fixed:,}: more than --max-context-tokens ({budget:,}) holds, and "
                    "compaction keeps the latest message whole. Send less at once (a part of "
                    "the file, or ask for it to be read in parts), or raise "
                    "--max-context-tokens if the server holds more.")
        return (f"The context (about {self._context.tokens():,} tokens) exceeds "
                f"--max-context-tokens ({budget:,}) and compaction could not bring it under "
                f"({why}). The turn stopped before sending an oversized request: \\compact "
                "tries again; a new session starts empty; or raise --max-context-tokens if "
                "the server holds more.")

    async def compact(self, *, trigger: Literal["manual", "auto"] = "manual") -> CompactResult:
        """Compact now (``\\compact``), after any background compaction, and wait for the
        result. Cancelling the wait leaves the compaction running; it announces its result
        when it lands. ``trigger``: what the PreCompact hooks are told."""
        while self._compaction is not None:
            await self._result_of(self._compaction)
        return await self._result_of(await self._start_compaction(trigger))

    async def _result_of(self, pending: _Compaction) -> CompactResult:
        pending.waiting += 1
        try:
            await pending.done.wait()
        finally:
            pending.waiting -= 1
        assert pending.result is not None
        return pending.result

    async def _start_compaction(self, trigger: Literal["manual", "auto"]) -> _Compaction:
        """Start a compaction of the context as it is now, and say so (``CompactionState``
        reaches the front end before this returns, and before the compaction's end)."""
        actors = self._running()
        pending = self._compaction = _Compaction()
        snapshot = self._context.snapshot()
        actors.tasks.start_soon(self._compaction_task, actors.compactor, pending, snapshot,
                                trigger)
        try:
            await self._events.send(CompactionState(True))
        finally:  # started either way: whoever waits for it is answered
            pending.announced.set()
        return pending

    async def _compaction_task(
        self,
        inbox: MemoryObjectSendStream[CompactRequest],
        pending: _Compaction,
        snapshot: ContextSnapshot,
        trigger: Literal["manual", "auto"],
    ) -> None:
        result = CompactResult(False, "The compactor stopped; context unchanged.")
        try:
            await pending.announced.wait()
            with pending.job.scope():
                await self._hook(PreCompact(trigger))
            plan: CompactAnswer = await ask(
                inbox, lambda reply: CompactRequest(snapshot, pending.job, reply, self._model),
                "compactor",
            )
            result = await self._apply(plan)
            if result.applied:
                with pending.job.scope():
                    await self._session_started("compact")
        except ActorGone:
            pass
        finally:
            pending.result = result
            announce = pending.waiting == 0  # in the background, or nobody waits any more
            self._compaction = None
            pending.done.set()
        await self._events.send(CompactionState(False))
        await self._gauge()
        if announce:
            await self.notify(result.message, "info" if result.applied else "warning")

    async def _apply(self, plan: CompactAnswer) -> CompactResult:
        """Apply the compactor's answer if it still fits the context (see WorkingContext)."""
        context = self._context
        if plan.usage is not None:  # the summary call is paid for, applied or not
            context.usage.add(plan.usage, self._settings.price_in, self._settings.price_out)
        if isinstance(plan, NoCompaction):
            return CompactResult(False, plan.reason)
        assert isinstance(plan, CompactionPlan)
        writer = self._running().writer
        async with self._context_lock:  # checkpoints wait: saved_len is stable
            why = context.why_not(plan)
            if why is not None:
                return CompactResult(False, why)
            stored = context.compacted_by(plan)
            try:
                await writer.replace_context(
                    stored,
                    compaction=Compaction(at=timestamp(), before_tokens=plan.before_tokens,
                                          after_tokens=plan.after_tokens, summary=plan.summary),
                    expect_prefix=plan.basis,
                )
            except HarnessError as exc:
                return CompactResult(False, f"Compaction not saved ({exc}); context unchanged.")
            context.compaction_saved(stored)  # with what was appended meanwhile
        return CompactResult(True, f"Context compacted: {plan.before_tokens} -> "
                             f"{plan.after_tokens} tokens.", plan.before_tokens,
                             plan.after_tokens)

    # -- commands -------------------------------------------------------------------------

    async def fork(self, at: int | None = None) -> str:
        """Checkpoint, then copy this session (up to message ``at``) into a new one; returns
        the new id. This session stays the running one."""
        await self._checkpoint()
        return await self._running().writer.fork(at)

    async def fork_session(self, session_id: str) -> str:
        """Copy another session whole (through this run's writer); the new id."""
        return await self._running().writer.fork(session_id=session_id)

    async def edit_session(self, session_id: str, *, title: str | None = None,
                           archived: bool | None = None) -> None:
        """Rename (the user's title) or archive another session, through this run's writer
        (this session's own title: :meth:`set_title`)."""
        await self._running().writer.set_metadata(session_id=session_id, title=title,
                                                  archived=archived)

    async def plan_files_rewind(self, to: int) -> RewindPlan:
        """What bringing the project's files back to user message ``to`` would do (0: undo
        the last rewind of files): a diffstat, hand edits flagged. Nothing is changed."""
        if self._turn is not None:
            raise UsageError("Wait for the turn to end (or interrupt it) before a rewind.")
        return await self._running().workspace.plan_rewind(to)

    async def files_changed(self, with_diff: bool = False, *, summary: bool = False
                            ) -> list[str]:
        """What each tool call of this session did to the project's files (``\\files``;
        ``summary``: one line, for ``\\info``)."""
        return await self._running().workspace.files_changed(with_diff, summary=summary)

    async def interrupted_rewind(self) -> Interrupted | None:
        """The rewind of the project's files that was cut short, if any (what ``\\rewind``
        asks about)."""
        return await self._running().workspace.interrupted()

    async def set_title(self, title: str) -> None:
        """The user's title: it always wins (a title call still running cannot replace it).
        Stored clean (one line, no terminal controls)."""
        title = clean_title(title)
        if not title:
            raise UsageError("The title is empty.")
        self._title_source = "user"
        await self._running().writer.set_metadata(title=title)
        await self._events.send(TitleChanged(title, "user"))

    # -- the title call -------------------------------------------------------------------

    def _start_title(self, user_text: str, answer_text: str) -> None:
        """After an answer, while the session has no title better than the provisional one,
        ask the model for one in the background (at most one call at a time; never waited
        for). No await: it starts or not, whatever cancellation is going on."""
        if (
            not self._settings.auto_title
            or self._title_source not in ("", "provisional")
            or self._titling is not None
            or self._actors is None
            or not answer_text.strip()
        ):
            return
        job = self._titling = Turn()
        actors = self._actors
        actors.tasks.start_soon(self._title_task, actors.model, job, user_text, answer_text)

    async def _title_task(
        self,
        inbox: MemoryObjectSendStream[ModelRequest],
        job: Turn,
        user_text: str,
        answer_text: str,
    ) -> None:
        """Ask, count the cost (the supervisor owns usage), set the title unless the user set
        one, tell the front end."""
        try:
            title, usage = await ask_for_title(inbox, user_text, answer_text, job, self._model)
            if usage is not None:
                self._context.usage.add(usage, self._settings.price_in, self._settings.price_out)
            state = self._context.state()
            applied = False
            if title is not None and self._title_source != "user":
                applied = await self._running().writer.propose_title(title)
            await self._running().writer.set_metadata(state=state)
            if applied and self._title_source != "user":
                self._title_source = "model"
                await self._events.send(TitleChanged(title or "", "model"))
            await self._gauge()
        except ActorGone:  # the harness is leaving: no title, nothing to undo
            pass
        except HarnessError as exc:  # the store failed: say so (the next turn will too)
            await self.notify(f"The session's title was not saved: {exc}", "warning")
        finally:
            self._titling = None

    # -- rewind ---------------------------------------------------------------------------

    async def rewind_points(self) -> list[UserMessage]:
        """The messages the user typed on the current branch, oldest first, as saved."""
        await self._checkpoint()
        return await anyio.to_thread.run_sync(self._store.reader.user_messages,
                                              self.session_id)

    async def rewind(self, request: RewindRequest) -> RewindOutcome:
        """Go back to just before a message the user typed, undo the last rewind of files,
        or take up one that was cut short: the one protocol of
        :func:`actors.runtime.rewind.carry_out` (the files by the plan the front end showed,
        then the conversation, whose later part is kept as a fork). Not during a turn; a
        background compaction is waited for first."""
        if self._turn is not None:
            raise UsageError("A turn is running; rewind when it has ended.")
        rewind_check(request)
        while self._compaction is not None:
            await self._result_of(self._compaction)
        await self._checkpoint()
        steps = ActorSteps(self._running().workspace, self._rewind_conversation)
        with anyio.CancelScope(shield=True):  # the store moves back: so must the context
            outcome = await anyio.to_thread.run_sync(carry_out, request, steps)
        await self._gauge()
        return outcome

    async def _rewind_conversation(self, before: int) -> ConversationRewound:
        async with self._context_lock:
            rewound: ConversationRewound = await self._running().writer.rewind(before)
            self._context.rewound(list(rewound.messages))
        return rewound

    async def set_standing_approvals(self, rules: list[str]) -> None:
        """Replace this run's standing approvals ("don't ask again": a tool name, or
        ``run_bash: PREFIX``), save them in the session's state and tell the front end.
        Safe while a batch runs (the messages are not touched)."""
        context = self._context
        async with self._context_lock:
            context.approvals = list(dict.fromkeys(rules))
            await self._running().writer.set_metadata(state=context.state())
        await self._events.send(ApprovalsChanged(tuple(context.approvals)))

    async def set_mode(self, mode: Mode) -> None:
        """``\\mode``: the permission mode from the next tool call on, saved with the
        session (a resume keeps it, but for dangerouslySkipPermissions). Not during a
        turn's batch: the executor takes it with the next batch."""
        await self._set_choices(mode, self._model)

    async def set_model(self, model: str) -> None:
        """``\\model``: the model asked from the next request on (the conversation's, its
        compactions' and its title's), saved with the session."""
        if not model.strip():
            raise UsageError("Which model? \\model NAME (\\model lists them).")
        await self._set_choices(self._mode, model.strip())

    async def _set_choices(self, mode: Mode, model: str) -> None:
        context = self._context
        async with self._context_lock:
            self._mode, self._model = mode, model
            context.mode, context.model = mode.value, model
            await self._running().writer.set_metadata(state=context.state())
        await self._events.send(SettingsChanged(mode.value, model))

    async def models(self) -> list[str]:
        """The models the endpoint lists (empty when it lists none or cannot be reached,
        within a few seconds), asked by a client of its own (the model client actor is
        never touched from outside). Cancellation closes that client."""
        settings = self._settings
        client = ModelClient(base_url=settings.base_url, api_key=settings.api_key,
                             model=self._model, timeout=settings.llm_timeout)
        try:
            return await client.list_models()
        finally:
            with anyio.move_on_after(SHUTDOWN_SECONDS, shield=True):
                await client.close()

    async def pin(self, text: str) -> None:
        """Keep ``text`` verbatim in the context across compactions (and tell the model now)."""
        self._context.pinned.append(text.strip())
        self._context.messages.append(
            {"role": "user", "content": PINNED_PREFIX + text.strip()}
        )
        await self._checkpoint()


class ActorSteps:
    """The steps of a running session's rewind: requests to the workspace keeper (its
    ``WorkspaceClient``) and ``rewind_conversation`` (the supervisor's: through the
    checkpoint writer, taking the context it answers), each awaited on the event loop from
    the worker thread :func:`carry_out` runs in."""

    def __init__(
        self, workspace: WorkspaceClient,
        rewind_conversation: Callable[[int], Coroutine[Any, Any, ConversationRewound]],
    ) -> None:
        self._workspace = workspace
        self._rewind_conversation = rewind_conversation

    def files(self, plan: RewindPlan, *, with_conversation: bool) -> Rewound:
        return anyio.from_thread.run(
            partial(self._workspace.rewind, plan, with_conversation=with_conversation))

    def files_back(self) -> Rewound:
        async def back() -> Rewound:
            return await self._workspace.rewind(await self._workspace.plan_rewind(0))

        return anyio.from_thread.run(back)

    def conversation(self, before: int) -> ConversationRewound:
        return anyio.from_thread.run(self._rewind_conversation, before)

    def conversation_done(self, files: Rewound, fork_id: str) -> None:
        anyio.from_thread.run(self._workspace.conversation_rewound, files, fork_id)

    def finish_interrupted(self) -> Finished | None:
        return anyio.from_thread.run(self._workspace.finish_interrupted)

    def put_back_interrupted(self) -> Rewound | None:
        return anyio.from_thread.run(self._workspace.put_back_interrupted)
