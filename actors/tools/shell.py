"""The shell tool: run_bash runs ``bash -c COMMAND`` in the sandbox directory.

The command runs in its own process group (``start_new_session=True``) with stdin from
/dev/null and stderr merged into stdout. Output is read as it comes and appended to
``ctx.progress``, so what was printed before an interruption is known.

Nothing outlives the call. When bash exits, whatever it left running in its process group
(background jobs such as ``server &``) is stopped. When the call is cancelled (Ctrl-C or the
executor's timeout), the whole group gets SIGTERM, then SIGKILL after a grace of
:data:`GRACE_SECONDS`, in a shielded cleanup bounded by :data:`CLEANUP_SECONDS`; bash is
reaped and the cancellation is re-raised. A grandchild that left the group itself (``setsid``)
is out of reach and not handled.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
from typing import Any

import anyio
import anyio.abc

from actors.core.errors import ToolFailed
from actors.tools._base import Permission, Tool, ToolContext

GRACE_SECONDS = 0.3  # between SIGTERM and SIGKILL (Ctrl-C must return within 0.5 s)
CLEANUP_SECONDS = 3.0  # bound of the shielded cleanup after a cancellation
DRAIN_SECONDS = 1.0  # how long to wait for the rest of the output once bash has exited
HEAD_CHARS = 200_000  # output kept from the start ...
TAIL_CHARS = 50_000  # ... and from the end; the middle of a huge output is dropped


class _ProcessGroup:
    """The process group led by bash (its pgid is bash's pid)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.pgid = process.pid
        self.empty = False  # killpg found no process in the group
        self.stopped = False

    def signal(self, signum: int) -> bool:
        """Send ``signum`` (0: just probe) to the group; False once the group is empty."""
        if self.empty:
            return False
        try:
            os.killpg(self.pgid, signum)
        except ProcessLookupError:
            self.empty = True
            return False
        except PermissionError:
            pass  # a member we may not signal; the rest of the group was still signalled
        return True

    def has_live_members(self) -> bool:
        """Whether any process of the group is still running (zombies do not count).

        Exited members stay visible to ``killpg`` until reaped, and bash's orphans are reaped
        by init, which in a container may never do it; /proc tells zombies apart.
        """
        if not self.signal(0):
            return False
        try:
            entries = os.listdir("/proc")
        except OSError:
            return True
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == self.pgid and fields[0] != b"Z":
                return True
        return False

    async def stop(self) -> None:
        """SIGTERM the group, SIGKILL it after the grace if anything is left, reap bash."""
        if self.stopped:
            return
        if self.signal(signal.SIGTERM):
            with anyio.move_on_after(GRACE_SECONDS):
                await self.process.wait()
                # No event tells when a process group becomes empty: poll it.
                while await anyio.to_thread.run_sync(self.has_live_members):  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            self.signal(signal.SIGKILL)
        await self.process.wait()
        self.stopped = True


class _Output:
    """The decoded output: all of it up to HEAD_CHARS, then only the last TAIL_CHARS."""

    def __init__(self, progress: list[str]) -> None:
        self.progress = progress
        self.head: list[str] = []
        self.head_size = 0
        self.tail = ""
        self.dropped = 0
        self.overflow = False  # past HEAD_CHARS
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        if not text:
            return
        room = HEAD_CHARS - self.head_size
        if room > 0:
            piece = text[:room]
            self.head.append(piece)
            self.progress.append(piece)
            self.head_size += len(piece)
            text = text[len(piece) :]
        if not text:
            return
        if not self.overflow:
            self.overflow = True
            self.progress.append("\n[... output continues; only its end is kept ...]\n")
        self.tail += text
        if len(self.tail) > TAIL_CHARS:
            self.dropped += len(self.tail) - TAIL_CHARS
            self.tail = self.tail[-TAIL_CHARS:]

    def text(self) -> str:
        middle = f"\n[... {self.dropped} characters omitted ...]\n" if self.dropped else ""
        return "".join(self.head) + middle + self.tail


async def _pump(process: anyio.abc.Process, output: _Output, done: anyio.Event) -> None:
    assert process.stdout is not None
    try:
        async for chunk in process.stdout:
            output.add(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    output.add(b"", final=True)
    done.set()


async def _run_bash(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Run the command; see the module docstring for what cancellation does."""
    try:
        process = await anyio.open_process(
            ["bash", "-c", args["command"]],
            cwd=ctx.sandbox,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolFailed(f"Cannot start bash: {exc.strerror or exc}.") from None
    group = _ProcessGroup(process)
    output = _Output(ctx.progress)
    try:
        async with anyio.create_task_group() as tg:
            done = anyio.Event()
            tg.start_soon(_pump, process, output, done)
            code = await process.wait()
            await group.stop()  # background jobs left by the command; closes their pipe ends
            with anyio.move_on_after(DRAIN_SECONDS):  # a setsid'd grandchild may hold the pipe
                await done.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
            await group.stop()
            await process.aclose()
    text = output.text()
    if text and not text.endswith("\n"):
        text += "\n"
    return f"{text}[exit code {code}{_signal_note(code)}]"


def _signal_note(code: int) -> str:
    """For a negative exit code (bash killed by a signal), the signal's name."""
    if code >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-code).name}"
    except ValueError:
        return f": killed by signal {-code}"


RUN_BASH = Tool(
    name="run_bash",
    description=(
        "Run a shell command with `bash -c` in the project directory and return its combined "
        "stdout and stderr, followed by a final line '[exit code N]'. Argument: command. "
        "There is no stdin (it reads /dev/null), so interactive programs cannot be answered; "
        "pass non-interactive flags. The call has a time limit: a command still running then "
        "is killed with everything it started. Background jobs (`cmd &`) are stopped when the "
        "command finishes, so nothing keeps running after the call."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
        },
        "required": ["command"],
    },
    run=_run_bash,
    permission=Permission.SHELL,
)
