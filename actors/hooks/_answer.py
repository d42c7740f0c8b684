"""What a hook's end says, as Claude Code reads it: its exit code, its stderr, and the JSON
it may print on stdout.

- **Exit 0**: success. Its stdout may be a JSON object (below); any other stdout is, for
  ``SessionStart`` and ``UserPromptSubmit``, context for the model, and otherwise ignored.
- **Exit 2**: it blocks what can be blocked, and its stderr says why: the tool call
  (``PreToolUse``: the stderr is the call's result), the prompt (``UserPromptSubmit``: shown
  to the user, the prompt not sent), the stop (``Stop``: the turn goes on with it); after a
  tool ran (``PostToolUse``) the stderr goes to the model with the result. The other events
  cannot be blocked: their stderr is shown to the user.
- **Any other exit code**, a timeout, or a command that cannot start: shown to the user and
  otherwise ignored.

The JSON answer (each field checked; a field of the wrong type is left out, with one line):
``continue: false`` stops the turn (``stopReason`` is shown); ``systemMessage`` is shown to
the user; ``decision: "block"`` with ``reason`` blocks as exit 2 does (the reason in place of
stderr), and ``"approve"`` allows a tool call; ``hookSpecificOutput.permissionDecision``
(``allow``: no question asked, ``deny``: blocked with ``permissionDecisionReason``, ``ask``:
the user is asked even where the mode would not), ``updatedInput`` (the tool's arguments,
checked again against its schema) and ``additionalContext`` (context for the model). Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from actors.hooks._run import Ran

CAN_BLOCK = {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop"}
STDOUT_IS_CONTEXT = {"SessionStart", "UserPromptSubmit"}
Outcome = Literal["ok", "blocked", "failed", "timed_out", "error"]
Decision = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Answer:
    """One command's answer to one event."""

    ran: Ran
    outcome: Outcome
    feedback: str = ""  # why it blocked (stderr, or the JSON's reason); for "failed": stderr
    decision: Decision | None = None  # PreToolUse's
    context: str = ""  # for the model
    updated_input: dict[str, Any] | None = None
    stop: str | None = None  # ``continue: false``: the stopReason ("" when none)
    message: str = ""  # systemMessage, for the user
    problems: tuple[str, ...] = ()  # JSON fields left out

    @property
    def blocks(self) -> bool:
        return self.outcome == "blocked" or self.decision == "deny"

    @property
    def worth_telling(self) -> bool:
        """Whether the user hears of it (and the session records it)."""
        return (self.outcome != "ok" or self.decision is not None or bool(self.context)
                or self.updated_input is not None or self.stop is not None
                or bool(self.message) or bool(self.problems))


def answer(event: str, ran: Ran) -> Answer:
    """How ``ran`` answers ``event`` (see the module doc)."""
    if ran.error:
        return Answer(ran, "error", ran.error)
    if ran.timed_out:
        return Answer(ran, "timed_out")
    stderr = ran.stderr.strip()
    if ran.exit_code == 2:
        if event in CAN_BLOCK:
            return Answer(ran, "blocked", stderr or "(the hook gave no reason)")
        return Answer(ran, "failed", stderr)
    if ran.exit_code != 0:
        return Answer(ran, "failed", stderr)
    stdout = ran.stdout.strip()
    if stdout.startswith("{"):
        try:
            value = json.loads(stdout)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return _from_json(event, ran, value)
    context = stdout if event in STDOUT_IS_CONTEXT else ""
    return Answer(ran, "ok", context=context)


def _from_json(event: str, ran: Ran, value: dict[str, Any]) -> Answer:
    problems: list[str] = []

    def text(container: dict[str, Any], key: str, where: str = "") -> str:
        item = container.get(key)
        if item is None:
            return ""
        if isinstance(item, str):
            return item
        problems.append(f"{where}{key} is not a string; left out")
        return ""

    outcome: Outcome = "ok"
    feedback = ""
    decision: Decision | None = None
    stop: str | None = None
    if value.get("continue") is False:
        stop = text(value, "stopReason")
    elif "continue" in value and not isinstance(value["continue"], bool):
        problems.append("continue is not true or false; left out")
    message = text(value, "systemMessage")
    verdict = value.get("decision")
    if verdict == "block" and event in CAN_BLOCK:
        outcome, feedback = "blocked", text(value, "reason") or "(the hook gave no reason)"
    elif verdict == "approve" and event == "PreToolUse":
        decision = "allow"
    elif verdict is not None and verdict not in ("block", "approve"):
        problems.append(f"decision {str(verdict)[:40]!r} is not \"block\" or \"approve\"; "
                        "left out")
    context = ""
    updated: dict[str, Any] | None = None
    specific = value.get("hookSpecificOutput")
    if isinstance(specific, dict):
        where = "hookSpecificOutput."
        context = text(specific, "additionalContext", where)
        if event == "PreToolUse":
            chosen = specific.get("permissionDecision")
            reason = text(specific, "permissionDecisionReason", where)
            if chosen in ("allow", "ask", "deny"):
                decision = chosen
                if chosen == "deny":
                    feedback = reason or "(the hook gave no reason)"
                elif reason:
                    message = "\n".join(filter(None, (message, reason)))
            elif chosen is not None:
                problems.append(f"{where}permissionDecision is not allow, ask or deny; "
                                "left out")
            if isinstance(specific.get("updatedInput"), dict):
                updated = specific["updatedInput"]
            elif specific.get("updatedInput") is not None:
                problems.append(f"{where}updatedInput is not an object; left out")
    elif specific is not None:
        problems.append("hookSpecificOutput is not an object; left out")
    return Answer(ran, outcome, feedback, decision, context, updated, stop, message,
                  tuple(problems))
