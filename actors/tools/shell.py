"""The shell tool: run_bash runs ``bash -c COMMAND`` in the sandbox directory.

The command runs in its own process group (``start_new_session=True``) with stdin from
/dev/null, stderr merged into stdout, and the harness's environment minus its secrets
(:mod:`._environment`). Output is read as it comes and appended to ``ctx.progress``, so what
was printed before an interruption is known. The result starts with the command's exit status
(``exit status 1``), then its output.

Nothing outlives the call:

- When bash exits, whatever it left running in its process group (background jobs such as
  ``server &``) is stopped.
- When the call is cancelled (Ctrl-C, Esc, SIGTERM or the executor's timeout), the whole group
  gets SIGTERM, then SIGKILL after a grace of :data:`GRACE_SECONDS`, in a shielded cleanup
  bounded by :data:`CLEANUP_SECONDS`; bash is reaped and the cancellation is re-raised.
- When the harness itself dies, however it dies (kill -9 included), a guardian in the group
  kills it: before the command starts, the group leader forks a small bash subshell that
  holds the read end of a pipe whose only write end is the harness's (:data:`WRAPPER`). The
  kernel closes that end when the harness dies; the guardian reads end-of-file and sends
  SIGKILL to its own process group, itself included. The guardian ignores nothing but
  SIGINT and SIGQUIT (as every background job of a script does) and dies with the group on
  the normal SIGTERM.

A grandchild that left the group itself (``setsid``) is out of reach and not handled.
:attr:`ToolContext.on_process_group`, when set, is told the group's id and its leader's
start time as soon as the command has started (for a record that outlives the harness).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
from typing import Any

import anyio
import anyio.abc

from actors.core.errors import ToolFailed
from actors.tools._base import Permission, ProcessGroup, Tool, ToolContext
from actors.tools._environment import tool_environment

GRACE_SECONDS = 0.3  # between SIGTERM and SIGKILL (Ctrl-C must return within 0.5 s)
CLEANUP_SECONDS = 3.0  # bound of the shielded cleanup after a cancellation
DRAIN_SECONDS = 1.0  # how long to wait for the rest of the output once bash has exited
HEAD_CHARS = 200_000  # output kept from the start ...
TAIL_CHARS = 50_000  # ... and from the end; the middle of a huge output is dropped

# Run as ``bash -c WRAPPER harness-run_bash LIFELINE_FD COMMAND``. The group leader starts the
# guardian (a subshell reading the lifeline until end-of-file, then killing the group), closes
# its own copy of the lifeline and becomes ``bash -c COMMAND``: the same pid, so the group and
# the exit status are the command's.
WRAPPER = """\
( while read -r -u "$1" _; do :; done; kill -KILL 0 ) </dev/null >/dev/null 2>&1 &
eval "exec $1<&-"
exec bash -c "$2"
"""


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
                # No event tells when a process group becomes empty: poll it, soon at first
                # (the guardian, and most jobs, die at once on SIGTERM), then every 20 ms.
                delay = 0.001
                while await anyio.to_thread.run_sync(self.has_live_members):
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.02)
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


def leader_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux; None elsewhere):
    with the pid, it names the process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


async def _spawn(ctx: ToolContext, command: str) -> tuple[anyio.abc.Process, int]:
    """Start the command under its guardian; returns it and the lifeline's write end."""
    lifeline_read, lifeline_write = os.pipe()  # both close-on-exec; only the read end passes
    try:
        process = await anyio.open_process(
            ["bash", "-c", WRAPPER, "harness-run_bash", str(lifeline_read), command],
            cwd=ctx.sandbox,
            env=tool_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(lifeline_read,),
        )
    except OSError as exc:
        os.close(lifeline_write)
        raise ToolFailed(f"Cannot start bash: {exc.strerror or exc}.") from None
    finally:
        os.close(lifeline_read)
    return process, lifeline_write


async def _run_bash(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Run the command; see the module docstring for what cancellation does."""
    process, lifeline = await _spawn(ctx, args["command"])
    group = _ProcessGroup(process)
    output = _Output(ctx.progress)
    try:
        if ctx.on_process_group is not None:
            started = await anyio.to_thread.run_sync(leader_start_time, process.pid)
            await ctx.on_process_group(ProcessGroup(group.pgid, started))
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
        with contextlib.suppress(OSError):
            os.close(lifeline)  # the group is gone; were it not, the guardian would kill it
    text = output.text().removesuffix("\n")
    return f"{exit_status(code)}\n{text}" if text else exit_status(code)


def exit_status(code: int) -> str:
    """The first line of the result: ``exit status N``, with the signal that killed bash."""
    if code >= 0:
        return f"exit status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"exit status {128 - code} (killed by {name})"


RUN_BASH = Tool(
    name="run_bash",
    description=(
        "Run a shell command with `bash -c` in the project directory. Returns a first line "
        "'exit status N' (0 is success), then the combined stdout and stderr. Argument: "
        "command. "
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
    brief="Run a bash command in the project directory, without stdin and time-limited; "
          "gives 'exit status N' and the output.",
)
