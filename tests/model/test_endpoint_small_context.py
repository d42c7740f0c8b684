"""A small context (a budget, or a server's context, of at most 8,192 tokens): the system
prompt and tool schemas fit in 1,200 tokens, by the harness's estimate and by a real
tokenizer (llama.cpp's, through its own chat template); a new session starts with room to
work; a message too large for the budget says what would help."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.core.budget import estimate_message, estimate_tools
from actors.core.events import ContextGauge, Notice
from actors.core.prompts import system_prompt
from actors.testing.flavours import LlamaCpp
from actors.testing.scripted_server import Reply, ScriptedServer
from actors.tools import COMPACT_TOOLS, TOOLS, tool_schemas
from tests.support.llamacpp import locate
from tests.support.ports import free_port
from tests.support.runtime import running, settings_for
from tests.support.strict import unavailable

LIMIT = 1200
NOTES = {"project": "Use tabs. " * 400, "user": "Prefers short answers."}
SANDBOX = Path("/home/someone/projects/a-project-with-a-fairly-long-name")


def fixed_part(compact: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The system message and the tools of a new session's requests."""
    system = {"role": "system", "content": system_prompt(SANDBOX, NOTES, compact=compact)}
    return system, tool_schemas(compact=compact)


def test_the_compact_prompt_and_tools_fit_in_1200_tokens_by_the_estimate() -> None:
    system, tools = fixed_part(compact=True)
    assert estimate_message(system) + estimate_tools(tools) <= LIMIT
    full_system, full_tools = fixed_part(compact=False)
    assert estimate_message(full_system) + estimate_tools(full_tools) > 2 * LIMIT  # before
    assert [t["function"]["name"] for t in tools] == list(COMPACT_TOOLS)
    assert all("description" not in p for t in tools
               for p in t["function"]["parameters"]["properties"].values())
    assert all(t["function"]["parameters"] == TOOLS[t["function"]["name"]].parameters
               | {"properties": t["function"]["parameters"]["properties"]} for t in tools)
    assert "cut to fit a small context" in system["content"]  # long notes are cut


# -- a real tokenizer: llama.cpp's server renders its chat template and counts ---------------

@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    binary, model = locate()  # where the real server is looked for (tests/support/llamacpp.py)
    port = free_port()
    process = subprocess.Popen(
        [str(binary), "-m", str(model), "-c", "4096", "--host",
         "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                unavailable(f"{binary} did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait(10)


def _post(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


@pytest.mark.slow
def test_the_compact_prompt_and_tools_fit_in_1200_tokens_by_a_real_tokenizer(
    llama_url: str
) -> None:
    """Counted as the server counts them: its chat template renders the system prompt and
    the tool declarations (with its own markup), its tokenizer counts the prompt."""

    def tokens(compact: bool) -> int:
        system, tools = fixed_part(compact)
        messages = [system, {"role": "user", "content": "hi"}]
        prompt = _post(f"{llama_url}/apply-template", {"messages": messages, "tools": tools})
        return len(_post(f"{llama_url}/tokenize", {"content": prompt["prompt"]})["tokens"])

    compact, full = tokens(True), tokens(False)
    print(f"system prompt and tools, llama.cpp's count: compact {compact}, full {full}")
    assert compact <= LIMIT
    assert full > 2 * LIMIT


# -- a session with a small budget ------------------------------------------------------------

@pytest.mark.anyio
async def test_a_small_budget_starts_with_room_and_a_10_kb_file_fits(tmp_path: Path) -> None:
    """--max-context-tokens 4096: a new session started at 68% with the full prompt and
    tools, and a 9.7 KB attachment ended in "compaction could not bring it under"."""
    attached = "def f(x):\n    return x\n" * 420  # 9.7 KB
    with ScriptedServer([Reply("Read it.", usage=(3300, 3))]) as server:
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=4096)
        async with running(settings) as (sup, rec):
            start = await rec.wait_for(ContextGauge)
            result = await sup.run_turn(f"<attached_file>{attached}</attached_file> Explain.")
        server.assert_done()
    assert start.tokens / start.budget < 0.25, start
    assert result.ok, result.text
    sent = server.requests[0]
    assert [t["function"]["name"] for t in sent["tools"]] == list(COMPACT_TOOLS)
    assert sent["messages"][0]["content"].startswith("You are a coding agent in the project")


@pytest.mark.anyio
async def test_a_message_larger_than_the_budget_says_what_helps(tmp_path: Path) -> None:
    with ScriptedServer([]) as server:
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=4096)
        async with running(settings) as (sup, _):
            result = await sup.run_turn("x " * 10_000)
        server.assert_done()
    assert result.outcome == "failed"
    assert result.text.startswith("Your message needs about 5,00")
    assert "Send less at once (a part of the file, or ask for it to be read in parts), or " \
        "raise --max-context-tokens if the server holds more." in result.text


@pytest.mark.anyio
async def test_a_small_context_learned_from_the_server_gets_the_compact_tools(
    tmp_path: Path
) -> None:
    with ScriptedServer([Reply("One.")], flavour=LlamaCpp(n_ctx=4096)) as server:
        settings = settings_for(tmp_path, server.base_url, preflight=True)  # budget 24,000
        async with running(settings) as (sup, rec):
            await rec.wait_for(Notice, lambda n: "4,096-token context" in n.text)
            assert (await sup.run_turn("Hello.")).ok
        server.assert_done()
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == list(COMPACT_TOOLS)
    assert server.requests[0]["messages"][0]["content"].startswith(
        "You are a coding agent working in")  # the budget's prompt, kept for the session
