"""The interactive REPL: prompt_toolkit on asyncio, with the supervisor's actors under it.

- The prompt (history, completion, keys, the toolbar) is :mod:`repl.interactive.prompt`;
  ``@path`` in a message attaches the file to what is sent
  (:mod:`repl.interactive.attachments`). The toolbar's view is learned from the
  supervisor's events (:class:`~repl.interactive.view.SessionView`).
- During a turn a status line says what runs; Esc or Ctrl-C aborts the turn (the supervisor
  recovers and checkpoints), and text typed meanwhile waits in the next prompt
  (:mod:`repl.interactive.keys`). At the prompt Ctrl-C clears the line, and a second Ctrl-C on
  an empty line exits, like Ctrl-D and ``\\exit``.
- Approvals show the change (a diff, the full command) and take yes, no, always for this
  session, or the reason for a no (:mod:`repl.interactive.approvals`).
- SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 end the run cleanly; the supervisor's shutdown saves
  the session, and further signals are ignored until it has ended (repl/signals.py).
- A new session's greeting and first prompt come before this module is imported
  (:mod:`repl.interactive.start`): its store and supervisor are opened once that prompt is
  drawn (or when a first message is sent); a message or command sent sooner waits for
  them, and a failure to open ends the run as it did before the prompt. A resumed session
  opens first: its greeting shows where it was left.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prompt_toolkit import PromptSession
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from actors.core.config import Settings
from actors.core.errors import HarnessError
from actors.core.events import ApprovalRequest, Denied, Event, SessionOpened
from repl import startup
from repl.interactive.command_context import CommandContext, ExitRequested, SwitchSession
from repl.interactive.greeting import greet
from repl.interactive.live import cells, fit
from repl.interactive.markdown import preload
from repl.interactive.project_files import ProjectFiles
from repl.interactive.prompt import MainPrompt
from repl.interactive.render import Renderer
from repl.interactive.replay import replay_lines
from repl.interactive.results import ResultLog
from repl.interactive.sanitize import sanitize
from repl.interactive.terminal import Capabilities, size
from repl.lazy_store import LazyStore
from repl.signals import Held, RunSignals, run_signals

if TYPE_CHECKING:
    from actors.runtime.supervisor import Supervisor
    from repl.interactive.keys import TurnKeys

QUESTION_ROOM = 12  # columns left on a question's line to type the answer
APPROVED_DIFF_LINES = 12  # of an edit the mode approved: the rest is counted
MODELS_WAIT = 5.0  # seconds completion waits for the endpoint's list of models

# What only a turn, a question or a command uses (approvals, attachments, diffs, the keys of
# a turn, the commands, the pager) is imported there, not before the first prompt.


class _Barrier:
    """Put in the event stream after a turn: set once everything before it was shown."""

    def __init__(self) -> None:
        self.reached = anyio.Event()


@dataclass(frozen=True)
class FirstPrompt:
    """A new session's first prompt, drawn before the REPL was imported
    (:mod:`repl.interactive.start`): its session's id (greeted), the prompt and its read."""

    session_id: str
    prompt: MainPrompt
    reading: asyncio.Task[str]


class Repl:
    def __init__(
        self,
        sup: Supervisor | None,
        settings: Settings,
        lazy_store: LazyStore,
        events: MemoryObjectSendStream[Event | _Barrier],
        prompt: MainPrompt | None = None,
    ) -> None:
        """``sup``: the running supervisor, or None for a new session's, which
        :meth:`open_new` opens (with the store, if it is not open yet). ``prompt``: the
        session's prompt, when it was made (and drawn) before."""
        self.sup = sup
        self.settings = settings
        self.prompt = prompt or MainPrompt(settings, lazy_store)
        self.view = self.prompt.view
        self.caps = Capabilities.of(sys.stdout)
        self._results = ResultLog()
        self.renderer = Renderer(self._approve, self.prompt.refresh, caps=self.caps,
                                 results=self._results)
        self._lazy_store = lazy_store
        self._commands: CommandContext | None = None  # made at the first command
        self._opened = anyio.Event()  # the supervisor runs
        self._may_open = anyio.Event()  # a new session's: the first prompt is up, or a
        # message was sent
        self._done = anyio.Event()  # the session's loop is over
        self.open_failed: HarnessError | None = None
        self._greeted = ""  # the session greeted before its supervisor opened
        if sup is not None:
            self._opened.set()
        self._project_files: ProjectFiles | None = None  # made at the first read
        self._events = events
        self._command: anyio.CancelScope | None = None  # a backslash command being run
        self._leaving = False
        self._keys: TurnKeys | None = None  # during a turn
        self._draft = ""  # text typed during the last turn, for the next prompt
        self._preloading = False  # rich is imported in a thread when the first turn starts
        self.switch_to: str | None = None  # \resume chose another session
        self.typed = False  # a message was sent in this session
        self._models: list[str] | None = None  # the endpoint's, once asked
        self._loop = asyncio.get_running_loop()
        self.prompt.on_shift_tab = self._next_mode
        self.prompt.completer.models = self._models_from_thread
        self._yes_no: PromptSession[str] | None = None  # made at the first question

    @property
    def _files(self) -> ProjectFiles:
        """The project as the tools see it (during a turn or a command: the store is open)."""
        if self._project_files is None:
            self._project_files = ProjectFiles(self.settings.sandbox_dir,
                                               self.settings.memory_dir, self._lazy_store.reader())
        return self._project_files

    # -- questions ------------------------------------------------------------------------

    def _question_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("escape", eager=True)  # Esc at a question aborts, like Ctrl-C
        def _abort(event: KeyPressEvent) -> None:
            event.app.exit(exception=KeyboardInterrupt())

        return bindings

    async def _ask(self, question: str) -> str | None:
        """Ask a question; None if it was answered by Ctrl-C, Esc or Ctrl-D (the turn is then
        aborted). Keys typed before it appeared never answer it."""
        pause = self._keys.paused() if self._keys is not None else contextlib.nullcontext()
        async with pause:
            if self._yes_no is None:
                self._yes_no = PromptSession(key_bindings=self._question_bindings())
            try:
                return await self._yes_no.prompt_async(question, handle_sigint=False)
            except (KeyboardInterrupt, EOFError):
                self._running().abort()
                return None

    async def _approve(self, request: ApprovalRequest) -> bool | Denied:
        """Answer an approval: a standing approval, or the user's answer to the change shown."""
        from repl.interactive.approvals import choices, covered, parse_answer, rule_for
        from repl.interactive.diff import change_lines

        if request.approved:  # by the mode: shown, not asked
            return await self._show_approved(request)
        rule = None if request.asks else covered(self.view.approvals, request.tool,
                                                 request.arguments)
        description = sanitize(request.description)
        if rule is not None:
            print(self.caps.style("dim", f"  allowed: {description} (standing approval "
                                         f"'{sanitize(rule)}')"), flush=True)
            return True
        width = max(size().columns, 20)
        lines = await anyio.to_thread.run_sync(
            partial(change_lines, request.tool, request.arguments, self._files.read,
                    self.caps, width=width - 4))
        for line in lines:
            print("    " + line)
        offered = None if request.asks else rule_for(request.tool, request.arguments)
        hints, keys = choices(offered)
        for hint in hints:
            print(self.caps.style("dim", _wrapped(sanitize(hint), width, "  ", "     ")))
        text = await self._ask(self._question(description, keys, width, shown=bool(lines)))
        if text is None:
            return False
        answer = parse_answer(text, always_offered=offered is not None)
        if answer.always and offered is not None:
            await self._running().set_standing_approvals([*self.view.approvals, offered])
            print(self.caps.style("dim", f"  '{sanitize(offered)}' is approved for the rest of "
                                         "this session (\\approvals lists them)"), flush=True)
        if answer.reason:
            return Denied(answer.reason)
        return answer.allowed

    async def _show_approved(self, request: ApprovalRequest) -> bool:
        """An edit the mode approved (acceptEdits): its diff, collapsed after
        :data:`APPROVED_DIFF_LINES` lines, before it runs; never a question."""
        from repl.interactive.diff import change_lines

        lines = await anyio.to_thread.run_sync(partial(
            change_lines, request.tool, request.arguments, self._files.read, self.caps,
            width=max(size().columns, 20) - 4, max_lines=APPROVED_DIFF_LINES))
        for line in lines:
            print("    " + line)
        mode = self.view.mode or self.settings.mode.value
        print(self.caps.style("dim", f"  (approved by {mode}; \\mode changes it)"),
              flush=True)
        return True

    def _question(self, description: str, keys: str, width: int, *, shown: bool) -> str:
        """``Allow DESCRIPTION? [y/N]`` on one line of the terminal, with room to type the
        answer: a description too long for it is cut (when nothing above showed the call
        whole, it is printed first, wrapped at words)."""
        question = f"Allow {description}? {keys} "
        room = width - QUESTION_ROOM
        if cells(question) <= room:
            return question
        if not shown:
            print(_wrapped(description, width, "    ", "    "), flush=True)
        return f"Allow {fit(description, room - cells(f'Allow ? {keys} '))}? {keys} "

    # -- the supervisor -------------------------------------------------------------------

    def _running(self) -> Supervisor:
        """The supervisor, during a turn or a command (it is open by then)."""
        assert self.sup is not None
        return self.sup

    async def _supervisor(self) -> Supervisor:
        """The supervisor, once it runs: a new session's is opened now if it was not yet."""
        self._may_open.set()
        await self._opened.wait()
        return self._running()

    async def open_new(self, session_id: str, loop: anyio.CancelScope) -> None:
        """A new session's store (if it is not open yet, in a worker thread) and supervisor:
        imported and opened once the first prompt is drawn (or a message is sent), and run
        until the session's loop is over. A failure to open either is kept in
        :attr:`open_failed` and ends the loop (``loop``)."""
        await self._may_open.wait()
        if self._done.is_set():  # left at once: nothing to open
            return
        try:
            store = await anyio.to_thread.run_sync(self._lazy_store.writable)
            if self._done.is_set():
                return
            from actors.runtime.supervisor import Supervisor

            async with Supervisor.open(self.settings, store, events=self._events,
                                       new_id=session_id, interactive=True) as sup:
                self.sup = sup
                self._opened.set()
                startup.resume()  # the start is over (repl/startup.py)
                await self._done.wait()
        except HarnessError as exc:
            self.open_failed = exc
            loop.cancel()

    def leave(self) -> None:
        """The session's loop is over: a supervisor opened by :meth:`open_new` shuts down
        (one not opened yet never is)."""
        self._done.set()
        self._may_open.set()

    # -- loop -----------------------------------------------------------------------------

    async def show_events(self, events: MemoryObjectReceiveStream[Event | _Barrier]) -> None:
        async with events:
            async for event in events:
                if isinstance(event, _Barrier):
                    event.reached.set()
                    continue
                self.view.apply(event)
                if isinstance(event, SessionOpened):
                    if event.session_id != self._greeted:
                        self._greet(event.session_id, event)
                else:
                    await self.renderer.show(event)

    def greeted(self, session_id: str) -> None:
        """A new session greeted before its supervisor opened (its toolbar shows it)."""
        self._greeted = self.view.session_id = session_id

    def _greet(self, session_id: str, opened: SessionOpened) -> None:
        more = []
        if opened.resumed:
            more.append(f"Resumed with {opened.context_messages} messages in context.")
            more += [self.caps.style("dim", sanitize(line))  # where you left off, dimmed
                     for line in replay_lines(opened)]
        if opened.saved_approvals:
            rules = ", ".join(sanitize(r) for r in opened.saved_approvals)
            more.append(f"Standing approvals of the last run are off ({rules}); "
                        "\\approvals keep turns them back on.")
        greet(self.settings, session_id, more, model=opened.model, mode=opened.mode)

    async def drain(self) -> None:
        """Wait until every event sent so far was shown."""
        barrier = _Barrier()
        await self._events.send(barrier)
        await barrier.reached.wait()

    def interrupt(self) -> bool:
        """SIGINT (Ctrl-C while a turn or a command runs; the prompt handles its own), or Esc
        during a turn: abort
        it. Never stops the REPL: that is Ctrl-D, ``\\exit`` or a stopping signal."""
        if (self.sup is None or not self.sup.abort()) and self._command is not None:
            self._command.cancel()
        return True

    async def loop(self, first: str | None = None,
                   reading: asyncio.Task[str] | None = None) -> None:
        """Read and run messages and commands until Ctrl-D, ``\\exit`` or ``\\resume``.
        ``first``: a message sent before any prompt; ``reading``: the first prompt's read,
        drawn before (then the supervisor may open at once)."""
        if first is not None:  # harness PROMPT: the first message, sent at once
            startup.resume()
            print(f"You: {sanitize(first)}", flush=True)
            await self.turn(first)
        if reading is not None:
            self._may_open.set()  # its prompt is on the screen
        while True:
            try:
                if reading is not None:
                    drawn, reading = reading, None
                    text = await drawn
                else:
                    draft, self._draft = self._draft, ""
                    text = await self.prompt.read(draft, self._after_draw)
            except EOFError:
                return
            except KeyboardInterrupt:
                continue
            if not text.strip():
                continue
            from repl.interactive.commands import command_name

            if command_name(text) is not None:
                await self.command(text)
                if self._leaving:
                    return
                continue
            await self.turn(text)

    def _after_draw(self) -> None:
        """Called once each prompt is drawn: the start is over (repl/startup.py), or, for a
        new session, its supervisor is opened (the start is over when it runs)."""
        if self.sup is not None:
            startup.resume()
        else:
            self._may_open.set()

    async def command(self, text: str) -> None:
        """Run a backslash command; Ctrl-C stops waiting for it (a compaction then goes on
        in the background)."""
        from repl.interactive.commands import command_name, run_command
        from repl.interactive.pager import show_long

        reply = None
        try:
            with anyio.CancelScope() as self._command:
                reply = await run_command(await self._command_context(), text)
        except ExitRequested:
            self._leaving = True
            return
        except SwitchSession as switch:
            self.switch_to = switch.session_id
            self._leaving = True
            if switch.said:
                await self.drain()
                print(sanitize(switch.said), flush=True)
            return
        except Exception as exc:  # a command's bug: one line, and the REPL goes on
            from repl.interactive.command_context import Reply

            reply = Reply(f"{command_name(text)} failed: {_one_line_of(exc)}", error=True)
        finally:
            self._command = None
        if reply is not None and reply.prefill:  # \rewind gives your message back
            self._draft = reply.prefill
        await self.drain()
        if reply is None:
            print("Interrupted (anything started goes on in the background).", flush=True)
        elif reply.paged:
            await show_long(sanitize(reply.text))
        else:
            print(sanitize(reply.text), flush=True)

    async def _command_context(self) -> CommandContext:
        if self._commands is None:
            self._commands = CommandContext(await self._supervisor(), self._lazy_store.reader(),
                                            self.view, self._results,
                                            lambda: self.renderer.last_reasoning,
                                            project_root=str(self.settings.sandbox_dir),
                                            models=partial(self._endpoint_models, again=True),
                                            endpoint=self.settings.base_url,
                                            settings=self.settings)
        return self._commands

    # -- mode and model -------------------------------------------------------------------

    async def _endpoint_models(self, again: bool = False) -> list[str]:
        """The models the endpoint lists, asked once (``again``: asked again) and kept."""
        if self._models is None or again:
            self._models = await (await self._supervisor()).models()
        return self._models

    def _models_from_thread(self) -> list[str]:
        """The endpoint's models for completion, which runs in a thread of its own: asked
        on the REPL's loop the first time, at most :data:`MODELS_WAIT` seconds."""
        if self._models is not None:
            return self._models
        asked = asyncio.run_coroutine_threadsafe(self._endpoint_models(), self._loop)
        try:
            return asked.result(MODELS_WAIT)
        except Exception:  # slow, or the session is gone: nothing to complete this time
            asked.cancel()
            return []

    async def _next_mode(self) -> None:
        """Shift-Tab: default, acceptEdits (and dangerouslySkipPermissions when the run was
        started in it), in turn; said above the prompt (and in the toolbar)."""
        from actors.core.config import Mode

        cycle = [Mode.DEFAULT, Mode.ACCEPT_EDITS]
        if self.settings.mode is Mode.SKIP_PERMISSIONS:
            cycle.append(Mode.SKIP_PERMISSIONS)
        current = self.view.mode or self.settings.mode.value
        values = [m.value for m in cycle]
        after = cycle[(values.index(current) + 1) % len(cycle)] if current in values \
            else cycle[0]
        try:
            await (await self._supervisor()).set_mode(after)
        except HarnessError as exc:
            print(f"Mode not changed: {sanitize(str(exc))}", flush=True)
            return
        self.view.mode = after.value  # (before its event is shown: a quick second press)
        print(self.caps.style("dim", f"Mode: {after.value} (Shift-Tab: the next one)"),
              flush=True)

    async def turn(self, text: str) -> None:
        """One message: ``@path`` attached, the turn run with the status line and the keys
        read; what was typed meanwhile goes to the next prompt."""
        from repl.interactive.keys import TurnKeys

        self.typed = True
        sup = await self._supervisor()
        sent, shown = text, None
        if "@" in text:
            from repl.interactive.attachments import attach

            attached = await anyio.to_thread.run_sync(attach, text, self._files)
            for note in attached.notes:
                print(self.caps.style("dim", f"  {sanitize(note)}"), flush=True)
            if attached.sent != text:
                sent, shown = attached.sent, text
        async with anyio.create_task_group() as tg:
            if self.caps.tty and not self._preloading:
                # Not before the first prompt (it must appear at once); now, while the
                # model is asked, so that no answer and no interrupt waits for the import.
                self._preloading = True
                tg.start_soon(partial(anyio.to_thread.run_sync, preload, abandon_on_cancel=True))
            if sys.stdin.isatty():
                self._keys = TurnKeys(sys.stdin.fileno(), self.interrupt,
                                      self.renderer.draft_changed)
                await tg.start(self._keys.run)
            self.renderer.begin_turn()
            tg.start_soon(self.renderer.tick)
            try:
                result = await sup.run_turn(sent, shown=shown)
                await self.drain()
            finally:
                self.renderer.end_turn()
                tg.cancel_scope.cancel()
        if self._keys is not None:
            self._draft, self._keys = self._keys.draft, None
        if result.outcome == "interrupted":
            print("Interrupted.", flush=True)
        elif result.outcome == "failed":
            print(self.caps.style("red", f"Error: {sanitize(result.text)}"), flush=True)
        elif result.outcome == "limit":
            print(sanitize(result.text), flush=True)


def _wrapped(text: str, width: int, first: str, rest: str) -> str:
    """``text`` wrapped at words to ``width`` columns, its lines indented."""
    return "\n".join(textwrap.wrap(text, max(width - 1, 20), initial_indent=first,
                                    subsequent_indent=rest, break_on_hyphens=False)) or first


def _one_line_of(exc: BaseException) -> str:
    """An unexpected error as one line (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}".split("\n", 1)[0]


async def _run_session(
    settings: Settings,
    lazy_store: LazyStore,
    signals: RunSignals,
    resume: str | None,
    continue_latest: bool,
    first: str | None,
    new: FirstPrompt | None,
) -> tuple[str | None, str | None, bool]:
    """One session in the REPL: (its id, the session ``\\resume`` chose to go on with,
    whether a message was sent)."""
    send, receive = anyio.create_memory_object_stream[Event | _Barrier](1000)
    if resume is None and not continue_latest:
        return await _run_new_session(settings, lazy_store, signals, send, receive, first, new)
    from actors.runtime.supervisor import Supervisor

    async with Supervisor.open(
        settings, lazy_store.writable(), events=send, resume=resume,
        continue_latest=continue_latest, interactive=True,
    ) as sup:
        repl = Repl(sup, settings, lazy_store, send)
        signals.on_interrupt = repl.interrupt
        async with anyio.create_task_group() as tg:
            tg.start_soon(repl.show_events, receive)
            await repl.drain()  # the greeting and the notices of opening come first
            session_id = repl.view.session_id
            await repl.loop(first)
            tg.cancel_scope.cancel()
    return session_id, repl.switch_to, repl.typed


async def _run_new_session(
    settings: Settings,
    lazy_store: LazyStore,
    signals: RunSignals,
    send: MemoryObjectSendStream[Event | _Barrier],
    receive: MemoryObjectReceiveStream[Event | _Barrier],
    first: str | None,
    new: FirstPrompt | None,
) -> tuple[str | None, str | None, bool]:
    """A new session: greeted and prompted for at once (``new``: that was done before),
    its store and supervisor opened meanwhile (:meth:`Repl.open_new`); a failure to open
    ends the run with its error."""
    if new is None:
        from actors.core.ids import new_session_id

        repl = Repl(None, settings, lazy_store, send)
        session_id = new_session_id()
        greet(settings, session_id)
    else:
        repl = Repl(None, settings, lazy_store, send, new.prompt)
        session_id = new.session_id
    repl.greeted(session_id)
    signals.on_interrupt = repl.interrupt
    loop = anyio.CancelScope()
    async with anyio.create_task_group() as session:
        session.start_soon(repl.open_new, session_id, loop)
        try:
            with loop:
                async with anyio.create_task_group() as shown:
                    shown.start_soon(repl.show_events, receive)
                    await repl.loop(first, new.reading if new is not None else None)
                    shown.cancel_scope.cancel()  # before the shutdown, as for a resume
        finally:
            repl.leave()
    if repl.open_failed is not None:
        raise repl.open_failed
    return session_id, repl.switch_to, repl.typed


async def main(
    settings: Settings,
    lazy_store: LazyStore,
    early: Held,
    *,
    resume: str | None,
    continue_latest: bool,
    first: str | None = None,
    new: FirstPrompt | None = None,
) -> int:
    """The REPL's run on asyncio's loop, from :func:`repl.interactive.start.run_repl`:
    sessions one after the other (``\\resume`` switches) until one is left. ``early``: the
    signals held since the loop started (:func:`repl.signals.held`); ``new``: a new
    session's first prompt, already drawn."""
    # The handlers stay until the supervisor's shutdown has ended (repl/signals.py).
    async with run_signals(early) as signals:
        with signals.scope:  # SIGTERM, SIGHUP, SIGQUIT, SIGUSR1: leave; the shutdown saves
            while True:
                session_id: str | None = None
                typed = False
                try:
                    session_id, switch, typed = await _run_session(
                        settings, lazy_store, signals, resume, continue_latest, first, new)
                finally:
                    if session_id is not None:
                        await _say_saved(lazy_store, session_id, typed)
                if switch is None:
                    break
                resume, continue_latest, first, new = switch, False, None, None
    return 0


async def _say_saved(lazy_store: LazyStore, session_id: str, typed: bool) -> None:
    store = lazy_store.opened  # none: the session never began (nothing was typed)
    kept = store is not None and await anyio.to_thread.run_sync(store.exists, session_id)
    with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
        if kept:
            print(f"Saved session {session_id}.", flush=True)
        elif typed:
            print(f"Nothing was answered, so session {session_id} was not kept (Up recalls "
                  "what you typed).", flush=True)
        else:
            print("Nothing was typed; no session was kept.", flush=True)
