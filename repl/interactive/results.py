"""Tool results as a person reads them, and the results of this run kept for ``\\result N``.

A result is shown under its ``[tool]`` line as a mark and its first line, then a few more
lines and ``… +N lines`` when there are more:

- ``→`` for a call that did its work; ``✗`` for one that did not: a command whose exit status
  is not 0 (run_bash's result starts with ``exit status N``), an error, a denial, a timeout,
  an interruption, a call never started;
- errors and denials are shown whole (wrapped at words, not cut), up to
  :data:`WHOLE_LINES` lines;
- other results show :data:`PREVIEW_LINES` lines, each cut to the width.

Every result of the run is numbered; :class:`ResultLog` keeps the last :data:`KEPT` of them
(each is at most the executor's output cap) for ``\\result [N]``, which shows one whole.
"""

from __future__ import annotations

import re
import textwrap
from collections import OrderedDict
from dataclasses import dataclass

from actors.core.events import ToolCallFinished
from repl.interactive.live import fit
from repl.interactive.sanitize import sanitize
from repl.interactive.terminal import Capabilities

PREVIEW_LINES = 4
WHOLE_LINES = 40
KEPT = 200
_EXIT = re.compile(r"exit status (\d+)")
_NOT_DONE = {
    "interrupted": "interrupted",
    "timed_out": "timed out",
    "not_started": "not started",
    "over_limit": "not run: tool-call limit",
}


@dataclass(frozen=True)
class Result:
    number: int
    name: str
    status: str
    text: str  # sanitised

    @property
    def failed(self) -> bool:
        if self.status and self.status != "done":
            return True
        first = self.text.split("\n", 1)[0]
        match = _EXIT.match(first)
        return bool(match and match.group(1) != "0")


class ResultLog:
    """The results of this run, numbered from 1 (the oldest are forgotten past :data:`KEPT`)."""

    def __init__(self) -> None:
        self._results: OrderedDict[int, Result] = OrderedDict()
        self._count = 0

    def add(self, event: ToolCallFinished) -> Result:
        self._count += 1
        text = sanitize(event.output or event.preview).rstrip("\n")
        result = Result(self._count, event.name, event.status or ("done" if event.ok else
                                                                   "failed"), text)
        self._results[self._count] = result
        while len(self._results) > KEPT:
            self._results.popitem(last=False)
        return result

    def get(self, number: int | None = None) -> Result | None:
        """Result ``number`` (None: the last), if it is still kept."""
        return self._results.get(self._count if number is None else number)

    @property
    def count(self) -> int:
        return self._count


def summary_lines(result: Result, width: int, caps: Capabilities) -> list[str]:
    """The lines shown under a tool call (see the module doc), without newlines."""
    mark = caps.style("red", "✗") if result.failed else caps.style("green", "→")
    lines = result.text.split("\n") if result.text else [""]
    if result.status in _NOT_DONE and not lines[0].startswith(_NOT_DONE[result.status]):
        lines = [_NOT_DONE[result.status], *lines] if result.text else [_NOT_DONE[
            result.status]]
    whole = result.status in ("failed", "denied")
    shown_count = WHOLE_LINES if whole else PREVIEW_LINES
    shown = lines[:shown_count]
    out = []
    for index, line in enumerate(shown):
        prefix = f"  {mark} " if index == 0 else "    "
        room = max(width - 4, 10)
        if whole:
            pieces = textwrap.wrap(line.expandtabs(4), room) or [""]
            out.append(prefix + pieces[0])
            out.extend("    " + piece for piece in pieces[1:])
        else:
            out.append(prefix + fit(line.expandtabs(4), room))
    more = len(lines) - len(shown)
    if more > 0:
        out.append("    " + caps.style("dim", f"… +{more} lines (\\result {result.number} "
                                              "shows all)"))
    return out
