"""Showing runtime events in the terminal.

On a terminal, during a turn: the answer rendered as markdown block by block (the block still
arriving shown raw), the model's reasoning dimmed and collapsed to one line, a ``[tool]`` line
per call with its result under it (:mod:`repl.interactive.results`), notices, and at the
bottom the live status line (:mod:`repl.interactive.live`, :mod:`repl.interactive.status`).
Approval questions are asked through ``approve`` with the live region off the screen.

When the output is not a terminal, the answer is written as it streams, as plain text, and
there is no status line. Everything that came from outside the harness goes through
:func:`~repl.interactive.sanitize.sanitize` before it is written.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

import anyio

from actors.core.events import (
    ApprovalRequest,
    CompactionState,
    ContextGauge,
    Denied,
    Event,
    Notice,
    ReasoningDelta,
    ReasoningRevealed,
    SettingsChanged,
    StreamRestarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from repl.interactive.live import LiveRegion, fit, tail_rows
from repl.interactive.markdown import MarkdownStream, render_markdown
from repl.interactive.results import ResultLog, summary_lines
from repl.interactive.sanitize import sanitize
from repl.interactive.status import TurnStatus
from repl.interactive.terminal import DIM, UNDIM, Capabilities, size

ARGUMENT_PREVIEW = 120
DECODE_LIMIT = 64 * 1024  # larger arguments are shown with Go's escapes undone only
TICK = 0.1  # seconds between redraws of the status line (its clock and spinner)
REDRAW_EVERY = 0.03  # at most this often for streamed text (the rest waits for the tick)
LABEL = "Assistant: "
_GO_ESCAPES = (("\\u003c", "<"), ("\\u003e", ">"), ("\\u0026", "&"))
_NOT_PARAGRAPH = ("#", "-", "*", "+", ">", "|", "```", "~~~", "    ", "\t")


def readable_arguments(text: str) -> str:
    """Tool-call arguments as a person reads them: JSON escapes decoded (Go's encoder, in
    ollama, writes ``>`` as ``\\u003e``), on one line. Text that is not JSON is shown as sent."""
    if len(text) <= DECODE_LIMIT:
        try:
            return json.dumps(json.loads(text), ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
    for escaped, plain in _GO_ESCAPES:
        text = text.replace(escaped, plain)
    return text.replace("\n", " ")


def preview(text: str, limit: int = ARGUMENT_PREVIEW) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_doing(event: ToolCallStarted) -> str:
    """What the status line says a tool call is doing."""
    try:
        args = json.loads(event.arguments) if len(event.arguments) <= DECODE_LIMIT else {}
    except (ValueError, RecursionError):
        args = {}
    if isinstance(args, dict):
        if event.name == "run_bash" and isinstance(args.get("command"), str):
            return f"{event.name}: {args['command']}"
        if isinstance(args.get("path"), str):
            return f"{event.name}: {args['path']}"
    return event.name


def _starts_paragraph(source: str) -> bool:
    first = source.lstrip("\n").split("\n", 1)[0]
    return bool(first.strip()) and not first.startswith(_NOT_PARAGRAPH) and not (
        first.split(".", 1)[0].isdigit() and "." in first[:6])


class Renderer:
    """Turns events into terminal output; ``approve`` answers approval questions."""

    def __init__(
        self,
        approve: Callable[[ApprovalRequest], Awaitable[bool | Denied]],
        refresh: Callable[[], None] = lambda: None,
        out: TextIO | None = None,
        caps: Capabilities | None = None,
        results: ResultLog | None = None,
    ) -> None:
        self._approve = approve
        self._refresh = refresh
        self._out = out
        self.caps = caps or Capabilities.of(out or sys.stdout)
        self.results = results or ResultLog()
        self._live: LiveRegion | None = None  # during a turn, on a terminal
        self._status: TurnStatus | None = None
        self._answer: MarkdownStream | None = None
        self._labelled = False  # the answer's label was written
        self._raw_answer = False  # plain streaming (not a terminal): a line is open
        self._reasoning: list[str] | None = None  # the reasoning streaming now
        self.last_reasoning = ""
        self._held: list[Notice] = []  # notices that came while an answer streamed
        self._dirty = False  # the live region changed since it was drawn
        self._drawn_at = 0.0

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout  # sys.stdout may be patched while a prompt is shown

    # -- writing ----------------------------------------------------------------------------

    def _final(self, text: str) -> None:
        """Write final text (whole lines)."""
        if not text:
            return
        if self._live is not None:
            self._live.write(text)
        else:
            self.out.write(text)
            self.out.flush()

    def _line(self, text: str) -> None:
        self.end_line()
        self._final(text + "\n")

    def _width(self) -> int:
        return size().columns if self.caps.tty else 120

    def _room(self) -> int:
        return max(size().lines - 4, 4)

    # -- the turn ---------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """A turn starts: the status line appears (on a terminal)."""
        self._status = TurnStatus()
        if self.caps.tty:
            self._live = LiveRegion(lambda: self.out)
            self._live.status = self._status.line()
            self._live.draw()

    def end_turn(self) -> None:
        """The turn ended and its events were shown: the status line goes."""
        self.end_line()
        if self._live is not None:
            self._live.erase()
        self._live = None
        self._status = None

    def draft_changed(self, draft: str) -> None:
        if self._status is not None:
            self._status.draft = draft
            self._dirty = True

    async def tick(self) -> None:
        """Redraw the status line while the turn runs (until cancelled)."""
        while True:
            await anyio.sleep(TICK)
            self._redraw()

    def _redraw(self) -> None:
        self._dirty = False
        self._drawn_at = time.monotonic()
        if self._live is not None and self._status is not None:
            self._live.status = self._status.line()
            self._live.pending = self._pending_text()
            self._live.draw()

    def _pending_text(self) -> str:
        width = size().columns
        if self._reasoning is not None:
            text = " ".join("".join(self._reasoning).split())
            return self._dim(fit("Thinking: " + text[-width:], width - 1))
        if self._answer is not None:
            pending = self._answer.pending
            shown = (LABEL + pending) if pending and not self._labelled else pending
            return tail_rows(shown, width, self._room())
        return ""

    def _dim(self, text: str) -> str:
        return DIM + text + UNDIM if self.caps.colour else text

    # -- the streams ------------------------------------------------------------------------

    def end_line(self) -> None:
        """Finish the answer (or reasoning) being streamed, then show the notices that came
        meanwhile."""
        self._end_reasoning()
        if self._answer is not None:
            rest = self._answer.finish()
            self._answer = None
            if self._live is not None:
                self._live.pending = ""
            self._final(rest)
        if self._raw_answer:
            self._final("\n")
            self._raw_answer = False
        held, self._held = self._held, []
        for notice in held:
            self._notice(notice)

    def _render_block(self, source: str) -> str:
        colour, width = self.caps.colour, self._width()
        if self._labelled:  # a block after another: a blank line between them
            rendered = render_markdown(source, width=width, colour=colour)
            return "\n" + rendered if rendered else ""
        self._labelled = True
        if _starts_paragraph(source):
            return render_markdown(LABEL + source.lstrip("\n"), width=width, colour=colour)
        return LABEL.rstrip() + "\n" + render_markdown(source, width=width, colour=colour)

    def _text(self, text: str) -> None:
        self._end_reasoning()
        text = sanitize(text)
        if self._status is not None:
            self._status.streaming(len(text))
        if not self.caps.tty:
            if not self._raw_answer:
                self.end_line()
                self._final(LABEL)
                self._raw_answer = True
            self.out.write(text)
            self.out.flush()
            return
        if self._answer is None:
            self._answer = MarkdownStream(self._render_block, self._room)
            self._labelled = False
        final = self._answer.feed(text)
        if self._live is None:  # an answer outside a turn (not expected): no live region
            self._final(final)
            return
        self._live.pending = self._pending_text()
        if final:
            self._live.write(final)
        else:
            self._dirty = True

    def _thinking(self, text: str) -> None:
        if self._reasoning is None:
            self.end_line()
            self._reasoning = []
        self._reasoning.append(sanitize(text))
        if self._status is not None:
            self._status.streaming(len(text), reasoning=True)
            self._dirty = True

    def _end_reasoning(self) -> None:
        """The reasoning is over: one dimmed line stays (``\\thinking`` shows it whole)."""
        if self._reasoning is None:
            return
        text = "".join(self._reasoning).strip()
        self._reasoning = None
        if self._live is not None:
            self._live.pending = ""
        if not text:
            return
        self.last_reasoning = text
        lines = text.split("\n")
        first = lines[0]
        more = len(lines) > 1
        width = self._width()
        suffix = f" (+{len(lines) - 1} lines: \\thinking)" if more else ""
        line = fit("Thinking: " + first, width - len(suffix) - 1) + suffix
        self._final(self._dim(line) + "\n")

    # -- events -------------------------------------------------------------------------------

    def _notice(self, event: Notice) -> None:
        prefix = {"info": "", "warning": "warning: ", "error": "error: "}[event.level]
        text = f"[{prefix}{sanitize(event.text)}]"
        if event.level != "info":
            text = self.caps.style("yellow" if event.level == "warning" else "red", text)
        self._final(text + "\n")

    async def show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._text(event.text)
        elif isinstance(event, ReasoningDelta):
            self._thinking(event.text)
        elif isinstance(event, ReasoningRevealed):
            self._line(self._dim("[the text above was the model's reasoning]"))
        elif isinstance(event, StreamRestarted):
            if self._answer is not None:
                self._answer = None  # what was not final yet is void
                if self._live is not None:
                    self._live.pending = ""
            self._line(f"[stream broken ({sanitize(event.reason)}); retrying]")
        elif isinstance(event, ToolCallStarted):
            arguments = preview(sanitize(readable_arguments(event.arguments)))
            self._line(fit(f"  [tool] {sanitize(event.name)}({arguments})", self._width()))
            if self._status is not None:
                self._status.running(sanitize(_tool_doing(event)))
                self._redraw()
        elif isinstance(event, ToolCallFinished):
            result = self.results.add(event)
            self._line("\n".join(summary_lines(result, self._width(), self.caps)))
            if self._status is not None:
                self._status.waiting()
                self._redraw()
        elif isinstance(event, Notice):
            if self._answer is not None or self._raw_answer or self._reasoning is not None:
                self._held.append(event)  # not in the middle of an answer
            else:
                self._notice(event)
        elif isinstance(event, ApprovalRequest):
            self.end_line()
            live, self._live = self._live, None
            if live is not None:
                live.erase()
            try:
                answer = await self._approve(event)
            finally:
                self._live = live
                if self._status is not None and self._status.tool_started is not None:
                    self._status.running(self._status.doing.removeprefix("running "))
            async with event.reply:
                with contextlib.suppress(anyio.BrokenResourceError):  # the turn was aborted
                    await event.reply.send(answer)
            if live is not None:
                self._redraw()
        elif isinstance(event, CompactionState | ContextGauge | SettingsChanged):
            self._refresh()
        if self._dirty and self._live is not None \
                and time.monotonic() - self._drawn_at >= REDRAW_EVERY:
            self._redraw()
