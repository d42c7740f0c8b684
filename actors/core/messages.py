"""Chat messages as plain data: normalising, pairing tool calls with results, and repair.

A *working context* is a list of chat-completions messages (dicts). It is *valid* when every
assistant tool call is followed, before the next non-tool message, by exactly one tool message
answering it, and no tool message answers a call that is not open. Everything here is pure:
no I/O, no clock, so the store, the supervisor and the tests share one definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]

INTERRUPTED_NOTICE = "Execution interrupted; outcome unknown. Inspect state before retrying."
NOT_STARTED_NOTICE = (
    "Not executed: the session stopped before this call started. Safe to retry."
)


SHOWN = "shown"
"""A user message's key for what the user typed, when the message sent differs from it (files
attached with ``@path``). Kept in the transcript for showing; never sent to a model."""


def for_model(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as a model request carries them: without the keys only the harness reads."""
    return [m if SHOWN not in m else {k: v for k, v in m.items() if k != SHOWN}
            for m in messages]


def to_plain(message: Any) -> Message:
    """Return ``message`` as a JSON-ready dict (SDK objects go through ``model_dump``)."""
    if isinstance(message, dict):
        return message
    dump = getattr(message, "model_dump", None)
    plain = dump(exclude_none=True) if dump is not None else None
    if isinstance(plain, dict):
        return plain
    raise TypeError(f"Cannot persist message of type {type(message).__name__}")


def encode(message: Message) -> str:
    """The canonical JSON text of one message, as stored."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def tool_calls_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an assistant message (an empty list for anything else)."""
    if message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]


def call_ids_of(message: Mapping[str, Any]) -> list[str]:
    return [c["id"] for c in tool_calls_of(message)]


def text_of(message: Mapping[str, Any]) -> str:
    """Readable text of a message: its content plus tool-call names and arguments."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    for call in tool_calls_of(message):
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(p for p in parts if p)


def tool_result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


@dataclass
class Repair:
    """What :func:`repair` did: the valid context, the results it added, what it dropped."""

    messages: list[Message]
    added: list[Message] = field(default_factory=list)
    dropped: list[Message] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped)

    def appends_only(self, original: Sequence[Message]) -> bool:
        """True when the repaired context is ``original`` plus new messages at its end."""
        return not self.dropped and self.messages[: len(original)] == list(original)


def repair(
    messages: Sequence[Message],
    notice: Callable[[str], str] = lambda _call_id: INTERRUPTED_NOTICE,
) -> Repair:
    """Make ``messages`` valid without ever inventing an outcome.

    Every tool call lacking a result gets ``tool_result(call_id, notice(call_id))`` at the end
    of its result block, in call order; tool messages answering no open call (orphans and
    duplicates) are dropped. Idempotent: repairing a valid context changes nothing.
    """
    out: list[Message] = []
    added: list[Message] = []
    dropped: list[Message] = []
    open_calls: list[str] = []  # calls of the latest assistant message still unanswered
    answered: set[str] = set()

    def close_block() -> None:
        for call_id in open_calls:
            if call_id not in answered:
                notice_message = tool_result(call_id, notice(call_id))
                out.append(notice_message)
                added.append(notice_message)
        open_calls.clear()
        answered.clear()

    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls and call_id not in answered:
                answered.add(call_id)
                out.append(message)
            else:
                dropped.append(message)
            continue
        close_block()
        out.append(message)
        open_calls.extend(dict.fromkeys(call_ids_of(message)))
    close_block()
    return Repair(out, added, dropped)


def pairing_problems(messages: Sequence[Message]) -> list[str]:
    """Human-readable reasons why ``messages`` is not a valid context (empty when valid)."""
    result = repair(messages)
    problems = [
        f"tool call {m['tool_call_id']} has no result" for m in result.added
    ]
    problems += [
        f"tool result {m.get('tool_call_id')!r} answers no open call" for m in result.dropped
    ]
    return problems


def open_calls_at_end(messages: Sequence[Message]) -> list[str]:
    """Unanswered calls of the last assistant message, scanning only from it to the end.

    In a context that was valid before its last batch, this is the only place open calls can
    be; the cost is the length of that batch, not of the context.
    """
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[i + 1 :] if m.get("role") == "tool"}
            return [c for c in call_ids_of(messages[i]) if c not in answered]
    return []
