"""The model's answers rendered as markdown on a terminal, block by block as they stream in.

:func:`render_markdown` renders one piece of markdown with rich (headings, emphasis, lists,
tables, fenced code highlighted by pygments) at the terminal's width: paragraphs wrap at word
boundaries. Without colour (``NO_COLOR``) the layout is the same and no escape sequence is
written. Raw HTML in an answer is shown as text, never interpreted (or dropped), and links are
written out as ``text (url)`` rather than hidden behind terminal hyperlinks.

:class:`MarkdownStream` cuts the streamed text into blocks that are complete (a blank line
outside a fenced code block, the end of a fence, a heading line): those are rendered and
become final; the block still arriving is shown raw until it completes. A block taller than
the room left on the screen is rendered in parts (a fence is closed and opened again), so the
part not final yet always fits on the screen.

rich is never imported before the prompt appears (it costs about 0.15 s): :func:`preload`
imports it in a worker thread when the first turn starts, so neither the first answer nor an
interrupt of it waits for the import.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from typing import Any

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_consoles: dict[tuple[int, bool], Any] = {}
_markdown_class: Any = None
_importing = threading.Lock()  # the import in a worker thread and a render wait for each other


def preload() -> None:
    """Import rich and make the markdown class (blocking: run it in a worker thread)."""
    _markdown_type()


def _markdown_type() -> Any:
    """rich's Markdown, parsed without raw HTML (``<T>`` stays text) and with level-1
    headings on the left."""
    global _markdown_class
    if _markdown_class is None:
        with _importing:
            if _markdown_class is None:
                _markdown_class = _make_markdown_type()
    return _markdown_class


def _make_markdown_type() -> Any:
    from markdown_it import MarkdownIt
    from rich.markdown import Heading, ListItem, Markdown
    from rich.segment import Segment

    class LeftHeading(Heading):
        LEVEL_ALIGN = {**Heading.LEVEL_ALIGN, "h1": "left"}  # noqa: RUF012

    class DottedItem(ListItem):
        """A numbered item as it was written, ``1.``, where rich writes ``1``."""

        def render_number(self, console: Any, options: Any, number: int, last_number: int
                          ) -> Any:
            width = len(str(max(number, last_number - 1))) + 3  # rich's is one past the last
            lines = console.render_lines(self.elements, options.update(
                width=options.max_width - width), style=self.style)
            style = console.get_style("markdown.item.number", default="none")
            for index, line in enumerate(lines):
                yield Segment(f"{number}.".rjust(width - 1) + " " if index == 0 else
                              " " * width, style)
                yield from line
                yield Segment("\n")

    class AnswerMarkdown(Markdown):
        elements = {**Markdown.elements, "heading_open": LeftHeading,  # noqa: RUF012
                    "list_item_open": DottedItem}

        def __init__(self, markup: str) -> None:
            super().__init__("", hyperlinks=False)
            self.markup = markup
            parser = MarkdownIt("commonmark", {"html": False})
            self.parsed = parser.enable("strikethrough").enable("table").parse(markup)

    return AnswerMarkdown


def _console(width: int, colour: bool) -> Any:
    key = (width, colour)
    console = _consoles.get(key)
    if console is None:
        from rich.console import Console

        console = Console(
            file=io.StringIO(), width=width, force_terminal=colour,
            color_system="256" if colour else None, no_color=not colour, highlight=False,
            emoji=False, markup=False, legacy_windows=False,
        )
        _consoles[key] = console
    return console


def render_markdown(text: str, *, width: int, colour: bool) -> str:
    """``text`` (already sanitised) rendered for a terminal ``width`` columns wide: whole
    lines, each ending with a newline; no escape sequences without ``colour``."""
    console = _console(max(width, 20), colour)
    with console.capture() as capture:
        console.print(_markdown_type()(text))
    lines = capture.get().split("\n")
    while lines and not _visible(lines[-1]):
        lines.pop()
    while lines and not _visible(lines[0]):
        lines.pop(0)
    return "".join(line.rstrip(" ") + "\n" for line in lines)


_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def _visible(line: str) -> str:
    return _ESCAPES.sub("", line).strip()


class MarkdownStream:
    """Streamed markdown, cut into final rendered blocks and a raw tail (see the module doc).

    ``render`` renders complete markdown; ``room`` is how many lines the raw tail may take
    before it is rendered in parts.
    """

    def __init__(self, render: Callable[[str], str], room: Callable[[], int]) -> None:
        self._render = render
        self._room = room
        self._buffer = ""  # text not rendered yet
        self._reopen = ""  # a fence line to put back before the rest of a cut code block

    @property
    def pending(self) -> str:
        """The text not final yet, as it came (for showing raw)."""
        return self._buffer

    def feed(self, text: str) -> str:
        """Add streamed text; return what became final, rendered (possibly empty)."""
        self._buffer += text
        out = []
        cut, _ = self._scan(None)
        if cut:  # a cut is never inside a fence
            out.append(self._render_part(self._buffer[:cut], None))
            self._buffer, self._reopen = self._buffer[cut:], ""
        if self._buffer.count("\n") > max(self._room(), 4):
            whole = self._buffer.rfind("\n") + 1
            _, fence = self._scan(whole)
            out.append(self._render_part(self._buffer[:whole], fence))
            self._buffer, self._reopen = self._buffer[whole:], (fence + "\n" if fence else "")
        return "".join(out)

    def finish(self) -> str:
        """The end of the answer: render what is left."""
        rest, self._buffer = self._buffer, ""
        out = self._render_part(rest, None) if rest.strip() else ""
        self._reopen = ""
        return out

    def _render_part(self, source: str, open_fence: str | None) -> str:
        source = self._reopen + source
        if open_fence is not None:  # a code block rendered in parts: close this part
            opener = _FENCE.match(open_fence)
            source += (opener.group(1) if opener else "```") + "\n"
        return self._render(source) if source.strip() else ""

    def _scan(self, limit: int | None) -> tuple[int, str | None]:
        """Over the buffer's complete lines (up to ``limit``): where its complete blocks end
        (0: none), and the opening line of the fence still open at the end."""
        fence = self._reopen.rstrip("\n") or None
        cut = position = 0
        for line in self._buffer.splitlines(keepends=True):
            if not line.endswith("\n") or (limit is not None and position >= limit):
                break  # the line still arriving
            position += len(line)
            stripped = line.rstrip("\n")
            match = _FENCE.match(stripped)
            if fence is not None:
                opener = _FENCE.match(fence)
                if (match and opener and not match.group(2).strip()
                        and match.group(1)[0] == opener.group(1)[0]
                        and len(match.group(1)) >= len(opener.group(1))):
                    fence, cut = None, position
            elif match:
                fence = stripped
            elif not stripped.strip() or _HEADING.match(stripped):
                cut = position
        return cut, fence
