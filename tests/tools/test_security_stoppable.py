"""Every tool can be stopped, and what it reads is bounded: a catastrophic regex, a huge
one-line file, a thread that will not stop on its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.events import ToolCallStarted
from actors.core.messages import INTERRUPTED_NOTICE
from actors.runtime.supervisor import Supervisor
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.tools import TOOLS, ToolContext
from actors.tools import files as file_tools
from actors.tools._threads import Stop, run_stoppable
from tests.support.children import rest_of
from tests.support.clitools import REPO
from tests.support.processes import CATASTROPHIC, descendants_running_grep
from tests.support.runtime import Recorder, running, settings_for
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio

STOP_WITHIN = 1.5  # seconds after the cancel, on the event loop's clock (the promise: ~1 s)


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


def sparse(path: Path, head: bytes, size: int) -> None:
    """A file of ``size`` bytes: ``head``, then a hole (NUL bytes that take no disk)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    return await TOOLS[name].run(ctx, args)


def grep_workers() -> list[int]:
    """Live children of this process that run the grep worker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(") ", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"_grep_worker" in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def evil_text(sandbox: Path) -> Path:
    path = sandbox / "evil.txt"
    path.write_text("a" * 60 + "b\n")
    return path


@pytest.mark.slow
async def test_a_catastrophic_grep_stops_at_a_cancel(ctx: ToolContext, evil_text: Path) -> None:
    start = anyio.current_time()
    with anyio.move_on_after(0.5) as scope:
        await call(ctx, "grep", pattern=CATASTROPHIC)
    stopped_after = anyio.current_time() - start - 0.5
    assert scope.cancelled_caught
    assert stopped_after < STOP_WITHIN, stopped_after
    assert grep_workers() == []  # killed and reaped


@pytest.mark.slow
async def test_grep_still_answers_ordinary_patterns(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "long.txt").write_text("x" * (2_500_000) + "needle" + "y" * 1_000_000 + "\nz\n")
    out = await call(ctx, "grep", pattern="needle")
    assert out.startswith("long.txt:1: …")
    assert "needle" in out.splitlines()[0] and len(out.splitlines()[0]) < 400
    assert "searched piece by piece" in out
    assert await call(ctx, "grep", pattern="^z$") == (
        "long.txt:2: z\n[1 line(s) longer than 1 MB were searched piece by piece; a match "
        "across two pieces may be missed.]"
    )


def _tool_results(server: ScriptedServer, index: int) -> list[str]:
    return [m["content"] for m in server.requests[index]["messages"] if m["role"] == "tool"]


@pytest.mark.slow
async def test_tool_timeout_stops_a_catastrophic_grep(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("grep", {"pattern": CATASTROPHIC})]), Reply("Slow.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url, tool_timeout=0.5)
        (settings.sandbox_dir / "evil.txt").write_text("a" * 60 + "b\n")
        async with running(settings) as (sup, _):
            start = anyio.current_time()
            result = await sup.run_turn("search")
            elapsed = anyio.current_time() - start
        [content] = _tool_results(server, 1)
    assert result.ok
    assert "Timed out after 0.5 s" in content
    assert elapsed < 0.5 + STOP_WITHIN + 1.0, elapsed  # plus two scripted model replies
    assert grep_workers() == []


@pytest.mark.slow
async def test_abort_stops_a_catastrophic_grep(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("grep", {"pattern": CATASTROPHIC})]), Reply("ok")]
    aborted_at: list[float] = []

    def abort_when_searching(event: Any, sup: Supervisor) -> None:
        if isinstance(event, ToolCallStarted) and event.name == "grep":
            async def later() -> None:
                with anyio.fail_after(10):
                    while not grep_workers():  # noqa: ASYNC110 (nothing to wait on but /proc)
                        await anyio.sleep(0.01)
                await anyio.sleep(0.2)  # the worker is matching now
                aborted_at.append(anyio.current_time())
                sup.abort()
            sup._tg_for_tests.start_soon(later)  # type: ignore[attr-defined]

    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        (settings.sandbox_dir / "evil.txt").write_text("a" * 60 + "b\n")
        recorder = Recorder(on_event=abort_when_searching)
        async with running(settings, recorder=recorder) as (sup, _), \
                anyio.create_task_group() as tg:
            sup._tg_for_tests = tg  # type: ignore[attr-defined]
            with anyio.fail_after(20):
                result = await sup.run_turn("search")
            returned_at = anyio.current_time()
            [content] = [m["content"] for m in sup.snapshot().messages if m["role"] == "tool"]
    assert result.outcome == "interrupted"
    assert returned_at - aborted_at[0] < STOP_WITHIN
    assert INTERRUPTED_NOTICE in content
    assert grep_workers() == []


async def test_an_abandoned_thread_returns_at_once_and_ends_on_its_own() -> None:
    ended = threading.Event()
    checks = 0

    def forever(stop: Stop) -> None:
        nonlocal checks
        try:
            while True:
                stop.check()
                checks += 1
                time.sleep(0.005)
        finally:
            ended.set()

    start = anyio.current_time()
    with anyio.move_on_after(0.2) as scope:
        await run_stoppable(forever)
    assert scope.cancelled_caught
    assert anyio.current_time() - start < 0.2 + STOP_WITHIN
    assert await anyio.to_thread.run_sync(ended.wait, 10)
    assert checks > 0


async def test_read_file_of_a_huge_one_line_file_reads_a_bounded_amount(
    ctx: ToolContext, sandbox: Path
) -> None:
    sparse(sandbox / "huge.txt", b"x" * 100_000, 1024**3)  # 1 GiB, one line, no disk used
    tracemalloc.start()
    try:
        out = await call(ctx, "read_file", path="huge.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak
    assert len(out.encode()) <= file_tools.READ_CAP_BYTES + 300
    assert "Line 1 is longer than" in out and "read on with offset=2" in out


async def test_read_file_gives_up_looking_for_a_far_offset(
    ctx: ToolContext, sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "MAX_SCAN_BYTES", 4 * 1024 * 1024)
    sparse(sandbox / "huge.txt", b"first\n", 64 * 1024 * 1024)  # then one line of NULs
    tracemalloc.start()
    try:
        out = await call(ctx, "read_file", path="huge.txt", offset=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak
    assert out.startswith("(read 4 MB, 2 lines, without reaching line 3")





@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signal_stops_a_catastrophic_grep_in_print_mode(
    backend: str, signum: int, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "evil.txt").write_text("a" * 60 + "b\n")
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(tmp_path / "memory"),
           "PYTHONPATH": str(REPO), "AGENT_HARNESS_BACKEND": backend, "OPENAI_API_KEY": "x"}
    script = [Reply(tool_calls=[ToolCall("grep", {"pattern": CATASTROPHIC})]), Reply("ok")]
    with ScriptedServer(script) as server:
        harness = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", "search", "--base-url", server.base_url],
            cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while not descendants_running_grep(harness.pid):
                assert time.monotonic() < deadline and harness.poll() is None, rest_of(harness)
                time.sleep(0.02)
            time.sleep(0.2)  # matching now
            harness.send_signal(signum)
            _, err = harness.communicate(timeout=20)  # before the fix: ignored, for ever
        finally:
            if harness.poll() is None:
                harness.kill()
                harness.communicate(timeout=20)
    assert harness.returncode == 1 and "Traceback" not in err, err
    assert descendants_running_grep(harness.pid) == [] and grep_workers() == []


def started_at(pid: int) -> tuple[str, int] | None:
    """The state and start time of process ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[19])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_catastrophic_grep_dies_with_a_harness_killed_with_9(
    backend: str, tmp_path: Path
) -> None:
    """The worker was re-parented to init and matched on at 100% CPU for ever."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "evil.txt").write_text("a" * 100_000 + "b\n")  # a long line
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(tmp_path / "memory"),
           "PYTHONPATH": str(REPO), "AGENT_HARNESS_BACKEND": backend, "OPENAI_API_KEY": "x"}
    script = [Reply(tool_calls=[ToolCall("grep", {"pattern": CATASTROPHIC})]), Reply("ok")]
    with ScriptedServer(script) as server:
        harness = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", "search", "--base-url", server.base_url],
            cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        workers: dict[int, tuple[str, int] | None] = {}
        try:
            deadline = time.monotonic() + 20
            while not workers:
                assert time.monotonic() < deadline and harness.poll() is None, rest_of(harness)
                workers = {pid: started_at(pid) for pid in descendants_running_grep(harness.pid)}
                time.sleep(0.02)
            time.sleep(0.2)  # matching now
            harness.send_signal(signal.SIGKILL)
            harness.wait(10)

            def alive() -> list[int]:
                return [pid for pid, was in workers.items()
                        if (now := started_at(pid)) is not None and now[0] != "Z"
                        and was is not None and now[1] == was[1]]

            deadline = time.monotonic() + 3  # the promise: nothing of it alive within 3 s
            while alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert alive() == []
        finally:
            if harness.poll() is None:
                harness.kill()
            harness.communicate(timeout=10)
            for pid in workers:  # (before the fix: for ever at 100% CPU)
                if started_at(pid) is not None:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
