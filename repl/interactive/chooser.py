"""A filterable list in the terminal: type to filter, arrows to move, a preview of the row
under the cursor, Enter to choose, and keys for actions. The resume picker and ``\\rewind``
are built on it.

The list is drawn below the prompt (not full screen) and erased when done. ``load(query)``
gives the rows for what is typed; it runs in a worker thread (a store query), at most one
at a time, a moment after the typing stops, and only its latest answer is shown.
``preview(key)`` gives the lines shown under the list (also in a worker thread, cached).
An action bound to a key may finish the chooser with a result, change the rows, ask for a
line of text (:meth:`Chooser.ask`) or say something in the status line.

Cancellation: Esc and Ctrl-C leave with None; leaving cancels the loads still running (their
threads finish on their own: they only read).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style

from repl.interactive.live import fit
from repl.interactive.sanitize import sanitize

FILTER_DELAY = 0.12  # seconds of no typing before the rows are looked up again
LIST_ROWS = 10
PREVIEW_ROWS = 9
STYLE = Style.from_dict({
    "title": "bold",
    "header": "underline",
    "selected": "reverse",
    "dim": "#888888",
    "status": "italic",
})


@dataclass
class Row:
    """One row: ``key`` is what choosing it returns, ``text`` what is shown."""

    key: str
    text: str
    data: Any = None


@dataclass
class Action:
    """A key and what it does: ``run(chooser, row)`` (an async function)."""

    key: str
    label: str
    run: Callable[[Chooser, Row], Awaitable[None]]


@dataclass
class _Ask:
    label: str
    done: Callable[[str], Awaitable[None]]


@dataclass
class Chooser:
    title: str
    load: Callable[[str], tuple[str, list[Row]]]  # query -> (header line, rows)
    preview: Callable[[Row], list[str]] | None = None
    actions: Sequence[Action] = ()
    enter_label: str = "choose"
    status: str = ""
    result: Any = None
    rows: list[Row] = field(default_factory=list)
    header: str = ""
    selected: int = 0
    _previews: dict[str, list[str]] = field(default_factory=dict)
    _generation: int = 0
    _asking: _Ask | None = None
    _loaded: list[Row] | None = None  # the first rows, once looked up

    def __post_init__(self) -> None:
        self.filter = Buffer(multiline=False, on_text_changed=lambda _: self._changed())
        self.answer = Buffer(multiline=False)
        self.app: Application[Any] = Application(
            layout=Layout(self._root(), focused_element=self._filter_window),
            key_bindings=self._bindings(),
            style=STYLE,
            full_screen=False,
            erase_when_done=True,
            mouse_support=False,
        )

    # -- layout -----------------------------------------------------------------------------

    def _root(self) -> HSplit:
        self._filter_window = Window(
            BufferControl(self.filter, input_processors=[BeforeInput("> ", style="class:title")]),
            height=1,
        )
        self._answer_window = Window(
            BufferControl(self.answer, input_processors=[
                BeforeInput(lambda: (self._asking.label if self._asking else ""),
                            style="class:title")]),
            height=1,
        )
        return HSplit([
            Window(FormattedTextControl(lambda: [("class:title", self.title)]), height=1),
            self._input_line(),
            Window(FormattedTextControl(self._list_text), height=Dimension(min=1,
                                                                            max=LIST_ROWS + 1)),
            Window(FormattedTextControl(self._preview_text), height=Dimension(max=PREVIEW_ROWS)),
            Window(FormattedTextControl(self._footer_text), height=2),
        ])

    def _input_line(self) -> Any:
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.layout import ConditionalContainer

        return HSplit([
            ConditionalContainer(self._filter_window, Condition(lambda: self._asking is None)),
            ConditionalContainer(self._answer_window,
                                 Condition(lambda: self._asking is not None)),
        ])

    def _list_text(self) -> StyleAndTextTuples:
        width = self._width()
        if not self.rows:
            return [("class:dim", "  (nothing matches)" if self.filter.text else "  (none)")]
        top = max(0, min(self.selected - LIST_ROWS // 2, len(self.rows) - LIST_ROWS))
        shown: StyleAndTextTuples = [("class:header", ("  " + self.header)[:width] + "\n")]
        for i in range(top, min(len(self.rows), top + LIST_ROWS)):
            text = fit(("▶ " if i == self.selected else "  ") + sanitize(self.rows[i].text),
                       width)
            shown.append(("class:selected" if i == self.selected else "", text + "\n"))
        return shown

    def _preview_text(self) -> StyleAndTextTuples:
        row = self.current
        if row is None or self.preview is None:
            return []
        lines = self._previews.get(row.key)
        if lines is None:
            self._start(self._load_preview(row))
            lines = ["  …"]
        width = self._width()
        shown: StyleAndTextTuples = [("class:dim", "  " + "─" * max(0, min(width, 80) - 4) + "\n")]
        shown += [("", fit("  " + sanitize(line), width) + "\n")
                  for line in lines[:PREVIEW_ROWS - 1]]
        return shown

    def _footer_text(self) -> StyleAndTextTuples:
        keys = [f"Enter {self.enter_label}"] + [f"{a.key.replace('c-', 'ctrl-')} {a.label}"
                                                 for a in self.actions]
        keys.append("Esc cancel")
        text: StyleAndTextTuples = []
        if self.status:
            text.append(("class:status", "  " + sanitize(self.status) + "\n"))
        text.append(("class:dim", "  " + " · ".join(keys)))
        return text

    def _width(self) -> int:
        try:
            return self.app.output.get_size().columns - 1
        except Exception:  # no terminal size (a test's pipe): a usual width
            return 119

    # -- behaviour --------------------------------------------------------------------------

    @property
    def current(self) -> Row | None:
        return self.rows[self.selected] if 0 <= self.selected < len(self.rows) else None

    def finish(self, result: Any) -> None:
        self.result = result
        self.app.exit(result=result)

    def set_rows(self, header: str, rows: list[Row], keep: str | None = None) -> None:
        self.header, self.rows = header, rows
        keys = [r.key for r in rows]
        self.selected = keys.index(keep) if keep in keys else 0
        self.app.invalidate()

    def forget_preview(self, key: str) -> None:
        self._previews.pop(key, None)

    def say(self, text: str) -> None:
        self.status = text
        self.app.invalidate()

    def ask(self, label: str, default: str, done: Callable[[str], Awaitable[None]]) -> None:
        """Read one line (Enter gives it to ``done``, Esc drops it) in place of the filter."""
        self._asking = _Ask(label, done)
        self.answer.text = default
        self.answer.cursor_position = len(default)
        self.app.layout.focus(self._answer_window)
        self.app.invalidate()

    def _end_ask(self) -> _Ask | None:
        asking, self._asking = self._asking, None
        self.app.layout.focus(self._filter_window)
        self.app.invalidate()
        return asking

    def _start(self, coroutine: Awaitable[None]) -> None:
        async def run() -> None:
            await coroutine

        self.app.create_background_task(run())

    def _changed(self) -> None:
        self._generation += 1
        self._start(self._reload(self._generation, self.filter.text, delay=FILTER_DELAY))

    async def _reload(self, generation: int, query: str, *, delay: float = 0.0) -> None:
        if delay:
            await anyio.sleep(delay)
        if generation != self._generation:
            return  # typed again meanwhile
        try:
            header, rows = await anyio.to_thread.run_sync(self.load, query)
        except Exception as exc:  # a store that failed: said in the status line, rows kept
            if generation == self._generation:
                self.say(f"Cannot look that up: {exc}")
            return
        if generation == self._generation:
            keep = self.current.key if self.current else None
            self.set_rows(header, rows, keep)

    async def reload(self) -> None:
        """Look the rows up again now (after an action changed them)."""
        self._generation += 1
        await self._reload(self._generation, self.filter.text)

    async def _load_preview(self, row: Row) -> None:
        assert self.preview is not None
        self._previews[row.key] = ["  …"]
        try:
            lines = await anyio.to_thread.run_sync(self.preview, row)
        except Exception as exc:  # a damaged session: say so in its preview
            lines = [f"(cannot show this session: {exc})"]
        self._previews[row.key] = lines
        self.app.invalidate()

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()

        def move(by: int) -> None:
            if self.rows:
                self.selected = max(0, min(len(self.rows) - 1, self.selected + by))
                self.status = ""

        kb.add("up")(lambda _e: move(-1))
        kb.add("down")(lambda _e: move(1))
        kb.add("pageup")(lambda _e: move(-LIST_ROWS))
        kb.add("pagedown")(lambda _e: move(LIST_ROWS))

        @kb.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            if self._asking is not None:
                asking = self._end_ask()
                assert asking is not None
                self._start(asking.done(self.answer.text))
                return
            row = self.current
            if row is not None:
                self.finish(row)

        @kb.add("escape", eager=True)
        @kb.add("c-c")
        def _cancel(event: KeyPressEvent) -> None:
            if self._asking is not None:
                self._end_ask()
                self.say("")
                return
            self.finish(None)

        for action in self.actions:
            def bound(event: KeyPressEvent, action: Action = action) -> None:
                row = self.current
                if row is not None and self._asking is None:
                    self._start(action.run(self, row))

            kb.add(action.key)(bound)
        return kb

    # -- running ----------------------------------------------------------------------------

    def first_rows(self) -> list[Row]:
        """Look up the rows shown first (what nothing typed gives): a caller may say there
        is nothing to choose instead of showing an empty list. :meth:`run` and
        :meth:`run_async` show these rows when they were looked up already."""
        if self._loaded is None:
            self.header, self.rows = self.load("")
            self._loaded = list(self.rows)
        return self._loaded

    async def run_async(self) -> Any:
        """Show the chooser in a running event loop (the REPL's); the result or None."""
        await anyio.to_thread.run_sync(self.first_rows)
        return await self.app.run_async()

    def run(self) -> Any:
        """Show the chooser (no event loop running); the result or None."""
        self.first_rows()
        return self.app.run()
