"""The user's hooks: commands run on the session's events, in Claude Code's vocabulary.

``_table.py`` which commands run on which event (the settings files' ``hooks``, checked);
``_events.py`` the events and the JSON a hook reads on stdin; ``_run.py`` one command run
confined like run_bash (its process group killed at its timeout and when the harness dies);
``_answer.py`` what its exit code, stderr and JSON stdout say; ``_hooks.py`` the run's
:class:`Hooks`, whose :meth:`~Hooks.fire` the supervisor (session start and end, prompt,
stop, compaction) and the tool executor (before and after a tool) call once per event.
"""

from actors.hooks._answer import Answer, answer
from actors.hooks._events import (
    HookEvent,
    PostToolUse,
    PreCompact,
    PreToolUse,
    SessionEnd,
    SessionStart,
    Stop,
    UserPromptSubmit,
)
from actors.hooks._hooks import Hooks, Verdict, export_command, load_hooks
from actors.hooks._run import Ran, run_command
from actors.hooks._table import DEFAULT_TIMEOUT, EVENTS, HookCommand, HookTable, hook_table

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "Answer",
    "HookCommand",
    "HookEvent",
    "HookTable",
    "Hooks",
    "PostToolUse",
    "PreCompact",
    "PreToolUse",
    "Ran",
    "SessionEnd",
    "SessionStart",
    "Stop",
    "UserPromptSubmit",
    "Verdict",
    "answer",
    "export_command",
    "hook_table",
    "load_hooks",
    "run_command",
]
