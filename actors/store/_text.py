"""What the search index holds, for both backends: a message's text and a session's text.

A message is indexed by :func:`indexed_text` (its content plus tool-call names and
arguments, cut at :data:`MAX_INDEXED_CHARS`; the transcript keeps everything), a session by
:func:`session_text` (title, summary and compaction summaries). Matching is a
case-insensitive substring test; :func:`like_pattern` writes one for ``LIKE``. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actors.core.messages import text_of

MAX_INDEXED_CHARS = 100_000  # text indexed for search per message (the transcript keeps all)


def indexed_text(message: Mapping[str, Any]) -> str:
    """The searchable text of one message ("" when it has none)."""
    return text_of(message)[:MAX_INDEXED_CHARS]


def session_text(title: str, summary: str, compaction_summaries: Iterable[str]) -> str:
    """The searchable text of a session apart from its messages."""
    return "\n".join([title, summary, *compaction_summaries])


def like_pattern(term: str) -> str:
    """``%term%`` for ``LIKE`` with backslash as the escape character."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
