"""The real ``harness -p`` process against each server's wire format and quirk, on both
event loops: the answer alone on stdout (no reasoning), the tools ran with the right
arguments, ``[tool]`` lines readable, every later request valid, exit codes, and every
failure one clear line on stderr, never a traceback."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.store import SessionStore
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
    tool_pairing_errors,
)
from tests.support.clitools import harness
from tests.support.flavours import (
    AFTER,
    CONTENT,
    FLAVOURS,
    TAGS,
    THINKING,
    script,
    sent_text,
)

pytestmark = pytest.mark.slow
BACKOFF = "0.01"  # the schedule doubles from here: five attempts take 0.15 s, not 7.5 s


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def run(url: str, model: str, backend: str, memory_dir: Path, project: Path,
        *extra: str, prompt: str = "Write a > b && c < d to out.txt and show it."
        ) -> tuple[int, str, str]:
    result = harness("-p", prompt, "--base-url", url, "--model", model,
                     "--mode", "dangerouslySkipPermissions", *extra, memory_dir=memory_dir,
                     cwd=project, env={"AGENT_HARNESS_BACKEND": backend,
                                       "OPENAI_API_KEY": "test",
                                       "AGENT_HARNESS_RETRY_BACKOFF": BACKOFF})
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    return result.returncode, result.stdout, result.stderr


def failure_line(stderr: str) -> str:
    """The one line of a failed turn (after ``Session: ID`` and any retry notices)."""
    lines = [line for line in stderr.splitlines() if line.startswith("harness: Turn failed")]
    assert len(lines) == 1, stderr
    return lines[0].removeprefix("harness: Turn failed: ")


@pytest.mark.parametrize(("flavour", "model"), [(f, m) for _, f, m in FLAVOURS],
                         ids=[i for i, _, _ in FLAVOURS])
def test_each_server_and_quirk_in_print_mode(
    backend: str, memory_dir: Path, project: Path, flavour: Callable[[], Flavour], model: str
) -> None:
    with ScriptedServer(script(), flavour=flavour()) as server:
        code, out, err = run(server.base_url, model, backend, memory_dir, project)
        server.assert_done()
    assert code == 0, err
    assert out == "I wrote out.txt and read it back.\n"
    assert THINKING not in out + err and AFTER not in out + err
    assert (project / "out.txt").read_text() == CONTENT
    tool_lines = [line for line in err.splitlines() if line.startswith("[tool] ")]
    assert len(tool_lines) == 2 and "\\u00" not in "".join(tool_lines)
    assert json.loads(tool_lines[0].removeprefix("[tool] write_file(")[:-1]) == {
        "path": "out.txt", "content": CONTENT}
    assert tool_lines[1] == '[tool] run_bash({"command": "cat out.txt"})'
    assert tool_pairing_errors(server.requests[1]["messages"]) == []
    sent = sent_text(server.requests)  # as answer text (as reasoning: test_endpoint_reasoning)
    assert THINKING not in sent and not any(tag in sent for tag in TAGS)
    sid = err.split()[1]
    state = SessionStore(memory_dir).info(sid).state
    assert state["calls"] == 2 and state["total_tokens_in"] > 0


# (id, flavour, model, steps, what the one line says)
FAILURES: list[tuple[str, Callable[[], Flavour], str, list[Step], str]] = [
    ("ollama-cut-midway", Ollama, "gemma4", [StreamError(3)] * 5,
     "broke off its answer: the stream ended without a finish_reason five times"),
    ("openai-body-just-ends", Flavour, "gemma4", [EndEarly(3)] * 5,
     "the stream ended without a finish_reason five times"),
    ("llama.cpp-http-500", LlamaCpp, "gemma4", [Fail(500, "failed to load model")] * 5,
     "failed: HTTP 500 five times: failed to load model."),
    ("llama.cpp-error-event", LlamaCpp, "gemma4",
     [StreamError(2, 400, "the request exceeds the available context size")],
     "error 400 in the stream: the request exceeds the available context size"),
    ("llama.cpp-error-field", lambda: LlamaCpp(legacy_errors=True), "gemma4",
     [StreamError(2, 400, "the request exceeds the available context size")],
     "error 400 in the stream: the request exceeds the available context size"),
    ("vllm-error-event", VLLM, "google/gemma-4-E4B-it",
     [StreamError(1, 400, "invalid tool schema")], "error 400 in the stream: invalid tool "
     "schema"),
    ("llama.cpp-without-jinja", lambda: LlamaCpp(jinja=False), "gemma4", [],
     "is not set up for tool calls: HTTP 500: tools param requires --jinja flag. Restart "
     "llama-server without --no-jinja"),
    ("vllm-without-auto-tool-choice", lambda: VLLM(auto_tool_choice=False),
     "google/gemma-4-E4B-it", [], "Restart vLLM with --enable-auto-tool-choice"),
    ("ollama-model-not-pulled", Ollama, "gemma5", [],
     "Model 'gemma5' is not available at {url} (HTTP 404: model 'gemma5' not found). Pull it "
     "with 'ollama pull gemma5'. Models there: gemma4:latest."),
    ("html-200", Flavour, "gemma4", [Garbage("<html><body>Welcome to nginx!</body></html>")],
     "HTTP 200 with a body that is not an event stream: text/html: "
     "'<html><body>Welcome to nginx!</body></html>'."),
]


@pytest.mark.parametrize(("flavour", "model", "steps", "expected"),
                         [(f, m, s, e) for _, f, m, s, e in FAILURES],
                         ids=[i for i, *_ in FAILURES])
def test_each_failure_is_one_line_and_exit_1(
    backend: str, memory_dir: Path, project: Path, flavour: Callable[[], Flavour], model: str,
    steps: list[Step], expected: str,
) -> None:
    with ScriptedServer(steps, flavour=flavour()) as server:
        code, out, err = run(server.base_url, model, backend, memory_dir, project)
        server.assert_done()
    assert code == 1 and out == ""
    assert expected.format(url=server.base_url) in failure_line(err)
    assert "This answer will" not in out  # a cut answer is never printed as the answer


def test_an_error_midway_is_retried_and_the_answer_printed(
    backend: str, memory_dir: Path, project: Path
) -> None:
    steps: list[Step] = [StreamError(2, 500, "out of memory"), Reply("After the retry.")]
    with ScriptedServer(steps, flavour=LlamaCpp(legacy_errors=True)) as server:
        code, out, err = run(server.base_url, "gemma4", backend, memory_dir, project)
        server.assert_done()
    assert code == 0 and out == "After the retry.\n"
    assert "harness: Model request failed (error 500 in the stream: out of memory); "\
        "retrying in 0.01 s (attempt 2 of 5)." in err


def test_an_answer_cut_at_the_output_limit_says_so(
    backend: str, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply("Half an ans", finish_reason="length")],
                        flavour=Ollama()) as server:
        code, out, err = run(server.base_url, "gemma4", backend, memory_dir, project)
    assert code == 0 and out == "Half an ans\n"
    assert "harness: The answer was cut at the model's output limit" in err


def test_reasoning_without_an_answer_fails_the_turn(
    backend: str, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Reply(reasoning="Endless deliberation...", finish_reason="length")],
                        flavour=VLLM()) as server:
        code, out, err = run(server.base_url, "google/gemma-4-E4B-it", backend, memory_dir,
                             project)
    assert code == 1 and out == ""
    assert failure_line(err).startswith("The model spent its whole answer on reasoning")
    assert "Endless deliberation" not in err


@pytest.mark.parametrize(("url", "expected", "code"), [
    ("localhost:11434/v1", "the URL has no scheme. Use --base-url http://localhost:11434/v1",
     2),
    ("ftp://localhost:11434/v1", "unsupported scheme 'ftp://'", 2),
    ("http://no-such-host.invalid:11434/v1", "unknown host", 1),
])
def test_a_bad_url_is_one_line(
    backend: str, memory_dir: Path, project: Path, url: str, expected: str, code: int
) -> None:
    status, out, err = run(url, "gemma4", backend, memory_dir, project)
    assert status == code and out == ""
    line = [x for x in err.splitlines() if x.startswith("harness: ")]
    assert len(line) == 1 and expected in line[0], err


def test_an_unreachable_endpoint_is_reported_fast_with_the_hint(
    backend: str, memory_dir: Path, project: Path, request: pytest.FixtureRequest
) -> None:
    """The time from starting ``harness -p`` to its exit is recorded (printed, and kept in the
    test's properties), not asserted: the machine's speed is not the harness's. The figures
    in docs/reliability.md come from ``benchmarks/endpoints.py``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    code, out, err = run(url, "gemma4", backend, memory_dir, project)
    elapsed = time.monotonic() - started
    request.node.user_properties.append((f"unreachable_report_seconds_{backend}",
                                         round(elapsed, 3)))
    print(f"unreachable endpoint reported after {elapsed:.2f} s ({backend}, process start "
          "to exit)")
    assert code == 1 and out == ""
    assert failure_line(err).startswith(f"Cannot reach the model endpoint {url}: connection "
                                        "refused. Is the server running? Check --base-url (or "
                                        "$OPENAI_BASE_URL). (nothing was answered")


def test_a_steady_answer_longer_than_llm_timeout_completes(
    backend: str, memory_dir: Path, project: Path
) -> None:
    """--llm-timeout bounds silence: an answer streaming a word every 0.1 s for about 3 s
    completes under --llm-timeout 1 (before, the limit was on the whole answer)."""
    text = " ".join(f"w{n}" for n in range(30))
    with ScriptedServer([Reply(text, chunk_delay=0.1)]) as server:
        code, out, err = run(server.base_url, "gemma4", backend, memory_dir, project,
                             "--llm-timeout", "1", prompt="Count.")
        server.assert_done()
    assert code == 0, err
    assert out == text + "\n"


def test_a_server_silent_past_llm_timeout_fails_with_one_line(
    backend: str, memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([Hang(after_chunks=2)]) as server:
        code, out, err = run(server.base_url, "gemma4", backend, memory_dir, project,
                             "--llm-timeout", "1", prompt="Count.")
    assert code == 1 and out == ""
    assert failure_line(err).startswith(
        f"The model endpoint {server.base_url} gave no answer in time: the answer stopped "
        "for 1 s: after 2 chunks. Raise --llm-timeout if the model pauses that long. "
        "(nothing was answered")
