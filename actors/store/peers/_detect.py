"""What a file is, by its content (never by its name): the one place formats are told apart.

* ``claude-code``: JSON lines whose entries have Claude Code's types (``user``,
  ``assistant``, ``summary``, …) with ``uuid``/``sessionId``;
* ``codex``: JSON lines ``{"timestamp", "type", "payload"}`` (or an older rollout's first
  line);
* ``gemini``: a first line (or a whole document) with ``sessionId`` and ``projectHash``;
* ``gemini-checkpoint``: one document that is Gemini API history (``/chat save``);
* ``record``: anything else that could be the harness's own record (an export or an older
  JSON record), for its reader to accept or refuse naming the field;
* ``None``: a file that parses and is plainly not a session (a directory walk passes over
  it).

Only the head of a JSON-lines file is looked at (its first lines, a garbage line skipped:
the reader refuses it later naming the line); a one-document file is parsed whole.
"""

from __future__ import annotations

import json
from typing import Any

from actors.store.peers import claude_code, codex, gemini

HEAD_LINES = 20


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _UNREADABLE


_UNREADABLE = object()


def _of_line(value: Any) -> str | None:
    if codex.looks_like(value):
        return "codex"
    if gemini.looks_like(value):
        return "gemini"
    if claude_code.looks_like(value):
        return "claude-code"
    return None


def detect(text: str) -> str | None:
    """The format of a file's ``text`` (see the module's doc)."""
    head = [line for line in text.split("\n", HEAD_LINES * 4)[: HEAD_LINES * 4]
            if line.strip()][:HEAD_LINES]
    values = [_value(line) for line in head]
    for value in values:
        found = _of_line(value)
        if found is not None:
            return found
        if isinstance(value, dict) and ("id" in value or "messages" in value):
            return "record"  # an export written on one line
    whole = _value(text) if len(head) != 1 else values[0]
    if whole is _UNREADABLE:
        if len(head) > 1 and all(v is not _UNREADABLE for v in values):
            return None  # JSON lines of something else
        return "record"  # for the record's reader to refuse, naming what is wrong
    if gemini.looks_like(whole):
        return "gemini"
    if gemini.looks_like_checkpoint(whole):
        return "gemini-checkpoint"
    if isinstance(whole, dict) and ("id" in whole or "messages" in whole):
        return "record"
    return None
