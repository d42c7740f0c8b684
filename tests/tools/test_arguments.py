"""Decoding tool-call arguments: hostile JSON fails its own call, never the turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ToolFailed
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from actors.tools import parse_arguments
from actors.tools._arguments import MAX_DEPTH, MAX_INTEGER_DIGITS
from tests.support.runtime import running, settings_for

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INTEGER = '{"id": ' + "7" * 5000 + ', "status": "done"}'


def test_ordinary_arguments_decode() -> None:
    assert parse_arguments('{"path": "a.txt", "offset": 3, "ratio": 0.5}') == {
        "path": "a.txt", "offset": 3, "ratio": 0.5,
    }
    assert parse_arguments("") == {}
    assert parse_arguments(None) == {}
    assert parse_arguments({"already": "decoded"}) == {"already": "decoded"}
    assert parse_arguments('{"n": ' + "9" * MAX_INTEGER_DIGITS + "}") == {
        "n": int("9" * MAX_INTEGER_DIGITS)
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        (HUGE_INTEGER, "an integer with 5000 digits"),
        ('{"n": -' + "1" * 200 + "}", "an integer with 200 digits"),
        ('{"x": 1e400}', "out of range"),
        ('{"x": NaN}', "NaN is not valid JSON"),
        ('{"x": -Infinity}', "Infinity is not valid JSON"),
        (DEEP, "nest deeper than"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "nest deeper than"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nest deeper than"),
    ],
)
def test_hostile_arguments_are_one_line_failures(raw: str, message: str) -> None:
    with pytest.raises(ToolFailed, match=message) as caught:
        parse_arguments(raw)
    assert "\n" not in str(caught.value)
    assert len(str(caught.value)) < 400


def test_nesting_up_to_the_limit_is_accepted() -> None:
    raw = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_arguments(raw) is not None


def test_an_already_decoded_deep_value_is_refused() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH + 5):
        value = {"x": value}
    with pytest.raises(ToolFailed, match="nest deeper"):
        parse_arguments(value)


@pytest.mark.anyio
async def test_hostile_arguments_fail_only_their_call(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[
            ToolCall("todo_update", HUGE_INTEGER),
            ToolCall("todo_list", DEEP),
            ToolCall("todo_append", {"text": "still runs"}),
        ]),
        Reply("Carried on."),
    ]
    with ScriptedServer(script) as server:
        # the 200 KB nesting stays in the assistant message: give the context room for it
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=400_000)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("go")
    assert result.ok and result.text == "Carried on."
    sent = server.requests[1]["messages"]
    assert tool_pairing_errors(sent) == []
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert "an integer with 5000 digits" in results[0]
    assert "nest deeper than" in results[1]
    assert "Added to-do 1: still runs" in results[2]
