"""The REPL with real endpoints, in a pseudo-terminal: the banner names the endpoint and the
model, the start-up check warns without holding up the prompt, reasoning is shown dimmed."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.testing.flavours import LlamaCpp, Ollama
from actors.testing.scripted_server import Fail, Reply, ScriptedServer
from tests.support.ports import free_port
from tests.support.terminal import PROMPT, Terminal, start

pytestmark = pytest.mark.slow


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        if terminal.child.isalive():
            terminal.child.terminate(force=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_the_prompt_comes_before_the_check_and_its_warning_after(
    terminals: list[Terminal], memory_dir: Path, project: Path
) -> None:
    gate = threading.Event()
    with ScriptedServer([], flavour=Ollama(), models=["qwen3:8b"], models_gate=gate) as server:
        terminal = start(terminals, memory_dir, project, "--base-url", server.base_url)
        # The prompt is up while GET /v1/models is still held by the server.
        banner = terminal.log.getvalue()
        assert f"Model:            gemma4 at {server.base_url}" in banner
        assert not gate.is_set()
        gate.set()
        terminal.expect(r"warning: Model 'gemma4' is not available at \S+ \(not in its list "
                        r"of models\)\. Pull it with 'ollama pull gemma4'\. Models there: "
                        r"qwen3:8b\.")
        terminal.say("hello")
        terminal.expect(r"Error: Model 'gemma4' is not available at \S+ \(HTTP 404: model "
                        r"'gemma4' not found\)")
        terminal.expect(PROMPT)
        assert terminal.exit() == 0
    assert "Traceback" not in terminal.log.getvalue()


def test_an_unreachable_endpoint_is_warned_at_the_prompt(
    terminals: list[Terminal], memory_dir: Path, project: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    terminal = start(terminals, memory_dir, project, "--base-url", url)
    warning = (f"[warning: Cannot reach the model endpoint {url}: connection refused. Is the "
               "server running? Check --base-url (or $OPENAI_BASE_URL).]")
    if warning not in terminal.log.getvalue():  # it may come before or after the prompt
        terminal.expect(re.escape(warning))
    assert terminal.exit() == 0


def test_reasoning_is_shown_dimmed_before_the_answer(
    terminals: list[Terminal], memory_dir: Path, project: Path
) -> None:
    reply = Reply("Forty-two.", reasoning="The user asks the question of everything.")
    with ScriptedServer([reply], flavour=LlamaCpp(n_ctx=32768)) as server:
        terminal = start(terminals, memory_dir, project, "--base-url", server.base_url)
        terminal.say("What is the answer?")
        terminal.expect(r"\x1b\[2mThinking: The user asks the question of everything\.")
        terminal.expect(r"Assistant: Forty-two\.")
        terminal.expect(PROMPT)
        assert terminal.exit() == 0
    sent = server.requests[0]["messages"]
    assert all("question of everything" not in str(m.get("content")) for m in sent)


def _wait_for_requests(server: ScriptedServer, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while len(server.requests) < count:
        assert time.monotonic() < deadline, f"{len(server.requests)} requests, not {count}"
        time.sleep(0.02)
    time.sleep(0.2)  # the failure is answered; the wait before the retry has begun


@pytest.mark.parametrize("key", ["ctrl-c", "esc"])
@pytest.mark.parametrize("phase", ["the turn's request", "a compaction's summary"])
def test_ctrl_c_and_esc_interrupt_the_wait_before_a_retry(
    terminals: list[Terminal], memory_dir: Path, project: Path, key: str, phase: str
) -> None:
    """Ctrl-C means what Esc means in every phase, the wait before a failed request is
    tried again included: the turn's own request's, and that of the summary a compaction
    run before the turn's request needs (which, before, ran all five tries first)."""
    (project / "a.txt").write_text("a" * 5000)
    (project / "b.txt").write_text("b" * 6000)
    if phase == "the turn's request":
        steps, first, failing = [*[Fail(503)] * 5], None, 1
    else:  # the first answer fills the budget: the next turn compacts first
        steps, first, failing = [Reply("Read.", usage=(4500, 1500)), *[Fail(500)] * 5], \
            "@a.txt", 2
    with ScriptedServer(steps) as server:
        terminal = start(terminals, memory_dir, project, "--base-url", server.base_url,
                         "--max-context-tokens", "5000",
                         env={"AGENT_HARNESS_RETRY_BACKOFF": "30"})
        if first is not None:
            terminal.say(first)
            terminal.expect("Assistant: Read.")
            terminal.expect(PROMPT)
        terminal.say("@b.txt")
        _wait_for_requests(server, failing)
        if key == "ctrl-c":
            terminal.child.sendcontrol("c")
        else:
            terminal.child.send("\x1b")
        terminal.expect("Interrupted.", timeout=5)  # not after 5 tries, 32 s of waits
        terminal.expect(PROMPT)
        assert len(server.requests) == failing
        assert terminal.exit() == 0
    assert "Traceback" not in terminal.log.getvalue()
