"""The rules of compaction, as pure functions over messages: where to split, what replaces
the older part, and the plan the compactor answers with.

The split is at the latest user-turn boundary: the system prompt and everything from the latest
user message onward are kept as they are (so no tool call is separated from its result); the
older turns (and any earlier summary) are summarised. The summary enters the context as a user
message wrapped in ``<session_context_data>``; pinned user instructions are carried verbatim in
their own message. The transcript is never touched.

A resumed context is stored rows parsed only where read (:mod:`actors.core.stored`), and these
rules read no more than they need: the split reads each message's role (from its stored text)
and the few blocks a compaction carried; fitting the older turns reads their saved token
estimates; only the messages that go into the summary request and the kept latest turn are
parsed. The older part and the basis of a plan stay stored rows (:func:`part`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.core.budget import Usage, estimate_message, estimate_messages
from actors.core.carried import PINNED_HEADER, SUMMARY_CLOSE, SUMMARY_HEADER, SUMMARY_OPEN
from actors.core.data_tags import escape_data
from actors.core.messages import Message
from actors.core.stored import StoredMessages


def summary_message(summary: str) -> Message:
    """The summary as data; a closing tag inside it cannot end the data block early."""
    safe = escape_data(summary)
    return {"role": "user", "content": SUMMARY_OPEN + SUMMARY_HEADER + safe + SUMMARY_CLOSE}


def pinned_message(pinned: Sequence[str]) -> Message:
    return {"role": "user", "content": PINNED_HEADER + "\n".join(f"- {p}" for p in pinned)}


def _is_carried(message: Message) -> bool:
    """A summary or pinned block placed by an earlier compaction."""
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and (
        content.startswith(SUMMARY_OPEN) or content.startswith(PINNED_HEADER)
    )


def part(messages: Sequence[Message], start: int, stop: int) -> Sequence[Message]:
    """``messages[start:stop]``; of stored messages, stored messages (nothing parsed)."""
    if isinstance(messages, StoredMessages):
        return messages.view(start, stop)
    return messages[start:stop]


def _role(messages: Sequence[Message], position: int) -> Any:
    if isinstance(messages, StoredMessages):
        return messages.role(position)  # from the stored text: nothing parsed
    return messages[position].get("role")


def _estimate(messages: Sequence[Message], position: int) -> int:
    if isinstance(messages, StoredMessages):
        return messages.estimate(position)  # the estimate saved with the row
    return estimate_message(messages[position])


@dataclass(frozen=True)
class Split:
    head_end: int  # messages[:head_end]: system prompt and blocks carried by a compaction
    cut: int  # messages[cut:]: the latest user turn, kept as it is

    def older(self, messages: Sequence[Message]) -> Sequence[Message]:
        """What the summary replaces: an earlier summary and the older turns (of stored
        messages, stored messages: parsed only where read)."""
        earlier = [m for m in messages[1 : self.head_end] if m["content"].startswith(SUMMARY_OPEN)]
        turns = part(messages, self.head_end, self.cut)
        if isinstance(turns, StoredMessages):
            turns[0:0] = earlier
            return turns
        return earlier + list(turns)


def split_point(messages: Sequence[Message]) -> Split | None:
    """Where to split, or None when there is nothing older than the latest user turn. Reads
    the roles of the messages after the head, from the end (of stored messages, from their
    stored text), and the head's messages themselves."""
    head_end = 1
    while head_end < len(messages) and _is_carried(messages[head_end]):
        head_end += 1
    for cut in range(len(messages) - 1, head_end, -1):
        if _role(messages, cut) == "user":
            return Split(head_end, cut)
    return None


def compacted(
    messages: Sequence[Message], split: Split, summary: str, pinned: Sequence[str]
) -> list[Message]:
    """``messages`` with everything between the system prompt and ``split.cut`` replaced by
    the pinned block and the summary."""
    head: list[Message] = [messages[0]]
    if pinned:
        head.append(pinned_message(pinned))
    head.append(summary_message(summary))
    return head + list(messages[split.cut :])


def fit_for_summary(older: Sequence[Message], limit: int) -> list[Message]:
    """The data for the summary call, within ``limit`` estimated tokens.

    The oldest messages go first (an earlier summary is kept at the front); what is left out
    is named in a note and stays in the transcript, searchable. Only the messages sent (and
    the first, to see whether it is an earlier summary) are read; the sizes are the
    estimates (of stored messages, those saved with them).
    """
    if not older or estimate_messages(older) <= limit:
        return list(older)
    skip = 1 if str(older[0].get("content", "")).startswith(SUMMARY_OPEN) else 0
    size = estimate_message(older[0]) if skip else 0
    keep = len(older)  # older[keep:] is sent, after the earlier summary
    while keep > skip and size + (tokens := _estimate(older, keep - 1)) <= limit:
        size += tokens
        keep -= 1
    note = {"role": "note", "content": f"{keep - skip} older messages omitted from this data "
            "(too long to summarise at once); they remain in the session transcript."}
    return [*older[:skip], note, *older[keep:]]


@dataclass(frozen=True)
class CompactionPlan:
    """The compactor's answer when it has a summary that makes the context smaller.

    ``basis`` is the part of the context the summary was made from (everything before
    ``split.cut``, as the compactor saw it); the plan applies only while the context still
    starts with it. ``usage`` is the summary call's, paid for whether or not it is applied.
    """

    split: Split
    basis: Sequence[Message]  # of stored messages, stored messages (compared unparsed)
    summary: str
    before_tokens: int
    after_tokens: int
    usage: Usage | None = None


@dataclass(frozen=True)
class NoCompaction:
    """The compactor's answer when there is nothing to apply, with the reason for the user."""

    reason: str
    usage: Usage | None = None


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did, for the user (``\\compact``) and the notices."""

    applied: bool
    message: str
    before_tokens: int = 0
    after_tokens: int = 0
