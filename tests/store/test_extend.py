"""The extend rule and its context cache (actors/store/_extend.py), on their own: no database,
the stored messages are what ``read`` returns."""

from __future__ import annotations

from typing import Any

import pytest

from actors.core.errors import ContextConflict, CorruptSession
from actors.core.messages import encode
from actors.core.stored import StoredMessages
from actors.store._extend import ContextCache, SavedContext, appended, extension


def msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


SYSTEM = msg("system", "s")


def saved_of(*messages: dict[str, Any], rid: int = 1, version: int = 0) -> SavedContext:
    """A context as the store keeps it after writing ``messages`` (the caller's objects)."""
    return SavedContext(rid, version, StoredMessages(messages))


def test_appending_to_the_same_objects_writes_only_the_new_ones() -> None:
    first = msg("user", "a")
    saved = saved_of(SYSTEM, first)
    incoming = [SYSTEM, first, msg("assistant", "b"), msg("user", "c")]
    delta = extension(saved, incoming, "sid")
    assert delta.new_texts == [encode(m) for m in incoming[2:]]
    assert delta.new_plain == incoming[2:]
    assert delta.prefix is None  # every saved message was the cached object
    assert saved.objs == [SYSTEM, first]  # nothing changes before commit
    assert delta.commit() == 2
    assert saved.objs == incoming and all(a is b for a, b in zip(saved.objs, incoming, strict=True))


def test_the_cache_holds_the_objects_not_their_json() -> None:
    saved = saved_of(SYSTEM)
    extension(saved, [SYSTEM, msg("user", "a")], "sid").commit()
    assert vars(saved).keys() == {"rid", "version", "objs"}


def test_an_append_encodes_the_new_messages_and_extends_the_cache() -> None:
    saved = saved_of(SYSTEM)
    new = [msg("user", "a"), msg("assistant", "b")]
    delta = appended(saved, new)
    assert delta.new_texts == [encode(m) for m in new] and saved.objs == [SYSTEM]
    assert delta.commit() == 2
    assert saved.objs == [SYSTEM, *new] and saved.objs[1] is new[0]
    assert appended(None, new).commit() == 2  # nothing cached: nothing to update


def test_equal_messages_that_are_other_objects_extend_and_replace_the_cached_ones() -> None:
    saved = saved_of(SYSTEM, msg("user", "a"))
    incoming = [dict(SYSTEM), msg("user", "a"), msg("assistant", "b")]
    delta = extension(saved, incoming, "sid")
    assert delta.new_plain == [msg("assistant", "b")]
    delta.commit()
    # next time: pointer checks
    assert all(a is b for a, b in zip(saved.objs, incoming, strict=True))


def test_messages_read_back_compare_by_their_canonical_json() -> None:
    saved = SavedContext(1, 0, StoredMessages([dict(SYSTEM), msg("user", "a")]))  # other objects
    delta = extension(saved, [SYSTEM, msg("user", "a"), msg("user", "b")], "sid")
    assert len(delta.new_texts) == 1
    assert saved.starts_with([SYSTEM]) and not saved.starts_with([msg("user", "a")])


def test_rows_not_parsed_yet_compare_by_their_stored_text_unparsed() -> None:
    def parse(text: str, position: int) -> dict[str, Any]:
        raise AssertionError("parsed")

    rows = StoredMessages.read([encode(SYSTEM), encode(msg("user", "a"))], ["", ""], [1, 1],
                               parse)
    saved = SavedContext(1, 0, rows)
    delta = extension(saved, [dict(SYSTEM), msg("user", "a"), msg("user", "b")], "sid")
    assert delta.new_plain == [msg("user", "b")] and rows.parsed() == 0
    with pytest.raises(ContextConflict, match="at message 1"):
        extension(saved, [SYSTEM, msg("user", "b")], "sid")


def test_a_changed_message_is_refused_naming_it() -> None:
    saved = saved_of(SYSTEM, msg("user", "a"), msg("assistant", "b"))
    with pytest.raises(ContextConflict, match="'sid' at message 1"):
        extension(saved, [SYSTEM, msg("user", "changed"), msg("assistant", "b")], "sid")


def test_fewer_messages_than_saved_are_refused() -> None:
    saved = saved_of(SYSTEM, msg("user", "a"))
    with pytest.raises(ContextConflict, match=r"1 messages given, 2 saved\); only compaction"):
        extension(saved, [SYSTEM], "sid")


def test_sdk_objects_are_dumped_and_other_objects_refused() -> None:
    class Dumpable:
        def model_dump(self, exclude_none: bool) -> dict[str, Any]:
            return msg("assistant", "from the SDK")

    saved = saved_of(SYSTEM)
    delta = extension(saved, [SYSTEM, Dumpable()], "sid")
    assert delta.new_plain == [msg("assistant", "from the SDK")]
    with pytest.raises(TypeError, match="Cannot persist message of type int"):
        extension(saved, [SYSTEM, 42], "sid")


def test_an_uncommitted_extension_leaves_the_cache_as_it_was() -> None:
    saved = saved_of(SYSTEM)
    extension(saved, [SYSTEM, msg("user", "lost")], "sid")  # its transaction failed
    delta = extension(saved, [SYSTEM, msg("user", "kept")], "sid")
    assert delta.new_plain == [msg("user", "kept")]


class Reads:
    """The stored context, counting how often the cache asks for it."""

    def __init__(self, *messages: dict[str, Any]) -> None:
        self.texts: list[dict[str, Any] | None] = list(messages)
        self.count = 0

    def __call__(self) -> StoredMessages | None:
        self.count += 1
        if any(m is None for m in self.texts):
            return None
        return StoredMessages([dict(m) for m in self.texts if m is not None])


def test_the_cache_reads_a_context_back_once_while_the_row_matches() -> None:
    cache = ContextCache()
    stored = Reads(SYSTEM, msg("user", "a"))
    first = cache.current("sid", rid=1, version=0, length=2, read=stored)
    again = cache.current("sid", rid=1, version=0, length=2, read=stored)
    assert first is again and stored.count == 1
    assert first.objs == stored.texts


@pytest.mark.parametrize(
    "row", [{"rid": 1, "version": 1, "length": 2},  # replaced (compaction, recovery)
            {"rid": 1, "version": 0, "length": 3},  # extended by someone else
            {"rid": 2, "version": 0, "length": 2}],  # deleted and created again
)
def test_the_cache_reloads_when_the_row_moved(row: dict[str, int]) -> None:
    cache = ContextCache()
    stored = Reads(SYSTEM, msg("user", "a"))
    cache.current("sid", rid=1, version=0, length=2, read=stored)
    stored.texts = [SYSTEM, msg("user", "b"), msg("user", "c")][: row["length"]]
    reloaded = cache.current("sid", read=stored, **row)
    assert stored.count == 2 and reloaded.objs == stored.texts


def test_the_cache_refuses_a_context_that_does_not_match_its_row() -> None:
    cache = ContextCache()
    with pytest.raises(CorruptSession, match="refers to missing messages"):
        cache.current("sid", rid=1, version=0, length=3, read=Reads(SYSTEM))
    stored = Reads(SYSTEM, SYSTEM)
    stored.texts[1] = None  # a context row pointing at no transcript row
    with pytest.raises(CorruptSession, match="Session 'sid' is damaged"):
        cache.current("sid", rid=1, version=0, length=2, read=stored)


def test_replaced_and_forgotten_contexts() -> None:
    cache = ContextCache()
    stored = Reads(SYSTEM)
    new = saved_of(SYSTEM, msg("user", "summary"), version=1)
    cache.replaced("sid", new)
    assert cache.current("sid", rid=1, version=1, length=2, read=stored) is new
    assert stored.count == 0
    cache.forget("sid")
    cache.current("sid", rid=1, version=1, length=1, read=stored)
    assert stored.count == 1
