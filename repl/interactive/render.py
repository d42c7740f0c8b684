"""Showing runtime events in the terminal: streamed text, one line per tool call, notices,
and inline approval questions."""

from __future__ import annotations

import contextlib
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
    StreamRestarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

ARGUMENT_PREVIEW = 120


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

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout  # sys.stdout may be patched while a prompt is shown

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def end_line(self) -> None:
        """Finish a streamed answer's line (at the end of a turn)."""
        if self._in_text:
            self._write("\n")
            self._in_text = False

    def _line(self, text: str) -> None:
        self.end_line()
        self._write(text + "\n")

    async def show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not self._in_text:
                self._write("Assistant: ")
                self._in_text = True
            self._write(event.text)
        elif isinstance(event, StreamRestarted):
            self._line(f"[stream broken ({event.reason}); retrying]")
        elif isinstance(event, ToolCallStarted):
            arguments = event.arguments.replace("\n", " ")
            if len(arguments) > ARGUMENT_PREVIEW:
                arguments = arguments[: ARGUMENT_PREVIEW - 1] + "…"
            self._line(f"  [tool] {event.name}({arguments})")
        elif isinstance(event, ToolCallFinished):
            mark = "→" if event.ok else "✗"
            self._line(f"  {mark} {event.preview.strip()[:ARGUMENT_PREVIEW]}")
        elif isinstance(event, Notice):
            prefix = {"info": "", "warning": "warning: ", "error": "error: "}[event.level]
            self._line(f"[{prefix}{event.text}]")
        elif isinstance(event, ApprovalRequest):
            self.end_line()
            allowed = await self._ask(f"Allow {event.description}? [y/N] ")
            async with event.reply:
                with contextlib.suppress(anyio.BrokenResourceError):  # the turn was aborted
                    await event.reply.send(allowed)
        elif isinstance(event, CompactionState | ContextGauge):
            self._refresh()
