"""The status line of a running turn: what is happening, for how long, and how to stop it.

``⠹ running run_bash: pytest -q · 12s · ~340 tokens · esc or ctrl-c to interrupt``

Its state is changed by the renderer from the events of the turn (waiting for the model,
thinking, streaming, running a tool); the elapsed time is the turn's, or while a tool runs
the tool's, counted from when it started to run (after its approval); tokens are the ones
received in this turn, estimated from the text (about four characters a token) until the
server's count is known. Text typed ahead during the turn is shown at the end (it waits in
the next prompt).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from actors.core.budget import CHARS_PER_TOKEN

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
KEYS = "esc or ctrl-c to interrupt"
DRAFT_SHOWN = 30


@dataclass
class TurnStatus:
    started: float = field(default_factory=time.monotonic)
    doing: str = "waiting for the model"
    received_chars: int = 0
    draft: str = ""
    tool_started: float | None = None  # while a tool runs: since when

    def waiting(self) -> None:
        self.doing = "waiting for the model"
        self.tool_started = None

    def streaming(self, chars: int, *, reasoning: bool = False) -> None:
        self.doing = "thinking" if reasoning else "streaming the answer"
        self.tool_started = None
        self.received_chars += chars

    def running(self, what: str, now: float | None = None) -> None:
        """A tool starts to run (again after its approval: its time starts over)."""
        self.doing = f"running {what}"
        self.tool_started = time.monotonic() if now is None else now

    def line(self, now: float | None = None) -> str:
        """The status line at ``now`` (monotonic seconds)."""
        since = self.started if self.tool_started is None else self.tool_started
        elapsed = (time.monotonic() if now is None else now) - since
        frame = FRAMES[int(elapsed * 10) % len(FRAMES)]
        parts = [f"{frame} {self.doing}", f"{elapsed:.0f}s"]
        if self.received_chars:
            parts.append(f"~{self.received_chars // CHARS_PER_TOKEN:,} tokens")
        parts.append(KEYS)
        text = " · ".join(parts)
        if self.draft:
            draft = " ".join(self.draft.split())
            if len(draft) > DRAFT_SHOWN:
                draft = "…" + draft[-DRAFT_SHOWN:]
            text += f" │ next: {draft}"
        return text
