"""Every way a request fails, against each server's real wire format: one clear line (the
status said once, a hint where one helps), the right retries with backoff (recorded, not
waited for), never an empty answer, and the actor keeps serving. asyncio and trio."""

from __future__ import annotations

import socket

import pytest

from actors.core.errors import (
    ContextExceeded,
    EndpointTimeout,
    EndpointUnreachable,
    InvalidResponse,
    ModelError,
    ModelNotFound,
    RequestRefused,
    ServerFailed,
    ServerMisconfigured,
    StreamBroken,
)
from actors.core.events import Notice, StreamRestarted, TextDelta
from actors.testing.flavours import VLLM, Flavour, LlamaCpp, Ollama
from actors.testing.scripted_server import (
    EndEarly,
    Fail,
    Garbage,
    Hang,
    Reply,
    ScriptedServer,
    Step,
    StreamError,
)
from tests.support.endpoints import TOOLS, Asked, ask_model, ask_once
from tests.support.ports import free_port

pytestmark = pytest.mark.anyio

VLLM_MODEL = "google/gemma-4-E4B-it"


def assert_one_line(asked: Asked) -> str:
    text = asked.error
    assert "\n" not in text and "Traceback" not in text and "Error code:" not in text
    assert text.count("HTTP ") <= 1, text
    return text


# ---------------------------------------------------------------- errors inside the stream


@pytest.mark.parametrize("flavour", [LlamaCpp(), LlamaCpp(legacy_errors=True), VLLM(),
                                     VLLM(legacy_errors=True), Flavour()],
                         ids=["llama.cpp", "llama.cpp-error-field", "vllm", "vllm-legacy",
                              "openai"])
async def test_an_error_sent_in_the_stream_is_retried_then_reported(flavour: Flavour) -> None:
    model = VLLM_MODEL if isinstance(flavour, VLLM) else "gemma4"
    failures: list[Step] = [StreamError(2, 500, "CUDA out of memory") for _ in range(5)]
    with ScriptedServer([StreamError(2, 500, "CUDA out of memory"), Reply("Recovered."),
                         *failures], flavour=flavour) as server:
        first, second = await ask_model(server.base_url, model=model, requests=2)
        server.assert_done()
    assert first.outcome.message == {"role": "assistant", "content": "Recovered."}
    assert first.of(StreamRestarted) and first.sleeps == [0.5]
    assert isinstance(second.outcome.error, ServerFailed)
    assert assert_one_line(second) == (
        f"The model endpoint {server.base_url} failed: error 500 in the stream five times: "
        "CUDA out of memory.")
    assert second.sleeps == [0.5, 1, 2, 4]
    retries = [n.text for n in second.of(Notice)]
    assert len(retries) == 4 and "attempt 5 of 5" in retries[-1]


async def test_llama_cpp_refuses_a_prompt_over_its_context_before_the_stream() -> None:
    """What llama.cpp 0c1e57098 really does (checked on the real server): HTTP 400 with
    exceed_context_size_error and the counts; the hint uses them."""
    with ScriptedServer([], flavour=LlamaCpp(n_ctx=5)) as server:
        asked = await ask_once(server.base_url)
    assert isinstance(asked.outcome.error, ContextExceeded) and asked.sleeps == []
    assert asked.outcome.error.context == 5 and asked.outcome.error.prompt_tokens
    assert f"request ({asked.outcome.error.prompt_tokens} tokens)" in str(asked.outcome.error)
    text = assert_one_line(asked)
    assert "HTTP 400: request (" in text and "exceeds the available context size (5 tokens)" \
        in text
    assert "--max-context-tokens" in text


@pytest.mark.parametrize("flavour", [LlamaCpp(legacy_errors=True), VLLM()],
                         ids=["llama.cpp-error-field", "vllm"])
async def test_a_refusal_in_the_stream_is_not_retried(flavour: Flavour) -> None:
    model = VLLM_MODEL if isinstance(flavour, VLLM) else "gemma4"
    step = StreamError(1, 400, "the request exceeds the available context size")
    with ScriptedServer([step], flavour=flavour) as server:
        asked = await ask_once(server.base_url, model=model)
        server.assert_done()
    assert isinstance(asked.outcome.error, RequestRefused) and asked.sleeps == []
    text = assert_one_line(asked)
    assert "error 400 in the stream: the request exceeds the available context size" in text
    assert "--max-context-tokens" in text


@pytest.mark.parametrize(("flavour", "step"), [
    (Ollama(), StreamError(3)),  # ollama: an empty chunk, then the body just ends
    (Flavour(), EndEarly(3)),
    (LlamaCpp(), EndEarly(2)),
], ids=["ollama-fails-midway", "openai-body-ends", "llama.cpp-body-ends"])
async def test_a_stream_without_a_finish_reason_is_broken_not_an_answer(
    flavour: Flavour, step: Step
) -> None:
    with ScriptedServer([step] * 5, flavour=flavour) as server:
        asked = await ask_once(server.base_url)
        server.assert_done()
    assert asked.outcome.message is None
    assert isinstance(asked.outcome.error, StreamBroken)
    text = assert_one_line(asked)
    assert "broke off its answer: the stream ended without a finish_reason five times" in text
    assert asked.sleeps == [0.5, 1, 2, 4]
    assert len(asked.of(StreamRestarted)) == 4  # the cut text shown is taken back each time


async def test_a_dropped_connection_is_retried() -> None:
    from actors.testing.scripted_server import Drop

    with ScriptedServer([Drop(2), Drop(0), Reply("Fine.")], flavour=Ollama()) as server:
        asked = await ask_once(server.base_url)
        server.assert_done()
    assert asked.outcome.message == {"role": "assistant", "content": "Fine."}
    assert asked.sleeps == [0.5, 1]


# ------------------------------------------------------------------------- garbage answers


@pytest.mark.parametrize(("body", "content_type", "expected"), [
    ("<html><body>502 Bad Gateway</body></html>", "text/html",
     "HTTP 200 with a body that is not an event stream: text/html: '<html><body>502 Bad"),
    ('{"error":"Unexpected endpoint or method. (POST /v1/chat/completions)"}',
     "application/json", "Unexpected endpoint or method"),
    ('{"hello": "world"}', "application/json", "HTTP 200 with JSON that is not a chat"),
    ("not json at all", "application/json", "HTTP 200 with a body that is not JSON"),
    ("data: {not json\n\n", "text/event-stream", "a malformed data line: '{not json'"),
    ("data: [1, 2]\n\n", "text/event-stream", "a data line that is not a JSON object"),
    ("", "text/event-stream", "the stream ended without a finish_reason"),
])
async def test_a_garbage_200_body_is_a_clear_failure(
    body: str, content_type: str, expected: str
) -> None:
    steps = [Garbage(body, content_type)] * (5 if not body else 1)
    with ScriptedServer(steps) as server:
        asked = await ask_once(server.base_url)
        server.assert_done()
    assert asked.outcome.message is None
    assert expected in assert_one_line(asked)
    assert isinstance(asked.outcome.error, InvalidResponse | RequestRefused | StreamBroken)


async def test_a_server_that_ignores_stream_gets_its_json_completion_taken() -> None:
    body = ('{"id":"x","object":"chat.completion","choices":[{"index":0,"message":'
            '{"role":"assistant","content":"Whole."},"finish_reason":"stop"}],'
            '"usage":{"prompt_tokens":9,"completion_tokens":2}}')
    with ScriptedServer([Garbage(body, "application/json")]) as server:
        asked = await ask_once(server.base_url)
    assert asked.outcome.message == {"role": "assistant", "content": "Whole."}
    assert asked.outcome.usage is not None and asked.outcome.usage.prompt_tokens == 9


# ----------------------------------------------------------------------------- HTTP status


async def test_5xx_is_retried_five_times_with_backoff() -> None:
    with ScriptedServer([Fail(500, "model runner crashed")] * 5, flavour=Ollama()) as server:
        asked = await ask_once(server.base_url)
        server.assert_done()
    assert asked.sleeps == [0.5, 1, 2, 4] and len(server.requests) == 5
    assert assert_one_line(asked) == (
        f"The model endpoint {server.base_url} failed: HTTP 500 five times: model runner "
        "crashed.")


async def test_429_honours_retry_after_but_not_an_hour_of_it() -> None:
    with ScriptedServer([Fail(429, "slow down", retry_after=3), Reply("ok"),
                         Fail(429, "come back tomorrow", retry_after=86400)]) as server:
        first, second = await ask_model(server.base_url, requests=2)
        server.assert_done()
    assert first.sleeps == [3] and first.outcome.message is not None
    assert second.sleeps == []
    assert "HTTP 429: come back tomorrow" in assert_one_line(second)


@pytest.mark.parametrize(("flavour", "model", "hint"), [
    (LlamaCpp(jinja=False), "gemma4", "Restart llama-server without --no-jinja"),
    (VLLM(auto_tool_choice=False), VLLM_MODEL, "--enable-auto-tool-choice --tool-call-parser"),
    (Ollama(tools_supported=False), "gemma4", "supports tool calls"),
], ids=["llama.cpp-without-jinja", "vllm-without-auto-tool-choice", "ollama-no-tools"])
async def test_known_server_configuration_is_not_retried(
    flavour: Flavour, model: str, hint: str
) -> None:
    with ScriptedServer([], flavour=flavour) as server:
        asked = await ask_once(server.base_url, model=model, tools=TOOLS)
        server.assert_done()
    assert isinstance(asked.outcome.error, ServerMisconfigured)
    assert len(server.requests) == 1 and asked.sleeps == []
    text = assert_one_line(asked)
    assert text.startswith(f"The model endpoint {server.base_url} is not set up for tool calls")
    assert hint in text


@pytest.mark.parametrize(("flavour", "listed"), [
    (Ollama(), "gemma4:latest, qwen3:8b"),
    (VLLM(), "google/gemma-4-E4B-it, qwen3:8b"),
], ids=["ollama", "vllm"])
async def test_an_unknown_model_is_named_with_the_models_there(
    flavour: Flavour, listed: str
) -> None:
    models = [flavour.default_models()[0], "qwen3:8b"]
    with ScriptedServer([], flavour=flavour, models=models) as server:
        asked = await ask_once(server.base_url, model="gemma5")
    assert isinstance(asked.outcome.error, ModelNotFound)
    assert len(server.requests) == 1
    text = assert_one_line(asked)
    assert text.startswith(f"Model 'gemma5' is not available at {server.base_url} (HTTP 404")
    assert f"Models there: {listed}." in text
    if isinstance(flavour, Ollama):
        assert "Pull it with 'ollama pull gemma5'." in text


async def test_a_missing_v1_is_pointed_out() -> None:
    with ScriptedServer([], flavour=Ollama()) as server:
        root = server.base_url.removesuffix("/v1")
        asked = await ask_once(root)
    assert isinstance(asked.outcome.error, RequestRefused)
    assert f"HTTP 404: 404 page not found. The URL may need /v1: --base-url {root}/v1" in (
        assert_one_line(asked))


async def test_401_says_where_the_key_comes_from() -> None:
    with ScriptedServer([Fail(401, "invalid api key")]) as server:
        asked = await ask_once(server.base_url)
    assert "HTTP 401: invalid api key. Check the key in $OPENAI_API_KEY." in assert_one_line(
        asked)


# ------------------------------------------------------------------- unreachable endpoints


async def test_connection_refused_says_how_to_start_ollama() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    asked = await ask_once(url)
    assert isinstance(asked.outcome.error, EndpointUnreachable)
    assert asked.sleeps == []  # nothing listens: reported at once
    assert assert_one_line(asked) == (
        f"Cannot reach the model endpoint {url}: connection refused. Is the server "
        "running? Check --base-url (or $OPENAI_BASE_URL).")
    ollama = await ask_once("http://127.0.0.1:11434/v1") if not _listening(11434) else None
    if ollama is not None:
        assert "Is ollama running? Start it with 'ollama serve'." in ollama.error


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize(("url", "expected"), [
    ("localhost:11434/v1", "the URL has no scheme. Use --base-url http://localhost:11434/v1"),
    ("ftp://localhost:11434/v1", "unsupported scheme 'ftp://'. Use http:// or https://"),
    ("http://[::1/v1", "the URL is not valid"),
    ("http:///v1", "the URL has no host"),
    ("http://no-such-host.invalid:11434/v1", "unknown host"),
])
async def test_a_bad_url_fails_at_once_with_the_fix(url: str, expected: str) -> None:
    asked = await ask_once(url)
    assert isinstance(asked.outcome.error, EndpointUnreachable)
    assert asked.sleeps == []
    assert expected in assert_one_line(asked)


async def test_a_stream_that_stalls_is_cut_after_llm_timeout_of_silence() -> None:
    with ScriptedServer([Hang(after_chunks=1)]) as server:
        asked = await ask_once(server.base_url, llm_timeout=0.5)
    assert isinstance(asked.outcome.error, EndpointTimeout)
    assert assert_one_line(asked) == (
        f"The model endpoint {server.base_url} gave no answer in time: the answer stopped "
        "for 0.5 s: after 1 chunk. Raise --llm-timeout if the model pauses that long.")


# --------------------------------------------------------------------------- the actor lives


async def test_the_actor_survives_every_failure_and_serves_the_next_request() -> None:
    steps: list[Step] = [Garbage("<html>"), Fail(400, "bad"), StreamError(1, 400, "nope"),
                         Reply("Still here.")]
    with ScriptedServer(steps, flavour=LlamaCpp()) as server:
        asked = await ask_model(server.base_url, requests=4)
        server.assert_done()
    assert [a.outcome.error is not None for a in asked] == [True, True, True, False]
    assert asked[3].outcome.message == {"role": "assistant", "content": "Still here."}
    assert "".join(e.text for e in asked[3].of(TextDelta)) == "Still here."


async def test_an_unexpected_exception_is_an_outcome_too() -> None:
    with ScriptedServer([]) as server:
        asked = await ask_once(server.base_url, messages=[{"role": "user", "content": {1, 2}}])
    assert isinstance(asked.outcome.error, ModelError)
    assert "unexpected error (TypeError)" in assert_one_line(asked)


async def test_a_redirect_of_an_http_endpoint_is_one_line_not_followed() -> None:
    """An http:// endpoint's client speaks no TLS and follows no redirect (so it never
    talks TLS unverified); the redirect is reported, not taken."""
    with ScriptedServer([Garbage("", content_type="text/html", status=301)]) as server:
        asked = await ask_once(server.base_url)
    assert isinstance(asked.outcome.error, RequestRefused) and asked.sleeps == []
    assert assert_one_line(asked) == (
        f"The model endpoint {server.base_url} refused the request: HTTP 301: redirected "
        "to ?. Check --base-url.")
