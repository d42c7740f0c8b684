"""The events hooks run on, and the JSON a hook reads on its stdin, in Claude Code's terms.

Every event's JSON has the common fields ``session_id``, ``transcript_path``, ``cwd`` (the
project directory, where the hook runs), ``permission_mode`` (the harness's: ``default``,
``acceptEdits``, ``dangerouslySkipPermissions``) and ``hook_event_name``, then its own:

========================  ==================================================================
``SessionStart``          ``source``: ``startup`` (a new session), ``resume``, ``fork`` (the
                          first open of a fork), ``compact`` (after a compaction); ``model``
``SessionEnd``            ``reason``: ``prompt_input_exit`` (the front end ended the run),
                          ``other`` (a signal, an error)
``UserPromptSubmit``      ``prompt``: the message as the user typed it
``PreToolUse``            ``tool_name``, ``tool_input`` (the checked arguments),
                          ``tool_use_id``
``PostToolUse``           the same and ``tool_response``: the result's text, as the model gets
                          it (capped, not wrapped)
``Stop``                  ``stop_hook_active`` (true when the turn goes on because a Stop hook
                          said so), ``last_assistant_message``
``PreCompact``            ``trigger``: ``manual`` (``\\compact``, ``--compact``) or ``auto``;
                          ``custom_instructions`` (always empty)
========================  ==================================================================

The session lives in the store, not in a transcript file: ``transcript_path`` is null, and
``export_command`` is the command that prints the session as JSON (``harness --export ID``,
with the memory directory when it is not the default; a session on PostgreSQL also needs
``$AGENT_HARNESS_STORE``, which hooks do not get). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal


@dataclass(frozen=True)
class _Event:
    name: ClassVar[str]

    @property
    def matched(self) -> str | None:
        """What the event's matchers are matched against (None: every matcher runs)."""
        return None

    def fields(self) -> dict[str, Any]:
        """The event's own fields of the JSON."""
        return {}


@dataclass(frozen=True)
class SessionStart(_Event):
    name: ClassVar[str] = "SessionStart"
    source: Literal["startup", "resume", "fork", "compact"]
    model: str = ""

    @property
    def matched(self) -> str:
        return self.source

    def fields(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model}


@dataclass(frozen=True)
class SessionEnd(_Event):
    name: ClassVar[str] = "SessionEnd"
    reason: Literal["prompt_input_exit", "other"]

    @property
    def matched(self) -> str:
        return self.reason

    def fields(self) -> dict[str, Any]:
        return {"reason": self.reason}


@dataclass(frozen=True)
class UserPromptSubmit(_Event):
    name: ClassVar[str] = "UserPromptSubmit"
    prompt: str

    def fields(self) -> dict[str, Any]:
        return {"prompt": self.prompt}


@dataclass(frozen=True)
class PreToolUse(_Event):
    name: ClassVar[str] = "PreToolUse"
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str

    @property
    def matched(self) -> str:
        return self.tool_name

    def fields(self) -> dict[str, Any]:
        return {"tool_name": self.tool_name, "tool_input": self.tool_input,
                "tool_use_id": self.tool_use_id}


@dataclass(frozen=True)
class PostToolUse(_Event):
    name: ClassVar[str] = "PostToolUse"
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str
    tool_response: str

    @property
    def matched(self) -> str:
        return self.tool_name

    def fields(self) -> dict[str, Any]:
        return {"tool_name": self.tool_name, "tool_input": self.tool_input,
                "tool_use_id": self.tool_use_id, "tool_response": self.tool_response}


@dataclass(frozen=True)
class Stop(_Event):
    name: ClassVar[str] = "Stop"
    stop_hook_active: bool
    last_assistant_message: str = ""

    def fields(self) -> dict[str, Any]:
        return {"stop_hook_active": self.stop_hook_active,
                "last_assistant_message": self.last_assistant_message}


@dataclass(frozen=True)
class PreCompact(_Event):
    name: ClassVar[str] = "PreCompact"
    trigger: Literal["manual", "auto"]

    @property
    def matched(self) -> str:
        return self.trigger

    def fields(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "custom_instructions": ""}


HookEvent = (SessionStart | SessionEnd | UserPromptSubmit | PreToolUse | PostToolUse | Stop
             | PreCompact)
