"""The harness in-process against each server's real wire format and every quirk: the right
tools run with the right arguments, every later request pairs each call with one result, no
thinking text is answered or sent back, usage is recorded. Runs on asyncio and trio."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.core.events import ReasoningDelta, ReasoningRevealed, TextDelta, ToolCallStarted
from actors.testing.flavours import Flavour, LlamaCpp
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from tests.support.flavours import AFTER, CONTENT, FLAVOURS, TAGS, THINKING, script, sent_text
from tests.support.runtime import running, settings_for

pytestmark = pytest.mark.anyio

def answer_shown(events: list[Any]) -> str:
    """The answer text the front end was left showing: text revealed to be reasoning (a
    lone ``</think>``) is taken back."""
    kept: list[str] = []
    current: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            current.append(event.text)
        elif isinstance(event, ReasoningRevealed):
            current.clear()
        elif isinstance(event, ToolCallStarted):
            kept += current
            current = []
    return "".join(kept + current)


@pytest.mark.parametrize(("flavour", "model"), [(f, m) for _, f, m in FLAVOURS],
                         ids=[i for i, _, _ in FLAVOURS])
async def test_parallel_tool_calls_and_reasoning(
    tmp_path: Path, flavour: Callable[[], Flavour], model: str
) -> None:
    with ScriptedServer(script(), flavour=flavour()) as server:
        settings = settings_for(tmp_path, server.base_url, model=model)
        async with running(settings) as (sup, rec):
            result = await sup.run_turn("Write a > b && c < d to out.txt and show it.")
        server.assert_done()
    assert result.outcome == "answered", result.text
    assert result.text == "I wrote out.txt and read it back."
    # the stream is read to its very end, so the connection serves the next request (the
    # other: the model client's look before its first, whether anything listens at all)
    assert server.connections_opened == 2
    assert (settings.sandbox_dir / "out.txt").read_text() == CONTENT

    second = server.requests[1]["messages"]
    assert tool_pairing_errors(second) == []
    assistant = next(m for m in second if m.get("tool_calls"))
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [
        ("write_file", {"path": "out.txt", "content": CONTENT}),
        ("run_bash", {"command": "cat out.txt"}),
    ]
    results = [m["content"] for m in second if m["role"] == "tool"]
    assert len(results) == 2 and CONTENT in results[1]

    sent = sent_text(server.requests)
    assert THINKING not in sent and not any(tag in sent for tag in TAGS)
    # back as reasoning only to Gemma 4's template (llama.cpp's /props), in the same turn
    gemma = isinstance(server.flavour, LlamaCpp) and server.flavour.template == "gemma4"
    assert assistant.get("reasoning_content") == (THINKING if gemma else None)
    saved = list(sup.snapshot().messages)
    assert not any(AFTER in str(m.get("content")) for m in saved)  # not saved as answer text
    assert saved[-1]["reasoning_content"] == AFTER  # but kept, as reasoning
    shown = answer_shown(rec.events)
    assert THINKING not in shown and AFTER not in shown
    assert "I wrote out.txt" in shown
    reasoning = "".join(e.text for e in rec.of(ReasoningDelta))
    if not isinstance(server.flavour, LlamaCpp) or server.flavour.reasoning_format != (
            "lone-close"):
        assert "write it and read it back" in reasoning and "I can answer" in reasoning
    started = [json.loads(e.arguments) for e in rec.of(ToolCallStarted)]
    assert started == [{"path": "out.txt", "content": CONTENT}, {"command": "cat out.txt"}]

    assert sup.snapshot().usage.calls == 2
    assert sup.snapshot().usage.total_tokens_in > 0 and sup.snapshot().usage.total_tokens_out > 0


async def test_numeric_and_duplicate_ids_are_each_paired_once(tmp_path: Path) -> None:
    steps = [
        Reply(tool_calls=[ToolCall("list_files", {}, id=7),
                          ToolCall("read_file", {"path": "a.txt"}, id="dup"),
                          ToolCall("read_file", {"path": "b.txt"}, id="dup")]),
        Reply(tool_calls=[ToolCall("list_files", {}, id="dup")]),  # reused in a later answer
        Reply("done"),
    ]
    with ScriptedServer(steps, check_tool_pairing=True) as server:
        settings = settings_for(tmp_path, server.base_url)
        (settings.sandbox_dir / "a.txt").write_text("A")
        (settings.sandbox_dir / "b.txt").write_text("B")
        async with running(settings) as (sup, _):
            result = await sup.run_turn("look")
        server.assert_done()
    assert result.ok
    for request in server.requests[1:]:
        assert tool_pairing_errors(request["messages"]) == []
    last = server.requests[2]["messages"]
    ids = [c["id"] for m in last for c in m.get("tool_calls") or []]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(isinstance(i, str) for i in ids)
    assert ids[0] == "7" and ids[1] == "dup"
    contents = [m["content"] for m in last if m["role"] == "tool"]
    assert "A" in contents[1] and "B" in contents[2]
