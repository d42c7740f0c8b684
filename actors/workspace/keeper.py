"""The workspace keeper: the actor that owns the project's snapshots for one run.

It alone holds the :class:`~actors.workspace.Workspace` of the project (its stat cache, its
lock, its journal) and writes this session's marks (:mod:`._marks`); everyone else asks it
through its inbox with a :class:`WorkspaceClient`:

- the supervisor, after a user message is checkpointed: ``note("message")``, without waiting
  (the snapshot runs while the model thinks; requests are served in order, so it is taken
  before any tool of that turn runs);
- the supervisor's rewind (:mod:`actors.runtime.rewind`): a rewind of the files (planned,
  shown, then carried out: see :mod:`._rewind`), the record of its conversation half, and
  a rewind of the files that was cut short (looked at, finished, or put back);
- the tool executor, before a side-effecting call (``write_file``, ``edit_file``,
  ``run_bash``) runs: ``await snapshot("before", call_id)``, which answers when the files are
  kept; and after it, ``await snapshot("after", call_id)`` (done, failed, timed out; when the
  call was interrupted, ``note("after", call_id)``, not waited for). The keeper records what
  the call created, changed and deleted; the executor tells the front end what a shell
  command changed after its result (the keeper does, for an interrupted one).

A ``before`` asked no later after the previous walk ended than that walk took (the next
call of a batch, run without asking the user) is that walk's snapshot again, without a
walk of its own: nothing of the harness changed the files in between, and an edit by hand
in so short a gap is as likely as one during the walk itself, which no snapshot can place
either. Any other ``before`` (after the model thought, after an approval was asked, after a
rewind) walks the tree.

Opening the workspace (importing the snapshot engine, reading the stat cache) and once a
day the collection of what no session needs (:mod:`._housekeeping`) happen in the keeper's
task after it has started, :data:`~actors.core.config.PROMPT_GRACE_SECONDS` later or at its
first request if that comes sooner (which then waits for them), so the prompt never waits
for them, nor shares the interpreter with them while it is drawn (a rewind that a crash cut
short is taken up before, at the session's open: :func:`actors.runtime.rewind.at_open`).
Snapshots are a safety net, never a reason to stop a turn: when one cannot be taken (a full
disk, an unreadable project), the front end is told once and the turn goes on; requests are
then answered ``None``. When a snapshot makes the store pass its quota, the oldest snapshots
of other sessions are dropped first (:func:`._housekeeping.make_room`); one that still does
not fit is not kept, and the front end is told.

Cancellation: each snapshot runs in a worker thread, so a mark is recorded whole or not at
all; a caller that stops waiting (Ctrl-C) leaves it to finish. When the keeper itself is
cancelled (the run is leaving), the snapshot under way is stopped at its next directory and
waited for (shielded, bounded): nothing of it is recorded. Requests still queued are
dropped (the next run's first snapshot sees their changes); the stat cache is written in a
shielded, bounded cleanup.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.core.config import PROMPT_GRACE_SECONDS
from actors.core.errors import ActorCrashed, HarnessError, StorageError, UsageError
from actors.core.events import EventSink, Notice
from actors.core.mailbox import answer, ask

if TYPE_CHECKING:  # the engine is imported when the workspace is opened (the package's doc)
    from actors.store import SessionReader
    from actors.workspace._objects import ObjectStore
    from actors.workspace._rewind import Finished, Interrupted, RewindPlan, Rewound
    from actors.workspace._snapshot import KeptOut, Limits
    from actors.workspace._tree import Change
    from actors.workspace._workspace import Workspace

SNAPSHOT_TOOLS = frozenset({"write_file", "edit_file", "run_bash"})
CLEANUP_SECONDS = 10
Kind = Literal["message", "before", "after"]
SHOWN_PATHS = 6  # paths named in a notice of what a command changed
ROOM_RETRY_SECONDS = 600.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class Taken:
    """A snapshot the keeper took (and recorded, unless it did not fit the quota)."""

    root: bytes
    message: int  # the session's message number it belongs to
    changes: tuple[Change, ...]  # since the call's "before" (after), or the last mark; never
    # what is below a directory either snapshot did not look in
    kept_out: tuple[KeptOut, ...]
    seconds: float
    unscanned: tuple[str, ...] = ()  # directories it did not look in (caps)
    unkept: str = ""  # why it was not kept (the quota), "" when it was


@dataclass
class SnapshotRequest:
    kind: Kind
    call_id: str = ""
    tool: str = ""
    message: int = 0  # the session's message number (0: the keeper looks it up)
    reply: MemoryObjectSendStream[Taken | HarnessError | None] | None = None
    asked_at: float = field(default_factory=time.monotonic)


@dataclass
class PlanRewind:
    """Plan a rewind of the session's files to user message ``to`` (0: undo the last one)."""

    to: int
    reply: MemoryObjectSendStream[RewindPlan | HarnessError]


@dataclass
class ApplyRewind:
    """Carry out a planned rewind (``with_conversation``: the conversation follows, and
    :class:`ConversationRewound` says when it has)."""

    plan: RewindPlan
    reply: MemoryObjectSendStream[Rewound | HarnessError]
    with_conversation: bool = False


@dataclass
class PendingRewind:
    """The rewind of the project's files that was cut short: ``look`` at it (None: there is
    none), ``finish`` it, or ``put_back`` what it wrote (see :mod:`._rewind`)."""

    action: Literal["look", "finish", "put_back"]
    reply: MemoryObjectSendStream[Any]


@dataclass
class ConversationRewound:
    """The conversation half of a rewind of both is done (recorded: see ``_rewind``)."""

    files: Rewound
    fork_id: str
    reply: MemoryObjectSendStream[bool | HarnessError]


@dataclass
class FilesReport:
    """What each tool call of this session changed, as lines (with the diffs: ``diff``; one
    line in all: ``summary``)."""

    diff: bool
    reply: MemoryObjectSendStream[list[str] | HarnessError]
    summary: bool = False


Request = (SnapshotRequest | PlanRewind | ApplyRewind | PendingRewind | ConversationRewound
           | FilesReport)


class WorkspaceClient:
    """How the supervisor and the executor ask the keeper (each holds its own clone)."""

    def __init__(self, inbox: MemoryObjectSendStream[Request]) -> None:
        self._inbox = inbox

    def clone(self) -> WorkspaceClient:
        return WorkspaceClient(self._inbox.clone())

    def close(self) -> None:
        self._inbox.close()

    def note(self, kind: Kind, call_id: str = "", tool: str = "", message: int = 0) -> None:
        """Ask for a snapshot without waiting (never blocks, never raises: a request that
        does not fit is dropped, and the next snapshot sees its changes). ``message``: the
        number of the user message a ``message`` snapshot belongs to."""
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):
            self._inbox.send_nowait(SnapshotRequest(kind, call_id, tool, message))

    async def snapshot(self, kind: Kind, call_id: str = "", tool: str = "") -> Taken | None:
        """Take a snapshot and wait for it (None: snapshots are off, or this one failed)."""
        try:
            result: Taken | None = await ask(
                self._inbox, lambda reply: SnapshotRequest(kind, call_id, tool, 0, reply),
                "workspace keeper",
            )
        except HarnessError:
            return None
        return result


    async def plan_rewind(self, to: int) -> RewindPlan:
        """What rewinding the files to user message ``to`` (0: undoing the last rewind)
        would do; :class:`UsageError` when it cannot be done (no snapshot there, snapshots
        off). Nothing is written but the undo snapshot's objects."""
        plan: RewindPlan = await ask(self._inbox, lambda reply: PlanRewind(to, reply),
                                     "workspace keeper")
        return plan

    async def files_changed(self, with_diff: bool, *, summary: bool = False) -> list[str]:
        """What each tool call of the session changed (lines for people; ``summary``: one)."""
        lines: list[str] = await ask(
            self._inbox, lambda reply: FilesReport(with_diff, reply, summary),
            "workspace keeper")
        return lines

    async def rewind(self, plan: RewindPlan, *, with_conversation: bool = False) -> Rewound:
        """Carry out ``plan`` (done or not started; see :mod:`._rewind`). Cancelling the
        wait does not stop it: the keeper finishes the restore it started."""
        done: Rewound = await ask(
            self._inbox, lambda reply: ApplyRewind(plan, reply, with_conversation),
            "workspace keeper")
        return done

    async def interrupted(self) -> Interrupted | None:
        """The rewind of the project's files that was cut short, if any."""
        found: Interrupted | None = await ask(
            self._inbox, lambda reply: PendingRewind("look", reply), "workspace keeper")
        return found

    async def finish_interrupted(self) -> Finished | None:
        """Carry on with the rewind that was cut short (None: there is none)."""
        done: Finished | None = await ask(
            self._inbox, lambda reply: PendingRewind("finish", reply), "workspace keeper")
        return done

    async def put_back_interrupted(self) -> Rewound | None:
        """Put back what the rewind that was cut short wrote (None: there is none)."""
        done: Rewound | None = await ask(
            self._inbox, lambda reply: PendingRewind("put_back", reply), "workspace keeper")
        return done

    async def conversation_rewound(self, files: Rewound, fork_id: str) -> bool:
        """Record that the conversation half of a rewind of both is done too (False:
        snapshots are off, nothing to record)."""
        recorded: bool = await ask(
            self._inbox, lambda reply: ConversationRewound(files, fork_id, reply),
            "workspace keeper")
        return recorded


def describe_changes(changes: Sequence[Change], shown: int = SHOWN_PATHS) -> str:
    """``created a, b; changed c; deleted d`` (files only; the rest counted)."""
    groups: dict[str, list[str]] = {"added": [], "modified": [], "deleted": []}
    for change in changes:
        if not change.is_dir:
            groups[change.status].append(change.path)
    parts = []
    left = shown
    for status, word in (("added", "created"), ("modified", "changed"), ("deleted", "deleted")):
        paths = groups[status]
        if not paths:
            continue
        named = paths[: max(left, 1)]
        left -= len(named)
        more = f" and {len(paths) - len(named)} more" if len(paths) > len(named) else ""
        parts.append(f"{word} {', '.join(named)}{more}")
    return "; ".join(parts)


@dataclass
class _State:
    workspace: Workspace | None = None
    last_root: bytes | None = None  # the session's latest mark's root
    before: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # call id -> its
    # "before" root and message number
    warned: set[str] = field(default_factory=set)
    walked: tuple[float, float, bytes] | None = None  # the last walk of this run: when it
    # ended (time.monotonic()), what it took, its root (None: none, or a rewind came after)
    project_bytes: int = 0  # what the project's last snapshot kept
    roomless_at: float = -1e9  # when making room last failed (time.monotonic()): not tried
    # again before ROOM_RETRY_SECONDS


class WorkspaceKeeper:
    """The actor (see the module doc); :meth:`run` serves the inbox."""

    def __init__(
        self,
        *,
        project: Path,
        memory_dir: Path,
        store: SessionReader,
        session_id: str,
        events: EventSink,
        limits: Limits | None = None,
        enabled: bool = True,
        retention_days: float | None = None,
        objects: ObjectStore | None = None,
        quota: int | None = None,
    ) -> None:
        """``retention_days``: how long snapshots are kept (None: the housekeeping's
        default). ``objects``: the object store already opened for this session (at its open, to
        finish an interrupted rewind first: :func:`actors.runtime.rewind.finish_interrupted`);
        the keeper owns it from here and closes it. ``quota``: the bytes the snapshots'
        store is kept under (None: the default, see :mod:`._housekeeping`)."""
        self._project = project
        self._memory_dir = memory_dir
        self._store = store
        self._session_id = session_id
        self._events = events
        self._limits = limits
        self._enabled = enabled
        self._retention_days = retention_days
        self._objects = objects
        self._quota = quota
        self._state = _State()

    async def run(
        self,
        inbox: MemoryObjectReceiveStream[Request],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        async with inbox:
            task_status.started()
            try:
                first: Request | None = None
                if self._enabled:
                    # Not while the prompt is drawn: opening reads the project's stat cache
                    # (and may finish a rewind) in a thread that would hold the interpreter
                    # meanwhile. A request that comes sooner opens it at once.
                    with anyio.move_on_after(PROMPT_GRACE_SECONDS):
                        with contextlib.suppress(anyio.EndOfStream):
                            first = await inbox.receive()
                    await self._open()
                if first is not None:
                    await self._handle(first)
                async for request in inbox:
                    await self._handle(request)
            finally:
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    await anyio.to_thread.run_sync(self._close)
                    if self._objects is not None:  # handed over, never opened (snapshots off)
                        objects, self._objects = self._objects, None
                        await anyio.to_thread.run_sync(objects.close)

    # -- in the keeper's task -------------------------------------------------------------

    async def _handle(self, request: Request) -> None:
        if isinstance(request, PlanRewind):
            await answer(request.reply, await self._blocking(self._plan_blocking, request.to))
        elif isinstance(request, ApplyRewind):
            await answer(request.reply, await self._blocking(
                self._apply_blocking, request.plan, request.with_conversation))
        elif isinstance(request, ConversationRewound):
            await answer(request.reply, await self._conversation_done(request))
        elif isinstance(request, PendingRewind):
            await answer(request.reply, await self._blocking(self._pending_blocking,
                                                             request.action))
        elif isinstance(request, FilesReport):
            await answer(request.reply, await self._report(request.diff, request.summary))
        else:
            result = await self._serve(request) if self._state.workspace else None
            if request.reply is not None:
                await answer(request.reply, result)

    async def _open(self) -> None:
        try:
            said = await anyio.to_thread.run_sync(self._open_blocking)
        except (HarnessError, OSError) as exc:  # a failed recovery included: its journal
            await anyio.to_thread.run_sync(self._close)  # stays for the next start
            await self._warn("open", f"Workspace snapshots are off for this run: {exc} "
                             "Files changed from now on cannot be rewound.")
            return
        if said:
            await self._events.send(Notice(said, "warning"))

    async def _serve(self, request: SnapshotRequest) -> Taken | None:
        from actors.workspace._snapshot import SnapshotStopped

        stop, finished = threading.Event(), threading.Event()

        def work() -> Taken:
            try:
                return self._take(request, stop)
            finally:
                finished.set()

        try:
            taken = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # Leaving: a cold snapshot of a big tree must not hold the exit. The walk stops
            # at its next directory (nothing of it is recorded); wait for that, bounded.
            stop.set()
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await anyio.to_thread.run_sync(finished.wait, CLEANUP_SECONDS)
            if not finished.is_set():
                self._state.workspace = None  # still in the thread's hands: not touched
            raise
        except SnapshotStopped:
            return None
        except Exception as exc:  # a full disk, or a bug: never a reason to stop the turn
            cause = str(exc) if isinstance(exc, HarnessError | OSError) else (
                f"{type(exc).__name__}: {exc}")
            await self._warn("snapshot", f"A workspace snapshot failed ({cause}); the files "
                             "of this point cannot be rewound. The session goes on.")
            return None
        for kept in taken.kept_out:
            await self._warn(f"kept out {kept.path}",
                             f"Not kept in the workspace snapshots: {kept}; a rewind leaves "
                             "it as it is.")
        if taken.unscanned:
            shown = ", ".join(taken.unscanned[:SHOWN_PATHS]) + (
                f" and {len(taken.unscanned) - SHOWN_PATHS} more"
                if len(taken.unscanned) > SHOWN_PATHS else "")
            await self._warn("unscanned", f"The workspace snapshots did not look in "
                             f"{len(taken.unscanned)} director"
                             f"{'y' if len(taken.unscanned) == 1 else 'ies'} ({shown}): the "
                             "project passes the snapshots' cap on entries or depth (or they "
                             "cannot be read). A rewind leaves them as they are; .gitignore "
                             "keeps what need not be kept out of the count.")
        if taken.unkept:
            await self._warn("unkept", f"A workspace snapshot could not be kept: {taken.unkept}. "
                             "The files of this point cannot be rewound.")
        if (request.kind == "after" and request.tool == "run_bash" and taken.changes
                and request.reply is None):  # not waited for (interrupted): told from here
            described = describe_changes(taken.changes)  # empty when only directories changed
            if described:
                await self._events.send(Notice(f"The command {described}."))
        return taken

    async def _blocking(self, work: Callable[..., _T], *args: object) -> _T | HarnessError:
        """``work(*args)`` in a worker thread, on the open workspace (see :mod:`._rewind`);
        an error is the answer."""
        if self._state.workspace is None:
            return UsageError("Workspace snapshots are off for this run; the files cannot "
                              "be rewound.")
        try:
            return await anyio.to_thread.run_sync(work, *args)
        except HarnessError as exc:  # raised in the caller (RestoreFailed says what became
            return exc  # of the files)
        except Exception as exc:  # a bug: answered, the keeper goes on
            return ActorCrashed(f"The workspace keeper failed ({type(exc).__name__}: {exc}).")

    async def _report(self, with_diff: bool, summary: bool) -> list[str] | HarnessError:
        workspace = self._state.workspace
        if workspace is None:
            return ["not kept (workspace snapshots are off for this run)" if summary
                    else "Workspace snapshots are off for this run."]
        objects = workspace.objects
        from actors.workspace._calls import call_lines, call_summary, calls_changing_files

        def lines() -> list[str]:
            calls = calls_changing_files(objects, self._session_id)
            if summary:
                return [call_summary(calls)]
            return call_lines(calls, objects if with_diff else None)

        try:
            return await anyio.to_thread.run_sync(lines)
        except HarnessError as exc:
            return exc

    async def _warn(self, key: str, text: str) -> None:
        if key not in self._state.warned:
            self._state.warned.add(key)
            await self._events.send(Notice(text, "warning"))

    # -- in worker threads (one at a time: the keeper waits for each) ---------------------

    def _open_blocking(self) -> str | None:
        from actors.workspace._housekeeping import DEFAULT_RETENTION_DAYS, collect, due
        from actors.workspace._workspace import Workspace, open_objects

        objects, self._objects = self._objects, None
        if objects is None:
            objects = open_objects(self._memory_dir, self._store)
        try:
            workspace = Workspace(self._project, self._memory_dir, objects,
                                  limits=self._limits, protected=[self._store.memory_dir])
        except BaseException:
            objects.close()
            raise
        state = self._state
        state.workspace = workspace
        latest = objects.marks.latest(self._session_id)
        state.last_root = latest.root if latest is not None else None
        if due(objects):  # once a day: deleted sessions' and expired snapshots go
            days = self._retention_days
            collect(objects, self._store.exists,
                    retention_days=DEFAULT_RETENTION_DAYS if days is None else days)
        return None

    def _message_number(self) -> int:
        return int(self._store.info(self._session_id).transcript_messages)

    def _take(self, request: SnapshotRequest, stop: threading.Event | None = None) -> Taken:
        state = self._state
        workspace = state.workspace
        assert workspace is not None
        walked = state.walked
        kept_out: tuple[KeptOut, ...]
        unscanned: tuple[str, ...] = ()
        stored = False
        if (request.kind == "before" and walked is not None
                and request.asked_at - walked[0] <= walked[1]):
            root, kept_out, seconds = walked[2], (), 0.0  # see the module doc
        else:
            snap = workspace.snapshot(stop=stop)
            root, kept_out, seconds = snap.root, snap.kept_out, snap.seconds
            unscanned, stored = snap.unscanned, snap.new_objects > 0
            state.walked = (time.monotonic(), snap.seconds, snap.root)
            state.project_bytes = snap.size
        since, number = state.last_root, request.message
        if request.kind == "after" and request.call_id in state.before:
            since, number = state.before.pop(request.call_id)
        if not number:  # "before": the batch's assistant message is the latest one saved
            number = self._message_number()
        changes = tuple(c for c in workspace.diff(since, root) if not c.unobserved
                        ) if since != root else ()
        detail: dict[str, object] = {"tool": request.tool} if request.tool else {}
        if request.kind == "message":  # a rewind goes back to it: only in its project
            detail["project"] = workspace.project
        mark = workspace.objects.marks.add(
            self._session_id, request.kind, number, root, call_id=request.call_id,
            changes=changes if request.kind == "after" else (), detail=detail or None,
        )
        unkept = self._room(mark.seq) if stored else ""
        if request.kind == "before":
            state.before[request.call_id] = (root, number)
        if not unkept:
            state.last_root = root
        if request.kind == "message":  # ~10 ms at 10,000 files: once a turn, not per call
            workspace.save_cache()  # (a cache lost to a kill -9 costs one slower snapshot)
        return Taken(root, number, changes, kept_out, seconds, unscanned, unkept)

    def _room(self, seq: int) -> str:
        """Keep the store under its quota after a snapshot that stored something (see
        :func:`._housekeeping.make_room`); the reason the snapshot (its mark ``seq``) was not
        kept, or "" when it was."""
        from actors.workspace._housekeeping import make_room, quota_for, size

        state = self._state
        workspace = state.workspace
        assert workspace is not None
        objects = workspace.objects
        quota = quota_for(self._quota, state.project_bytes)
        if objects.stored_bytes() <= quota:
            return ""
        if time.monotonic() - state.roomless_at < ROOM_RETRY_SECONDS:
            room = None
        else:
            room = make_room(objects, quota, self._session_id)
            if room.fits:
                return ""
            state.roomless_at = time.monotonic()
        objects.marks.forget([seq])
        stored = objects.stored_bytes()
        return (f"the workspace snapshots take {size(stored)}, over their quota of "
                f"{size(quota)}, even with the oldest snapshots of other sessions dropped "
                "(--snapshot-quota raises it)")

    async def _conversation_done(self, request: ConversationRewound) -> bool | HarnessError:
        workspace = self._state.workspace
        if workspace is None:
            return False
        from actors.workspace._rewind import record_conversation

        try:
            await anyio.to_thread.run_sync(record_conversation, workspace, request.files,
                                           request.fork_id)
        except HarnessError as exc:
            return exc
        return True

    def _plan_blocking(self, to: int) -> RewindPlan:
        from actors.workspace._rewind import lineage, plan_rewind, plan_undo

        workspace = self._state.workspace
        assert workspace is not None
        ancestors = lineage(self._store.info, self._session_id)
        if to:
            return plan_rewind(workspace, self._session_id, to, ancestors)
        return plan_undo(workspace, self._session_id, ancestors)

    def _apply_blocking(self, plan: RewindPlan, with_conversation: bool) -> Rewound:
        from actors.workspace._rewind import apply_rewind

        workspace = self._state.workspace
        assert workspace is not None
        self._state.walked = None  # the files change under the last walk
        done = apply_rewind(workspace, plan, with_conversation=with_conversation)
        self._state.last_root = done.mark.root
        workspace.save_cache()
        return done

    def _pending_blocking(self, action: str) -> Interrupted | Finished | Rewound | None:
        from actors.workspace._rewind import finish, interrupted, put_back

        workspace = self._state.workspace
        assert workspace is not None
        if action == "look":
            return interrupted(workspace)
        self._state.walked = None
        done = (finish(workspace) if action == "finish"
                else put_back(workspace, session_id=self._session_id))
        latest = workspace.objects.marks.latest(self._session_id)
        self._state.last_root = latest.root if latest is not None else None
        workspace.save_cache()
        return done

    def _close(self) -> None:
        workspace, self._state.workspace = self._state.workspace, None
        if workspace is not None:
            with contextlib.suppress(OSError, StorageError):
                workspace.close()
            workspace.objects.close()
