"""What a REPL command is given and what it gives back: the context it may use, its reply,
and the two ways a command ends the session's loop (leaving, switching to another session).

Kept apart from the commands themselves so that the commands living in modules of their own
(``\\rewind``, ``\\resume``) import these without importing the command table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.store import SessionReader
from repl.interactive.results import ResultLog
from repl.interactive.view import SessionView

if TYPE_CHECKING:  # a new session's first prompt is drawn before the runtime is imported
    from actors.core.config import Settings
    from actors.runtime.supervisor import Supervisor


class ExitRequested(Exception):
    """``\\exit`` was typed."""


class SwitchSession(Exception):
    """``\\resume`` chose another session (or ``\\rewind undo`` went back to the fork
    holding the conversation as it was): leave this one (saved) and open that one, saying
    ``said`` first."""

    def __init__(self, session_id: str, said: str = "") -> None:
        super().__init__(session_id)
        self.session_id = session_id
        self.said = said


@dataclass
class Reply:
    text: str
    error: bool = False
    paged: bool = False  # long text: shown through the pager
    prefill: str = ""  # text to put in the next prompt (\\rewind gives your message back)


async def _no_models() -> list[str]:
    return []


@dataclass
class CommandContext:
    """What a command may use: the supervisor's commands (every write goes through them),
    the store's read-only face to read sessions, and what the events said about this one."""

    sup: Supervisor
    store: SessionReader
    view: SessionView
    results: ResultLog = field(default_factory=ResultLog)
    reasoning: Callable[[], str] = lambda: ""  # the model's last reasoning
    project_root: str = ""  # this run's project (listings are scoped to it)
    models: Callable[[], Awaitable[list[str]]] = _no_models  # the endpoint's (kept once asked)
    endpoint: str = ""  # the base URL, for what \\model says
    settings: Settings | None = None  # this run's (\\doctor checks its endpoint)
