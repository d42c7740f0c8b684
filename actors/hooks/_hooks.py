"""The hooks of one run: :meth:`Hooks.fire` runs an event's commands and says what they decided.

The supervisor and the tool executor hold the same :class:`Hooks` (its table and the session's
facts never change during a run; each call's state is its own) and call :meth:`Hooks.fire`
once per event, at one place each. The commands matching the event run at the same time, each
under its own timeout (:mod:`._run`); their answers (:mod:`._answer`) are combined into one
:class:`Verdict`: blocked when any blocks (their reasons joined), the strictest tool decision
(deny, then ask, then allow), the contexts joined, the last changed arguments, the first stop.

What the user hears: one notice per command that did more than succeed quietly (blocked,
failed, timed out, could not start, said something, stopped the turn), sent through the
run's events. What the session records: the same, as :attr:`Verdict.records` (the caller
keeps them in the session's state; what reaches the model is in the messages themselves).
Text for the model is cut at :data:`MAX_TEXT_CHARS` and wrapped as ``<hook_output>`` data
(:func:`actors.core.data_tags.wrap_hook_output`).

Cancellation: cancelling :meth:`fire` kills every command still running (its process group,
shielded) and goes through; nothing is told or recorded of that event.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from actors.core.config import DEFAULT_MEMORY_DIR, Settings
from actors.core.data_tags import wrap_hook_output
from actors.core.events import EventSink, Notice
from actors.core.project_trust import not_approved
from actors.core.settings_files import read_settings
from actors.hooks._answer import Answer, Decision, answer
from actors.hooks._events import HookEvent
from actors.hooks._run import Ran, run_command
from actors.hooks._table import HookTable, hook_table

MAX_TEXT_CHARS = 10_000  # of what a verdict gives the model (Claude Code's cap on context)
RECORD_CHARS = 300  # of a command and of what it said, in the session's record
_SEVERITY = {"deny": 3, "ask": 2, "allow": 1}


@dataclass
class Verdict:
    """What the commands of one event decided, together."""

    blocked: bool = False
    feedback: str = ""  # why it was blocked (every blocking command's reason)
    decision: Decision | None = None  # PreToolUse: deny, ask or allow (None: no say)
    context: str = ""  # for the model (every command's context)
    updated_input: dict[str, Any] | None = None  # PreToolUse: the tool's new arguments
    stop: str | None = None  # a command said ``continue: false``; its reason ("" if none)
    records: list[dict[str, Any]] = field(default_factory=list)

    def for_model(self, event: str, text: str) -> str:
        """``text`` as the model gets it: cut, and wrapped as the hooks' output of ``event``."""
        return wrap_hook_output(event, cut(text))


def cut(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n[... {len(text) - MAX_TEXT_CHARS:,} more characters cut]"


def export_command(session_id: str, settings: Settings) -> str:
    """The command that prints the session as JSON (see :mod:`._events`; "" for a store
    named by ``--store`` or ``$AGENT_HARNESS_STORE``, whose URL may hold a password)."""
    if settings.store_url:
        return ""
    words = [sys.executable, "-m", "repl", "--export", session_id]
    if settings.memory_dir.expanduser() != Path(DEFAULT_MEMORY_DIR).expanduser():
        words += ["--memory-dir", str(settings.memory_dir)]
    return shlex.join(words)


def load_hooks(settings: Settings, session_id: str, events: EventSink
               ) -> tuple[Hooks, list[str]]:
    """The hooks of a session's run, from the settings files as they are now (blocking: a
    worker thread), and the lines to say about them: files that cannot be used, entries
    left out, a project file waiting for the user's approval."""
    files = read_settings(settings.memory_dir, settings.sandbox_dir)
    said = [file.problem for file in files if file.problem]
    said += [not_approved(file.path, "its hooks do not run") for file in files
             if file.waiting_for_approval]
    table, problems = hook_table(files)
    hooks = Hooks(table, session_id=session_id, project=settings.sandbox_dir, events=events,
                  export=export_command(session_id, settings))
    return hooks, said + problems


class Hooks:
    """The run's hooks (an empty table: nothing runs, nothing is spawned)."""

    def __init__(self, table: HookTable, *, session_id: str, project: Path, events: EventSink,
                 export: str = "") -> None:
        self.table = table
        self._session_id = session_id
        self._project = project
        self._events = events
        self._export = export
        project_dir = str(project)
        self._env = {"HARNESS_PROJECT_DIR": project_dir, "CLAUDE_PROJECT_DIR": project_dir}

    def __bool__(self) -> bool:
        return bool(self.table)

    def longest(self, event: HookEvent) -> float:
        """The longest timeout of ``event``'s commands (0: none run): a bound for a caller
        that must not wait longer (the shutdown's SessionEnd)."""
        commands = self.table.commands_for(event.name, event.matched)
        return max((c.timeout for c in commands), default=0.0)

    def payload(self, event: HookEvent, mode: str) -> dict[str, Any]:
        """The JSON a command of ``event`` reads on its stdin (see :mod:`._events`)."""
        return {
            "session_id": self._session_id,
            "transcript_path": None,
            "export_command": self._export,
            "cwd": str(self._project),
            "permission_mode": mode,
            "hook_event_name": event.name,
            **event.fields(),
        }

    async def fire(self, event: HookEvent, mode: str) -> Verdict:
        """Run the commands of ``event`` (at the same time) and combine their answers."""
        commands = self.table.commands_for(event.name, event.matched)
        if not commands:
            return Verdict()
        data = json.dumps(self.payload(event, mode)).encode()  # ASCII: any text survives
        ran: list[Ran | None] = [None] * len(commands)

        async def one(index: int) -> None:
            ran[index] = await run_command(commands[index], data, cwd=self._project,
                                           extra_env=self._env)

        async with anyio.create_task_group() as tg:
            for index in range(len(commands)):
                tg.start_soon(one, index)
        answers = [answer(event.name, r) for r in ran if r is not None]
        verdict = _combined(answers)
        about = _about(event)
        for said in answers:
            if said.worth_telling:
                verdict.records.append(_record(event.name, said))
                level, text = _notice(event.name, about, said)
                await self._events.send(Notice(text, level))
        return verdict


def _combined(answers: list[Answer]) -> Verdict:
    verdict = Verdict()
    feedback, context = [], []
    for said in answers:
        if said.blocks:
            verdict.blocked = True
            feedback.append(said.feedback)
        if said.decision is not None and (verdict.decision is None or _SEVERITY[said.decision]
                                          > _SEVERITY[verdict.decision]):
            verdict.decision = said.decision
        if said.context.strip():
            context.append(said.context.strip())
        if said.updated_input is not None:
            verdict.updated_input = said.updated_input
        if said.stop is not None and verdict.stop is None:
            verdict.stop = said.stop
    verdict.feedback = "\n".join(feedback)
    verdict.context = "\n\n".join(context)
    return verdict


def _about(event: HookEvent) -> str:
    matched = event.matched
    return f"{event.name} hook" + (f" ({matched})" if matched else "")


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _notice(event: str, about: str, said: Answer) -> tuple[Any, str]:
    command = f"`{_short(said.ran.command.command, 80)}`"
    if said.outcome == "error":
        return "warning", f"{about} {command} could not start: {said.feedback}"
    if said.outcome == "timed_out":
        return "warning", (f"{about} {command} timed out after {said.ran.command.timeout:g} s "
                           "and was stopped (ignored).")
    if said.outcome == "failed":
        exit_code = said.ran.exit_code
        detail = f": {_short(said.feedback)}" if said.feedback else ""
        how = "cannot block; shown only" if exit_code == 2 else "ignored"
        return "warning", f"{about} {command} exited {exit_code} ({how}){detail}"
    parts = []
    if said.blocks:
        verb = {"PreToolUse": "blocked the call", "UserPromptSubmit": "blocked the prompt",
                "Stop": "asked the turn to go on", "PostToolUse": "answered the model"}
        parts.append(f"{verb.get(event, 'blocked')}: {_short(said.feedback)}")
    elif said.decision is not None:
        parts.append({"allow": "allowed the call without asking",
                      "ask": "asks for the user's approval"}[said.decision])
    if said.updated_input is not None:
        parts.append("changed the call's arguments")
    if said.context:
        parts.append(f"added context for the model ({len(said.context):,} characters)")
    if said.stop is not None:
        parts.append("stopped the turn" + (f": {_short(said.stop)}" if said.stop else ""))
    if said.message:
        parts.append(f"says: {_short(said.message, 500)}")
    parts.extend(said.problems)
    level = "warning" if said.blocks or said.stop is not None or said.problems else "info"
    return level, f"{about} {command} " + "; ".join(parts)


def _record(event: str, said: Answer) -> dict[str, Any]:
    record: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "event": event,
        "command": said.ran.command.command[:RECORD_CHARS],
        "scope": said.ran.command.scope,
        "outcome": "denied" if said.decision == "deny" else said.outcome,
    }
    if said.ran.exit_code is not None:
        record["exit_code"] = said.ran.exit_code
    text = said.feedback or said.stop or said.message or said.context
    if text:
        record["said"] = text[:RECORD_CHARS]
    return record
