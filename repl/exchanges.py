"""The last exchanges of a session, compactly: what a resume replays before the first prompt,
the resume picker's preview and the end of ``--info``.

One line per message: ``You: …`` (what was typed, ``[attached: a.py]`` for each file sent
with it), ``Assistant: …``, ``  [tool] name(arguments)`` for each call and ``  → first line
(+N lines)`` (``✗`` for a failure) for each result, each cut to a width and numbered when
asked (the numbers ``--fork ID --at N`` takes). The system prompt is left out; a
compaction's summary shows as one ``[earlier conversation summarised]`` line; no data tag is
ever shown. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from actors.core.carried import PINNED_HEADER, SUMMARY_OPEN
from actors.core.messages import text_of, tool_calls_of
from actors.core.previews import one_line, result_label, typed_with_labels

REPLAY_MESSAGES = 12  # messages of the context a resume shows (tool lines included)
WIDTH = 100

_FAILED_STARTS = ("Error", "error:", "Denied", "Not executed", "Execution interrupted")
_EXIT = re.compile(r"[Ee]xit status (\d+)")


def _arguments(raw: Any) -> str:
    if isinstance(raw, str):
        try:
            return json.dumps(json.loads(raw), ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return raw
    return json.dumps(raw, ensure_ascii=False)


def _result_line(content: str) -> str:
    label = result_label(content)
    status = _EXIT.match(label)
    failed = label.startswith(_FAILED_STARTS) or bool(status and status.group(1) != "0")
    return ("✗ " if failed else "→ ") + label


def message_lines(message: dict[str, Any]) -> list[str]:
    """The lines of one message (none for the system prompt)."""
    role = message.get("role")
    content = message.get("content")
    if role == "system":
        return []
    if role == "user":
        if isinstance(content, str) and content.startswith(SUMMARY_OPEN):
            return ["[earlier conversation summarised]"]
        if isinstance(content, str) and content.startswith(PINNED_HEADER):
            return ["[pinned instructions]"]
        return ["You: " + one_line(typed_with_labels(message) or text_of(message))]
    if role == "assistant":
        lines = []
        text = content if isinstance(content, str) else ""
        if text.strip():
            lines.append("Assistant: " + one_line(text))
        for call in tool_calls_of(message):
            fn = call.get("function") or {}
            arguments = one_line(_arguments(fn.get("arguments")))
            lines.append(f"  [tool] {fn.get('name', '?')}({arguments})")
        return lines
    if role == "tool":
        return ["  " + _result_line(str(content or ""))]
    return []


def exchange_lines(
    numbered: Sequence[tuple[int | None, dict[str, Any]]],
    *,
    width: int = WIDTH,
    numbers: bool = False,
) -> list[str]:
    """The lines of ``(number, message)`` pairs, each cut to ``width``."""
    out = []
    for number, message in numbered:
        for i, line in enumerate(message_lines(message)):
            if numbers:
                label = f"{number:>4} " if number is not None and i == 0 else "     "
                line = label + line
            out.append(line if len(line) <= width else line[: width - 1] + "…")
    return out
