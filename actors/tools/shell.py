"""The shell tool: run_bash runs ``bash -c COMMAND`` in the sandbox directory.

The command runs in its own process group (``start_new_session=True``) with stdin from
/dev/null, stderr merged into stdout, and the harness's environment minus its secrets
(:mod:`._environment`). Output is read as it comes and appended to ``ctx.progress``, so what
was printed before an interruption is known. The result starts with the command's exit status
(``exit status 1``), then its output.

Nothing outlives the call (:mod:`.confined`): when bash exits, whatever it left running in its
process group (background jobs such as ``server &``) is stopped; when the call is cancelled
(Ctrl-C, Esc, SIGTERM or the executor's timeout), the whole group gets SIGTERM, then SIGKILL
after a grace, in a shielded cleanup, and the cancellation is re-raised; when the harness
itself dies, however it dies (kill -9 included), the guardian in the group kills it.

A grandchild that left the group itself (``setsid``) is out of reach and not handled.
:attr:`ToolContext.on_process_group`, when set, is told the group's id and its leader's
start time as soon as the command has started (for a record that outlives the harness).
"""

from __future__ import annotations

import codecs
import signal
from typing import Any

import anyio
import anyio.abc

from actors.tools._base import Permission, ProcessGroup, Tool, ToolContext
from actors.tools.confined import confined_process, leader_start_time

DRAIN_SECONDS = 1.0  # how long to wait for the rest of the output once bash has exited
HEAD_CHARS = 200_000  # output kept from the start ...
TAIL_CHARS = 50_000  # ... and from the end; the middle of a huge output is dropped


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
    output = _Output(ctx.progress)
    async with confined_process(args["command"], cwd=ctx.sandbox,
                                name="harness-run_bash") as (process, group):
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
