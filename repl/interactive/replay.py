"""Where you were: what a resumed session shows before its first prompt.

The end of the working context (the supervisor sends it in :class:`SessionOpened`), one
line per message as :mod:`repl.exchanges` writes them, dimmed on a terminal, under a line
saying how much came before and, for a fork, what it was forked from. Pure.
"""

from __future__ import annotations

from actors.core.events import SessionOpened
from repl.exchanges import exchange_lines

REPLAY_LINES = 14


def replay_lines(opened: SessionOpened, width: int = 100) -> list[str]:
    """The lines shown when ``opened`` is a resume ([] for a new session)."""
    if not opened.resumed:
        return []
    lines = []
    if opened.parent_id:
        at = f" at message {opened.fork_point}" if opened.fork_point else ""
        lines.append(f"Forked from {opened.parent_id}{at}.")
    body = exchange_lines(opened.recent, width=width)[-REPLAY_LINES:]
    if body:
        lines.append("Where you left off:")
        lines += ["  " + line for line in body]
    return lines
