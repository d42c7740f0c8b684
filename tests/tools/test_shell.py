"""run_bash with real subprocesses: output, exit codes, and no process left behind."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest

from actors.tools import TOOLS, ToolContext
from actors.tools import shell as shell_tool
from tests.support.processes import live_members
from tests.support.tool_context import ToolSession

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


async def run(ctx: ToolContext, command: str) -> str:
    return await TOOLS["run_bash"].run(ctx, {"command": command})


async def survivors(pgid: int) -> list[int]:
    """Live members of the group, waiting briefly: a SIGKILLed process needs a moment to die
    (the tool reaps bash, but not bash's children, which init adopts)."""
    with anyio.move_on_after(5):
        while live_members(pgid):  # noqa: ASYNC110 (nothing to wait on but /proc)
            await anyio.sleep(0.02)
    return live_members(pgid)


def pgid_from(text: str) -> int:
    match = re.search(r"pgid=(\d+)", text)
    assert match, text
    return int(match.group(1))


async def test_output_and_exit_code(ctx: ToolContext, sandbox: Path) -> None:
    out = await run(ctx, "echo out; echo err >&2; pwd; exit 3")
    assert out == f"exit status 3\nout\nerr\n{sandbox}"
    assert await run(ctx, "printf 'no newline'") == "exit status 0\nno newline"
    assert await run(ctx, "true") == "exit status 0"
    assert await run(ctx, "printf 'blank lines\\n\\n\\n'") == "exit status 0\nblank lines\n\n"


async def test_progress_receives_the_output(ctx: ToolContext) -> None:
    await run(ctx, "echo one; echo two")
    assert "".join(ctx.progress) == "one\ntwo\n"


async def test_stdin_is_empty(ctx: ToolContext) -> None:
    # A command reading stdin gets end-of-file at once instead of hanging.
    with anyio.fail_after(10):
        assert await run(ctx, "cat; echo done") == "exit status 0\ndone"


async def test_killed_by_a_signal(ctx: ToolContext) -> None:
    assert await run(ctx, "kill -9 $$") == "exit status 137 (killed by SIGKILL)"


async def test_background_jobs_do_not_outlive_the_call(ctx: ToolContext) -> None:
    with anyio.fail_after(10):  # the background job holds the pipe: it must be stopped
        out = await run(ctx, "echo pgid=$$; sleep 30 & echo started")
    assert out.startswith("exit status 0\n") and out.endswith("started")
    assert await survivors(pgid_from(out)) == []


async def test_cancellation_kills_the_whole_group(ctx: ToolContext) -> None:
    started = time.monotonic()
    reached_the_end = False
    with anyio.move_on_after(0.5) as scope:
        await run(ctx, "echo pgid=$$; sleep 30 & sleep 30; echo never")
        reached_the_end = True
    assert scope.cancelled_caught
    assert not reached_the_end
    progress = "".join(ctx.progress)
    assert "never" not in progress
    pgid = pgid_from(progress)  # printed before the cancel, kept in ctx.progress
    assert await survivors(pgid) == []
    assert time.monotonic() - started < 10


async def test_sigkill_after_the_grace_when_sigterm_is_ignored(ctx: ToolContext) -> None:
    # An ignored signal stays ignored across exec, so `sleep` ignores SIGTERM too.
    with anyio.move_on_after(0.5) as scope:
        await run(ctx, "trap '' TERM; echo pgid=$$; sleep 30 & sleep 30")
    assert scope.cancelled_caught
    assert await survivors(pgid_from("".join(ctx.progress))) == []


async def test_huge_output_keeps_its_start_and_end(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_tool, "HEAD_CHARS", 100)
    monkeypatch.setattr(shell_tool, "TAIL_CHARS", 50)
    out = await run(ctx, "seq 1 10000")
    assert out.startswith("exit status 0\n1\n2\n3\n")
    assert out.endswith("9999\n10000")
    assert "characters omitted" in out
    assert len(out) < 400
    assert len("".join(ctx.progress)) < 200


def test_output_decodes_characters_split_across_chunks() -> None:
    output = shell_tool._Output([])
    output.add("é".encode()[:1])
    output.add("é".encode()[1:] + b"\xff")
    output.add(b"", final=True)
    assert output.text() == "é\ufffd"
