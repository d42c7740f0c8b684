"""Standing approvals ("yes, and don't ask again this session") and reading an answer.

A rule is a tool's name (``edit_file``: every edit_file call) or, for run_bash, a command
prefix (``run_bash: pytest``: ``pytest``, ``pytest -q tests/``, never ``pytest; rm -rf x``).
The prefix is the command's first word, or its first two for tools with subcommands (``git
status``, ``npm run``, ``uv run``...), or three for ``python -m MODULE``. Only a simple
command can match a prefix or make one: a command with shell operators, substitutions,
redirections or a leading variable assignment is asked every time.

A call the tool itself insists on being asked about (a write into ``.git/``, a hard-linked
file, another project's session) is never covered by a rule.

The rules live in the session's state (the supervisor saves them); a resume starts without
them unless the user keeps them with ``\\approvals keep``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

BASH_PREFIX = "run_bash: "
_SUBCOMMANDS = frozenset({
    "git", "npm", "pnpm", "yarn", "npx", "uv", "cargo", "go", "docker", "kubectl", "pip",
    "poetry", "make", "dotnet", "bundle", "rake", "mvn", "gradle", "hatch", "pdm", "bun",
})
_PYTHONS = frozenset({"python", "python3"})
_NOT_SIMPLE = re.compile(r"[;&|`$<>(){}\n\\!]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _words(command: str) -> list[str] | None:
    """The words of a simple command, or None."""
    if _NOT_SIMPLE.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or _ASSIGNMENT.match(words[0]):
        return None
    return words


def rule_for(tool: str, args: dict[str, Any]) -> str | None:
    """The rule "always" would add for this call (None: it cannot have one)."""
    if tool != "run_bash":
        return tool
    words = _words(str(args.get("command", "")))
    if words is None:
        return None
    count = 2 if words[0] in _SUBCOMMANDS and len(words) > 1 else 1
    if words[0] in _PYTHONS and len(words) > 2 and words[1] == "-m":
        count = 3  # python -m pytest
    return BASH_PREFIX + " ".join(words[:count])


def covered(rules: Iterable[str], tool: str, args: dict[str, Any]) -> str | None:
    """The rule that approves this call, if any."""
    for rule in rules:
        if rule == tool and tool != "run_bash":
            return rule
        if tool == "run_bash" and rule.startswith(BASH_PREFIX):
            words = _words(str(args.get("command", "")))
            prefix = rule[len(BASH_PREFIX):].split()
            if words is not None and prefix and words[: len(prefix)] == prefix:
                return rule
    return None


@dataclass(frozen=True)
class Answer:
    allowed: bool
    always: bool = False
    reason: str = ""


def covers(rule: str) -> str:
    """What a rule approves, in words: ``commands starting "git status"``, ``edit_file on
    any file``, ``every memory_note call``."""
    if rule.startswith(BASH_PREFIX):
        return f'commands starting "{rule[len(BASH_PREFIX):]}"'
    if rule in ("write_file", "edit_file"):
        return f"{rule} on any file"
    return f"every {rule} call"


def choices(rule: str | None) -> tuple[list[str], str]:
    """(the hint lines above the question, the answers in brackets)."""
    hint = "y: yes · n: no · or type what to do instead"
    if rule is None:
        return [hint], "[y/N]"
    return [hint, f"a: yes, and don't ask again this session for {covers(rule)}"], "[y/N/a]"


def parse_answer(text: str, *, always_offered: bool) -> Answer:
    """y/yes: allow; a/always: allow and add the rule (when offered); n/no or nothing: deny;
    anything else: deny, with the text as the reason told to the model."""
    word = text.strip()
    lowered = word.lower()
    if lowered in ("y", "yes"):
        return Answer(True)
    if always_offered and lowered in ("a", "always"):
        return Answer(True, always=True)
    if lowered in ("", "n", "no"):
        return Answer(False)
    return Answer(False, reason=word)
