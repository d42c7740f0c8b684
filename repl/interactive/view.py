"""What the REPL knows about the running session, learned from the supervisor's events only.

The toolbar, ``\\info`` and ``\\todos`` read a :class:`SessionView`; the event loop of the
REPL folds every event into it (:meth:`SessionView.apply`) before showing it, so after the
events of a turn were drained the view describes the session as the turn left it.

A new session's toolbar reads the view before any event came, at the first prompt, which is
drawn before the events' module (and anyio with it) is imported: :meth:`SessionView.apply`
imports it with the first event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors.core.events import Event


@dataclass
class SessionView:
    session_id: str = ""
    title: str = ""
    tokens: int = 0
    budget: int = 0
    cost_usd: float = 0.0
    compacting: bool = False
    todos: str = "No to-dos."
    approvals: tuple[str, ...] = ()  # standing approvals in force
    saved_approvals: tuple[str, ...] = ()  # the last run's, not in force
    mode: str = ""  # the permission mode in force ("": the run's, before the first event)
    model: str = ""  # the model asked

    def apply(self, event: Event) -> None:
        from actors.core import events  # after the first prompt (the module docstring)

        if isinstance(event, events.SessionOpened):
            self.session_id, self.title = event.session_id, event.title
            self.approvals, self.saved_approvals = (), event.saved_approvals
            self.mode, self.model = event.mode, event.model
        elif isinstance(event, events.SettingsChanged):
            self.mode, self.model = event.mode, event.model
        elif isinstance(event, events.ContextGauge):
            self.tokens, self.budget, self.cost_usd = event.tokens, event.budget, event.cost_usd
        elif isinstance(event, events.CompactionState):
            self.compacting = event.running
        elif isinstance(event, events.TitleChanged):
            self.title = event.title
        elif isinstance(event, events.PlanningChanged):
            self.todos = event.todos
        elif isinstance(event, events.ApprovalsChanged):
            self.approvals = event.rules

    def context_line(self) -> str:
        """``ctx 1,234/24,000 (5%)``."""
        percent = 100 * self.tokens // self.budget if self.budget else 0
        return f"ctx {self.tokens:,}/{self.budget:,} ({percent}%)"
