"""Request bodies built from pieces: each message is encoded to JSON once, not every request.

A conversation's requests repeat every earlier message; encoding the whole body again for
each request costs time in proportion to the session's length (at 4,000 messages, most of a
turn's own work). :class:`EncodedMessages` keeps the JSON of the messages it was last given,
one piece per message, and the facts the client needs about them (their estimated tokens,
their tool-call ids); a request that extends the last one by the same message objects (the
supervisor appends to its context) encodes only the new messages. A request that does not
(after a compaction or a recovery) keeps the common prefix and encodes the rest.

The body is never joined into one copy (:class:`Body`): a resumed context of 20,000 messages
is 22 MB of JSON, and the joined messages, the body joined from them and what the socket
buffers while sending it were each another 22 MB. A stored row not parsed yet is kept as the
very text the store read (shared with the context, not copied), each message encoded as it
is sent, in chunks of :data:`CHUNK` bytes; the length is known ahead, so the request says
``Content-Length`` and no server sees a chunked request body.

The rule that makes this safe is the context's own: a message already in the working context
is never changed in place (a change is a new message object). The JSON is what the openai
SDK would send (``ensure_ascii=False``, compact separators, no NaN), without the keys only
the harness reads (:data:`~actors.core.messages.SHOWN`, what the user typed beside what the
model gets): they are left out here, as each message is encoded, so the caller passes its
own message objects and they are recognised request after request.

Every message's JSON has the control tokens of the served model neutralised
(:mod:`actors.core.control_tokens`: text from files, tools, attachments, summaries and
imported sessions stays text when the server tokenizes the prompt); a change of the tokens
known (learned from the server after the first requests) encodes every message again, once.

An assistant message's reasoning (:data:`~actors.core.messages.REASONING`) is sent only when
the caller says the server's template renders it, and then only on the messages of the
current turn, after the last user message (where such templates read it: Gemma 4 keeps its
chain of thought between the tool calls of one turn, and no template wants earlier turns'):
a message encoded with its reasoning is encoded again, without it, once a user message
follows it.

Pure: no I/O; not thread-safe (the model client uses it on the event loop only).
"""

from __future__ import annotations

import bisect
import json
import operator
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from actors.core.budget import estimate_message
from actors.core.control_tokens import ControlTokens
from actors.core.messages import REASONING, SHOWN, Message, call_ids_of

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
CHUNK = 64 * 1024  # bytes of body per write (asyncio's transport buffers 64 KiB before pausing)


def dumps(value: Any) -> bytes:
    """The JSON the SDK sends for ``value``."""
    return _encoder.encode(value).encode()


FAMILIES = ControlTokens()  # the common families' control tokens, for any server


def _for_wire(message: Message, reasoning: bool = False) -> Message:
    """``message`` as a request carries it: without the keys only the harness reads, and
    with its reasoning only when ``reasoning`` says so."""
    if SHOWN in message or (not reasoning and REASONING in message):
        return {key: value for key, value in message.items()
                if key != SHOWN and (reasoning or key != REASONING)}
    return message


_ROLE = '{"role":"'  # how the canonical JSON of a message built role first begins
_USER = _ROLE + 'user"'


def _is_user(messages: Sequence[Message], position: int, text: str | None = None) -> bool:
    """Whether the message at ``position`` is the user's; ``text``: its stored JSON, if it
    is a stored row (one whose role comes first is told without parsing it)."""
    if text is None:
        wire = getattr(messages, "wire", None)
        stored = wire(position) if wire is not None else None
        text = stored[0] if stored is not None else None
    if text is not None and text.startswith(_ROLE):
        return text.startswith(_USER)
    return bool(messages[position].get("role") == "user")


def _keys(messages: Sequence[Message]) -> tuple[object, Sequence[object]]:
    """The owner of the stored rows and a key per message (see
    :meth:`~actors.core.stored.StoredMessages.keys`); a plain list's keys are its dicts."""
    keys = getattr(messages, "keys", None)  # stored messages: told apart without parsing
    if keys is not None:
        origin, items = keys()
        return origin, items
    return None, messages


class Body:
    """A request's JSON body as its pieces (see the module): ``len()`` is its size in bytes,
    ``bytes()`` the whole of it, and iterating it, sync (:meth:`chunks`) or async, gives
    it in chunks of about :data:`CHUNK` bytes, encoding each message as it comes. Every
    iteration starts from the beginning, so a retry sends the same bytes again. Holds the
    pieces it was made of (immutable strings and bytes), not copies of them."""

    __slots__ = ("_ends", "_head", "_parts", "_size", "_tail")

    def __init__(self, head: bytes, parts: list[str | bytes], ends: list[int],
                 tail: bytes) -> None:
        """``ends``: where each part ends in the parts joined by commas (in bytes)."""
        self._head, self._parts, self._ends, self._tail = head, parts, ends, tail
        self._size = len(head) + (ends[-1] if ends else 0) + len(tail)

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks())

    def chunks(self) -> Iterator[bytes]:
        """The body from its start in chunks of about :data:`CHUNK` bytes: the head, the
        messages (the messages of each chunk joined in one call, their ends known ahead: no
        Python work per message; a message longer than two chunks is encoded and given a
        chunk at a time) and the tail, pieces shorter than a chunk sent together (a small
        body is one write)."""
        pending = b""
        for piece in self._pieces():
            if pending and len(pending) + len(piece) > CHUNK:
                yield pending
                pending = piece
            else:
                pending += piece
        if pending:
            yield pending

    def _pieces(self) -> Iterator[bytes]:
        parts, ends, count = self._parts, self._ends, len(self._parts)
        yield self._head
        i = 0
        while i < count:
            start = ends[i - 1] + 1 if i else 0  # where part i begins
            j = min(bisect.bisect_left(ends, start + CHUNK, i, count) + 1, count)
            comma = b"," if i else b""
            if ends[j - 1] - start > 2 * CHUNK:  # only the last of them can be that long
                if j - 1 > i:
                    j -= 1  # the long one begins the next window
                else:
                    yield from _slices(parts[i], comma)
                    i += 1
                    continue
            yield comma + _joined(parts[i:j])
            i = j
        yield self._tail

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _Chunks(self.chunks())


def _joined(window: list[str | bytes]) -> bytes:
    """The parts joined by commas, in UTF-8 (stored texts are strings, encoded parts bytes;
    a window is mostly one or the other)."""
    try:
        if isinstance(window[0], str):
            return ",".join(window).encode()  # type: ignore[arg-type]
        return b",".join(window)  # type: ignore[arg-type]
    except TypeError:  # both kinds
        return b",".join([p.encode() if isinstance(p, str) else p for p in window])


def _slices(part: str | bytes, comma: bytes) -> Iterator[bytes]:
    """One long part a chunk at a time (a string's slices encoded one by one)."""
    for start in range(0, len(part), CHUNK):
        piece = part[start : start + CHUNK]
        data = piece.encode() if isinstance(piece, str) else piece
        yield comma + data if start == 0 else data


class _Chunks:
    """:meth:`Body.chunks` as an async iterator (a plain object, not an async generator: one
    left unfinished by a failed send has nothing for the event loop to finalise)."""

    __slots__ = ("_chunks",)

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None


def _size(part: str | bytes) -> int:
    """The bytes of ``part`` in UTF-8 (a string of ASCII alone, the usual JSON, in O(1))."""
    if isinstance(part, str) and not part.isascii():
        return len(part.encode())
    return len(part)


class EncodedMessages:
    """The messages of the latest request, encoded and joined (see the module docstring)."""

    def __init__(self) -> None:
        self._origin: object = None  # the owner of the stored rows the keys index
        self._keys: list[object] = []  # per message: its dict, or its stored row's index
        self._ends: list[int] = []  # the end offset (bytes) of each message's JSON, joined
        self._estimates: list[int] = []  # estimated tokens of the messages up to each one
        self._calls: list[tuple[str, ...] | list[str]] = []  # each message's call ids
        self._parts: list[str | bytes] = []  # each message's JSON: a stored text, or encoded
        self._user: list[bool] = []  # each message: whether it is the user's
        self._reasoned: set[int] = set()  # the messages encoded with their reasoning
        self._reasoning = False  # whether the latest update sent the current turn's reasoning
        self._tokens = FAMILIES  # the control tokens the messages held are neutralised for
        self._call_ids: set[str] = set()
        self.encoded = 0  # messages encoded so far (for tests and benchmarks)
        self.taken = 0  # messages taken as stored, not parsed nor encoded (the same)

    def starts(self, messages: Sequence[Message]) -> bool:
        """Whether the messages held start with the first of these (nothing is parsed)."""
        origin, keys = _keys(messages)
        return (bool(self._keys) and bool(keys) and keys[0] is self._keys[0]
                and (origin is self._origin or type(keys[0]) is not int))

    def update(self, messages: Sequence[Message], *, reasoning: bool = False,
               tokens: ControlTokens = FAMILIES) -> None:
        """Make these the messages held, encoding only those not held already. A stored
        row not yet parsed is taken as stored (its text is what encoding it would give, its
        control tokens neutralised). ``reasoning``: send the reasoning of the current
        turn's messages; ``tokens``: the control tokens to neutralise (see the module)."""
        if tokens is not self._tokens:
            self._truncate(0)
            self._tokens = tokens
        origin, keys = _keys(messages)
        held_keys = self._keys
        held = len(held_keys)
        if origin is not self._origin:  # row indexes of other rows: none of them match
            keep = next((i for i, (a, b) in enumerate(zip(keys, held_keys, strict=False))
                         if a is not b or type(a) is int), min(held, len(keys)))
            self._truncate(keep)
        elif len(keys) >= held and all(map(operator.is_, keys, held_keys)):
            keep = held
        else:
            keep = next(
                (i for i, (a, b) in enumerate(zip(keys, held_keys, strict=False)) if a is not b),
                min(held, len(keys)),
            )
            self._truncate(keep)
        self._origin = origin
        turn = len(keys)  # where the current turn's messages begin (none of them held)
        if reasoning or self._reasoned:
            turn = self._turn_start(messages, keep)
            for position in sorted(self._reasoned):  # a user message followed them
                if position < turn or not reasoning:
                    self._encode_again(messages[position], position, reasoning=False)
            if reasoning and not self._reasoning:  # the turn's held messages gain theirs
                for position in range(turn, keep):
                    if REASONING in messages[position]:
                        self._encode_again(messages[position], position, reasoning=True)
        self._reasoning = reasoning
        wire = getattr(messages, "wire", None)
        for position in range(keep, len(keys)):
            stored = wire(position) if wire is not None else None
            part: str | bytes
            if stored is not None:
                text, estimate, calls = stored
                part = tokens.neutralise(text)  # the row's own text, not a copy (mostly)
                self._user.append(_is_user(messages, position, text))
                self.taken += 1
            else:
                message = messages[position]
                reasoned = reasoning and position >= turn and REASONING in message
                part = self._encode(message, reasoned)
                if reasoned:
                    self._reasoned.add(position)
                self._user.append(message.get("role") == "user")
                estimate, calls = estimate_message(message), call_ids_of(message)
                self.encoded += 1
            end = self._ends[-1] + 1 if self._ends else 0  # a comma after the one before
            self._parts.append(part)
            held_keys.append(keys[position])
            self._ends.append(end + _size(part))
            previous = self._estimates[-1] if self._estimates else 0
            self._estimates.append(previous + estimate)
            self._calls.append(calls)
            self._call_ids.update(calls)

    def _encode(self, message: Message, reasoning: bool) -> bytes:
        """``message`` as the request sends it (see :func:`_for_wire`), its control tokens
        neutralised."""
        return self._tokens.neutralise(_encoder.encode(_for_wire(message, reasoning))).encode()

    def _encode_again(self, message: Message, position: int, *, reasoning: bool) -> None:
        """Encode a held message again, with or without its reasoning, in its place."""
        part = self._encode(message, reasoning)
        delta = _size(part) - _size(self._parts[position])
        self._parts[position] = part
        ends = self._ends
        for later in range(position, len(ends)):
            ends[later] += delta
        if reasoning:
            self._reasoned.add(position)
        else:
            self._reasoned.discard(position)
        self.encoded += 1

    def _turn_start(self, messages: Sequence[Message], held: int) -> int:
        """The position after the last user message of ``messages`` (0: there is none);
        the first ``held`` of them are the messages held."""
        for position in range(len(messages) - 1, -1, -1):
            if self._user[position] if position < held else _is_user(messages, position):
                return position + 1
        return 0

    def _truncate(self, keep: int) -> None:
        del self._keys[keep:]
        del self._user[keep:]
        self._reasoned = {i for i in self._reasoned if i < keep}
        del self._ends[keep:]
        del self._estimates[keep:]
        del self._calls[keep:]
        del self._parts[keep:]
        self._call_ids = {i for calls in self._calls for i in calls}

    @property
    def tokens(self) -> int:
        """The estimated tokens of the messages held (``estimate_messages`` of them)."""
        return self._estimates[-1] if self._estimates else 0

    @property
    def call_ids(self) -> set[str]:
        """Every tool-call id of the assistant messages held (a copy)."""
        return set(self._call_ids)

    def body(self, head: dict[str, Any], tail: dict[str, Any]) -> Body:
        """The JSON object ``{**head, "messages": [...], **tail}``, as its pieces (the
        messages held now: a later :meth:`update` does not change it)."""
        return self.framed(frame(head, tail))

    def framed(self, around: tuple[bytes, bytes]) -> Body:
        """:meth:`body` with its head and tail already encoded (:func:`frame`)."""
        return Body(around[0], list(self._parts), list(self._ends), around[1])


def frame(head: dict[str, Any], tail: dict[str, Any]) -> tuple[bytes, bytes]:
    """What comes before and after the messages in ``{**head, "messages": [...], **tail}``
    (a request's tool schemas are most of it: encoded once, kept by the model client)."""
    first = dumps(head)[:-1]
    last = dumps(tail)[1:]
    return (first + (b"," if len(first) > 1 else b"") + b'"messages":[',
            b"]" + (b"," if len(last) > 1 else b"") + last)
