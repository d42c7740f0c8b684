"""A working context read back from the store, parsed only where it is read.

A resumed session's context can hold tens of thousands of messages, about 1 KB of JSON each;
parsing them all costs more than reading them. :class:`StoredMessages` holds each message
as the store read it (its canonical JSON, the :func:`~actors.core.messages.shape_of` text
and the token estimate saved beside it) and parses a message the first time someone reads
it, once: every copy of the sequence shares the parse, and the same position always gives
the same dict. What a resume itself needs (the pairing rule, the context's size) comes from
the saved facts, so a resume parses nothing.

It is a mutable sequence of plain message dicts, like the list it stands in for: appending,
iterating, indexing and slicing (a slice is a list) work as on a list; messages added are
kept as given. Treat the dicts as immutable, as every message of a working context.

A message whose text does not parse raises what the ``parse`` function given raises (the
store's: :class:`~actors.core.errors.CorruptSession` naming the session), when it is read.

One sequence has one owner (the supervisor's context, the store's cache under its lock); the
rows two copies share are parsed under a lock of their own, so a message is parsed once and
is the same dict in every copy whichever thread reads it first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, MutableSequence, Sequence
from typing import Any, overload

from actors.core.budget import estimate_message
from actors.core.messages import (
    REASONING,
    SHOWN,
    Facts,
    Message,
    encode,
    facts_of,
    facts_of_shape,
)

_PLAIN: Facts = (False, None, ())  # the facts of most messages
_SHOWN_KEY = f'"{SHOWN}":'  # the harness-only key, as canonical JSON writes a key
_REASONING_KEY = f'"{REASONING}":'  # a key a request sends only at times
_ROLE = '{"role":"'  # how the canonical JSON of a message built role first begins


class _Rows:
    """The stored messages as read, shared by every copy of a sequence: their JSON (None
    once parsed), facts, token estimates and parsed dicts (None until parsed). Columns of
    plain lists rather than an object per message: a resume reads tens of thousands, and
    neither strings nor ints are objects the garbage collector walks."""

    __slots__ = ("lock", "messages", "parse", "shapes", "texts", "tokens")

    def __init__(self, texts: list[str | None], shapes: list[str | None],
                 tokens: list[int | None], parse: Callable[[str, int], Message]) -> None:
        self.texts = texts
        self.shapes = shapes
        self.tokens = tokens
        self.messages: list[Message | None] = [None] * len(texts)
        self.parse = parse
        self.lock = threading.Lock()  # the store's copy is read in its worker threads

    def message(self, index: int, position: int) -> Message:
        """The parsed message of row ``index``: parsed once, whichever thread asks first."""
        message = self.messages[index]
        if message is None:
            with self.lock:
                message = self.messages[index]
                if message is None:
                    text = self.texts[index]
                    assert text is not None
                    message = self.messages[index] = self.parse(text, position)
                    self.texts[index] = None  # one copy of each message in memory
        return message


class StoredMessages(MutableSequence[Message]):
    """Messages, some of them still stored rows parsed on first read (see the module)."""

    __slots__ = ("_items", "_rows")

    def __init__(self, items: Iterable[Message] = (), rows: _Rows | None = None,
                 indexes: Iterable[Message | int] | None = None) -> None:
        # each item: a message dict, or (an int) the index of a stored row in ``rows``
        self._items: list[Message | int] = list(items) if indexes is None else list(indexes)
        self._rows = rows

    @classmethod
    def read(
        cls,
        texts: list[str | None],
        shapes: list[str | None],
        tokens: list[int | None],
        parse: Callable[[str, int], Message],
    ) -> StoredMessages:
        """The messages of these stored columns (JSON, facts, token estimates), unparsed;
        ``parse(text, position)`` parses one when it is first read."""
        return cls(rows=_Rows(texts, shapes, tokens, parse), indexes=range(len(texts)))

    # -- reading without parsing ----------------------------------------------------------

    def facts(self) -> Iterator[Facts]:
        """The pairing rule's facts of every message, in order; a row is parsed only when
        its facts were not saved with it."""
        rows = self._rows
        for position, item in enumerate(self._items):
            if type(item) is int:
                assert rows is not None
                message = rows.messages[item]
                shape = rows.shapes[item]
                if message is not None:
                    yield facts_of(message)
                elif shape == "":
                    yield _PLAIN
                elif shape is not None:
                    yield facts_of_shape(shape)
                else:
                    yield facts_of(rows.message(item, position))
            else:
                yield facts_of(item)  # type: ignore[arg-type]

    def estimate_tokens(self) -> int:
        """The estimated tokens of every message (``estimate_messages``), from the estimates
        saved with the rows where they are."""
        rows = self._rows
        total = 0
        for position, item in enumerate(self._items):
            if type(item) is int:
                assert rows is not None
                saved = rows.tokens[item]
                total += (saved if saved is not None
                          else estimate_message(rows.message(item, position)))
            else:
                total += estimate_message(item)  # type: ignore[arg-type]
        return total

    def estimate(self, position: int) -> int:
        """The estimated tokens of one message (``estimate_message``), from the estimate
        saved with its row where there is one."""
        item = self._items[position]
        if type(item) is int:
            assert self._rows is not None
            saved = self._rows.tokens[item]
            return saved if saved is not None else estimate_message(self._message(position, item))
        return estimate_message(item)  # type: ignore[arg-type]

    def role(self, position: int) -> Any:
        """The ``role`` of one message, read from its stored text when the text begins with
        it (every message the harness builds has its role first): ``{"role":"`` can only
        begin the top-level object's first key, and a value without a backslash ends at the
        next quote. Any other row is parsed."""
        item = self._items[position]
        if type(item) is int:
            assert self._rows is not None
            text = self._rows.texts[item]
            if text is not None and text.startswith(_ROLE):
                end = text.find('"', len(_ROLE))
                role = text[len(_ROLE) : end]
                if end > 0 and "\\" not in role:
                    return role
            return self._message(position, item).get("role")
        return item.get("role")  # type: ignore[union-attr]

    def view(self, start: int, stop: int) -> StoredMessages:
        """``self[start:stop]`` as stored messages (the rows shared, nothing parsed)."""
        return StoredMessages(rows=self._rows, indexes=self._items[start:stop])

    def same(self, position: int, other: Sequence[Message], other_position: int) -> bool:
        """Whether the message at ``position`` is the very one at ``other_position`` of
        ``other``, told without parsing: the same stored row of the same rows, or the same
        dict (False means not known to be the same: compare them by value)."""
        item = self._items[position]
        if isinstance(other, StoredMessages):
            theirs = other._items[other_position]
            if type(theirs) is int:
                if type(item) is int:
                    return other._rows is self._rows and item == theirs
                assert other._rows is not None
                return other._rows.messages[theirs] is item
        else:
            theirs = other[other_position]
        return self.is_message(position, theirs)

    def text(self, position: int) -> str:
        """The canonical JSON of one message (as stored; encoded if it was given)."""
        item = self._items[position]
        if type(item) is int:
            assert self._rows is not None
            text = self._rows.texts[item]
            return text if text is not None else encode(self._rows.message(item, position))
        return encode(item)  # type: ignore[arg-type]

    def wire(self, position: int) -> tuple[str, int, tuple[str, ...]] | None:
        """A row not parsed yet as a request sends it, without parsing it: its stored text
        (canonical JSON, which is what the model client's encoding of the parsed message
        gives, byte for byte), its saved token estimate and the ids of the calls it makes;
        None when the message must be read instead (given as a dict, parsed already, saved
        without its facts, or holding the harness-only key :data:`SHOWN`, which a request
        leaves out, or the reasoning :data:`REASONING`, which it sends only at times). Only
        such a key puts that text in canonical JSON (a quote inside a string is escaped), so
        a text without it has no such key at any depth."""
        item = self._items[position]
        if type(item) is not int:
            return None
        rows = self._rows
        assert rows is not None
        text, shape, tokens = rows.texts[item], rows.shapes[item], rows.tokens[item]
        if (text is None or shape is None or tokens is None or _SHOWN_KEY in text
                or _REASONING_KEY in text):
            return None
        return text, tokens, facts_of_shape(shape)[2] if shape else ()

    def keys(self) -> tuple[object, list[object]]:
        """What tells this sequence's messages apart without parsing them: the stored rows'
        owner (shared by every copy, None if there are none) and a key per position, the
        same in every copy whether or not the row was parsed (the dict given, or the row's
        index: an index means a row only beside the same owner)."""
        return self._rows, list(self._items)

    def is_message(self, position: int, message: object) -> bool:
        """Whether ``message`` is the very dict at ``position`` (nothing is parsed: a row
        not yet read cannot be a dict someone holds)."""
        item = self._items[position]
        if type(item) is int:
            assert self._rows is not None
            return self._rows.messages[item] is message
        return item is message

    def parsed(self) -> int:
        """How many messages are dicts now (for tests and benchmarks)."""
        rows = self._rows
        return sum(type(i) is not int or (rows is not None and rows.messages[i] is not None)
                   for i in self._items)

    def copy(self) -> StoredMessages:
        """Another sequence of the same messages (rows shared: parsed once for both)."""
        return StoredMessages(rows=self._rows, indexes=self._items)

    # -- the sequence ---------------------------------------------------------------------

    def _message(self, position: int, index: int) -> Message:
        assert self._rows is not None
        return self._rows.message(index, position)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._items)))]
        item = self._items[index]
        if type(item) is int:
            position = index if index >= 0 else index + len(self._items)
            return self._message(position, item)
        return item  # type: ignore[return-value]

    def __iter__(self) -> Iterator[Message]:
        for position, item in enumerate(self._items):
            if type(item) is int:
                yield self._message(position, item)
            else:
                yield item  # type: ignore[misc]

    def __reversed__(self) -> Iterator[Message]:
        for position in range(len(self._items) - 1, -1, -1):
            yield self[position]

    @overload
    def __setitem__(self, index: int, value: Message) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Message]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):
            self._items[index] = list(value)
        else:
            self._items[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self._items[index]

    def insert(self, index: int, value: Message) -> None:
        self._items.insert(index, value)

    def append(self, value: Message) -> None:
        self._items.append(value)

    def extend(self, values: Iterable[Message]) -> None:
        self._items.extend(values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, tuple, StoredMessages)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredMessages({len(self)} messages, {self.parsed()} parsed)"
