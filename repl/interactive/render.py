"""Showing runtime events in the terminal: streamed text, the model's reasoning dimmed, one
line per tool call (arguments decoded), notices, and inline approval questions."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import anyio

from actors.core.events import (
    ApprovalRequest,
    CompactionState,
    ContextGauge,
    Event,
    Notice,
    ReasoningDelta,
    ReasoningRevealed,
    StreamRestarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

ARGUMENT_PREVIEW = 120
DIM, UNDIM = "\x1b[2m", "\x1b[22m"
DECODE_LIMIT = 64 * 1024  # larger arguments are shown with Go's escapes undone only
_GO_ESCAPES = (("\\u003c", "<"), ("\\u003e", ">"), ("\\u0026", "&"))


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


class Renderer:
    """Turns events into terminal output. ``ask`` answers approval questions (y/n)."""

    def __init__(
        self,
        ask: Callable[[str], Awaitable[bool]],
        refresh: Callable[[], None] = lambda: None,
        out: TextIO | None = None,
    ) -> None:
        self._ask = ask
        self._refresh = refresh
        self._out = out
        self._in_text = False
        self._in_reasoning = False
        self._held: list[Notice] = []  # notices that came while a line was streaming

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout  # sys.stdout may be patched while a prompt is shown

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def end_line(self) -> None:
        """Finish a streamed answer's (or reasoning's) line (at the end of a turn), then show
        the notices that came meanwhile."""
        if self._in_reasoning:
            self._write(UNDIM + "\n")
            self._in_reasoning = False
        if self._in_text:
            self._write("\n")
            self._in_text = False
        held, self._held = self._held, []
        for notice in held:
            self._notice(notice)

    def _notice(self, event: Notice) -> None:
        prefix = {"info": "", "warning": "warning: ", "error": "error: "}[event.level]
        self._write(f"[{prefix}{event.text}]\n")

    def _line(self, text: str) -> None:
        self.end_line()
        self._write(text + "\n")

    async def show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not self._in_text:
                self.end_line()
                self._write("Assistant: ")
                self._in_text = True
            self._write(event.text)
        elif isinstance(event, ReasoningDelta):
            if not self._in_reasoning:
                self.end_line()
                self._write(DIM + "Thinking: ")
                self._in_reasoning = True
            self._write(event.text)
        elif isinstance(event, ReasoningRevealed):
            self._line(DIM + "[the text above was the model's reasoning]" + UNDIM)
        elif isinstance(event, StreamRestarted):
            self._line(f"[stream broken ({event.reason}); retrying]")
        elif isinstance(event, ToolCallStarted):
            arguments = preview(readable_arguments(event.arguments))
            self._line(f"  [tool] {event.name}({arguments})")
        elif isinstance(event, ToolCallFinished):
            mark = "→" if event.ok else "✗"
            self._line(f"  {mark} {event.preview.strip()[:ARGUMENT_PREVIEW]}")
        elif isinstance(event, Notice):
            if self._in_text or self._in_reasoning:
                self._held.append(event)  # not in the middle of a streamed line
            else:
                self._notice(event)
        elif isinstance(event, ApprovalRequest):
            self.end_line()
            allowed = await self._ask(f"Allow {event.description}? [y/N] ")
            async with event.reply:
                with contextlib.suppress(anyio.BrokenResourceError):  # the turn was aborted
                    await event.reply.send(allowed)
        elif isinstance(event, CompactionState | ContextGauge):
            self._refresh()
