"""The search index, behind the checkpoints: messages committed "not yet indexed" are
indexed later, in batches of their own (docs/storage.md, "The search index follows the
checkpoints").

The checkpoint writer calls :func:`index_pending` when it is idle; a search catches up first
(:func:`catch_up_before_reading`), so results are complete; a write that is not a
checkpoint indexes one batch before it returns (:func:`index_now`). Functions over a store
instance's :class:`~actors.store._shared.Shared`; synchronous, one transaction per batch.
"""

from __future__ import annotations

import contextlib
import json

from actors.core.errors import StorageError
from actors.store._shared import Shared
from actors.store._text import indexed_text

INDEX_BATCH = 256  # messages indexed per transaction of the background indexer


def index_pending(shared: Shared, limit: int = INDEX_BATCH) -> bool:
    """Index up to ``limit`` transcript messages that are not in the search index yet, in
    one transaction of their own; True when none remain.

    The transaction is not synced on its own (the next durable commit syncs it; a crash
    loses at most the indexing, whose marks are then still there), so it costs CPU, not an
    ``fsync``. Marks are claimed inside the transaction: two indexers never index a message
    twice. A damaged message (not JSON) is left out: ``--doctor`` reports it, and the
    messages after it, of every session, are indexed.
    """
    index = shared.index
    with shared.db.write(durable=False) as conn:
        rows = index.claim_pending(conn, limit)
        texts: dict[int, list[tuple[int, str]]] = {}
        for mid, rid, body in rows:
            if rid is None or body is None:  # its session was deleted since
                continue
            try:
                text = indexed_text(json.loads(body))
            except (TypeError, ValueError, AttributeError, RecursionError):
                continue
            if text:
                texts.setdefault(rid, []).append((mid, text))
        for rid, items in texts.items():
            index.add_messages(conn, rid, items)
    done = len(rows) < limit
    if done:
        shared.unindexed = 0
    return done


def catch_up(shared: Shared) -> None:
    """Index every message not yet indexed (batches of :data:`INDEX_BATCH`)."""
    while not index_pending(shared):
        pass


def index_now(shared: Shared) -> None:
    """After a write that is not a checkpoint: one batch, so that a small write's messages
    are indexed when it returns (a bigger backlog, e.g. left by a crash, is the indexer's
    and search's). Its data is committed already; an index that cannot be written now (a
    full disk, a busy or read-only store) stays marked and is caught up later."""
    with contextlib.suppress(StorageError):
        index_pending(shared)


def catch_up_before_reading(shared: Shared) -> None:
    """Search sees every committed message: what is still marked is indexed first. A store
    that cannot be written (read-only, busy) is searched as its index stands."""
    if shared.read_only:
        return
    with shared.db.read() as conn:
        pending = shared.index.has_pending(conn)
    if pending:
        index_now(shared)


__all__ = ["INDEX_BATCH", "catch_up", "catch_up_before_reading", "index_now", "index_pending"]
