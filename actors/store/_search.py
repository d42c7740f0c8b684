"""What a search means, shared by both backends: the words of a query, the score, snippets.

A session matches a query when every word (``\\w+``, lowercased) occurs as a case-insensitive
substring in its title, summary, compaction summaries or any transcript message. Per word, a
session scores ``log(1 + matching messages)``, plus :data:`SESSION_TEXT_BONUS` when its title,
summary or a compaction summary matches; the scores of the words add up and ties go to the
most recently updated session. Only *finding* the matches differs per backend (SQLite's
trigram FTS5, PostgreSQL's pg_trgm); pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

SNIPPET_RADIUS = 60
SESSION_TEXT_BONUS = 3.0
MAX_INDEXED_CHARS = 100_000  # text indexed for search per message (the transcript keeps all)


#: How well one session matches one word, and where to cut its snippet from:
#: ``(score, kind, key)``, kind "message" (key: the message's transcript row, mid) or
#: "session" (key: the session's row, rid). A plain tuple: a common word makes thousands.
Hit = tuple[float, str, int]


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query``, lowercased, longest first (most selective first)."""
    return sorted(set(re.findall(r"\w+", query.lower())), key=len, reverse=True)


def like_pattern(term: str) -> str:
    """``%term%`` for ``LIKE``/``ILIKE`` with backslash as the escape character."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def session_text(title: str, summary: str, compaction_summaries: Iterable[str]) -> str:
    """The searchable text of a session apart from its messages."""
    return "\n".join([title, summary, *compaction_summaries])


def term_hits(
    message_matches: Iterable[tuple[int, int, int]], session_matches: Iterable[int]
) -> dict[int, Hit]:
    """Combine one word's matches: ``(rid, matching messages, one mid)`` rows and the rids
    whose session text matches, into ``{rid: Hit}``."""
    log1p = math.log1p
    hits = {rid: (log1p(count), "message", mid) for rid, count, mid in message_matches}
    for rid in session_matches:
        score, kind, key = hits.get(rid, (0.0, "session", rid))
        hits[rid] = (score + SESSION_TEXT_BONUS, kind, key)
    return hits


def snippet(text: str, terms: Sequence[str]) -> str:
    """About three radii of ``text`` on one line around the first match of any term."""
    lowered = text.lower()
    at = min((i for i in (lowered.find(t) for t in terms) if i >= 0), default=0)
    start = max(0, at - SNIPPET_RADIUS)
    end = min(len(text), at + SNIPPET_RADIUS * 2)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")
