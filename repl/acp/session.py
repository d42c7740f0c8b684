"""One session served over ACP: its supervisor, its prompts, and what the client is told.

:meth:`ServedSession.run` is the session's task (in the agent's task group): it opens the
session with :func:`repl.session_run.open_session` (new or resumed, an ordinary session whose
id is the ACP ``sessionId``) and then runs the prompts its inbox receives, one at a time,
until :meth:`close`. Everything the supervisor does happens in that task, whatever task the
client's request came in on; the request waits for the answer (:func:`actors.core.mailbox.ask`).

The supervisor's events become ``session/update`` notifications (:mod:`repl.acp.updates`),
sent in order once the client knows the session (it asked for it, or sent a prompt to it: a
new session's opening is not told). A turn's result is answered after every update of the
turn has been sent. An approval becomes ``session/request_permission`` (allow once; always,
for the rule the REPL would offer, kept as a standing approval of the session; deny), asked
in a task of the turn so that the events keep flowing; a call a standing approval covers is
allowed without asking, as in the REPL. The client not answering before the turn ends (a
cancel), or answering ``cancelled``, denies.

Cancellation: :meth:`cancel` aborts the running turn (``session/cancel``: the safe recovery of
Ctrl-C; the prompt answers ``cancelled``). :meth:`close` aborts it too and ends the task; the
supervisor's shutdown runs shielded, as on any exit. Cancelling the task (SIGTERM) does the
same through the supervisor's own cancellation.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
from acp import Client, RequestError, update_agent_message_text
from acp.schema import AllowedOutcome, PermissionOption
from anyio.streams.memory import MemoryObjectSendStream
from pydantic import ValidationError

from actors.core.config import Settings
from actors.core.errors import HarnessError, UsageError
from actors.core.events import (
    ApprovalRequest,
    ApprovalsChanged,
    CompactionState,
    Event,
    Notice,
)
from actors.core.mailbox import answer, ask
from actors.runtime.supervisor import TurnResult
from actors.store import Store
from repl.acp.updates import CallShape, Update, event_update, replay
from repl.interactive.approvals import BASH_PREFIX, covered, rule_for
from repl.session_run import OpenSession, open_session

log = logging.getLogger("harness.acp")

CLOSE_SECONDS = 30  # a session's shutdown (the supervisor bounds its own at 15 s)


@dataclass
class _Prompt:
    text: str
    shown: str
    reply: MemoryObjectSendStream[TurnResult | HarnessError]


class ServedSession:
    """A session open for the client (see the module doc). ``new``: create the session
    with this id (else resume ``session_id``)."""

    def __init__(self, session_id: str, settings: Settings, store: Store, client: Client,
                 *, new: bool) -> None:
        self.id = session_id
        self.project: Path = settings.sandbox_dir
        self._settings = settings
        self._store = store
        self._client = client
        self._new = new
        self._inbox, self._requests = anyio.create_memory_object_stream[_Prompt](1)
        self._opened: OpenSession | None = None
        self._known = False  # the client knows the session: its updates are sent
        self._approvals: list[str] = []  # the standing approvals, as last announced
        self._asks: anyio.abc.TaskGroup | None = None  # the running turn's questions
        self._prompting = False
        self.ended = anyio.Event()

    # -- the session's task ---------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Open the session, then serve its prompts until :meth:`close`. A failure to open
        is raised to whoever started the task; after that nothing is raised."""
        try:
            async with open_session(self._settings, self._store, self._on_event,
                                    resume=None if self._new else self.id,
                                    new_id=self.id if self._new else None) as opened:
                self._opened = opened
                await opened.drain()  # the opening's events are not the client's
                task_status.started()
                try:
                    async with self._requests:
                        async for prompt in self._requests:
                            await self._turn(opened, prompt)
                except Exception as exc:  # a bug here must not take the other sessions down
                    log.error("session %s: %s: %s", self.id, type(exc).__name__, exc)
        finally:
            self._inbox.close()
            self._requests.close()
            self.ended.set()

    async def _turn(self, opened: OpenSession, prompt: _Prompt) -> None:
        # stopped before the turn ended (the agent is stopping): the turn was interrupted
        result: TurnResult | HarnessError = TurnResult("interrupted", "the agent stopped")
        try:
            async with anyio.create_task_group() as asks:
                self._asks = asks
                try:
                    shown = prompt.shown if prompt.shown != prompt.text else None
                    result = await opened.sup.run_turn(prompt.text, shown=shown)
                    await opened.drain()  # every update of the turn is out before its answer
                    if result.outcome == "limit":  # why it stopped, where the user looks
                        log.warning("session %s: %s", self.id, result.text)
                        await self._send(update_agent_message_text(f"\n\n[{result.text}]"))
                finally:
                    self._asks = None
                    asks.cancel_scope.cancel()  # questions still open: denied
        except HarnessError as exc:
            result = exc
        finally:
            await answer(prompt.reply, result)

    # -- the client's requests ------------------------------------------------------------

    async def prompt(self, text: str, shown: str) -> TurnResult:
        """Run one user message; its result once every update of the turn was sent."""
        if self._prompting:
            raise UsageError(f"A prompt is already running in session {self.id}.")
        self._prompting = self._known = True
        try:
            result: TurnResult = await ask(self._inbox, lambda reply: _Prompt(text, shown, reply),
                                           f"session {self.id}")
        finally:
            self._prompting = False
        return result

    async def replay(self) -> None:
        """Send the conversation as it stands (``session/load``), then what happens."""
        if self._prompting:
            raise UsageError(f"A prompt is running in session {self.id}; load it when it ends.")
        assert self._opened is not None
        for update in replay(self._opened.sup.snapshot().messages, self.project):
            await self._send(update)
        self._known = True

    def known(self) -> None:
        """The client knows the session (``session/resume``): its updates are sent."""
        self._known = True

    def cancel(self) -> None:
        """Abort the running turn, if any (``session/cancel``)."""
        if self._opened is not None:
            self._opened.sup.abort("cancelled by the client")

    async def close(self) -> None:
        """Abort the running turn, end the task and wait for the supervisor's shutdown."""
        self.cancel()
        self._inbox.close()
        with anyio.move_on_after(CLOSE_SECONDS, shield=True):
            await self.ended.wait()

    # -- events ---------------------------------------------------------------------------

    async def _on_event(self, event: Event) -> None:
        try:
            await self._show(event)
        except Exception as exc:  # the events must keep flowing: a bug is one line
            log.error("session %s: %s: %s", self.id, type(exc).__name__, exc)
            if isinstance(event, ApprovalRequest):
                _reply(event, False)

    async def _show(self, event: Event) -> None:
        if isinstance(event, ApprovalRequest):
            self._approval(event)
        elif isinstance(event, ApprovalsChanged):
            self._approvals = list(event.rules)
        elif isinstance(event, Notice):
            log.log(logging.WARNING if event.level != "info" else logging.INFO,
                    "session %s: %s", self.id, event.text)
        elif isinstance(event, CompactionState):
            log.info("session %s: compaction %s", self.id,
                     "started" if event.running else "ended")
        update = event_update(event, self.project)
        if update is not None and self._known:
            await self._send(update)

    async def _send(self, update: Update) -> None:
        """One notification; a client that is gone is not an error (the session is saved
        all the same)."""
        try:
            await self._client.session_update(session_id=self.id, update=update)
        except (ConnectionError, OSError, RequestError) as exc:
            log.debug("session %s: an update was not sent (%s)", self.id, exc)

    def _approval(self, request: ApprovalRequest) -> None:
        """Allow a call the mode approved already (an edit in acceptEdits: the editor shows
        the change from its tool-call update) or a standing approval covers; ask the client
        about any other."""
        if request.approved or (not request.asks
                                and covered(self._approvals, request.tool, request.arguments)):
            _reply(request, True)
        elif self._asks is None:  # no turn to ask in (cannot happen): denied
            _reply(request, False)
        else:
            self._asks.start_soon(self._ask, request)

    async def _ask(self, request: ApprovalRequest) -> None:
        """``session/request_permission`` for one call, and the answer to the executor."""
        rule = None if request.asks else rule_for(request.tool, request.arguments)
        options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once")]
        if rule is not None:
            what = rule.removeprefix(BASH_PREFIX) + ("…" if rule.startswith(BASH_PREFIX) else "")
            options.append(PermissionOption(option_id="always", kind="allow_always",
                                            name=f"Always allow {what} in this session"))
        options.append(PermissionOption(option_id="deny", name="Deny", kind="reject_once"))
        shape = CallShape.of(request.tool, request.arguments, self.project)
        allowed = False
        try:
            response = await self._client.request_permission(
                session_id=self.id, tool_call=shape.asked(request.call_id), options=options)
            outcome = response.outcome
            allowed = isinstance(outcome, AllowedOutcome) and outcome.option_id in (
                "allow", "always")
            if allowed and rule is not None and outcome.option_id == "always":
                assert self._opened is not None
                await self._opened.sup.set_standing_approvals([*self._approvals, rule])
        except (ConnectionError, OSError, RequestError, ValidationError, HarnessError) as exc:
            log.warning("session %s: the permission request failed (%s); denied", self.id,
                        exc)
        finally:
            _reply(request, allowed)


def _reply(request: ApprovalRequest, allowed: bool) -> None:
    """Answer an approval without waiting (its stream holds the one answer); an executor
    that stopped waiting (the turn was aborted) is not an error."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError,
                             anyio.WouldBlock):
        request.reply.send_nowait(allowed)
    request.reply.close()
