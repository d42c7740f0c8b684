"""What the store's reads answer: typed, so that a caller sees the fields it may use.

Listings and search results are :class:`~typing.TypedDict` s (plain dicts at run time: they
go to JSON as they are); a session's metadata is a dataclass (:class:`SessionInfo`); the
whole record is :class:`~actors.store._records.SessionRecord`. Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from actors.core.messages import Message


class Compaction(TypedDict):
    """One compaction of a session's context: when, its size before and after, the
    summary that replaced what it dropped."""

    at: str
    before_tokens: int
    after_tokens: int
    summary: str


class ListedSession(TypedDict):
    """One entry of a listing (``--list-sessions``, the picker): the session row's
    metadata, no message read."""

    id: str
    title: str
    status: str
    created_at: str
    updated_at: str
    summary: str
    archived: bool
    project_root: str
    parent_id: str | None
    title_source: str  # "", "provisional", "model" or "user" (actors.core.titles)
    preview: str  # the latest thing the user typed (or the summary since), one line
    messages: int  # the transcript's length
    user_messages: int  # messages the user typed
    fork_point: int | None  # the parent's message number a fork was cut after


class FoundSession(ListedSession):
    """A search result: a listing entry, the text around a match, and the number of the
    message it was cut from (None: the title, summary or a compaction's summary)."""

    snippet: str
    message: int | None


@dataclass
class SessionInfo:
    """Metadata of one session without its messages (cheap: one row and a count)."""

    id: str
    title: str
    summary: str
    status: str
    archived: bool
    created_at: str
    updated_at: str
    project_root: str
    parent_id: str | None
    state: dict[str, Any]
    context_messages: int
    transcript_messages: int
    compactions: list[Compaction] = field(default_factory=list)
    fork_point: int | None = None  # the parent's message number the fork was cut after
    title_source: str = ""  # "", "provisional", "model" or "user" (actors.core.titles)
    preview: str = ""  # the latest thing the user typed, on one line
    user_messages: int = 0  # messages the user typed


@dataclass(frozen=True)
class UserMessage:
    """A message the user typed, on the current branch: its number and text."""

    number: int
    text: str


@dataclass(frozen=True)
class Rewound:
    """What a rewind did: the context now, the fork keeping what came after, and where."""

    messages: list[Message]
    fork_id: str
    before: int  # the user message the context now ends before


@dataclass
class ImportResult:
    """What happened to one file given to import: imported, skipped (id present) or error."""

    source: str
    session_id: str | None = None
    error: str | None = None
    skipped: bool = False


__all__ = ["Compaction", "FoundSession", "ImportResult", "ListedSession", "Rewound",
           "SessionInfo", "UserMessage"]
