"""What the harness says when the server's context is the limit, as llama.cpp really reports
it: a request refused before any stream (HTTP 400 ``exceed_context_size_error`` with the
server's counts), the context a request gets with several slots (``-np 4 --no-kv-unified``:
``-c`` divided among them), a fixed prompt that alone does not fit, an answer cut because the
context filled (``finish_reason: length`` with prompt + answer at ``n_ctx``) told apart from
the output limit, and the shared KV cache filling under requests in flight. In-process on
asyncio and trio; the real server: tests/e2e/test_llamacpp_real.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.core.events import Notice
from actors.model import CUT_ANSWER_NOTICE, CUT_CALL_RESULT
from actors.testing.flavours import LlamaCpp
from actors.testing.scripted_server import Reply, ScriptedServer, StreamError, ToolCall
from tests.support.runtime import running, settings_for

pytestmark = pytest.mark.anyio

FOUR_SLOTS = ("llama-server gives each request a 8,192-token context (n_ctx in /props; "
              "4 slots)")
RAISE_FOUR = ("llama-server with -c 32768 -np 1 (with --no-kv-unified each of its 4 slots "
              "gets -c / 4)")


def warnings(events: list[object]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]


async def test_a_conversation_longer_than_a_slot_is_refused_with_the_flag_that_helps(
    tmp_path: Path
) -> None:
    """-np 4 --no-kv-unified -c 32768: each request gets 8,192 tokens; "-c 32768" is what
    the server already runs with, so the fix names -np."""
    flavour = LlamaCpp(n_ctx=32768, kv_unified=False)
    with ScriptedServer([], flavour=flavour) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            result = await sup.run_turn("Look at this: " + "word " * 8000)
        server.assert_done()
    assert result.outcome == "failed"
    assert "refused the request: HTTP 400: request (" in result.text
    assert f"The conversation is longer than the server's context: {FOUR_SLOTS[:1].lower()}" \
        f"{FOUR_SLOTS[1:]}. Pass --max-context-tokens " in result.text
    assert result.text.endswith(f"so that the harness compacts it before, or start "
                                f"{RAISE_FOUR}.")
    assert len(server.requests) == 1  # refused before the model ran: not retried
    assert any(w.startswith(FOUR_SLOTS) for w in warnings(rec.events))  # warned before


async def test_a_context_below_the_fixed_prompt_names_the_only_fixes(tmp_path: Path) -> None:
    """-c 768: the system prompt and the tool schemas alone do not fit, even with the compact
    schemas a small context gets (~860 tokens); lowering --max-context-tokens cannot help.
    Warned before the first request, then refused."""
    with ScriptedServer([], flavour=LlamaCpp(n_ctx=768)) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            result = await sup.run_turn("hi")
    assert result.outcome == "failed"
    assert "The harness's fixed prompt alone (system prompt and tool schemas, ~" in result.text
    assert ("does not fit: llama-server gives each request a 768-token context (n_ctx in "
            "/props; 4 slots). Start llama-server with -c 32768 -np 1") in result.text
    assert result.text.endswith("the compact prompt is used when the context is 8,192 tokens "
                                "or less.")
    assert "--max-context-tokens" not in result.text
    [warning] = [w for w in warnings(rec.events) if "fixed prompt" in w]
    assert "alone does not fit, and every request will be refused" in warning


@pytest.mark.parametrize(("usage", "full"), [((6000, 2190), True), ((6000, 512), False)],
                         ids=["context-full", "output-limit"])
async def test_a_full_context_is_told_apart_from_the_output_limit(
    tmp_path: Path, usage: tuple[int, int], full: bool
) -> None:
    reply = Reply("words " * 50, finish_reason="length", usage=usage)
    with ScriptedServer([reply], flavour=LlamaCpp(n_ctx=8192, slots=1)) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            # ~4,000 tokens by the harness's estimate (the server counts 6,000), the fixed
            # prompt ~860 of them: the compact schemas, since the server's context is small
            result = await sup.run_turn("Go on and on. " + "word " * 2500)
    assert result.outcome == "answered"
    cut = [w for w in warnings(rec.events) if w.startswith("The answer was cut")]
    if not full:
        assert cut == [CUT_ANSWER_NOTICE]
        return
    assert cut == [
        "The answer was cut because the server's context is full (finish_reason 'length' "
        "with the prompt's 6,000 tokens and the answer's 2,190 filling the 8,192 the server "
        "gives a request). Start llama-server with -c 32768, or pass --max-context-tokens "
        "3200 so that the conversation is compacted while an answer still fits."]


async def test_tool_calls_cut_by_a_full_context_say_so(tmp_path: Path) -> None:
    reply = Reply(tool_calls=[ToolCall("run_bash", '{"command": "ec')], finish_reason="length",
                  usage=(8000, 192))
    with ScriptedServer([reply], flavour=LlamaCpp(n_ctx=8192, slots=1)) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("Run it.")
            saved = list(sup.snapshot().messages)
    assert result.outcome == "failed"
    assert result.text.startswith("The model's answer was cut because the server's context is "
                                  "full (finish_reason 'length' with the prompt's 8,000 tokens")
    assert "none of them was run" in result.text
    assert saved[-1]["content"] == CUT_CALL_RESULT


async def test_the_shared_kv_cache_filling_up_is_retried_then_explained(
    tmp_path: Path
) -> None:
    """llama.cpp's 500 to every request in flight, the body ending without [DONE]."""
    full = StreamError(2, 500, "Context size has been exceeded.")
    with ScriptedServer([full, Reply("Made it.")], flavour=LlamaCpp()) as server:
        settings = settings_for(tmp_path, server.base_url, retry_backoff=0.01)
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("hi")).text == "Made it."
    with ScriptedServer([full] * 5, flavour=LlamaCpp()) as server:
        settings = settings_for(tmp_path, server.base_url, retry_backoff=0.01)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("hi")
    assert result.text.endswith(
        "error 500 in the stream five times: Context size has been exceeded. llama-server's "
        "context (its KV cache, -c) is shared by the requests it serves at once, and they "
        "filled it: start it with -np 1 (one request at a time gets all of it) or a larger -c.")
