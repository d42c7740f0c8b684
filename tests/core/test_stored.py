"""The context as read back on a resume (actors/core/stored.py) and the pairing rule on the
facts saved with each message (actors/core/messages.py: shape_of, repair_plan): the same
answers as on the parsed messages, without parsing them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.core.budget import estimate_message, estimate_messages
from actors.core.messages import (
    Message,
    encode,
    facts_of,
    facts_of_shape,
    repair,
    repair_plan,
    shape_of,
    tool_result,
)
from actors.core.stored import StoredMessages


def reference_repair(messages: list[Message]) -> list[Message]:
    """The pairing rule as first written, message by message (the model to check against)."""
    out: list[Message] = []
    open_calls: list[str] = []
    answered: set[str] = set()

    def close() -> None:
        out.extend(tool_result(c, "notice") for c in open_calls if c not in answered)
        open_calls.clear()
        answered.clear()

    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls and call_id not in answered:
                answered.add(call_id)
                out.append(message)
            continue
        close()
        out.append(message)
        open_calls.extend(dict.fromkeys(
            c["id"] for c in message.get("tool_calls") or []
            if message.get("role") == "assistant" and isinstance(c, dict)
            and isinstance(c.get("id"), str)))
    close()
    return out


IDS = st.sampled_from(["a", "b", "c", "x\ny", ""])
MESSAGES = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=5)),
    st.builds(lambda ids: {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in ids]}, st.lists(IDS, max_size=3)),
    st.builds(lambda i: {"role": "tool", "tool_call_id": i, "content": "r"},
              st.one_of(IDS, st.just(None), st.integers(0, 2))),
)


def stored(messages: list[Message]) -> StoredMessages:
    """``messages`` as a resume reads them: rows with their saved facts, unparsed."""
    return StoredMessages.read([encode(m) for m in messages], [shape_of(m) for m in messages],
                               [estimate_message(m) for m in messages],
                               lambda text, _position: json.loads(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGES, max_size=12))
def test_repair_is_the_pairing_rule_and_needs_only_the_saved_facts(
    messages: list[dict[str, Any]]
) -> None:
    assert repair(messages, lambda _c: "notice").messages == reference_repair(messages)
    for message in messages:
        shape = shape_of(message)
        if shape is not None:
            assert facts_of_shape(shape) == facts_of(message)
    rows = stored(messages)
    assert repair_plan(rows.facts()) == repair_plan(map(facts_of, messages))
    assert rows.estimate_tokens() == estimate_messages(messages)
    unusual = sum(shape_of(m) is None for m in messages)
    assert rows.parsed() == unusual  # only rows whose facts did not fit were read
    assert list(rows) == messages


def test_stored_messages_act_as_the_list_they_stand_for() -> None:
    messages = [{"role": "user", "content": str(i)} for i in range(5)]
    rows = stored(messages)
    rows.append({"role": "assistant", "content": "new"})
    assert len(rows) == 6 and rows[-1]["content"] == "new" and rows.parsed() == 1
    assert rows[1:3] == messages[1:3] and rows.parsed() == 3
    assert rows[1] is rows[1] and rows.copy()[1] is rows[1]  # one parse, shared
    assert list(reversed(rows))[-1] == messages[0]
    assert rows.text(4) == encode(messages[4]) and rows.text(1) == encode(messages[1])
    assert rows == [*messages, {"role": "assistant", "content": "new"}]
    del rows[0]
    assert rows[0] == messages[1]
