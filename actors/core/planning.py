"""Planning state of a session: the to-do list (with retry counts) and the scratchpad.

Saved with every checkpoint as part of the session ``state`` and restored on resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from actors.core.errors import ToolFailed

TODO_STATUSES = ("pending", "in_progress", "done", "cancelled", "failed")
OPEN_STATUSES = ("pending", "in_progress", "failed")
MAX_RETRIES = 3


@dataclass
class Todo:
    id: int
    text: str
    status: str = "pending"
    retries: int = 0


@dataclass
class Planning:
    todos: list[Todo] = field(default_factory=list)
    scratchpad: str = ""

    def append(self, text: str) -> Todo:
        text = text.strip()
        if not text:
            raise ToolFailed("A to-do needs some text.")
        todo = Todo(id=max((t.id for t in self.todos), default=0) + 1, text=text)
        self.todos.append(todo)
        return todo

    def get(self, todo_id: int) -> Todo:
        for todo in self.todos:
            if todo.id == todo_id:
                return todo
        raise ToolFailed(f"No to-do with id {todo_id}.")

    def update(self, todo_id: int, status: str) -> str:
        """Move a to-do to ``status``; a failed one started again counts as a retry.

        After :data:`MAX_RETRIES` retries, starting it again is refused with an escalation:
        the model must ask the user instead of looping.
        """
        if status not in TODO_STATUSES:
            raise ToolFailed(f"Unknown status '{status}'; use one of {', '.join(TODO_STATUSES)}.")
        todo = self.get(todo_id)
        if todo.status == "failed" and status == "in_progress":
            if todo.retries >= MAX_RETRIES:
                raise ToolFailed(
                    f"To-do {todo.id} has failed {todo.retries + 1} times. Do not retry it again: "
                    "escalate to the user, explain what failed, and ask how to proceed."
                )
            todo.retries += 1
        todo.status = status
        message = f"To-do {todo.id} is now {status}."
        if status == "failed" and todo.retries >= MAX_RETRIES:
            message += " It has used all its retries: escalate to the user before going on."
        return message

    def render(self, include_closed: bool = True) -> str:
        shown = [t for t in self.todos if include_closed or t.status in OPEN_STATUSES]
        if not shown:
            return "No to-dos."
        return "\n".join(
            f"{t.id}. [{t.status}] {t.text}" + (f" (retries: {t.retries})" if t.retries else "")
            for t in shown
        )

    def copy(self) -> Planning:
        """An independent copy (changing one does not change the other)."""
        return Planning([replace(t) for t in self.todos], self.scratchpad)

    def to_state(self) -> dict[str, Any]:
        return {"todos": [asdict(t) for t in self.todos], "scratchpad": self.scratchpad}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Planning:
        todos: list[Todo] = []
        for raw in state.get("todos") or []:
            if isinstance(raw, dict) and "text" in raw:
                todos.append(
                    Todo(
                        id=int(raw.get("id", len(todos) + 1)),
                        text=str(raw["text"]),
                        status=str(raw["status"]) if raw.get("status") in TODO_STATUSES
                        else "pending",
                        retries=int(raw.get("retries", 0)),
                    )
                )
        return cls(todos=todos, scratchpad=str(state.get("scratchpad") or ""))
