"""The REPL's prompt, ``You:``: where a message is typed.

- History in ``<memory-dir>/history`` (0600, made by :func:`create_history_file` before the
  event loop starts), shared across sessions; Up/Down, Ctrl-R.
- Enter sends; Alt-Enter (or Esc then Enter) inserts a new line.
- Tab completes backslash (and slash) commands, session ids (with titles), modes, the
  endpoint's models and ``@`` paths (:mod:`repl.interactive.completion`); Shift-Tab
  changes the permission mode (the REPL's :attr:`MainPrompt.on_shift_tab`).
- Ctrl-C clears the line and arms exit (the toolbar says so); a second Ctrl-C on an empty
  line exits, like Ctrl-D; typing disarms. In a history search (Ctrl-R) it ends the search.
- The bottom toolbar shows the session, mode, context gauge, ``compacting…`` and cost, from
  the :class:`~repl.interactive.view.SessionView` the REPL keeps up to date.
- What is printed while the prompt is shown (a notice) is written above it
  (:func:`above_the_prompt`).

Imports prompt_toolkit and nothing of the runtime, anyio or the store: a new session's first
prompt is drawn with it before the rest of the REPL is imported (:mod:`repl.interactive.start`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import has_completions, is_searching
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import StdoutProxy

from actors.core.config import Settings
from actors.core.errors import HarnessError
from repl.interactive.completion import HarnessCompleter
from repl.interactive.live import cells, fit
from repl.interactive.sanitize import sanitize
from repl.interactive.terminal import size
from repl.interactive.view import SessionView

if TYPE_CHECKING:
    from actors.store import ListedSession
    from repl.lazy_store import LazyStore

HISTORY_FILE = "history"
PROMPT = "You: "


def create_history_file(memory_dir: Path) -> Path:
    """The input history file, created 0600 if missing (before the event loop starts)."""
    path = memory_dir / HISTORY_FILE
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    return path


@contextlib.contextmanager
def above_the_prompt() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` written above the prompt while it is shown:
    prompt_toolkit's ``patch_stdout(raw=True)``, with no pause between writes.

    Its proxy's flush thread writes each line on the event loop (``run_in_terminal``: the
    prompt erased, the text written, the prompt drawn again) and then sleeps 0.2 s by
    default, to bundle a burst of small writes into one redraw; the proxy's close, when the
    prompt is done, joins that thread on the event loop. A message sent within 0.2 s of a
    notice held the loop, and so the message, for the rest of the pause. What the REPL
    prints above its prompt is a few whole lines (notices), so the pause bundles nothing;
    without it the close is immediate. Writes stay in order (prompt_toolkit chains them)."""
    with StdoutProxy(sleep_between_writes=0, raw=True) as proxy:
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = cast(TextIO, proxy)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = stdout, stderr


def _listed(lazy_store: LazyStore) -> list[ListedSession]:
    """The sessions whose ids complete (in a worker thread: a store not open yet is opened
    here; one that cannot open offers none, and the run ends with its error)."""
    try:
        return lazy_store.reader().list_sessions(include_empty=False)
    except HarnessError:
        return []


def toolbar_text(view: SessionView, mode: str, columns: int) -> str:
    """The bottom toolbar: the session's title (or id), the mode, the context gauge,
    ``compacting…`` and the cost. The title gets what the rest leaves of the line: a long
    one never pushes the gauge off it."""
    title = " ".join(sanitize(view.title).split())  # the model may have written it
    rest = [mode, view.context_line()]
    if view.compacting:
        rest.append("compacting…")
    rest.append(f"${view.cost_usd:.4f}")
    room = columns - cells(" │ ".join(["", *rest])) - 3
    name = fit(title or view.session_id, max(room, 8))
    return " " + " │ ".join([name, *rest]) + " "


class MainPrompt:
    """The prompt of one session in the REPL, and the :attr:`view` its toolbar shows."""

    def __init__(self, settings: Settings, lazy_store: LazyStore) -> None:
        self.view = SessionView(budget=settings.max_context_tokens)
        self._mode = settings.mode.value
        self.exit_armed = False  # Ctrl-C on an empty line exits now (the toolbar says so)
        # Set by the REPL once it runs: the next mode (Shift-Tab), the endpoint's models.
        self.on_shift_tab: Callable[[], Coroutine[Any, Any, None]] | None = None
        self.completer = HarnessCompleter(lambda: _listed(lazy_store), settings.sandbox_dir)
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(settings.memory_dir / HISTORY_FILE)),
            completer=self.completer,
            complete_in_thread=True,  # session ids come from the database
            multiline=True,
            key_bindings=self._bindings(),
            bottom_toolbar=self._toolbar,
            prompt_continuation="... ",
            refresh_interval=0.5,
            enable_history_search=False,
        )
        self.session.default_buffer.on_text_changed += self._disarm_exit

    async def read(self, draft: str = "", after_draw: Callable[[], None] | None = None) -> str:
        """The next message, typed at the prompt (``draft`` already in it). ``after_draw`` is
        called once the prompt is on the screen (the event loop's next step after its first
        frame). Raises EOFError for Ctrl-D (or the second Ctrl-C) and KeyboardInterrupt for
        an interrupt of the prompt. Cancelled, the prompt is closed and nothing is sent."""
        self.exit_armed = False
        pre_run = None
        if after_draw is not None:
            loop = asyncio.get_running_loop()

            def pre_run() -> None:  # called just before the first frame is drawn
                loop.call_soon(after_draw)

        with above_the_prompt():
            return await self.session.prompt_async(PROMPT, handle_sigint=False, default=draft,
                                                   pre_run=pre_run)

    async def start_reading(self) -> asyncio.Task[str]:
        """:meth:`read` in a task of its own, returned once the prompt is on the screen (or
        the read is over already). Cancelled before that, the read is cancelled too."""
        drawn = asyncio.get_running_loop().create_future()

        def shown() -> None:
            if not drawn.done():
                drawn.set_result(None)

        reading = asyncio.ensure_future(self.read(after_draw=shown))
        try:
            await asyncio.wait((reading, drawn), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            reading.cancel()
            raise
        return reading

    def refresh(self) -> None:
        """Redraw the prompt (and its toolbar) if it is shown."""
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def _disarm_exit(self, _: object) -> None:
        self.exit_armed = False

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("enter")
        def _send(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("s-tab", filter=~has_completions)  # (in a menu: the one before)
        def _next_mode(event: KeyPressEvent) -> None:
            if self.on_shift_tab is not None:
                event.app.create_background_task(self.on_shift_tab())

        # In a history search (Ctrl-R) Ctrl-C is prompt_toolkit's: it ends the search and
        # gives back the line as it was before it.
        @bindings.add("c-c", filter=~is_searching)
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if not buffer.text and self.exit_armed:
                event.app.exit(exception=EOFError())
                return
            buffer.reset()
            self.exit_armed = True  # until something is typed; the toolbar says so
            event.app.invalidate()

        return bindings

    def _toolbar(self) -> FormattedText:
        view = self.view
        if self.exit_armed:
            return FormattedText([("", " Press Ctrl-C again (or Ctrl-D) to exit ")])
        return FormattedText([("", toolbar_text(view, view.mode or self._mode,
                                                 size().columns))])
