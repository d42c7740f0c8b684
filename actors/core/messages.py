"""Chat messages as plain data: normalising, pairing tool calls with results, and repair.

A *working context* is a list of chat-completions messages (dicts). It is *valid* when every
assistant tool call is followed, before the next non-tool message, by exactly one tool message
answering it, and no tool message answers a call that is not open. Everything here is pure:
no I/O, no clock, so the store, the supervisor and the tests share one definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]

INTERRUPTED_NOTICE = "Execution interrupted; outcome unknown. Inspect state before retrying."
NOT_STARTED_NOTICE = (
    "Not executed: the session stopped before this call started. Safe to retry."
)
NO_ANSWER_NOTICE = "[No answer: the request for the message above failed or was interrupted.]"
"""The assistant's place after a user message that got no answer, written when the next
message is sent: the request then carries no two user messages in a row."""
PINNED_PREFIX = "[pinned instruction] "
"""What a ``\\pin`` puts before its text in the user's role (an instruction, no question)."""


SHOWN = "shown"
"""A user message's key for what the user typed, when the message sent differs from it (files
attached with ``@path``). Kept in the transcript for showing; never sent to a model."""

REASONING = "reasoning_content"
"""An assistant message's key for the model's reasoning (its thinking, kept apart from the
answer). Kept in the session; sent back only to a server whose chat template renders it, and
only on the messages of the current turn (:mod:`actors.model._body`)."""


def to_plain(message: Any) -> Message:
    """Return ``message`` as a JSON-ready dict (SDK objects go through ``model_dump``)."""
    if isinstance(message, dict):
        return message
    dump = getattr(message, "model_dump", None)
    plain = dump(exclude_none=True) if dump is not None else None
    if isinstance(plain, dict):
        return plain
    raise TypeError(f"Cannot persist message of type {type(message).__name__}")


def dumps_fast(separators: tuple[str, str], *,
               sort_keys: bool = False) -> Callable[[dict[str, Any]], str]:
    """``json.dumps(obj, ensure_ascii=False, separators=…, sort_keys=…)`` of a dict, with the C
    encoder json.dumps builds on every call built once (every message saved or sent, every
    state saved, is encoded). The same text, checked once here, else json.dumps itself. No
    cycle check: messages and states are plain data, and anything the C encoder refuses (a
    cycle, a value JSON has no form for) goes to json.dumps, which says what is wrong."""

    def slow(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=separators, sort_keys=sort_keys)

    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        encoder = make(None, None, json.encoder.encode_basestring, None, separators[1],
                       separators[0], sort_keys, False, True) if make else None
    except TypeError:  # another signature: not this interpreter's encoder
        encoder = None
    if encoder is None:
        return slow

    def fast(obj: dict[str, Any]) -> str:
        if type(obj) is dict:
            try:
                return "".join(encoder(obj, 0))
            except (TypeError, ValueError, RecursionError):
                pass
        return slow(obj)

    sample = {"b": [1, 2.5, None, True, "é\n\"x"], "a": {"z": float("inf"), "y": []}}
    return fast if fast(sample) == slow(sample) else slow


encode = dumps_fast((",", ":"))
"""The canonical JSON text of one message, as stored: ``encode(message) -> str``."""


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


Facts = tuple[bool, Any, tuple[str, ...]]
"""What the pairing rule reads of a message: whether it is a tool result, the call it
answers (its ``tool_call_id``, any value), and the ids of the tool calls it makes."""


def facts_of(message: Mapping[str, Any]) -> Facts:
    """The :data:`Facts` of a message."""
    if message.get("role") == "tool":
        return True, message.get("tool_call_id"), ()
    return False, None, tuple(dict.fromkeys(call_ids_of(message)))


def shape_of(message: Mapping[str, Any]) -> str | None:
    """The :data:`Facts` of a message as a short text stored beside it, so that a resume
    checks the pairing rule without parsing the message (:func:`facts_of_shape`): ``""``
    for a message that neither answers nor makes a call, ``"t" + id`` for a tool result,
    ``"a" + ids`` (one per line) for an assistant message with calls; None when the facts
    do not fit that form (then the message itself is read)."""
    is_tool, answers, calls = facts_of(message)
    if is_tool:
        return "t" + answers if isinstance(answers, str) else None
    if not calls:
        return ""
    if any("\n" in c for c in calls):
        return None
    return "a" + "\n".join(calls)


def facts_of_shape(shape: str) -> Facts:
    """The :data:`Facts` a :func:`shape_of` text stands for."""
    if not shape:
        return False, None, ()
    if shape[0] == "t":
        return True, shape[1:], ()
    return False, None, tuple(shape[1:].split("\n"))


@dataclass(frozen=True)
class RepairPlan:
    """What makes a context valid (:func:`repair_plan`): the results to add, as ``(position,
    call id)`` with the position the result goes before (in the original numbering, in
    order), and the positions of the results to drop."""

    inserts: tuple[tuple[int, str], ...] = ()
    drops: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.inserts or self.drops)

    def appends_only(self, length: int) -> bool:
        """True when the plan only adds results after the last of ``length`` messages."""
        return not self.drops and all(pos == length for pos, _ in self.inserts)


def repair_plan(facts: Iterable[Facts]) -> RepairPlan:
    """The pairing rule, on the :data:`Facts` of a context's messages, in order: every tool
    call lacking a result gets one at the end of its result block, in call order; a tool
    result answering no open call (an orphan or a duplicate) is dropped."""
    inserts: list[tuple[int, str]] = []
    drops: list[int] = []
    open_calls: tuple[str, ...] = ()  # calls of the latest assistant message
    answered: set[str] = set()
    length = 0
    for position, (is_tool, answers, calls) in enumerate(facts):
        length = position + 1
        if is_tool:
            if answers in open_calls and answers not in answered:
                answered.add(answers)
            else:
                drops.append(position)
            continue
        if len(answered) < len(open_calls):  # answered holds open calls only
            inserts += [(position, c) for c in open_calls if c not in answered]
        answered.clear()
        open_calls = calls
    if len(answered) < len(open_calls):
        inserts += [(length, c) for c in open_calls if c not in answered]
    return RepairPlan(tuple(inserts), tuple(drops))


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


def apply_plan(
    messages: Sequence[Message],
    plan: RepairPlan,
    notice: Callable[[str], str],
) -> Repair:
    """``messages`` with ``plan`` carried out (results ``tool_result(id, notice(id))``)."""
    if not plan:
        return Repair(list(messages))
    out: list[Message] = []
    added: list[Message] = []
    dropped = [messages[p] for p in plan.drops]
    drops = set(plan.drops)
    inserts = list(plan.inserts)
    at = 0
    for position, message in enumerate(messages):
        while at < len(inserts) and inserts[at][0] == position:
            added.append(tool_result(inserts[at][1], notice(inserts[at][1])))
            out.append(added[-1])
            at += 1
        if position not in drops:
            out.append(message)
    for _, call_id in inserts[at:]:
        added.append(tool_result(call_id, notice(call_id)))
        out.append(added[-1])
    return Repair(out, added, dropped)


def repair(
    messages: Sequence[Message],
    notice: Callable[[str], str] = lambda _call_id: INTERRUPTED_NOTICE,
) -> Repair:
    """Make ``messages`` valid without ever inventing an outcome.

    Every tool call lacking a result gets ``tool_result(call_id, notice(call_id))`` at the end
    of its result block, in call order; tool messages answering no open call (orphans and
    duplicates) are dropped. Idempotent: repairing a valid context changes nothing.
    """
    return apply_plan(messages, repair_plan(map(facts_of, messages)), notice)


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
