"""What the endpoint tells about itself: the start-up check (unreachable, model missing,
context smaller than --max-context-tokens, learned from ollama's native API, vLLM's models
list or llama.cpp's /props), the context check after the first answer, the warning when the
server cut the prompt, and estimated usage that counts the tool schemas. asyncio and trio."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from actors.core.budget import estimate_tools, prompt_truncated
from actors.core.events import Event, EventSink, Notice
from actors.core.mailbox import ask
from actors.model import ModelClient, ModelRequest
from actors.testing.flavours import VLLM, Flavour, LlamaCpp, Ollama
from actors.testing.scripted_server import Reply, ScriptedServer
from actors.tools import tool_schemas
from tests.support.endpoints import USER
from tests.support.ports import free_port
from tests.support.runtime import running, settings_for

pytestmark = pytest.mark.anyio


class Events(list[Event]):
    """Events as they arrive; :meth:`settle` waits for a number of warnings."""

    def __init__(self) -> None:
        super().__init__()
        self._arrived = anyio.Event()

    def add(self, event: Event) -> None:
        self.append(event)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def settle(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(warnings(self)) < count:
                await self._arrived.wait()


@asynccontextmanager
async def actor(
    base_url: str, *, model: str = "gemma4", budget: int = 24_000,
    fixed: tuple[int, int | None] | None = None,
) -> AsyncIterator[tuple[ModelClient, Any, Events]]:
    """A running model client with a sink for its own warnings; yields (client, inbox,
    events received so far)."""
    events = Events()
    send, receive = anyio.create_memory_object_stream[Event](100)
    client = ModelClient(base_url=base_url, api_key="test", model=model, timeout=20,
                         events=EventSink(send), context_budget=budget, fixed_tokens=fixed)
    inbox, requests = anyio.create_memory_object_stream[ModelRequest](1)

    async def collect() -> None:
        async with receive:
            async for event in receive:
                events.add(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        await tg.start(client.run, requests)
        try:
            yield client, inbox, events
        finally:
            inbox.close()
            send.close()


def warnings(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]


async def test_an_unreachable_endpoint_is_reported_at_start() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with actor(url) as (client, _, events):
        await client.check_endpoint()
        await events.settle(1)
    assert warnings(events) == [
        f"Cannot reach the model endpoint {url}: connection refused. Is the server running? "
        "Check --base-url (or $OPENAI_BASE_URL)."]


async def test_a_model_that_is_not_pulled_is_named_with_the_fix() -> None:
    with ScriptedServer([], flavour=Ollama(), models=["qwen3:8b", "llama3.2"]) as server:
        async with actor(server.base_url) as (client, _, events):
            await client.check_endpoint()
            await events.settle(1)
    assert warnings(events)[0] == (
        f"Model 'gemma4' is not available at {server.base_url} (not in its list of models). "
        "Pull it with 'ollama pull gemma4'. Models there: qwen3:8b, llama3.2:latest.")
    assert server.requests == []  # nothing was sent to the model


@pytest.mark.parametrize(("flavour", "model", "expected"), [
    (Ollama(num_ctx_parameter=8192), "gemma4",
     "ollama runs gemma4 with a 8,192-token context (num_ctx in its Modelfile), below "
     "--max-context-tokens 24,000: past it ollama silently drops the oldest messages. Start "
     "ollama with 'OLLAMA_CONTEXT_LENGTH=32768 ollama serve' (or PARAMETER num_ctx 32768 in "
     "a Modelfile), or pass --max-context-tokens 8192."),
    (Ollama(loaded=True, context_length=4096), "gemma4",
     "ollama runs gemma4 with a 4,096-token context (loaded now, per 'ollama ps')"),
    (VLLM(max_model_len=8192), "google/gemma-4-E4B-it",
     "vLLM serves google/gemma-4-E4B-it with max_model_len 8,192 (max_model_len in "
     "/v1/models), below --max-context-tokens 24,000: longer requests are refused. Start "
     "vLLM with --max-model-len 32768, or pass --max-context-tokens 8192."),
    (LlamaCpp(n_ctx=4096, slots=1), "gemma4",
     "llama-server gives each request a 4,096-token context (n_ctx in /props), below "
     "--max-context-tokens 24,000: longer requests are refused. Start llama-server with "
     "-c 32768, or pass --max-context-tokens 4096."),
    # -np 4 --no-kv-unified -c 32768: each slot gets 8,192, and -c 32768 is already in use
    (LlamaCpp(n_ctx=32768, kv_unified=False), "gemma4",
     "llama-server gives each request a 8,192-token context (n_ctx in /props; 4 slots), "
     "below --max-context-tokens 24,000: longer requests are refused. Start llama-server "
     "with -c 32768 -np 1 (with --no-kv-unified each of its 4 slots gets -c / 4), or pass "
     "--max-context-tokens 8192."),
], ids=["ollama-modelfile", "ollama-loaded", "vllm", "llama.cpp", "llama.cpp-4-slots"])
async def test_a_context_smaller_than_the_budget_is_warned_at_start(
    flavour: Flavour, model: str, expected: str
) -> None:
    with ScriptedServer([], flavour=flavour, models=flavour.default_models()) as server:
        async with actor(server.base_url, model=model) as (client, _, events):
            await client.check_endpoint()
            await events.settle(1)
    assert len(warnings(events)) == 1 and warnings(events)[0].startswith(expected)


async def test_a_context_below_the_fixed_prompt_names_the_only_fixes() -> None:
    """Lowering --max-context-tokens cannot help when the system prompt and the tool schemas
    alone do not fit, the compact schemas a small context gets (~860 tokens) included."""
    with ScriptedServer([], flavour=LlamaCpp(n_ctx=768)) as server:
        async with actor(server.base_url, fixed=(2800, 860)) as (client, _, events):
            await client.check_endpoint()
            await events.settle(1)
    assert warnings(events) == [
        "llama-server gives each request a 768-token context (n_ctx in /props; 4 slots): "
        "the harness's fixed prompt (system prompt and tool schemas, ~860 tokens) alone "
        "does not fit, and every request will be refused. Start llama-server with -c 32768 "
        "-np 1 (with --no-kv-unified each of its 4 slots gets -c / 4); the compact prompt is "
        "used when the context is 8,192 tokens or less."]


@pytest.mark.parametrize("flavour", [Ollama(loaded=True, context_length=32768), VLLM(),
                                     LlamaCpp(n_ctx=32768), Flavour()],
                         ids=["ollama", "vllm", "llama.cpp", "openai"])
async def test_a_large_enough_context_gives_no_warning(flavour: Flavour) -> None:
    model = flavour.default_models()[0].removesuffix(":latest")
    with ScriptedServer([], flavour=flavour) as server:
        async with actor(server.base_url, model=model) as (client, _, events):
            await client.check_endpoint()
            await anyio.lowlevel.checkpoint()
    assert warnings(events) == []


async def test_ollama_s_default_context_is_learned_after_the_first_answer() -> None:
    """Not loaded and no num_ctx: nothing can be claimed at start; once the first answer
    loaded the model, /api/ps says what ollama chose."""
    with ScriptedServer([Reply("hi")], flavour=Ollama(context_length=4096)) as server:
        async with actor(server.base_url) as (client, inbox, events):
            await client.check_endpoint()
            assert warnings(events) == []
            outcome = await ask(inbox, lambda reply: ModelRequest(list(USER), reply), "model")
            assert outcome.message is not None
            await events.settle(1)
    assert warnings(events)[0].startswith("ollama runs gemma4 with a 4,096-token context "
                                          "(loaded now, per 'ollama ps')")


async def test_a_prompt_the_server_cut_is_reported_once(tmp_path: Path) -> None:
    """ollama drops the oldest messages past its context and reports what it kept."""
    big = "word " * 8000  # ~10,000 estimated tokens, far past the 2,048 ollama keeps
    with ScriptedServer([Reply("first"), Reply("second")],
                        flavour=Ollama(context_length=2048)) as server:
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=200_000)
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn(big)).ok
            assert (await sup.run_turn("and again")).ok
    cut = [n.text for n in rec.of(Notice) if n.text.startswith("The server counted")]
    assert len(cut) == 1
    assert cut[0].startswith("The server counted 2,048 prompt tokens for a request the "
                             "harness estimates at ~")
    assert "start ollama with a larger OLLAMA_CONTEXT_LENGTH" in cut[0]


def test_truncation_needs_a_large_gap() -> None:
    assert prompt_truncated(2048, 10_000)
    assert not prompt_truncated(900, 1_800)  # a small request: estimates are rough
    assert not prompt_truncated(6_000, 10_000)


async def test_estimated_usage_counts_the_tool_schemas(tmp_path: Path) -> None:
    with ScriptedServer([Reply("no usage from me")],
                        flavour=Flavour(send_usage=False)) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            assert (await sup.run_turn("hi")).ok
    usage = sup.snapshot().usage
    schemas = estimate_tools(tool_schemas())
    assert schemas > 1500
    assert usage.total_tokens_in > schemas
    sent = server.requests[0]
    assert usage.total_tokens_in >= len(json.dumps(sent["tools"])) // 4
