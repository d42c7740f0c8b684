"""``--doctor``'s and ``\\doctor``'s checks of the model endpoint (actors/model/doctor.py)
against each server's wire format: reachable, the model there, tool calls accepted (one tiny
request), the context it really holds against the budget; one line per check, with the fix;
and the real ``harness --doctor`` and the REPL's ``\\doctor``."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.model.doctor import Finding, diagnose
from actors.testing.flavours import VLLM, Flavour, LlamaCpp, Ollama
from actors.testing.scripted_server import Hang, Reply, ScriptedServer
from tests.support.clitools import harness
from tests.support.ports import free_port
from tests.support.terminal import PROMPT, start


async def check(server: ScriptedServer | str, model: str = "gemma4", budget: int = 24_000,
                **bounds: float) -> dict[str, Finding]:
    url = server if isinstance(server, str) else server.base_url
    found = await diagnose(base_url=url, api_key="test", model=model, budget=budget, **bounds)
    assert [f.check for f in found] == ["reachable", "model", "tools", "context"]
    assert all("\n" not in f.line() for f in found)
    return {f.check: f for f in found}


def statuses(found: dict[str, Finding]) -> list[str]:
    return [f.status for f in found.values()]


@pytest.mark.anyio
async def test_a_healthy_ollama_passes_every_check() -> None:
    with ScriptedServer([Reply("OK")], flavour=Ollama(context_length=32768)) as server:
        found = await check(server)
        server.assert_done()
    assert statuses(found) == ["ok", "ok", "ok", "ok"], found
    assert found["reachable"].text == f"{server.base_url} (ollama), 1 model listed."
    assert found["context"].text.startswith("the server holds 32,768 tokens (loaded now, per "
                                            "'ollama ps'); --max-context-tokens 24,000 fits")
    assert server.requests[0]["tools"][0]["function"]["name"] == "get_time"


@pytest.mark.anyio
async def test_an_unreachable_endpoint_is_one_line_and_the_rest_not_tried() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    found = await check(url)
    assert statuses(found) == ["problem", "unknown", "unknown", "unknown"]
    assert found["reachable"].text == (
        f"Cannot reach the model endpoint {url}: connection refused. Is the server running? "
        "Check --base-url (or $OPENAI_BASE_URL).")
    assert found["tools"].text == "not checked: the endpoint cannot be reached."


@pytest.mark.anyio
async def test_a_missing_model_is_named_with_the_fix() -> None:
    with ScriptedServer([], flavour=Ollama(), models=["qwen3:8b"]) as server:
        found = await check(server)
        server.assert_done()
    assert statuses(found)[:3] == ["ok", "problem", "unknown"]
    assert "Pull it with 'ollama pull gemma4'. Models there: qwen3:8b." in found["model"].text


@pytest.mark.anyio
@pytest.mark.parametrize(("flavour", "model", "fix"), [
    (LlamaCpp(jinja=False), "gemma4", "Restart llama-server without --no-jinja"),
    (VLLM(auto_tool_choice=False), "google/gemma-4-E4B-it", "--enable-auto-tool-choice"),
    (Ollama(tools_supported=False), "gemma4", "supports tool calls"),
], ids=["llama.cpp-without-jinja", "vllm-without-auto-tool-choice", "ollama-no-tools"])
async def test_a_server_that_refuses_tools_says_how_to_fix_it(
    flavour: Flavour, model: str, fix: str
) -> None:
    with ScriptedServer([], flavour=flavour, models=[model]) as server:
        found = await check(server, model=model)
    assert found["tools"].status == "problem" and fix in found["tools"].text


@pytest.mark.anyio
async def test_a_context_smaller_than_the_budget_says_what_to_pass() -> None:
    with ScriptedServer([Reply("OK")], flavour=LlamaCpp(n_ctx=4096)) as server:
        found = await check(server)
    assert found["context"].status == "problem"
    assert "llama-server gives each request a 4,096-token context (n_ctx in /props; 4 slots), " \
        "below --max-context-tokens 24,000" in found["context"].text
    assert found["context"].text.endswith(
        "Start llama-server with -c 32768 -np 1 (with --no-kv-unified each of its 4 slots gets "
        "-c / 4), or pass --max-context-tokens 4096.")


@pytest.mark.anyio
async def test_a_server_that_never_answers_is_bounded() -> None:
    with ScriptedServer([Hang()]) as server:
        found = await check(server, request_seconds=0.5)
    assert found["tools"].status == "problem"
    assert found["tools"].text.startswith("a request with one tool schema got no answer "
                                          "within 0.5 s")


@pytest.mark.slow
def test_harness_doctor_prints_the_endpoint_lines(tmp_path: Path, memory_dir: Path) -> None:
    with ScriptedServer([Reply("OK")], flavour=Ollama(context_length=2048)) as server:
        result = harness("--doctor", "--base-url", server.base_url, memory_dir=memory_dir,
                         cwd=tmp_path, env={"OPENAI_API_KEY": "test"})
    assert result.returncode == 0, result.stderr  # the store's status: nothing to repair
    lines = result.stdout.splitlines()
    at = lines.index(f"Model endpoint: gemma4 at {server.base_url}")
    assert [line.split()[0] for line in lines[at + 1:at + 5]] == [
        "reachable:", "model:", "tools:", "context:"]
    assert "PROBLEM" in lines[at + 4] and "OLLAMA_CONTEXT_LENGTH=32768" in lines[at + 4]


@pytest.mark.slow
def test_backslash_doctor_in_the_repl(tmp_path: Path, memory_dir: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    terminals: list = []
    try:
        with ScriptedServer([Reply("OK")], flavour=LlamaCpp(n_ctx=32768)) as server:
            terminal = start(terminals, memory_dir, project, "--base-url", server.base_url)
            terminal.say("\\doctor")
            terminal.expect(r"tools:\s+ok\s+a request with one tool schema was answered")
            terminal.expect(r"context:\s+ok\s+the server holds 32,768 tokens")
            terminal.expect(PROMPT)
            assert terminal.exit() == 0
    finally:
        for opened in terminals:
            if opened.child.isalive():
                opened.child.terminate(force=True)
    assert "Traceback" not in terminal.log.getvalue()
