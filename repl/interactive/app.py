"""The interactive REPL: prompt_toolkit on asyncio, with the supervisor's actors under it.

- History in ``<memory-dir>/history`` (0600), shared across sessions; Up/Down, Ctrl-R.
- Enter sends; Alt-Enter (or Esc then Enter) inserts a new line.
- Tab completes backslash (and slash) commands, session ids (with titles) and ``@`` paths;
  ``@path`` attaches the file to the message sent (:mod:`repl.interactive.attachments`).
- The bottom toolbar shows the session, mode, context gauge, ``compacting…`` and cost, all
  learned from the supervisor's events (:class:`~repl.interactive.view.SessionView`).
- During a turn a status line says what runs; Esc or Ctrl-C aborts the turn (the supervisor
  recovers and checkpoints), and text typed meanwhile waits in the next prompt
  (:mod:`repl.interactive.keys`). At the prompt Ctrl-C clears the line, and a second Ctrl-C on
  an empty line exits, like Ctrl-D and ``\\exit``.
- Approvals show the change (a diff, the full command) and take yes, no, always for this
  session, or the reason for a no (:mod:`repl.interactive.approvals`).
- SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 end the run cleanly; the supervisor's shutdown saves
  the session, and further signals are ignored until it has ended (repl/signals.py).
- A new session's greeting and first prompt come before the runtime is imported: its id is
  made here, and its supervisor is imported and opened once that prompt is drawn (or when a
  first message is sent); a message or command sent sooner waits for it, and a failure to
  open ends the run as it did before the prompt. A resumed session opens first: its
  greeting shows where it was left.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout

from actors.core.config import Settings
from actors.core.errors import HarnessError
from actors.core.events import ApprovalRequest, Denied, Event, SessionOpened
from actors.core.ids import new_session_id
from actors.store import Store
from repl import startup
from repl.interactive.command_context import CommandContext, ExitRequested, SwitchSession
from repl.interactive.completion import HarnessCompleter
from repl.interactive.markdown import preload
from repl.interactive.project_files import ProjectFiles
from repl.interactive.render import Renderer
from repl.interactive.replay import replay_lines
from repl.interactive.results import ResultLog
from repl.interactive.sanitize import sanitize
from repl.interactive.terminal import Capabilities
from repl.interactive.view import SessionView
from repl.signals import RunSignals, run_signals

if TYPE_CHECKING:
    from actors.runtime.supervisor import Supervisor
    from repl.interactive.keys import TurnKeys

# What only a turn, a question or a command uses (approvals, attachments, diffs, the keys of
# a turn, the commands, the pager) is imported there, not before the first prompt.

HISTORY_FILE = "history"


class _Barrier:
    """Put in the event stream after a turn: set once everything before it was shown."""

    def __init__(self) -> None:
        self.reached = anyio.Event()


def create_history_file(memory_dir: Path) -> Path:
    """The input history file, created 0600 if missing (before the event loop starts)."""
    path = memory_dir / HISTORY_FILE
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    return path


class Repl:
    def __init__(
        self,
        sup: Supervisor | None,
        settings: Settings,
        store: Store,
        events: MemoryObjectSendStream[Event | _Barrier],
    ) -> None:
        """``sup``: the running supervisor, or None for a new session's, which
        :meth:`open_new` opens."""
        self.sup = sup
        self.settings = settings
        self.view = SessionView(budget=settings.max_context_tokens)
        self.caps = Capabilities.of(sys.stdout)
        self._results = ResultLog()
        self.renderer = Renderer(self._approve, self._refresh, caps=self.caps,
                                 results=self._results)
        self._store = store
        self._commands: CommandContext | None = None  # made at the first command
        self._opened = anyio.Event()  # the supervisor runs
        self._may_open = anyio.Event()  # a new session's: the first prompt is up, or a
        # message was sent
        self._done = anyio.Event()  # the session's loop is over
        self.open_failed: HarnessError | None = None
        self._greeted = ""  # the session greeted before its supervisor opened
        if sup is not None:
            self._opened.set()
        self._files = ProjectFiles(settings.sandbox_dir, settings.memory_dir, store)
        self._events = events
        self._exit_armed = False
        self._command: anyio.CancelScope | None = None  # a backslash command being run
        self._leaving = False
        self._keys: TurnKeys | None = None  # during a turn
        self._draft = ""  # text typed during the last turn, for the next prompt
        self._preloading = False  # rich is imported in a thread when the first turn starts
        self.switch_to: str | None = None  # \resume chose another session
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(settings.memory_dir / HISTORY_FILE)),
            completer=HarnessCompleter(lambda: store.list_sessions(include_empty=False),
                                       settings.sandbox_dir),
            complete_in_thread=True,  # session ids come from the database
            multiline=True,
            key_bindings=self._bindings(),
            bottom_toolbar=self._toolbar,
            prompt_continuation="... ",
            refresh_interval=0.5,
            enable_history_search=False,
        )
        self._yes_no: PromptSession[str] | None = None  # made at the first question
        self.session.default_buffer.on_text_changed += self._disarm_exit

    def _disarm_exit(self, _: object) -> None:
        self._exit_armed = False

    # -- prompt ---------------------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("enter")
        def _send(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if not buffer.text and self._exit_armed:
                event.app.exit(exception=EOFError())
                return
            buffer.reset()
            self._exit_armed = True  # until something is typed; the toolbar says so
            event.app.invalidate()

        return bindings

    def _question_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("escape", eager=True)  # Esc at a question aborts, like Ctrl-C
        def _abort(event: KeyPressEvent) -> None:
            event.app.exit(exception=KeyboardInterrupt())

        return bindings

    def _toolbar(self) -> FormattedText:
        view = self.view
        if self._exit_armed:
            return FormattedText([("", " Press Ctrl-C again (or Ctrl-D) to exit ")])
        title = " ".join(sanitize(view.title).split())  # the model may have written it
        parts = [title or view.session_id, self.settings.mode.value, view.context_line()]
        if view.compacting:
            parts.append("compacting…")
        parts.append(f"${view.cost_usd:.4f}")
        return FormattedText([("", " " + " │ ".join(parts) + " ")])

    def _refresh(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

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

        rule = None if request.asks else covered(self.view.approvals, request.tool,
                                                 request.arguments)
        description = sanitize(request.description)
        if rule is not None:
            print(self.caps.style("dim", f"  allowed: {description} (standing approval "
                                         f"'{sanitize(rule)}')"), flush=True)
            return True
        lines = await anyio.to_thread.run_sync(
            change_lines, request.tool, request.arguments, self._files.read, self.caps)
        for line in lines:
            print("    " + line)
        offered = None if request.asks else rule_for(request.tool, request.arguments)
        hint, keys = choices(offered)
        print(self.caps.style("dim", "  " + sanitize(hint)), flush=True)
        text = await self._ask(f"Allow {description}? {keys} ")
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
        """A new session's supervisor: imported and opened once the first prompt is drawn
        (or a message is sent), and run until the session's loop is over. A failure to
        open is kept in :attr:`open_failed` and ends the loop (``loop``)."""
        await self._may_open.wait()
        if self._done.is_set():  # left at once: nothing to open
            return
        from actors.runtime.supervisor import Supervisor

        try:
            async with Supervisor.open(self.settings, self._store, events=self._events,
                                       new_id=session_id) as sup:
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

    def greet_new(self, session_id: str) -> None:
        """A new session's greeting, before its supervisor opens (its toolbar too)."""
        self._greeted = self.view.session_id = session_id
        self._greet(session_id, None)

    def _greet(self, session_id: str, opened: SessionOpened | None) -> None:
        print(f"Session:          {session_id}")
        print(f"Model:            {self.settings.model} at {self.settings.base_url}")
        print(f"Memory directory: {self.settings.memory_dir}")
        if opened is not None and opened.resumed:
            print(f"Resumed with {opened.context_messages} messages in context.")
            for line in replay_lines(opened):  # where you left off, dimmed
                print(self.caps.style("dim", sanitize(line)))
        if opened is not None and opened.saved_approvals:
            rules = ", ".join(sanitize(r) for r in opened.saved_approvals)
            print(f"Standing approvals of the last run are off ({rules}); "
                  "\\approvals keep turns them back on.")
        print("Type \\help for commands, Ctrl-D to exit.", flush=True)

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

    async def loop(self, first: str | None = None) -> None:
        if first is not None:  # harness PROMPT: the first message, sent at once
            startup.resume()
            print(f"You: {first}", flush=True)
            await self.turn(first)
        while True:
            self._exit_armed = False
            try:
                draft, self._draft = self._draft, ""
                with patch_stdout(raw=True):
                    text = await self.session.prompt_async("You: ", handle_sigint=False,
                                                           default=draft,
                                                           pre_run=self._after_draw)
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
        """Called as each prompt starts; once it is drawn (the loop's next step), the start
        is over (repl/startup.py), or, for a new session, its supervisor is opened (the
        start is over when it runs)."""
        loop = asyncio.get_running_loop()
        loop.call_soon(startup.resume if self.sup is not None else self._may_open.set)

    async def command(self, text: str) -> None:
        """Run a backslash command; Ctrl-C stops waiting for it (a compaction then goes on
        in the background)."""
        from repl.interactive.commands import run_command
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
            return
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
            self._commands = CommandContext(await self._supervisor(), self._store, self.view,
                                            self._results,
                                            lambda: self.renderer.last_reasoning,
                                            project_root=str(self.settings.sandbox_dir))
        return self._commands

    async def turn(self, text: str) -> None:
        """One message: ``@path`` attached, the turn run with the status line and the keys
        read; what was typed meanwhile goes to the next prompt."""
        from repl.interactive.keys import TurnKeys

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


async def _run_session(
    settings: Settings,
    store: Store,
    signals: RunSignals,
    resume: str | None,
    continue_latest: bool,
    first: str | None,
) -> tuple[str | None, str | None]:
    """One session in the REPL: (its id, the session ``\\resume`` chose to go on with)."""
    send, receive = anyio.create_memory_object_stream[Event | _Barrier](1000)
    if resume is None and not continue_latest:
        return await _run_new_session(settings, store, signals, send, receive, first)
    from actors.runtime.supervisor import Supervisor

    async with Supervisor.open(
        settings, store, events=send, resume=resume, continue_latest=continue_latest
    ) as sup:
        repl = Repl(sup, settings, store, send)
        signals.on_interrupt = repl.interrupt
        async with anyio.create_task_group() as tg:
            tg.start_soon(repl.show_events, receive)
            await repl.drain()  # the greeting and the notices of opening come first
            session_id = repl.view.session_id
            await repl.loop(first)
            tg.cancel_scope.cancel()
    return session_id, repl.switch_to


async def _run_new_session(
    settings: Settings,
    store: Store,
    signals: RunSignals,
    send: MemoryObjectSendStream[Event | _Barrier],
    receive: MemoryObjectReceiveStream[Event | _Barrier],
    first: str | None,
) -> tuple[str | None, str | None]:
    """A new session: greeted and prompted for at once, its supervisor opened meanwhile
    (:meth:`Repl.open_new`); a failure to open ends the run with its error."""
    repl = Repl(None, settings, store, send)
    signals.on_interrupt = repl.interrupt
    session_id = new_session_id()
    repl.greet_new(session_id)
    loop = anyio.CancelScope()
    async with anyio.create_task_group() as session:
        session.start_soon(repl.open_new, session_id, loop)
        try:
            with loop:
                async with anyio.create_task_group() as shown:
                    shown.start_soon(repl.show_events, receive)
                    await repl.loop(first)
                    shown.cancel_scope.cancel()  # before the shutdown, as for a resume
        finally:
            repl.leave()
    if repl.open_failed is not None:
        raise repl.open_failed
    return session_id, repl.switch_to


async def _main(
    settings: Settings,
    store: Store,
    resume: str | None,
    continue_latest: bool,
    first: str | None = None,
) -> int:
    # The handlers are installed before the first prompt shows and stay until the
    # supervisor's shutdown has ended (repl/signals.py).
    async with run_signals() as signals:
        with signals.scope:  # SIGTERM, SIGHUP, SIGQUIT, SIGUSR1: leave; the shutdown saves
            while True:
                session_id: str | None = None
                try:
                    session_id, switch = await _run_session(
                        settings, store, signals, resume, continue_latest, first)
                finally:
                    if session_id is not None:
                        await _say_saved(store, session_id)
                if switch is None:
                    break
                resume, continue_latest, first = switch, False, None
    return 0


async def _say_saved(store: Store, session_id: str) -> None:
    kept = await anyio.to_thread.run_sync(store.exists, session_id)
    with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
        if kept:
            print(f"Saved session {session_id}.", flush=True)
        else:
            print("Nothing was typed; no session was kept.", flush=True)


def run_repl(
    settings: Settings,
    store: Store,
    *,
    resume: str | None,
    continue_latest: bool,
    first: str | None = None,
) -> int:
    """The interactive prompt; ``first`` is sent as the first message (``harness PROMPT``)."""
    if not sys.stdin.isatty():  # pragma: no cover - print mode handles pipes
        raise SystemExit("harness: the interactive prompt needs a terminal; use -p")
    create_history_file(settings.memory_dir)
    # The endpoint is checked in the background while the prompt is shown: its warnings
    # (not running, model not pulled, context too small) arrive as notices. After the first
    # answer, the model names the session in the background.
    settings = dataclasses.replace(settings, preflight=True, auto_title=True)
    return anyio.run(partial(_main, settings, store, resume, continue_latest, first),
                     backend="asyncio")
