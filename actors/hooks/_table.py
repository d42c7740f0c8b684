"""Which commands run on which event: the ``hooks`` of the settings files, checked.

Claude Code's shape, in the user's and the (approved) project's settings files::

    {"hooks": {"PreToolUse": [{"matcher": "run_bash",
                               "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}}

Both files' hooks run (the user's first). A ``matcher`` picks what the event is about: the
tool's name (``PreToolUse``, ``PostToolUse``), the start's source (``SessionStart``), the end's
reason (``SessionEnd``), the compaction's trigger (``PreCompact``); ``UserPromptSubmit`` and
``Stop`` have nothing to match and run all of theirs. A missing, empty or ``*`` matcher
matches everything; a matcher of names (letters, digits, ``_``, ``|``) matches exactly one of
them; anything else is a regular expression searched in the name (``edit_.*|write_file``).
A command appearing twice for the same event runs once.

Everything is checked as hostile input: each bad entry is one line naming the file and the
field (``…/settings.json: hooks.PreToolUse[0].hooks[1].timeout: …``), that entry is left
out, and the rest is used. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.core.settings_files import SettingsFile

EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
          "PreCompact")
MATCHED = {"SessionStart", "SessionEnd", "PreToolUse", "PostToolUse", "PreCompact"}
DEFAULT_TIMEOUT = 60.0  # seconds, as Claude Code's
MAX_COMMAND_CHARS = 64 * 1024
_NAMES = re.compile(r"[A-Za-z0-9_|]+")


@dataclass(frozen=True)
class HookCommand:
    """One command to run: its text, its timeout in seconds, and whose file it came from."""

    command: str
    timeout: float = DEFAULT_TIMEOUT
    scope: str = "user"  # "user" or "project"


@dataclass(frozen=True)
class Matcher:
    pattern: str  # "" matches everything
    commands: tuple[HookCommand, ...]
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def matches(self, value: str | None) -> bool:
        if self.pattern in ("", "*") or value is None:
            return True
        if self._regex is None:
            return value in self.pattern.split("|")
        return self._regex.search(value) is not None


@dataclass(frozen=True)
class HookTable:
    """The checked hooks: event name -> matchers, in the order the files give them."""

    events: Mapping[str, tuple[Matcher, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.events.values())

    def commands_for(self, event: str, value: str | None = None) -> list[HookCommand]:
        """The commands ``event`` runs for ``value`` (what its matcher is about), each once."""
        chosen: dict[str, HookCommand] = {}
        for matcher in self.events.get(event, ()):
            if event not in MATCHED or matcher.matches(value):
                for command in matcher.commands:
                    chosen.setdefault(command.command, command)
        return list(chosen.values())

    def summary(self) -> list[str]:
        """One line per event with hooks: ``PreToolUse: 2 commands (run_bash: 1, *: 1)``."""
        lines = []
        for event, matchers in self.events.items():
            count = sum(len(m.commands) for m in matchers)
            if not count:
                continue
            line = f"{event}: {count} command{'s' if count != 1 else ''}"
            if event in MATCHED:
                parts = [f"{m.pattern or '*'}: {len(m.commands)}" for m in matchers]
                line += f" ({', '.join(parts)})"
            lines.append(line)
        return lines


def hook_table(files: Sequence[SettingsFile]) -> tuple[HookTable, list[str]]:
    """The hooks of ``files`` (each file's usable data: see :attr:`SettingsFile.data`) and
    one line per entry left out."""
    problems: list[str] = []
    events: dict[str, list[Matcher]] = {}
    for file in files:
        hooks = file.data.get("hooks")
        if hooks is None:
            continue
        where = f"{file.path}: hooks"
        if not isinstance(hooks, dict):
            problems.append(f"{where}: must be an object of event names; the file's hooks "
                            "are left out")
            continue
        for event, entries in hooks.items():
            if event not in EVENTS:
                name = event if event.isidentifier() and len(event) <= 60 else _shown(event)
                problems.append(f"{where}.{name}: not an event the harness runs "
                                f"({', '.join(EVENTS)}); left out")
                continue
            events.setdefault(event, []).extend(
                _matchers(entries, f"{where}.{event}", file.scope, problems))
    return HookTable({event: tuple(m) for event, m in events.items()}), problems


def _matchers(entries: Any, where: str, scope: str, problems: list[str]) -> list[Matcher]:
    if not isinstance(entries, list):
        problems.append(f"{where}: must be a list of {{\"matcher\", \"hooks\"}} objects; "
                        "left out")
        return []
    matchers = []
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict):
            problems.append(f"{at}: must be an object with \"hooks\"; left out")
            continue
        pattern = entry.get("matcher", "")
        if pattern is None:
            pattern = ""
        if not isinstance(pattern, str):
            problems.append(f"{at}.matcher: must be a string; the entry is left out")
            continue
        regex = None
        if pattern not in ("", "*") and not _NAMES.fullmatch(pattern):
            try:
                regex = re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                problems.append(f"{at}.matcher: not a regular expression ({exc}); the entry "
                                "is left out")
                continue
        commands = _commands(entry.get("hooks"), f"{at}.hooks", scope, problems)
        if commands:
            matchers.append(Matcher(pattern, tuple(commands), regex))
    return matchers


def _commands(hooks: Any, where: str, scope: str, problems: list[str]) -> list[HookCommand]:
    if not isinstance(hooks, list):
        problems.append(f"{where}: must be a list of {{\"type\": \"command\", \"command\": …}} "
                        "objects; the entry is left out")
        return []
    commands = []
    for index, hook in enumerate(hooks):
        at = f"{where}[{index}]"
        if not isinstance(hook, dict):
            problems.append(f"{at}: must be an object; left out")
            continue
        kind = hook.get("type", "command")
        if kind != "command":
            problems.append(f"{at}.type: only \"command\" hooks run here, not "
                            f"{_shown(kind)}; left out")
            continue
        command = hook.get("command")
        if not isinstance(command, str) or not command.strip():
            problems.append(f"{at}.command: must be a command line (a non-empty string); "
                            "left out")
            continue
        if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
            problems.append(f"{at}.command: longer than {MAX_COMMAND_CHARS:,} characters or "
                            "holds a NUL; left out")
            continue
        timeout = hook.get("timeout", DEFAULT_TIMEOUT)
        if (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                or not math.isfinite(timeout) or timeout <= 0):
            problems.append(f"{at}.timeout: must be a positive number of seconds, not "
                            f"{_shown(timeout)}; left out")
            continue
        commands.append(HookCommand(command, float(timeout), scope))
    return commands


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
