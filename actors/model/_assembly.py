"""Putting a streamed chat completion back together, whatever the server's dialect.

Chunks are plain JSON objects (the SDK's typed models would reject or mangle what real servers
send). What the servers do, and what is done about it:

- Tool calls are keyed by ``index``, but a delta with no ``index`` (ollama before 0.4.7), or an
  ``index`` already taken by a call with a different non-empty ``id`` (ollama 0.20 with gemma4
  gives every call ``index: 0``), starts a new call. So does a second name for a slot whose
  arguments are already complete JSON.
- ``arguments`` that arrive as a JSON object (llama.cpp builds of March 2026) are serialised;
  arguments that are one JSON object twice over (vLLM's end-of-stream flush repeating what it
  streamed), or a streamed prefix followed by the whole object, are taken once.
- Ids: missing or empty ones are generated; non-string ones (numbers) become strings; an id
  already used earlier in the response or in the conversation is re-issued, so every call has
  exactly one result.
- Valid JSON arguments are kept exactly as sent (the front end decodes escapes such as Go's
  ``\\u003e`` for display).
- Reasoning from the ``reasoning`` / ``reasoning_content`` fields, or inline ``<think>`` tags
  (see :mod:`actors.model._reasoning`), is kept apart from the answer.
- ``limit``: at most that many bytes (UTF-8) of text, reasoning and tool-call arguments, all
  together, are taken; what comes past it is dropped and :attr:`Assembly.over_limit` says so
  (the reader then stops reading: :mod:`actors.model._wire`). A tool call whose arguments
  the cut left incomplete keeps ``{}`` (it is never run; its result says why), so the saved
  answer sends no megabytes of broken JSON back to the server.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.core.budget import Usage
from actors.core.messages import REASONING, Message
from actors.model._reasoning import Piece, ThinkSplitter

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def arguments_text(self) -> str:
        return "".join(self.arguments)


def new_call_id() -> str:
    """``call_`` and 12 hex digits from the system's secure random source (what
    ``secrets.token_hex(6)`` returns; ``secrets`` itself, with hmac, hashlib and random, is
    not imported at the start for it)."""
    return f"call_{os.urandom(6).hex()}"


def _as_id(value: Any) -> str:
    """A tool-call id as a string ('' when missing); numbers and the like are converted."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    return _serialise(value)


def _as_index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _as_text(value: Any) -> str:
    """An ``arguments`` delta as text: strings as they are, objects serialised."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _serialise(value)


def _complete_json(text: str) -> bool:
    return _loads(text) is not _INVALID


def repair_arguments(text: str) -> str:
    """The arguments to keep: valid JSON exactly as the model sent it; one object repeated,
    or a streamed prefix followed by the whole object, as that object once; anything else as
    it came (the tool executor reports invalid JSON to the model, with its own bounds)."""
    stripped = text.strip()
    if not stripped:
        return "{}"
    if _loads(stripped) is not _INVALID:
        return stripped
    decoder = json.JSONDecoder()
    # One object twice over, possibly formatted differently the second time.
    try:
        first, end = decoder.raw_decode(stripped)
        rest = stripped[end:].lstrip()
        second, end2 = decoder.raw_decode(rest)
        if isinstance(first, dict) and first == second and not rest[end2:].strip():
            return stripped[:end]
    except (ValueError, RecursionError):
        pass
    # A streamed prefix, then the whole object again: '{"a": 1' + '{"a": 1}'.
    start = stripped.find("{", 1)
    while start > 0:
        if stripped[start:2 * start] == stripped[:start]:
            tail = stripped[start:]
            if isinstance(_loads(tail), dict):
                return tail
        start = stripped.find("{", start + 1)
    return text


_INVALID = object()


def _loads(text: str) -> Any:
    """The decoded JSON, or ``_INVALID`` (never raises: hostile nesting is just invalid)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _INVALID


def _serialise(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return str(value)


@dataclass
class Assembly:
    """A streamed response being put back together; :meth:`add` folds in one chunk."""

    taken_ids: set[str] = field(default_factory=set)  # ids used earlier in the conversation
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    fingerprint: str = ""
    chunks: int = 0
    limit: int | None = None  # bytes of text, reasoning and arguments taken, at most
    size: int = 0  # bytes of them taken so far
    over_limit: bool = False  # more came than ``limit`` lets in: the answer is cut
    _calls: list[_Call] = field(default_factory=list)
    _by_index: dict[int, _Call] = field(default_factory=dict)
    _splitter: ThinkSplitter = field(default_factory=ThinkSplitter)

    def add(self, chunk: dict[str, Any]) -> list[Piece]:
        """Fold one chunk in; return what to show: answer text, reasoning, or ``revealed``."""
        self.chunks += 1
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._take_usage(usage)
        if isinstance(chunk.get("system_fingerprint"), str):
            self.fingerprint = chunk["system_fingerprint"]
        shown: list[Piece] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or _as_index(choice.get("index", 0)) not in (0, None):
                continue  # one choice is asked for; others are ignored
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = choice.get("message")
            shown += self._take_delta(delta if isinstance(delta, dict) else {})
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return shown

    def cut(self) -> None:
        """The answer is cut at :attr:`limit`: it ends here, as at an output limit."""
        self.over_limit = True
        self.finish_reason = "length"

    def finish(self) -> list[Piece]:
        """The stream ended: flush what the reasoning splitter held back."""
        return self._record(self._splitter.finish())

    # -- deltas ---------------------------------------------------------------------------

    def _take_usage(self, usage: dict[str, Any]) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and prompt > 0:
            done = completion if isinstance(completion, int) and completion >= 0 else 0
            self.usage = Usage(prompt, done)

    def _take_delta(self, delta: dict[str, Any]) -> list[Piece]:
        shown: list[Piece] = []
        for name in REASONING_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and value:
                value = self._fit(value)
                if not value:
                    break
                self.reasoning.append(value)
                shown.append(Piece("reasoning", value))
                break
        content = delta.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content
                              if isinstance(p, dict) and isinstance(p.get("text"), str))
        if isinstance(content, str) and content:
            content = self._fit(content)
        if isinstance(content, str) and content:
            shown += self._record(self._splitter.feed(content))
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                self._take_call(call)
        return shown

    def _fit(self, text: str) -> str:
        """As much of ``text`` as :attr:`limit` still lets in (all of it without a limit);
        counted in UTF-8 bytes, cut at a character's boundary."""
        if self.limit is None or not text:
            return text
        size = len(text) if text.isascii() else len(text.encode())
        if self.size + size <= self.limit:
            self.size += size
            return text
        room = max(0, self.limit - self.size)
        self.size, self.over_limit = self.limit, True
        return text.encode()[:room].decode(errors="ignore")

    def _record(self, pieces: Iterable[Piece]) -> list[Piece]:
        out = []
        for piece in pieces:
            if piece.kind == "text":
                self.text.append(piece.text)
            elif piece.kind == "reasoning":
                self.reasoning.append(piece.text)
            else:  # revealed: the answer so far was reasoning
                self.reasoning.extend([*self.text, piece.text])
                self.text.clear()
            out.append(piece)
        return out

    def _take_call(self, call: dict[str, Any]) -> None:
        index = _as_index(call.get("index"))
        call_id = _as_id(call.get("id"))
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        name = name if isinstance(name, str) else ""
        arguments = self._fit(_as_text(function.get("arguments")))
        slot = self._slot(index, call_id, name)
        if call_id and not slot.id:
            slot.id = call_id
        if name and not slot.name:
            slot.name = name
        if arguments:
            slot.arguments.append(arguments)

    def _slot(self, index: int | None, call_id: str, name: str) -> _Call:
        if index is None:
            last = self._calls[-1] if self._calls else None
            if last is not None and not call_id and not name:
                return last  # a fragment without index: the call being streamed
            return self._new(None)
        slot = self._by_index.get(index)
        if slot is None:
            return self._new(index)
        if call_id and slot.id and call_id != slot.id:
            return self._new(index)  # every call says index 0 (ollama 0.20 with gemma4)
        if (name and slot.name and not call_id and not slot.id
                and _complete_json(slot.arguments_text())):
            return self._new(index)
        return slot

    def _new(self, index: int | None) -> _Call:
        slot = _Call()
        self._calls.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    # -- result ---------------------------------------------------------------------------

    def answer_text(self) -> str:
        return "".join(self.text)

    def reasoning_text(self) -> str:
        return "".join(self.reasoning).strip()

    def tool_calls(self) -> list[dict[str, Any]]:
        used = set(self.taken_ids)
        calls = []
        for slot in self._calls:
            call_id = slot.id
            if not call_id or call_id in used:
                call_id = new_call_id()
                while call_id in used:
                    call_id = new_call_id()
            used.add(call_id)
            arguments = repair_arguments(slot.arguments_text())
            if self.over_limit and not _complete_json(arguments):
                arguments = "{}"  # cut at the limit: never run, and no junk sent back
            calls.append({
                "id": call_id,
                "type": "function",
                "function": {"name": slot.name, "arguments": arguments},
            })
        return calls

    def message(self) -> Message:
        """The assistant message: the answer, the tool calls, and the reasoning under its
        own key (kept in the session; sent back only where it belongs, see
        :mod:`actors.model._body`)."""
        calls = self.tool_calls()
        text = self.answer_text()
        message: Message = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        reasoning = self.reasoning_text()
        if reasoning:
            message[REASONING] = reasoning
        return message


def call_ids_in(messages: Iterable[Message]) -> set[str]:
    """Every tool-call id of the assistant messages (to keep new ids unique)."""
    ids: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    ids.add(call["id"])
    return ids
