"""What a person sees of a session in a listing: the user's own words, never the wrappers.

The context holds messages the harness wrote itself in the user's role: a compaction's
summary (``<session_context_data>…``) and the pinned-instructions block. They are data for
the model, not something the user said, so they never become a title, a preview or a count
of user messages. :func:`one_line` is the one way a text becomes a line of a listing: the
data tags and their boilerplate taken out, whitespace folded, cut with an ellipsis. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from actors.core.carried import PINNED_HEADER, SUMMARY_HEADER, SUMMARY_OPEN
from actors.core.controls import TERMINAL_CONTROLS
from actors.core.messages import SHOWN, text_of

PREVIEW_CHARS = 200  # what the store keeps; listings cut it shorter to fit the screen
_CONTROLS = re.compile(f"[{TERMINAL_CONTROLS}]")
_TAGS = re.compile(
    r"</?\s*(?:session[\s_-]*context[\s_-]*data|tool[\s_-]*result|memory[\s_-]*notes)\b[^>]*>",
    re.IGNORECASE,
)
_BOILERPLATE = (SUMMARY_HEADER.strip(), PINNED_HEADER.strip())
_ATTACHED = re.compile(r'<attached_file path="([^"]*)"')
_ENTITIES = (("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def _unescape(value: str) -> str:
    """An attribute's value as it was before ``escape_attribute``."""
    for entity, char in _ENTITIES:
        value = value.replace(entity, char)
    return value


def is_carried(message: Mapping[str, Any]) -> bool:
    """A block the harness placed in the user's role (a compaction summary, the pins)."""
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, str)
        and (content.startswith(SUMMARY_OPEN) or content.startswith(PINNED_HEADER))
    )


def own_user_text(message: Mapping[str, Any]) -> str | None:
    """The text of a message the user typed, as typed (``@path`` attachments not expanded;
    None for any other message)."""
    if message.get("role") != "user" or is_carried(message):
        return None
    shown = message.get(SHOWN)
    return shown if isinstance(shown, str) else text_of(message)


def attached_paths(message: Mapping[str, Any]) -> list[str]:
    """The paths of the files (or directories) attached with ``@path`` to a user message."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str) or (
            "<attached_file" not in content):
        return []
    return [_unescape(path) for path in _ATTACHED.findall(content)]


def typed_with_labels(message: Mapping[str, Any]) -> str | None:
    """What the user typed, with ``[attached: a.py]`` for the files sent with it (never
    their content or tags); None for any other message."""
    text = own_user_text(message)
    if text is None:
        return None
    paths = attached_paths(message)
    return text + (f" [attached: {', '.join(paths)}]" if paths else "")


def result_label(content: str) -> str:
    """A tool result as a short label: its first line without the data tags, and how many
    lines follow (``+3 lines``)."""
    lines = [line for line in _TAGS.sub("", content).split("\n") if line.strip()]
    if not lines:
        return "(no output)"
    more = len(lines) - 1
    first = one_line(lines[0])
    return first + (f" (+{more} line{'s' if more > 1 else ''})" if more else "")


def latest_user_text(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """The last thing the user typed among ``messages`` (None if nothing)."""
    found = None
    for message in messages:
        text = own_user_text(message)
        if text is not None and text.strip():
            found = text
    return found


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line for a listing: data tags and their headers removed, whitespace
    folded, at most ``limit`` characters (an ellipsis marks a cut)."""
    if (  # already one clean line (a stored preview, most titles): nothing to do
        len(text) <= limit
        and text.isprintable()
        and "<" not in text
        and "  " not in text
        and text == text.strip()
        and not any(header in text for header in _BOILERPLATE)
    ):
        return text
    text = _TAGS.sub(" ", text)
    for header in _BOILERPLATE:
        text = text.replace(header, " ")
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def clean_title(text: str) -> str:
    """A title as it is stored: one line, without terminal controls (each is a space) or the
    data tags, whitespace folded."""
    return one_line(_CONTROLS.sub(" ", text), 10_000)
