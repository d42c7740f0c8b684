"""The model's reasoning, sent back where the server's chat template renders it: on the
assistant messages of the current turn (after the last user message), never on earlier
turns', never as answer text, and to no server that does not say its template reads it.
In-process, on asyncio and trio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.store import SessionStore
from actors.testing.flavours import Flavour, LlamaCpp, Ollama
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.runtime import running, settings_for

pytestmark = pytest.mark.anyio

FIRST, SECOND, THIRD = ("I should read the notes first.", "The notes say hello.",
                        "Again the notes.")
READ = ToolCall("read_file", {"path": "notes.txt"})


def script() -> list[Reply]:
    return [Reply(reasoning=FIRST, tool_calls=[READ]), Reply("They say hello.", reasoning=SECOND),
            Reply(reasoning=THIRD, tool_calls=[READ]), Reply("Still hello.")]


def reasoning_sent(request: dict[str, Any]) -> list[str | None]:
    return [m.get("reasoning_content") for m in request["messages"] if m["role"] == "assistant"]


def answers_sent(request: dict[str, Any]) -> str:
    return " ".join(str(m.get("content")) for m in request["messages"])


async def two_turns(tmp_path: Path, flavour: Flavour) -> tuple[ScriptedServer, str]:
    with ScriptedServer(script(), flavour=flavour) as server:
        settings = settings_for(tmp_path, server.base_url)
        (settings.sandbox_dir / "notes.txt").write_text("hello\n")
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("What do the notes say?")).ok
            assert (await sup.run_turn("And now?")).ok
        server.assert_done()
    return server, sup.session_id


async def test_the_turn_s_reasoning_goes_back_to_a_template_that_renders_it(
    tmp_path: Path
) -> None:
    server, _ = await two_turns(tmp_path, LlamaCpp())  # Gemma 4's template
    first, second, third, fourth = server.requests
    assert reasoning_sent(first) == []
    assert reasoning_sent(second) == [FIRST]  # the same turn: Gemma 4 reads it there
    assert reasoning_sent(third) == [None, None]  # an earlier turn's: never
    assert reasoning_sent(fourth) == [None, None, THIRD]
    for request in server.requests:
        assert not any(text in answers_sent(request) for text in (FIRST, SECOND, THIRD))


@pytest.mark.parametrize("flavour", [LlamaCpp(template="think"), Ollama(), Flavour()],
                         ids=["llama.cpp-template-without-it", "ollama", "openai"])
async def test_no_reasoning_goes_to_a_server_that_does_not_ask_for_it(
    tmp_path: Path, flavour: Flavour
) -> None:
    server, _ = await two_turns(tmp_path, flavour)
    assert all(r is None for request in server.requests for r in reasoning_sent(request))


async def test_a_resumed_session_keeps_its_reasoning_and_sends_none_of_it(
    tmp_path: Path
) -> None:
    """The reasoning is saved with its message; after a resume every saved turn is an
    earlier one (its stored rows are read, not sent as stored)."""
    _, session = await two_turns(tmp_path, LlamaCpp())
    with ScriptedServer([Reply("Resumed.")], flavour=LlamaCpp()) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings, SessionStore(settings.memory_dir),
                           resume=session) as (sup, _):
            assert (await sup.run_turn("Still there?")).ok
            saved = list(sup.snapshot().messages)
    assert [m.get("reasoning_content") for m in saved if m["role"] == "assistant"][:2] == [
        FIRST, SECOND]
    assert all(r is None for r in reasoning_sent(server.requests[0]))
