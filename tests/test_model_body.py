"""Request bodies built from pieces (actors/model/_body.py): the same JSON as encoding the
whole body, with each message encoded once."""

from __future__ import annotations

import json
from typing import Any

from actors.core.budget import estimate_messages
from actors.model._assembly import call_ids_in
from actors.model._body import EncodedMessages


def _turn(k: int) -> list[dict[str, Any]]:
    call = {"id": f"call_{k}", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{k}.txt"})}}
    return [
        {"role": "user", "content": f"Turn {k}: read f{k}.txt — naïve “quotes” \u2028 ok"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": "x" * (k * 7 % 300)},
        {"role": "assistant", "content": f"Done {k}."},
    ]


def _check(encoded: EncodedMessages, messages: list[dict[str, Any]]) -> None:
    head = {"model": "m"}
    tail = {"stream": True, "stream_options": {"include_usage": True}, "tools": [{"a": 1}]}
    body = encoded.body(head, tail)
    assert json.loads(body) == {**head, "messages": messages, **tail}
    assert encoded.tokens == estimate_messages(messages)
    assert encoded.call_ids == call_ids_in(messages)


def test_extending_requests_encode_only_the_new_messages() -> None:
    encoded = EncodedMessages()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    encoded.update(messages)
    _check(encoded, messages)
    for k in range(1, 30):
        messages = [*messages, *_turn(k)]  # a new list of the same objects, as requests are
        before = encoded.encoded
        encoded.update(messages)
        assert encoded.encoded - before == 4
        _check(encoded, messages)


def test_a_replaced_context_keeps_the_common_prefix_and_encodes_the_rest() -> None:
    encoded = EncodedMessages()
    system = {"role": "system", "content": "sys"}
    messages = [system, *(m for k in range(1, 11) for m in _turn(k))]
    encoded.update(messages)
    summary = {"role": "user", "content": "Summary of turns 1-8."}
    compacted = [system, summary, *messages[-8:]]
    before = encoded.encoded
    encoded.update(compacted)
    assert encoded.encoded - before == 9
    _check(encoded, compacted)
    shorter = compacted[:3]  # fewer messages than held, all of them held
    before = encoded.encoded
    encoded.update(shorter)
    assert encoded.encoded == before
    _check(encoded, shorter)
    encoded.update([])
    _check(encoded, [])


def test_empty_head_and_tail() -> None:
    encoded = EncodedMessages()
    encoded.update([{"role": "user", "content": "hi"}])
    assert json.loads(encoded.body({}, {})) == {"messages": [{"role": "user", "content": "hi"}]}


def test_what_the_user_typed_is_kept_out_and_the_message_encoded_once() -> None:
    encoded = EncodedMessages()
    system = {"role": "system", "content": "sys"}
    typed = {"role": "user", "content": "Read this:\n<file a.txt>…</file>", "shown": "@a.txt"}
    messages: list[dict[str, Any]] = [system, typed]
    encoded.update(messages)
    wire = [system, {"role": "user", "content": typed["content"]}]
    _check(encoded, wire)
    assert b"@a.txt" not in encoded.body({}, {})
    for k in range(1, 5):  # later requests recognise it: only their new messages are encoded
        messages = [*messages, *_turn(k)]
        before = encoded.encoded
        encoded.update(messages)
        assert encoded.encoded - before == 4
        _check(encoded, [*wire, *messages[2:]])
