"""What the REPL knows about the running session, learned from the supervisor's events only.

The toolbar, ``\\info`` and ``\\todos`` read a :class:`SessionView`; the event loop of the
REPL folds every event into it (:meth:`SessionView.apply`) before showing it, so after the
events of a turn were drained the view describes the session as the turn left it.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.core.events import (
    ApprovalsChanged,
    CompactionState,
    ContextGauge,
    Event,
    PlanningChanged,
    SessionOpened,
    TitleChanged,
)


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

    def apply(self, event: Event) -> None:
        if isinstance(event, SessionOpened):
            self.session_id, self.title = event.session_id, event.title
            self.approvals, self.saved_approvals = (), event.saved_approvals
        elif isinstance(event, ContextGauge):
            self.tokens, self.budget, self.cost_usd = event.tokens, event.budget, event.cost_usd
        elif isinstance(event, CompactionState):
            self.compacting = event.running
        elif isinstance(event, TitleChanged):
            self.title = event.title
        elif isinstance(event, PlanningChanged):
            self.todos = event.todos
        elif isinstance(event, ApprovalsChanged):
            self.approvals = event.rules

    def context_line(self) -> str:
        """``ctx 1,234/24,000 (5%)``."""
        percent = 100 * self.tokens // self.budget if self.budget else 0
        return f"ctx {self.tokens:,}/{self.budget:,} ({percent}%)"
