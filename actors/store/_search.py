"""Search, for both backends: what a query means, how sessions are ranked, and running it.

A session matches a query when every word (``\\w+``, lowercased) occurs as a case-insensitive
substring in its title, summary, compaction summaries or any transcript message. Per word, a
session scores ``log(1 + matching messages)``, plus :data:`SESSION_TEXT_BONUS` when its title,
summary or a compaction summary matches; the scores of the words add up and ties go to the
most recently updated session. Each result carries a snippet around a match.

Only *finding* one word differs per backend (SQLite's trigram FTS5, PostgreSQL's pg_trgm):
that is the :class:`~actors.store._parts.SearchIndex` part. :func:`search` runs a query
inside the caller's read transaction; the rest are pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from actors.store._parts import Conn, SearchIndex
from actors.store._results import FoundSession
from actors.store._rows import LISTED, fetch_all, listed

SNIPPET_RADIUS = 60
SESSION_TEXT_BONUS = 3.0


#: How well one session matches one word, and where to cut its snippet from:
#: ``(score, kind, key)``, kind "message" (key: the message's transcript row, mid) or
#: "session" (key: the session's row, rid). A plain tuple: a common word makes thousands.
Hit = tuple[float, str, int]


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query``, lowercased, longest first (most selective first)."""
    return sorted(set(re.findall(r"\w+", query.lower())), key=len, reverse=True)


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


def search(
    conn: Conn,
    index: SearchIndex,
    query: str,
    *,
    include_archived: bool,
    limit: int,
    project_root: str | None = None,
) -> list[FoundSession]:
    """The best ``limit`` sessions matching ``query`` (listing entries with a ``snippet``,
    and ``message``: the number of the message it was cut from, None for the title or
    summary), only those of ``project_root`` when given.

    The words are looked up most selective first, and a session missing one word is dropped
    before the next is counted. Session rows are read only for the results returned.
    """
    terms = query_terms(query)
    if not terms:
        return []
    scores: dict[int, float] = {}
    shown: dict[int, Hit] = {}
    for n, term in enumerate(terms):
        hits = term_hits(index.message_matches(conn, term), index.session_matches(conn, term))
        if n:
            hits = {rid: hit for rid, hit in hits.items() if rid in scores}
        scores = {rid: scores.get(rid, 0.0) + hit[0] for rid, hit in hits.items()}
        for rid, hit in hits.items():
            shown.setdefault(rid, hit)
        if not scores:
            return []
    among, params = index.rid_among(list(scores))
    recency = {
        rid: updated
        for rid, updated, archived, project in fetch_all(
            conn, f"SELECT rid, updated_at, archived, project_root FROM sessions WHERE rid {among}",
            params,
        )
        if (include_archived or not archived)
        and (project_root is None or project == project_root)
    }
    ranked = sorted(recency, key=recency.__getitem__, reverse=True)
    ranked = sorted(ranked, key=scores.__getitem__, reverse=True)[:limit]
    if not ranked:
        return []
    items = {
        row[0]: listed(row[1:])
        for row in fetch_all(
            conn,
            f"SELECT rid, {LISTED} FROM sessions WHERE rid IN ({','.join('?' * len(ranked))})",
            ranked,
        )
    }
    texts = {
        kind: index.texts(conn, kind, [shown[rid][2] for rid in ranked if shown[rid][1] == kind])
        for kind in ("message", "session")
    }
    hit_mids = [shown[rid][2] for rid in ranked if shown[rid][1] == "message"]
    numbers = dict(conn.execute(
        f"SELECT mid, seq + 1 FROM transcript WHERE mid IN ({','.join('?' * len(hit_mids))})",
        hit_mids,
    ).fetchall()) if hit_mids else {}
    results = []
    for rid in ranked:
        _, kind, key = shown[rid]
        results.append(FoundSession(
            **items[rid], snippet=snippet(texts[kind].get(key, ""), terms),
            message=numbers.get(key) if kind == "message" else None,
        ))
    return results
