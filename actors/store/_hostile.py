"""Records from files are hostile until checked: bounded decoding and checks naming the field.

An exported file, an older JSON record or a file someone crafted goes through
:func:`decode_record` and :func:`check_record` before anything is written. Whatever it holds,
the answer is the record or :class:`InvalidRecord` with one line naming the file and the
field (``session.json: messages[3].tool_calls must be a list``), never a ``TypeError`` deep in
the store or a ``RecursionError``:

* numbers: integers within 64 bits (decoded only up to :data:`MAX_INTEGER_DIGITS` digits),
  finite floats (``1e400``, ``NaN`` and ``Infinity`` refused); the fields that count or
  cost something (compactions' token counts, ``fork_point``, the state's usage counters and
  costs) within their range: no negative count, nothing beyond :data:`MAX_COUNT` or
  :data:`MAX_COST`;
* nesting at most :data:`MAX_DEPTH` deep (checked without recursion; a 100,000-deep file
  stops the decoder's own recursion, and a scan of its brackets then names the field);
* text valid Unicode: a lone surrogate (``"\\ud800"``, which JSON allows and UTF-8 cannot
  hold) is refused;
* messages shaped as chat messages: a ``role``; ``content`` null, text or a list of parts;
  ``tool_calls`` a list of calls with a string ``id`` and a ``function`` whose ``name`` and
  ``arguments`` are text; a tool message's ``tool_call_id`` text;
* compactions with integer token counts and a text summary;
* ``format_version`` one this version reads.

Repairs and salvage clean what they copy with :func:`importable`: tool-call ids made unique
strings, then malformed messages left out.

Pure computation: no I/O, bounded by the file's size.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from actors.core.errors import InvalidRecord
from actors.core.messages import open_calls_at_end, pairing_problems, repair

MAX_INTEGER_DIGITS = 100
MAX_DEPTH = 100
MAX_INTEGER = 2**63 - 1  # what a database integer holds
MAX_COUNT = 2**53  # a count of tokens, calls or messages (exact in every JSON reader)
MAX_COST = 10.0**9  # dollars spent on one session
_SURROGATE = re.compile("[\ud800-\udfff]")

Path = tuple[str | int, ...]


class _HugeInteger:
    """What the decoder makes of an integer with too many digits (reported with its field)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))


def _integer(text: str) -> int | _HugeInteger:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        return _HugeInteger(text)
    return int(text)


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')


def _deep_field(text: str) -> Path:
    """Where ``text`` first nests deeper than :data:`MAX_DEPTH` (a scan of its brackets,
    strings and keys; run only when the decoder gave up)."""
    stack: list[list[Any]] = []  # [kind, key or index, expecting a key]
    pending = ""
    for token in _TOKENS.finditer(text):
        t = token.group()
        if t in "{[":
            if len(stack) >= MAX_DEPTH:
                break
            stack.append(["{", None, True] if t == "{" else ["[", 0, False])
        elif t in "}]":
            if stack:
                stack.pop()
        elif t == ":":
            if stack and stack[-1][0] == "{":
                stack[-1][1], stack[-1][2] = pending, False
        elif t == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][1] += 1
            elif stack:
                stack[-1][2] = True
        elif stack and stack[-1][0] == "{" and stack[-1][2]:
            pending = t[1:-1]
    return tuple(frame[1] for frame in stack if frame[1] is not None)


def field_name(path: Path) -> str:
    """``messages[3].tool_calls`` for ``("messages", 3, "tool_calls")``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "the record"


def decode_record(text: str, source: str) -> Any:
    """The JSON value of ``text``, else :class:`InvalidRecord` (values are checked by
    :func:`check_values`)."""
    try:
        return json.loads(text, parse_int=_integer)
    except RecursionError:
        path = _deep_field(text)
        shown = field_name(path[:8]) + ("…" if len(path) > 8 else "")
        raise InvalidRecord(f"{source}: {shown} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError and anything else the decoder refuses
        raise InvalidRecord(f"{source}: not valid JSON ({exc})") from None


def check_values(value: Any, source: str) -> None:
    """Depth, numbers and text of every value (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, Path]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise _refuse(source, path, "holds a lone surrogate (not valid Unicode)")
            continue
        if isinstance(item, float) and not math.isfinite(item):
            raise _refuse(source, path, f"is {item}, out of range (1e400, NaN, Infinity)")
        if isinstance(item, _HugeInteger) or (
            _is_int(item) and abs(item) >= 10 ** MAX_INTEGER_DIGITS
        ):
            raise _refuse(source, path, f"is an integer of more than {MAX_INTEGER_DIGITS} "
                          "digits")
        if _is_int(item) and abs(item) > MAX_INTEGER:
            raise _refuse(source, path, f"is {_shown(item)}, out of range (beyond a 64-bit "
                          "integer)")
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        if len(path) >= MAX_DEPTH:
            raise _refuse(source, path, f"nests deeper than {MAX_DEPTH} levels")
        for key, child in children:
            if isinstance(key, str) and _SURROGATE.search(key):
                raise _refuse(source, path, "has a key holding a lone surrogate (not valid "
                              "Unicode)")
            stack.append((child, (*path, key)))


def _refuse(source: str, path: Path, what: str) -> InvalidRecord:
    return InvalidRecord(f"{source}: {field_name(path)} {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A number as a refusal names it (a huge one shortened)."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:10]}…({len(text)} digits)"


def _count(value: Any, path: Path, source: str) -> None:
    """A count (tokens, calls, a message number): an integer from 0 to :data:`MAX_COUNT`."""
    if not _is_int(value):
        raise _refuse(source, path, "must be an integer")
    if not 0 <= value <= MAX_COUNT:
        raise _refuse(source, path, f"is {_shown(value)}, out of range (0 to {MAX_COUNT})")


def _cost(value: Any, path: Path, source: str) -> None:
    """A cost in dollars: a finite number from 0 to :data:`MAX_COST`."""
    if not (_is_int(value) or isinstance(value, float)):
        raise _refuse(source, path, "must be a number")
    if not 0 <= value <= MAX_COST:  # NaN compares false: refused too
        raise _refuse(source, path, f"is {_shown(value)}, out of range (0 to {MAX_COST:.0f})")


_USAGE_COUNTS = ("total_tokens_in", "total_tokens_out", "calls", "tool_calls")
_INHERITED_COUNTS = ("tokens_in", "tokens_out", "calls")


def check_state(state: Any, source: str) -> None:
    """The planning/usage state: an object whose usage counters and costs (those the
    harness adds to and shows) are in range."""
    if not isinstance(state, dict):
        raise _refuse(source, ("state",), "must be an object")
    for key in _USAGE_COUNTS:
        if key in state:
            _count(state[key], ("state", key), source)
    if "total_cost_usd" in state:
        _cost(state["total_cost_usd"], ("state", "total_cost_usd"), source)
    inherited = state.get("inherited_usage")
    if inherited is not None:
        if not isinstance(inherited, dict):
            raise _refuse(source, ("state", "inherited_usage"), "must be an object")
        for key in _INHERITED_COUNTS:
            if key in inherited:
                _count(inherited[key], ("state", "inherited_usage", key), source)
        if "cost_usd" in inherited:
            _cost(inherited["cost_usd"], ("state", "inherited_usage", "cost_usd"), source)


def check_numbers(record: dict[str, Any], source: str, newest_format: int) -> None:
    """The record's own numeric fields: ``fork_point`` a message number when given (null:
    none), ``format_version`` one this version reads."""
    if record.get("fork_point") is not None:
        _count(record["fork_point"], ("fork_point",), source)
    if "format_version" in record:
        version = record["format_version"]
        if not _is_int(version) or not 1 <= version <= newest_format:
            raise _refuse(source, ("format_version",), f"is {_shown(version)}, not a format "
                          f"this version reads (1 to {newest_format})")


def _check_message(message: Any, path: Path, source: str) -> None:
    if not isinstance(message, dict):
        raise _refuse(source, path, "must be an object")
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise _refuse(source, (*path, "role"), "must be text")
    content = message.get("content")
    if content is not None and not isinstance(content, str) and (
        not isinstance(content, list) or not all(isinstance(p, dict) for p in content)
    ):
        raise _refuse(source, (*path, "content"), "must be text, null or a list of parts")
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise _refuse(source, (*path, "tool_calls"), "must be a list")
        for i, call in enumerate(calls):
            where = (*path, "tool_calls", i)
            if not isinstance(call, dict):
                raise _refuse(source, where, "must be an object")
            if not isinstance(call.get("id"), str) or not call["id"]:
                raise _refuse(source, (*where, "id"), "must be a non-empty text")
            function = call.get("function")
            if not isinstance(function, dict):
                raise _refuse(source, (*where, "function"), "must be an object")
            for key in ("name", "arguments"):
                if not isinstance(function.get(key), str):
                    raise _refuse(source, (*where, "function", key), "must be text")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _refuse(source, (*path, "tool_call_id"), "must be text")


def check_messages(messages: Any, name: str, source: str) -> None:
    """``messages`` (the record's field ``name``) is a list of chat messages."""
    if not isinstance(messages, list):
        raise _refuse(source, (name,), "must be a list of messages")
    for i, message in enumerate(messages):
        _check_message(message, (name, i), source)


def check_compactions(compactions: Sequence[Any], source: str) -> None:
    for i, event in enumerate(compactions):
        path: Path = ("compactions", i)
        if not isinstance(event, dict):
            raise _refuse(source, path, "must be an object")
        for key in ("before_tokens", "after_tokens"):
            if key in event:
                _count(event[key], (*path, key), source)
        if not isinstance(event.get("summary", ""), str):
            raise _refuse(source, (*path, "summary"), "must be text")
        if not isinstance(event.get("at", ""), str):
            raise _refuse(source, (*path, "at"), "must be text")


def is_valid_message(message: Any) -> bool:
    """Whether ``message`` passes the checks of an imported message (repairs and salvage keep
    only those)."""
    try:
        _check_message(message, (), "")
        check_values(message, "")
    except InvalidRecord:
        return False
    return True


def unique_call_ids(messages: list[Any]) -> list[Any]:
    """``messages`` with every tool call id a string, unique in the context, and each result
    pointing at its call: non-string ids become strings, a repeated id gets a suffix
    (``-2``), and results answer the calls of their block in order."""
    out: list[Any] = []
    used: set[str] = set()
    pending: dict[str, list[str]] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls") is not None:
            pending = {}
            calls = message["tool_calls"] if isinstance(message["tool_calls"], list) else []
            renamed = []
            for call in calls:
                if not isinstance(call, dict):
                    continue
                raw = call.get("id")
                base = str(raw) if raw not in (None, "") else "call"
                new, n = base, 2
                while new in used:
                    new, n = f"{base}-{n}", n + 1
                used.add(new)
                pending.setdefault(base, []).append(new)
                renamed.append({**call, "id": new})
            message = {**message, "tool_calls": renamed}
            if not renamed:
                del message["tool_calls"]
        elif role == "tool":
            queue = pending.get(str(message.get("tool_call_id")))
            if queue:
                message = {**message, "tool_call_id": queue.pop(0)}
        out.append(message)
    return out


def importable(messages: list[Any]) -> list[Any]:
    """What a repaired copy or a salvage can hold of ``messages``: tool-call ids made unique
    strings (:func:`unique_call_ids`), then malformed messages left out."""
    return [m for m in unique_call_ids(messages) if is_valid_message(m)]


def call_id_problems(context: Sequence[Any]) -> list[str]:
    """Why the endpoint would refuse this context's tool calls: ids that are not strings,
    an id used twice in one message, a call without its result, a result without its call."""
    problems = []
    for pos, message in enumerate(context):
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls") is not None:
            calls = message["tool_calls"]
            if not isinstance(calls, list):
                problems.append(f"message {pos}: tool_calls is not a list")
                continue
            ids: set[str] = set()
            for call in calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                if not isinstance(call_id, str) or not call_id:
                    problems.append(f"message {pos}: a tool call id {call_id!r} is not a string")
                elif call_id in ids:
                    problems.append(f"message {pos}: tool call id {call_id!r} is used twice")
                ids.add(str(call_id))
        elif role == "tool" and not isinstance(message.get("tool_call_id"), str):
            problems.append(
                f"message {pos}: a tool result's id {message.get('tool_call_id')!r} is not "
                "a string")
    return problems + pairing_problems(context)


def only_open_at_crash(context: Sequence[Any]) -> bool:
    """Whether the only problems of ``context`` are calls left open at its end by a crash
    (what recovery answers on resume)."""
    problems = call_id_problems(context)
    return len(problems) == len(open_calls_at_end(context)) and not call_id_problems(
        repair(context).messages)


def unsendable(problems: list[str]) -> str:
    """The doctor's line for a context an endpoint would refuse."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"its context cannot be sent to an endpoint: {problems[0]}{more}"


def context_problem(context: Sequence[Any], *, crashed: bool) -> str | None:
    """Why an endpoint would refuse a saved ``context``, in the doctor's words; None when
    it can be sent, or when (``crashed``: its run died) its only problem is the calls the
    crash left open, which recovery answers on resume."""
    problems = call_id_problems(context)
    if not problems or (crashed and only_open_at_crash(context)):
        return None
    return unsendable(problems)
