"""The extend rule, and the cache that makes checking it cost only what was appended.

**The rule.** A checkpoint gives the whole working context; it must *extend* the saved one:
the saved messages first, unchanged, then the new ones. Only compaction and recovery replace
the context (``replace_context``). A checkpoint that breaks the rule is refused with
:class:`ContextConflict` and writes nothing.

**The cache.** Checking the rule naively would read and compare every saved message on every
checkpoint. Instead each store instance keeps, per session, the saved context as it last read
or wrote it (:class:`SavedContext`): the caller's own message objects and their canonical JSON.
The caller passes the same objects again (the supervisor appends to its list), so the check is
one pointer comparison per message, and only a message that is a different object is compared
by value. An entry is used only while it matches the session row's ``(rid, context_version,
context_len)``: the version moves when the context is replaced, the length when it is
extended, and the rid when a session is deleted and created again. A change made by another
process, another machine or another store instance is so noticed and the context read back
once.

The caveat of the fast path: a message object that was already checkpointed is treated as
immutable. Mutating it in place and checkpointing again is not detected (the database keeps
the saved version, which is the truth on the next load).

Pure bookkeeping, no I/O: the store reads the texts back when :meth:`ContextCache.current`
asks, and calls :meth:`Extension.commit` only after its transaction committed, so the cache is
never ahead of the database. Not thread-safe on its own: the store uses it inside its
transactions, which hold the database's lock.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from actors.core.errors import ContextConflict, CorruptSession
from actors.core.messages import Message, encode, to_plain


@dataclass
class SavedContext:
    """The saved working context of one session as this store instance last saw it."""

    rid: int
    version: int
    objs: list[Any]  # the caller's message objects; None where read back and not yet parsed
    texts: list[str]  # their canonical JSON, as stored

    def parsed(self, loads: Callable[[str, str], Any]) -> list[Message]:
        """The messages as objects, parsing (once) those read back from the database."""
        for i, obj in enumerate(self.objs):
            if obj is None:
                self.objs[i] = loads(self.texts[i], f"context message {i}")
        return self.objs


@dataclass
class ContextCache:
    """Session id -> :class:`SavedContext`, for one store instance."""

    _saved: dict[str, SavedContext] = field(default_factory=dict)

    def current(
        self,
        session_id: str,
        *,
        rid: int,
        version: int,
        length: int,
        read: Callable[[], Sequence[str | None]],
    ) -> SavedContext:
        """The saved context of the row ``(rid, version, length)``: the cached one when it
        is that row's, else ``read()`` (the stored texts in order) once.

        Raises :class:`CorruptSession` when what was read does not match the row.
        """
        saved = self._saved.get(session_id)
        if (
            saved is not None
            and saved.version == version
            and saved.rid == rid
            and len(saved.texts) == length
        ):
            return saved
        texts = list(read())
        if len(texts) != length or None in texts:
            raise CorruptSession(session_id, "the working context refers to missing messages")
        stored = cast(list[str], texts)
        saved = self._saved[session_id] = SavedContext(rid, version, [None] * length, stored)
        return saved

    def replaced(self, session_id: str, saved: SavedContext) -> None:
        """The context was replaced (compaction, recovery) and the new one committed."""
        self._saved[session_id] = saved

    def forget(self, session_id: str) -> None:
        """The session is gone or new: nothing cached is its."""
        self._saved.pop(session_id, None)


@dataclass
class Extension:
    """What a checkpoint appends to a saved context (see :func:`extension`)."""

    saved: SavedContext
    prefix: list[Any] | None  # the caller's objects for the saved part; None: the cached ones
    new_objs: list[Any]
    new_plain: list[Message]
    new_texts: list[str]

    def commit(self) -> int:
        """Bring the cache up to date; call only after the transaction committed. Returns
        the number of messages appended."""
        saved = self.saved
        if self.prefix is not None:
            saved.objs[:] = self.prefix  # equal by value; keep the caller's objects
        saved.objs.extend(self.new_objs)
        saved.texts.extend(self.new_texts)
        return len(self.new_texts)


def extension(saved: SavedContext, incoming: list[Any], session_id: str) -> Extension:
    """Check that ``incoming`` extends ``saved``; the messages to append, encoded.

    Raises :class:`ContextConflict` naming the first message that differs, or saying that
    fewer messages were given than are saved. Raises :class:`TypeError` for a message that
    cannot be persisted. Costs a pointer comparison per saved message, plus a value
    comparison for each one that is not the cached object.
    """
    n = len(saved.texts)
    if len(incoming) < n:
        raise ContextConflict(
            f"Context changed unexpectedly for session '{session_id}' ({len(incoming)} "
            f"messages given, {n} saved); only compaction may replace it."
        )
    prefix: list[Any] | None = None
    if not all(map(operator.is_, incoming, saved.objs)):  # stops at the saved length
        prefix = incoming[:n]
        for i, (given, kept) in enumerate(zip(prefix, saved.objs, strict=True)):
            if given is not kept and encode(to_plain(given)) != saved.texts[i]:
                raise ContextConflict(
                    f"Context changed unexpectedly for session '{session_id}' at message "
                    f"{i}; use compaction to replace it."
                )
    new_objs = incoming[n:]
    new_plain = [to_plain(m) for m in new_objs]
    new_texts = [encode(m) for m in new_plain]
    return Extension(saved, prefix, new_objs, new_plain, new_texts)
