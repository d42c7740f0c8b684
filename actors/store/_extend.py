"""The extend rule, and the cache that makes checking it cost only what was appended.

**The rule.** A checkpoint gives the whole working context; it must *extend* the saved one:
the saved messages first, unchanged, then the new ones. Only compaction and recovery replace
the context (``replace_context``). A checkpoint that breaks the rule is refused with
:class:`ContextConflict` and writes nothing.

**The cache.** Checking the rule naively would read and compare every saved message on every
checkpoint. Instead each store instance keeps, per session, the saved context as it last read
or wrote it (:class:`SavedContext`): the message objects themselves (the caller's), or the
rows as read back (:class:`~actors.core.stored.StoredMessages`, parsed only where someone
reads them, and then as the very dicts handed out). The caller passes the same objects again (the
supervisor appends to its list), so the check is one pointer comparison per message, and only
a message that is a different object is compared by value (its canonical JSON). An entry is
used only while it matches the session row's ``(rid, context_version, context_len)``: the
version moves when the context is replaced, the length when it is extended, and the rid when
a session is deleted and created again. A change made by another process, another machine or
another store instance is so noticed and the context read back once.

**Appends** (:func:`appended`): the owner of a working context knows what it added since its
last checkpoint and how many messages the store holds; :meth:`Store.append` writes those
messages after checking only the length, with no scan of the context at all.

The caveat of the fast path: a message object that was already checkpointed, or that a load
returned, is treated as immutable. Mutating it in place and checkpointing again is not
detected (the database keeps the saved version, which is the truth on the next load).

Pure bookkeeping, no I/O: the store reads the context back when :meth:`ContextCache.current`
asks, and calls :meth:`Extension.commit` only after its transaction committed, so the cache is
never ahead of the database. Not thread-safe on its own: the store uses it inside its
transactions, which hold the database's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.core.errors import ContextConflict, CorruptSession
from actors.core.messages import Message, encode, to_plain
from actors.core.stored import StoredMessages


def _same(given: Any, kept: StoredMessages, position: int) -> bool:
    """Whether ``given`` equals the saved message at ``position`` as stored (its canonical
    JSON; a saved row not parsed yet is compared as its stored text, unparsed)."""
    return kept.is_message(position, given) or encode(to_plain(given)) == kept.text(position)


@dataclass
class SavedContext:
    """The saved working context of one session as this store instance last saw it: the
    messages in order (the caller's own objects, or stored rows parsed only when read)."""

    rid: int
    version: int
    objs: StoredMessages

    def starts_with(self, messages: Sequence[Any]) -> bool:
        """Whether the saved context starts with ``messages`` (equal as stored; stored
        messages that are its very rows are told so unparsed)."""
        kept = self.objs
        return len(messages) <= len(kept) and all(
            kept.same(i, messages, i) or _same(messages[i], kept, i)
            for i in range(len(messages))
        )


@dataclass
class ContextCache:
    """Session id -> :class:`SavedContext`, for one store instance."""

    _saved: dict[str, SavedContext] = field(default_factory=dict)

    def cached(self, session_id: str, *, rid: int, version: int, length: int
               ) -> SavedContext | None:
        """The cached context if it is the row ``(rid, version, length)``'s, else None."""
        saved = self._saved.get(session_id)
        if (
            saved is not None
            and saved.version == version
            and saved.rid == rid
            and len(saved.objs) == length
        ):
            return saved
        return None

    def current(
        self,
        session_id: str,
        *,
        rid: int,
        version: int,
        length: int,
        read: Callable[[], StoredMessages | None],
    ) -> SavedContext:
        """The saved context of the row ``(rid, version, length)``: the cached one when it
        is that row's, else ``read()`` once (the stored messages in order; None when a row
        points nowhere).

        Raises :class:`CorruptSession` when what was read does not match the row.
        """
        saved = self.cached(session_id, rid=rid, version=version, length=length)
        if saved is not None:
            return saved
        objs = read()
        if objs is None or len(objs) != length:
            raise CorruptSession(session_id, "the working context refers to missing messages")
        saved = self._saved[session_id] = SavedContext(rid, version, objs)
        return saved

    def replaced(self, session_id: str, saved: SavedContext) -> None:
        """The context was replaced (compaction, recovery) or loaded (the objects handed out)
        and the new one committed."""
        self._saved[session_id] = saved

    def forget(self, session_id: str) -> None:
        """The session is gone or new: nothing cached is its."""
        self._saved.pop(session_id, None)


@dataclass
class Extension:
    """What a checkpoint appends to a saved context (see :func:`extension`)."""

    saved: SavedContext | None  # None: nothing cached to bring up to date (an append)
    prefix: list[Any] | None  # the caller's objects for the saved part; None: the cached ones
    new_objs: list[Any]
    new_plain: list[Message]
    new_texts: list[str]

    def commit(self) -> int:
        """Bring the cache up to date; call only after the transaction committed. Returns
        the number of messages appended."""
        saved = self.saved
        if saved is not None:
            if self.prefix is not None:
                saved.objs[:] = self.prefix  # equal by value; keep the caller's objects
            saved.objs.extend(self.new_objs)
        return len(self.new_texts)


def appended(saved: SavedContext | None, new: Sequence[Any]) -> Extension:
    """The messages ``new`` appended to a context, encoded (``saved``: the cached context
    they extend, if any). Raises :class:`TypeError` for a message that cannot be persisted."""
    new_objs = list(new)
    new_plain = [to_plain(m) for m in new_objs]
    return Extension(saved, None, new_objs, new_plain, [encode(m) for m in new_plain])


def extension(saved: SavedContext, incoming: list[Any], session_id: str) -> Extension:
    """Check that ``incoming`` extends ``saved``; the messages to append, encoded.

    Raises :class:`ContextConflict` naming the first message that differs, or saying that
    fewer messages were given than are saved. Raises :class:`TypeError` for a message that
    cannot be persisted. Costs a pointer comparison per saved message, plus a value
    comparison for each one that is not the cached object.
    """
    kept = saved.objs
    n = len(kept)
    if len(incoming) < n:
        raise ContextConflict(
            f"Context changed unexpectedly for session '{session_id}' ({len(incoming)} "
            f"messages given, {n} saved); only compaction may replace it."
        )
    prefix: list[Any] | None = None
    is_message = kept.is_message
    if not all(map(is_message, range(n), incoming)):
        prefix = incoming[:n]
        for i, given in enumerate(prefix):
            if not _same(given, kept, i):
                raise ContextConflict(
                    f"Context changed unexpectedly for session '{session_id}' at message "
                    f"{i}; use compaction to replace it."
                )
    delta = appended(saved, incoming[n:])
    delta.prefix = prefix
    return delta
