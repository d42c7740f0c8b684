"""Finish reasons honoured by the turn: an answer cut at the output limit says so, tool calls
cut by it are never run (each answered as not executed), and reasoning without an answer is
a failed turn, not an empty success. asyncio and trio."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.core.events import Notice
from actors.model import CUT_ANSWER_NOTICE, CUT_CALL_RESULT, CUT_CALLS_REASON
from actors.testing.flavours import LlamaCpp, Ollama
from actors.testing.scripted_server import Fail, Reply, ScriptedServer, ToolCall
from tests.support.runtime import running, settings_for

pytestmark = pytest.mark.anyio


async def test_an_answer_cut_at_the_output_limit_is_kept_with_a_warning(tmp_path: Path) -> None:
    with ScriptedServer([Reply("The first half of", finish_reason="length")],
                        flavour=Ollama(context_length=32768)) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, rec):
            result = await sup.run_turn("Explain.")
    assert result.outcome == "answered" and result.text == "The first half of"
    assert [n.text for n in rec.of(Notice) if n.level == "warning"] == [CUT_ANSWER_NOTICE]
    assert sup.snapshot().messages[-1] == {"role": "assistant", "content": "The first half of"}


async def test_tool_calls_cut_at_the_output_limit_are_not_run(tmp_path: Path) -> None:
    cut = Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"}),
                            ToolCall("write_file", '{"path": "b.txt", "content": "unfini')],
                finish_reason="length")
    with ScriptedServer([cut, Reply("Retried smaller.")], flavour=LlamaCpp(),
                        check_tool_pairing=True) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            first = await sup.run_turn("Write two files.")
            second = await sup.run_turn("Try again, smaller.")
        server.assert_done()
    assert first.outcome == "failed" and first.text == CUT_CALLS_REASON
    assert not (settings.sandbox_dir / "a.txt").exists()
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in results] == [CUT_CALL_RESULT, CUT_CALL_RESULT]
    assert second.ok and server.errors == []


@pytest.mark.parametrize("finish", ["length", "stop"])
async def test_reasoning_without_an_answer_is_a_failed_turn(tmp_path: Path, finish: str) -> None:
    steps = [Reply(reasoning="Thinking about it at great length...", finish_reason=finish,
                   usage=(50, 4000)),
             Reply("Here it is.")]
    with ScriptedServer(steps, flavour=LlamaCpp()) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            first = await sup.run_turn("Answer this.")
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "Answer this."}
            assert sup.snapshot().usage.calls == 1 and sup.snapshot().usage.total_tokens_out == 4000
            second = await sup.run_turn("Please answer.")
        server.assert_done()
    assert first.outcome == "failed"
    assert first.text.startswith("The model spent its whole answer on reasoning")
    assert f"finish_reason '{finish}'" in first.text
    assert second.ok and second.text == "Here it is."
    assert "Thinking about it" not in str(server.requests[1]["messages"])


async def test_a_failed_request_is_one_line_and_the_context_stays_sendable(
    tmp_path: Path
) -> None:
    with ScriptedServer([Fail(400, "bad request: unknown field"), Reply("ok")]) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            failed = await sup.run_turn("Hello")
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "Hello"}
            assert (await sup.run_turn("Again")).ok
    assert failed.outcome == "failed"
    assert failed.text == (f"The model endpoint {server.base_url} refused the request: "
                           "HTTP 400: bad request: unknown field.")
