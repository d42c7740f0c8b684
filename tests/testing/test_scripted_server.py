"""Tests for actors/testing/scripted_server.py, driven by the real ``openai.AsyncOpenAI`` client;
the flavours (ollama, llama.cpp, vLLM) are checked on the raw SSE lines they send.

Every async test runs on asyncio and on trio (see the ``anyio_backend`` fixture in conftest).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import openai
import pytest

from actors.testing.scripted_server import (
    Drop,
    Fail,
    Hang,
    Reply,
    ScriptedServer,
    Step,
    ToolCall,
    load_script,
    tool_pairing_errors,
)
from tests.support.children import read_line

# Under trio, every stream that openai's AsyncStream ends by itself (it `break`s out of its own
# SSE async generator on "data: [DONE]" without aclose()) leaves a chain of suspended async
# generators (openai._streaming.AsyncStream._iter_events, SSEDecoder.aiter_bytes,
# httpx2 Response.aiter_bytes, httpcore2 PoolByteStream.__aiter__) to the garbage collector.
# trio's asyncgen finalizer closes them correctly but also warns (ResourceWarning), which
# filterwarnings=error turns into PytestUnraisableExceptionWarning failures. asyncio's
# finalizer closes them silently. See test_trio_warns_about_openai_stream_generators.
OPENAI_ASYNCGEN_WARNING = r"ignore:Async generator '(openai|httpx2|httpcore2)\.:ResourceWarning"

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings(OPENAI_ASYNCGEN_WARNING)]

USER = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def client_for(server: ScriptedServer, **kwargs: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    """A real AsyncOpenAI client pointed at the server, without retries, closed afterwards."""
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=0, **kwargs
    ) as client:
        yield client


async def stream_chunks(
    client: openai.AsyncOpenAI, messages: Any = USER, **kwargs: Any
) -> list[Any]:
    """Create a streaming chat completion and collect all of its chunks."""
    stream = await client.chat.completions.create(
        model="scripted-model", messages=messages, stream=True, **kwargs
    )
    return [chunk async for chunk in stream]


# ------------------------------------------------------------------------------------- replies


async def test_streamed_text_arrives_in_several_chunks() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    with ScriptedServer([Reply(text)]) as server:
        async with client_for(server) as client:
            chunks = await stream_chunks(client)
        server.assert_done()
    pieces = [c.choices[0].delta.content for c in chunks[:-1] if c.choices[0].delta.content]
    assert len(pieces) >= 3
    assert "".join(pieces) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert server.last_request["stream"] is True
    assert server.last_request["messages"] == USER


async def test_short_text_is_still_split() -> None:
    with ScriptedServer([Reply("Hi!")]) as server:
        async with client_for(server) as client:
            chunks = await stream_chunks(client)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert pieces == ["H", "i", "!"]


async def test_streamed_tool_calls_reassemble_from_split_arguments() -> None:
    args = json.dumps({"path": "src/app.py", "start": 1, "end": 40})
    bad = '{"command": "ls -la'  # malformed JSON is delivered verbatim
    step = Reply("Let me look.", [ToolCall("read_file", args, id="call_a"), ToolCall("bash", bad)])
    with ScriptedServer([step]) as server:
        async with client_for(server) as client:
            chunks = await stream_chunks(client)
        server.assert_done()

    calls: dict[int, dict[str, str]] = {}
    argument_deltas = 0
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            if delta.function:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
                argument_deltas += bool(delta.function.arguments)
    assert calls == {
        0: {"id": "call_a", "name": "read_file", "arguments": args},
        1: {"id": "call_0_1", "name": "bash", "arguments": bad},  # default id: call_<req>_<n>
    }
    assert argument_deltas >= 6  # both argument strings were split across several deltas
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert step.request_index == 0


async def test_include_usage_adds_a_final_usage_chunk() -> None:
    with ScriptedServer([Reply("counted reply", usage=(120, 7)), Reply("estimated")]) as server:
        async with client_for(server) as client:
            chunks = await stream_chunks(client, stream_options={"include_usage": True})
            estimated = await stream_chunks(client, stream_options={"include_usage": True})
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (120, 7)
    assert last.usage.total_tokens == 127
    assert all(c.usage is None for c in chunks[:-1])
    assert estimated[-1].usage is not None and estimated[-1].usage.total_tokens > 0


async def test_no_usage_chunk_without_include_usage() -> None:
    with ScriptedServer([Reply("no usage")]) as server:
        async with client_for(server) as client:
            chunks = await stream_chunks(client)
    assert all(c.choices and c.usage is None for c in chunks)


async def test_non_streaming_completion() -> None:
    step = Reply("Done.", [ToolCall("bash", {"command": "ls"})], usage=(10, 3))
    with ScriptedServer([step]) as server:
        async with client_for(server) as client:
            completion = await client.chat.completions.create(model="m-1", messages=USER)
        server.assert_done()
    choice = completion.choices[0]
    assert completion.model == "m-1"
    assert choice.message.content == "Done."
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    function = choice.message.tool_calls[0].function  # type: ignore[union-attr]
    assert (function.name, json.loads(function.arguments)) == ("bash", {"command": "ls"})
    assert completion.usage is not None and completion.usage.total_tokens == 13


async def test_models_endpoint_and_unknown_paths() -> None:
    with ScriptedServer([], models=["alpha", "beta"]) as server:
        async with client_for(server) as client:
            models = [m.id async for m in client.models.list()]
            with pytest.raises(openai.NotFoundError):
                await client.embeddings.create(model="alpha", input="x")
        server.assert_done()  # neither endpoint consumes steps
    assert models == ["alpha", "beta"]
    assert server.requests == []


# ------------------------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
        (400, openai.BadRequestError),
    ],
)
async def test_fail_maps_to_openai_status_errors(
    status: int, error_type: type[openai.APIStatusError]
) -> None:
    with ScriptedServer([Fail(status, "slow down", retry_after=7)]) as server:
        async with client_for(server) as client:
            with pytest.raises(error_type) as info:
                await stream_chunks(client)
        server.assert_done()
    assert type(info.value) is error_type
    assert info.value.status_code == status
    assert info.value.response.headers["retry-after"] == "7"
    assert isinstance(info.value.body, dict) and info.value.body["message"] == "slow down"


async def test_drop_mid_stream_raises_api_connection_error() -> None:
    """Observed on both backends: openai.APIConnectionError from the iteration, caused by
    httpx2.RemoteProtocolError("peer closed connection ... (incomplete chunked read)")."""
    with ScriptedServer([Drop(after_chunks=2)]) as server:
        async with client_for(server) as client:
            stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
            received = []
            with pytest.raises(openai.APIConnectionError) as info:
                async for chunk in stream:
                    received.append(chunk)
        server.assert_done()
    assert type(info.value) is openai.APIConnectionError
    assert isinstance(info.value, openai.APIError)
    assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
    assert "incomplete chunked read" in str(info.value.__cause__)
    assert len(received) == 2


async def test_drop_before_response_fails_the_create_call() -> None:
    """Drop(0): create() itself raises APIConnectionError (cause: RemoteProtocolError
    "Server disconnected without sending a response.")."""
    with ScriptedServer([Drop(0), Drop(0), Drop(1)]) as server:
        async with client_for(server) as client:
            for kwargs in ({"stream": True}, {}, {}):  # Drop(1) non-streaming: half a body
                with pytest.raises(openai.APIConnectionError) as info:
                    await client.chat.completions.create(model="m", messages=USER, **kwargs)
                assert type(info.value) is openai.APIConnectionError
                assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
        server.assert_done()


async def test_hang_is_cut_by_the_client_timeout() -> None:
    """Observed on both backends: openai.APITimeoutError (a subclass of APIConnectionError)
    caused by httpx2.ReadTimeout, whether the hang is before headers, after headers, or
    after some chunks."""
    steps: list[Step] = [Hang(), Hang(after_headers=False), Hang(after_chunks=2)]
    with ScriptedServer(steps) as server:
        async with client_for(server, timeout=0.2) as client:
            for _ in steps:
                received = []
                with pytest.raises(openai.APITimeoutError) as info:
                    async for chunk in await client.chat.completions.create(
                        model="m", messages=USER, stream=True
                    ):
                        received.append(chunk)
                assert isinstance(info.value.__cause__, httpx2.ReadTimeout)
            assert len(received) == 2
        closing = threading.Thread(target=server.close)  # must not wait for the hanging handlers
        closing.start()
        closing.join(10)
        assert not closing.is_alive(), "server.close() waited for the hanging handlers"
        server.assert_done()


async def test_hang_is_cut_by_a_cancel_scope() -> None:
    """A stream hanging after its first chunk ends when its cancel scope is cancelled (no
    timeout involved: the scope is cancelled once the reader waits for the second chunk)."""
    with ScriptedServer([Hang(after_chunks=1)]) as server:
        async with client_for(server) as client:
            received = []
            first = anyio.Event()

            async def read() -> None:
                stream = await client.chat.completions.create(model="m", messages=USER,
                                                              stream=True)
                async for chunk in stream:
                    received.append(chunk)
                    first.set()

            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await first.wait()
                    await anyio.wait_all_tasks_blocked()  # the reader waits for more
                    scope.cancel()
            assert scope.cancelled_caught and len(received) == 1


async def test_server_closes_while_client_is_hanging() -> None:
    with ScriptedServer([Hang()]) as server:
        async with client_for(server) as client:
            stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
            server.close()
            with pytest.raises(openai.APIConnectionError):
                async for _ in stream:
                    pass


@pytest.mark.filterwarnings("default")
async def test_trio_warns_about_openai_stream_generators(anyio_backend: str) -> None:
    """Pin the upstream behaviour behind OPENAI_ASYNCGEN_WARNING (fails once it is fixed)."""
    with ScriptedServer([Reply("complete stream")]) as server:
        async with client_for(server) as client:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                await stream_chunks(client)
                gc.collect()
    names = sorted(
        str(w.message).split("'")[1] for w in caught if issubclass(w.category, ResourceWarning)
    )
    if anyio_backend == "trio":
        assert "openai._streaming.AsyncStream._iter_events" in names
    else:
        assert names == []


async def test_client_disconnect_mid_stream_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    text = " ".join(f"word{i}" for i in range(30))
    with ScriptedServer([Reply(text, chunk_delay=0.01)]) as server:
        async with client_for(server) as client:
            stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
            async for chunk in stream:
                if chunk.choices[0].delta.content:
                    break
            await stream.close()
        await anyio.sleep(0.1)  # let the handler hit the closed socket before server.close()
        server.assert_done()
    assert capfd.readouterr().err == ""


# ---------------------------------------------------------------------------------- strictness


async def test_exhausted_script_answers_500_and_fails_assert_done() -> None:
    with ScriptedServer([Reply("only one")]) as server:
        async with client_for(server) as client:
            await stream_chunks(client)
            with pytest.raises(openai.InternalServerError, match="script exhausted"):
                await stream_chunks(client)
        with pytest.raises(AssertionError, match="unexpected request 1"):
            server.assert_done()
    assert len(server.requests) == 2


async def test_unconsumed_steps_fail_assert_done() -> None:
    with ScriptedServer([Reply("a"), Fail(500)]) as server:
        async with client_for(server) as client:
            await stream_chunks(client)
        assert server.remaining == [Fail(500)]
        with pytest.raises(AssertionError, match="unconsumed step 1"):
            server.assert_done()


async def test_expectations_are_checked_and_steps_record_their_request() -> None:
    def wants_tools(body: dict[str, Any]) -> None:
        assert "tools" in body, "request has no tools"

    first, second = Reply("one", expect=wants_tools), Reply("two", expect=wants_tools)
    with ScriptedServer([first, second]) as server:
        async with client_for(server) as client:
            tools: Any = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
            await stream_chunks(client, tools=tools)
            await stream_chunks(client)
        with pytest.raises(AssertionError, match="request 1: expectation failed"):
            server.assert_done()
    assert (first.request_index, second.request_index) == (0, 1)


async def test_check_tool_pairing_rejects_invalid_conversations() -> None:
    with ScriptedServer([Reply("never sent")], check_tool_pairing=True) as server:
        async with client_for(server) as client:
            orphan: Any = [*USER, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
            with pytest.raises(openai.BadRequestError, match="orphan"):
                await client.chat.completions.create(model="m", messages=orphan)
        with pytest.raises(AssertionError, match="invalid conversation"):
            server.assert_done()


async def test_responder_drives_a_long_conversation() -> None:
    def responder(body: dict[str, Any]) -> Step:
        turn = len([m for m in body["messages"] if m["role"] == "user"])
        if turn == 3:
            return Fail(503)
        return Reply(f"turn {turn}", [ToolCall("noop", "{}")] if turn % 2 else [])

    with ScriptedServer(responder) as server:
        async with client_for(server) as client:
            messages: list[Any] = []
            replies = []
            for _ in range(20):
                messages.append({"role": "user", "content": "next"})
                try:
                    chunks = await stream_chunks(client, messages=messages)
                except openai.InternalServerError:
                    replies.append("503")
                    continue
                text = "".join(c.choices[0].delta.content or "" for c in chunks)
                replies.append(text)
                messages.append({"role": "assistant", "content": text})
        server.assert_done()
    assert replies[:4] == ["turn 1", "turn 2", "503", "turn 4"]
    assert len(server.requests) == 20


async def test_wait_for_requests_from_a_worker_thread() -> None:
    with ScriptedServer([Reply("a", chunk_delay=0.01), Reply("b")]) as server:
        seen: list[int] = []
        waiter = threading.Thread(target=lambda: seen.append(len(server.wait_for_requests(2))))
        waiter.start()
        async with client_for(server) as client:
            await stream_chunks(client)
            await stream_chunks(client)
        await anyio.to_thread.run_sync(waiter.join)
        assert seen == [2]
        with pytest.raises(TimeoutError):
            server.wait_for_requests(3, timeout=0.05)
        server.assert_done()


# ------------------------------------------------------------------------- tool_pairing_errors


def _assistant(*ids: str) -> dict[str, Any]:
    function = {"name": "f", "arguments": "{}"}
    calls = [{"id": i, "type": "function", "function": function} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def test_tool_pairing_accepts_a_valid_conversation() -> None:
    messages = [
        {"role": "system", "content": "s"},
        *USER,
        _assistant("a", "b"),
        _result("b"),
        _result("a"),
        {"role": "assistant", "content": "done"},
        *USER,
        _assistant("c"),
        _result("c"),
    ]
    assert tool_pairing_errors(messages) == []


def test_tool_pairing_catches_a_missing_result() -> None:
    errors = tool_pairing_errors([*USER, _assistant("a", "b"), _result("a"), *USER])
    assert len(errors) == 1 and "'b'" in errors[0] and "no tool result" in errors[0]
    assert tool_pairing_errors([*USER, _assistant("a")]) == [
        "tool call 'a' (message 1) has no tool result at end of conversation"
    ]


def test_tool_pairing_catches_a_duplicate_result() -> None:
    errors = tool_pairing_errors([*USER, _assistant("a"), _result("a"), _result("a")])
    assert errors == ["duplicate tool result for 'a' at message 3"]


def test_tool_pairing_catches_orphan_and_late_results() -> None:
    assert tool_pairing_errors([*USER, _result("x")]) == [
        "orphan tool result 'x' at message 1: no open call"
    ]
    late = tool_pairing_errors([*USER, _assistant("a"), *USER, _result("a")])
    assert late[0].startswith("tool call 'a' (message 1) has no tool result before message 2")
    assert late[1] == "tool result for 'a' at message 3 comes too late"


# ------------------------------------------------------------------------------------- program


def test_load_script_parses_the_json_forms() -> None:
    steps = load_script(
        [
            {"reply": "hi", "tool_calls": [{"name": "ls", "arguments": "{}"}], "usage": [3, 4]},
            {"fail": 429, "retry_after": 2},
            {"drop": 2},
            {"hang": True},
        ]
    )
    assert steps == [
        Reply("hi", [ToolCall("ls", "{}")], usage=(3, 4)),
        Fail(429, retry_after=2),
        Drop(2),
        Hang(),
    ]


@pytest.mark.slow
def test_program_serves_a_script_in_a_subprocess(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"reply": "from another process"}]))
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "actors.testing.scripted_server", "--port", "0",
               "--script", script]
    with subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            base_url = read_line(proc.stdout).strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
            with openai.OpenAI(base_url=base_url, api_key="test", max_retries=0) as client:
                completion = client.chat.completions.create(model="m", messages=USER)
            assert completion.choices[0].message.content == "from another process"
        finally:
            proc.terminate()
            _, stderr = proc.communicate(timeout=5)
    assert stderr == ""


# ------------------------------------------------------------------------------------ flavours


def raw_stream(server: ScriptedServer, **body: Any) -> tuple[int, list[str]]:
    """POST a streaming chat request; the status and the raw SSE lines (blank ones dropped)."""
    payload = {"model": server.models[0], "messages": USER, "stream": True, **body}
    with httpx2.Client() as http:
        response = http.post(f"{server.base_url}/chat/completions", json=payload)
    return response.status_code, [line for line in response.text.splitlines() if line]


def data(lines: list[str]) -> list[Any]:
    return [json.loads(line[6:]) for line in lines
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_ollama_streams_whole_calls_with_go_escapes_and_its_index_quirks() -> None:
    from actors.testing.flavours import Ollama

    step = Reply("Hi", [ToolCall("run_bash", {"command": "a > b"}), ToolCall("ls", {})],
                 reasoning="hmm")
    for tool_index, expected in (("sequential", [0, 1]), ("zero", [0, 0]),
                                 ("absent", [None, None])):
        with ScriptedServer([step], flavour=Ollama(tool_index=tool_index)) as server:
            _, lines = raw_stream(server, stream_options={"include_usage": True})
        chunks = data(lines)
        assert lines[-1] == "data: [DONE]"
        assert all(c["system_fingerprint"] == "fp_ollama" for c in chunks)
        first = chunks[0]["choices"][0]["delta"]
        assert first == {"role": "assistant", "content": "", "reasoning": "h"}
        calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
                 if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
        assert [c.get("index") for c in calls] == expected
        assert calls[0]["function"]["arguments"] == '{"command":"a \\u003e b"}'
        assert calls[0]["id"].startswith("call_") and len(calls[0]["id"]) == 13
        assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0


def test_ollama_fails_midway_with_an_empty_chunk_and_no_end() -> None:
    from actors.testing.flavours import Ollama
    from actors.testing.scripted_server import StreamError

    with ScriptedServer([StreamError(2)], flavour=Ollama()) as server:
        status, lines = raw_stream(server)
    chunks = data(lines)
    assert status == 200 and "data: [DONE]" not in lines
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {"content": ""},
                                        "finish_reason": None}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)


def test_ollama_native_api_and_unknown_models() -> None:
    from actors.testing.flavours import Ollama

    with ScriptedServer([], flavour=Ollama(num_ctx_parameter=8192, loaded=True)) as server:
        root = server.base_url.removesuffix("/v1")
        with httpx2.Client() as http:
            assert http.get(f"{root}/api/version").json() == {"version": "0.20.4"}
            show = http.post(f"{root}/api/show", json={"model": "gemma4"}).json()
            ps = http.get(f"{root}/api/ps").json()
            models = http.get(f"{server.base_url}/models").json()
            missing = http.post(f"{server.base_url}/chat/completions",
                                json={"model": "gemma5", "messages": USER})
            route = http.post(f"{root}/chat/completions", json={})
    assert "num_ctx                        8192" in show["parameters"]
    assert ps["models"][0]["context_length"] == 8192
    assert models["data"][0] == {"id": "gemma4:latest", "object": "model",
                                 "created": 1767225600, "owned_by": "library"}
    assert missing.status_code == 404 and missing.json()["error"] == {
        "message": "model 'gemma5' not found", "type": "not_found_error", "param": None,
        "code": None}
    assert (route.status_code, route.text) == (404, "404 page not found")


def test_llama_cpp_fragments_reasoning_formats_and_error_events() -> None:
    from actors.testing.flavours import LlamaCpp
    from actors.testing.scripted_server import StreamError

    step = Reply("Answer", [ToolCall("ls", {"path": "src"})], reasoning="think")
    with ScriptedServer([step, step], flavour=LlamaCpp()) as server:
        _, lines = raw_stream(server, stream_options={"include_usage": True})
        _, old = raw_stream(server)
    chunks = data(lines)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert chunks[1]["choices"][0]["delta"] == {"reasoning_content": "th"}
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert len(calls[0]["id"]) == 32 and calls[0]["function"]["name"] == "ls"
    assert all(set(c) == {"index", "function"} for c in calls[1:])
    assert "".join(c["function"]["arguments"] for c in calls) == '{"path": "src"}'
    assert chunks[-1]["choices"] == [] and "timings" in chunks[-1]
    assert chunks[0]["system_fingerprint"].startswith("b")
    assert all(not c.get("usage") for c in data(old))  # no include_usage: no usage chunk

    for flavour, content in ((LlamaCpp(reasoning_format="none"), "<|channel>thought\nthink"
                              "<channel|>"),  # Gemma 4, as the real server sends it
                             (LlamaCpp(reasoning_format="none", template="think"),
                              "<think>\nthink\n</think>"),
                             (LlamaCpp(reasoning_format="lone-close"), "think\n</think>")):
        with ScriptedServer([Reply("A", reasoning="think")], flavour=flavour) as server:
            _, lines = raw_stream(server)
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in data(lines)
                       if c["choices"])
        assert text.startswith(content) and text.endswith("A")

    with ScriptedServer([Reply(tool_calls=[ToolCall("ls", {"path": "."})])],
                        flavour=LlamaCpp(arguments_as_object=True)) as server:
        _, lines = raw_stream(server)
    objects = [c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
               for c in data(lines) if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert objects == [{"path": "."}]

    with ScriptedServer([StreamError(1, 500, "boom")], flavour=LlamaCpp()) as server:
        _, new = raw_stream(server)
    with ScriptedServer([StreamError(1, 500, "boom")],
                        flavour=LlamaCpp(legacy_errors=True)) as server:
        _, legacy = raw_stream(server)
    assert new[-1] == 'data: {"error": {"code": 500, "message": "boom", "type": "server_error"}}'
    assert legacy[-2:] == ['error: {"code": 500, "message": "boom", "type": "server_error"}',
                           "data: [DONE]"]
    with ScriptedServer([], flavour=LlamaCpp(jinja=False)) as server:
        status, lines = raw_stream(server, tools=[{"type": "function",
                                                   "function": {"name": "ls"}}])
    assert status == 500 and json.loads(lines[0]) == {"error": {
        "code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}


def test_vllm_repeated_arguments_null_fields_and_errors() -> None:
    from actors.testing.flavours import VLLM
    from actors.testing.scripted_server import StreamError

    step = Reply(tool_calls=[ToolCall("ls", {"path": "a"})], reasoning="r")
    with ScriptedServer([step], flavour=VLLM(repeat_arguments=True, null_fields=True)) as server:
        _, lines = raw_stream(server)
    chunks = data(lines)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[1]["choices"][0]["delta"] == {"reasoning": "r"}
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0]["id"].startswith("chatcmpl-tool-") and calls[0]["function"] == {"name": "ls"}
    assert calls[1]["id"] is None and calls[1]["function"]["name"] is None
    streamed = "".join(c["function"]["arguments"] for c in calls[1:-1])
    assert streamed == '{"path": "a"}' and calls[-1]["function"]["arguments"] == streamed
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"

    with ScriptedServer([StreamError(1, 400, "bad")], flavour=VLLM()) as server:
        _, lines = raw_stream(server)
        with httpx2.Client() as http:
            listed = http.get(f"{server.base_url}/models").json()["data"][0]
            missing = http.post(f"{server.base_url}/chat/completions",
                                json={"model": "nope", "messages": USER})
    assert lines[-2:] == ['data: {"error": {"message": "bad", "type": "BadRequestError", '
                          '"param": null, "code": 400}}', "data: [DONE]"]
    assert listed["owned_by"] == "vllm" and listed["max_model_len"] == 32768
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "The model `nope` does not exist."
