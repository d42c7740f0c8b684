"""A turn's durable writes, counted: a batch of reads is saved with the answer that planned it
in one commit and needs no write-ahead record; a batch with effects keeps the answer's own
commit and the "started" record before the call runs. A request goes out while the
checkpoint of what it carries commits, and nothing of its answer is shown before that
checkpoint is durable (checked at every answer text and tool call shown); an interruption
during a batch of reads saves the answer with its "interrupted" result, and a kill -9 during
one leaves the session as a kill during the model's answer does (both backends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.config import Mode
from actors.core.errors import StorageError
from actors.core.events import TextDelta, ToolCallStarted
from actors.core.messages import INTERRUPTED_NOTICE, NO_ANSWER_NOTICE, pairing_problems
from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, Step, ToolCall
from actors.testing.torture import missing_from_transcript
from actors.tools import TOOLS
from tests.support.children import read_line, rest_of
from tests.support.programs.turn_child import WAIT_TOOL
from tests.support.runtime import Recorder, running, settings_for

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]
WRITES = ("append", "checkpoint", "mark_started", "mark_process_group", "replace_context")


class Arrivals:
    """A responder playing ``script`` that counts the requests as they arrive."""

    def __init__(self, script: list[Step]) -> None:
        self.script = list(script)
        self.count = 0
        self._arrived = threading.Condition()

    def __call__(self, body: dict[str, Any]) -> Step:
        with self._arrived:
            self.count += 1
            self._arrived.notify_all()
            return self.script.pop(0)

    def wait_for(self, n: int, timeout: float = 10) -> bool:
        """Block until ``n`` requests have arrived (False if they did not in time)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: self.count >= n, timeout)


class CountingStore(SessionStore):
    """The SQLite store, naming each write of messages or write-ahead records (each one
    transaction, one commit) in ``writes``.

    ``hold`` (append number -> request number, both from 1): that append waits in the
    writer's thread, before it commits, until the server has received that request, then
    holds its commit ``HOLD_SECONDS`` more (``holding`` is True meanwhile); ``problems``
    says when the request did not come while the append waited."""

    HOLD_SECONDS = 0.3

    def __init__(self, memory_dir: Path, arrivals: Arrivals | None = None,
                 hold: dict[int, int] | None = None) -> None:
        super().__init__(memory_dir)
        self.writes: list[str] = []
        self.arrivals, self.hold = arrivals, hold or {}
        self.holding = False
        self.problems: list[str] = []
        for name in WRITES:
            method = getattr(self, name)

            def counted(*args: Any, _name: str = name, _method: Any = method,
                        **kwargs: Any) -> Any:
                self.writes.append(_name)
                if _name == "append":
                    self._wait(self.writes.count("append"))
                return _method(*args, **kwargs)

            setattr(self, name, counted)

    def _wait(self, number: int) -> None:
        request = self.hold.get(number)
        if request is None or self.arrivals is None:
            return
        if not self.arrivals.wait_for(request):
            self.problems.append(f"request {request} was not sent while append {number}, "
                                 "which saves what it carries, waited to commit")
        self.holding = True
        time.sleep(self.HOLD_SECONDS)  # an answer shown too soon would be seen meanwhile
        self.holding = False


class ShownAfterSaved:
    """Checks, at every answer's text and every tool call the front end is shown, that the
    store (read from its own connection) holds every message of the request answered, and
    that no checkpoint of it is still being held (:class:`CountingStore`)."""

    def __init__(self, memory_dir: Path, store: CountingStore) -> None:
        self.memory_dir, self.store = memory_dir, store
        self.server: ScriptedServer | None = None
        self.session_id = ""
        self.problems: list[str] = []
        self.checked = 0

    def __call__(self, event: Any, sup: Supervisor) -> None:
        if not isinstance(event, TextDelta | ToolCallStarted) or self.server is None:
            return
        if self.store.holding:
            self.problems.append(f"{type(event).__name__} shown while the checkpoint of "
                                 "its request was not committed")
        with SessionStore(self.memory_dir) as store:
            transcript = store.load_session(self.session_id)["transcript"]
        why = missing_from_transcript(self.server.last_request, transcript, [])
        if why is not None:
            self.problems.append(why)
        self.checked += 1


async def run_counted(tmp_path: Path, script: list[Step], text: str,
                      hold: dict[int, int] | None = None, **overrides: Any
                      ) -> tuple[list[str], ShownAfterSaved, list[dict[str, Any]]]:
    """One turn of ``script``: the writes it made, the checks of what was shown, the saved
    transcript."""
    arrivals = Arrivals(script)
    with ScriptedServer(arrivals) as server:
        settings = settings_for(tmp_path, server.base_url, workspace_snapshots=False,
                                auto_title=False, **overrides)
        store = CountingStore(settings.memory_dir, arrivals, hold)
        shown = ShownAfterSaved(settings.memory_dir, store)
        async with running(settings, store, Recorder(on_event=shown)) as (sup, _):
            shown.server, shown.session_id = server, sup.session_id
            store.writes.clear()
            result = await sup.run_turn(text)
            writes = list(store.writes)
        server.assert_done()
    assert result.ok, result.text
    assert store.problems == []
    transcript = SessionStore(settings.memory_dir).load_session(sup.session_id)["transcript"]
    return writes, shown, transcript


async def test_a_batch_of_reads_is_saved_with_its_answer_in_one_commit(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("hello\n")
    script: list[Step] = [
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}),
                          ToolCall("glob_files", {"pattern": "*.txt"})]),
        Reply("The notes say hello."),
    ]
    writes, shown, transcript = await run_counted(tmp_path, script, "Read the notes")
    # the user's message, the answer with both results, the final answer; no "started"
    assert writes == ["append", "append", "append"]
    assert shown.checked >= 3 and shown.problems == []  # two calls, the answer's text
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "tool",
                                                "assistant"]
    assert "1\thello" in transcript[3]["content"]
    assert pairing_problems(transcript) == []


async def test_a_batch_with_effects_is_recorded_before_it_runs(tmp_path: Path) -> None:
    script: list[Step] = [
        Reply(tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": "x"})]),
        Reply("Written."),
    ]
    writes, shown, transcript = await run_counted(tmp_path, script, "Write it")
    assert writes == ["append", "append", "mark_started", "append", "append"]
    assert shown.problems == []
    assert (tmp_path / "project" / "out.txt").read_text() == "x"
    assert pairing_problems(transcript) == []


async def test_a_read_that_may_ask_is_recorded_too(tmp_path: Path) -> None:
    # list_sessions may ask (another project's sessions) outside the skip mode
    script: list[Step] = [
        Reply(tool_calls=[ToolCall("read_file", {"path": "missing.txt"}),
                          ToolCall("list_sessions", {})]),
        Reply("Nothing there."),
    ]
    assert TOOLS["list_sessions"].always_ask is not None
    writes, shown, _ = await run_counted(tmp_path, script, "Look", mode=Mode.ACCEPT_EDITS)
    assert writes[:3] == ["append", "append", "mark_started"]
    assert shown.problems == []


async def test_a_request_goes_out_while_its_checkpoint_commits_its_answer_waits(
    tmp_path: Path
) -> None:
    # The user's message (append 1) and the batch of reads with its answer (append 2) are
    # each committed while the request carrying them goes out (requests 1 and 2): each is
    # held until its request has reached the server. The answer's text waits for its
    # checkpoint: none is shown while append 2 is held.
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("hello\n")
    script: list[Step] = [
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Reply("The notes say hello, and nothing else at all."),
    ]
    writes, shown, transcript = await run_counted(tmp_path, script, "Read the notes",
                                                  hold={1: 1, 2: 2})
    assert writes == ["append", "append", "append"]
    assert shown.problems == []
    assert shown.checked >= 2  # the call, and the answer's text after its checkpoint
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool",
                                                "assistant"]


async def test_an_interrupted_batch_of_reads_saves_the_answer_with_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(TOOLS, WAIT_TOOL.name, WAIT_TOOL)
    started = anyio.Event()

    def on_event(event: Any, sup: Supervisor) -> None:
        if isinstance(event, ToolCallStarted) and event.name == WAIT_TOOL.name:
            started.set()

    script: list[Step] = [Reply(tool_calls=[ToolCall(WAIT_TOOL.name, {})]), Reply("Fine.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, workspace_snapshots=False,
                                auto_title=False)
        store = CountingStore(settings.memory_dir)
        async with running(settings, store, Recorder(on_event=on_event)) as (sup, _), \
                anyio.create_task_group() as tg:

            async def abort_once_waiting() -> None:
                await started.wait()
                await anyio.wait_all_tasks_blocked()
                sup.abort()

            tg.start_soon(abort_once_waiting)
            store.writes.clear()
            with anyio.fail_after(10):
                result = await sup.run_turn("Wait")
            assert result.outcome == "interrupted"
            assert store.writes == ["append", "append"]  # the user's; answer + result
            saved = SessionStore(settings.memory_dir).load_session(sup.session_id)
            assert [m["role"] for m in saved["transcript"]] == ["system", "user", "assistant",
                                                                "tool"]
            assert saved["transcript"][-1]["content"].find(INTERRUPTED_NOTICE) >= 0
            second = await sup.run_turn("Go on")
            assert second.ok
        server.assert_done()
    assert pairing_problems(server.requests[1]["messages"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_kill_during_a_batch_of_reads_is_a_kill_during_the_answer(
    tmp_path: Path, backend: str
) -> None:
    script: list[Step] = [Reply(tool_calls=[ToolCall(WAIT_TOOL.name, {})])]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        with subprocess.Popen(
            [sys.executable, "-m", "tests.support.programs.turn_child", str(tmp_path),
             server.base_url, backend],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        ) as child:
            assert child.stdout is not None
            first = read_line(child.stdout)
            assert first.startswith("session "), first + rest_of(child)
            session_id = first.split()[1]
            assert read_line(child.stdout).strip() == "running", rest_of(child)
            child.send_signal(signal.SIGKILL)
            child.wait(30)
    with SessionStore(settings.memory_dir) as store:
        saved = store.load_session(session_id)
        # as if killed while the model answered: the user's message is the last saved
        assert [m["role"] for m in saved["transcript"]] == ["system", "user"]
        assert len(store.recover(session_id)) == 2  # nothing open to recover
    resumed: list[Step] = [Reply("Back again.")]
    with ScriptedServer(resumed, check_tool_pairing=True) as server:
        settings = settings_for(tmp_path, server.base_url)

        async def resume() -> None:
            async with running(settings, resume=session_id) as (sup, rec):
                result = await sup.run_turn("Go on")
                assert result.ok, result.text
                opened = rec.events[0]
                assert getattr(opened, "recovered_calls", None) == 0

        anyio.run(resume, backend=backend)
        server.assert_done()
    sent = server.requests[0]["messages"]  # the message killed unanswered says so
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == NO_ANSWER_NOTICE



class FailingOnce(SessionStore):
    """The SQLite store whose next append fails as a full disk does, once (``fail`` set),
    after the request it goes with has reached the server (``sent``) and a moment more."""

    fail = False
    sent = threading.Event()

    def append(self, *args: Any, **kwargs: Any) -> int:
        if self.fail:
            self.fail = False
            self.sent.wait(10)
            time.sleep(CountingStore.HOLD_SECONDS)  # an answer shown too soon is seen by then
            raise StorageError("No space left on device (the session store could not grow).")
        return super().append(*args, **kwargs)


async def test_a_checkpoint_that_fails_drops_the_answer_of_its_request(tmp_path: Path) -> None:
    # The user's message cannot be saved: its request has gone out and been answered, but
    # nothing of the answer is shown, the turn stops with the cause, and the next turn
    # sends the message again.
    sent = threading.Event()

    def answer(body: dict[str, Any]) -> Step:
        if body["messages"][-1]["content"] == "Hello again":
            return Reply("Now it is saved.")
        sent.set()
        return Reply("Never shown.")

    with ScriptedServer(answer) as server:
        settings = settings_for(tmp_path, server.base_url, workspace_snapshots=False,
                                auto_title=False)
        store = FailingOnce(settings.memory_dir)
        store.sent = sent
        async with running(settings, store) as (sup, rec):
            store.fail = True
            with anyio.fail_after(10):
                failed = await sup.run_turn("Hello there")
            assert failed.outcome == "failed"
            assert "Could not save the session: No space left on device" in failed.text
            assert rec.of(TextDelta) == []
            with anyio.fail_after(10):
                second = await sup.run_turn("Hello again")
            assert second.ok and second.text == "Now it is saved."
            shown = "".join(e.text for e in rec.of(TextDelta))
            assert shown == "Now it is saved."
        sent = server.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["Hello there", "Hello again"]
    transcript = SessionStore(settings.memory_dir).load_session(sup.session_id)["transcript"]
    # the first message got no answer: its place says so, and no two user messages follow
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "user",
                                               "assistant"]
    assert transcript[2]["content"] == NO_ANSWER_NOTICE
