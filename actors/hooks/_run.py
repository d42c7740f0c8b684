"""Running one hook command: the event's JSON on its stdin, its stdout and stderr read
(bounded), its exit code, cut at its timeout.

The command runs as run_bash's do (:func:`actors.tools.confined.confined_process`): ``bash -c
COMMAND`` in the project directory, in a process group of its own with the guardian that kills
it if the harness dies, and the harness's environment without its secrets, plus
``HARNESS_PROJECT_DIR`` and ``CLAUDE_PROJECT_DIR`` (the project directory, for hooks written
for Claude Code). When bash exits, whatever it left running in its group is stopped; at the
timeout, or when the caller is cancelled, the whole group is killed (SIGTERM, then SIGKILL),
in a shielded, bounded cleanup.

Of stdout and stderr, the first :data:`MAX_OUTPUT_BYTES` each are kept (the rest is read and
dropped, so the hook is never blocked on a full pipe). The JSON is written by a task of its
own: a hook that never reads its stdin is not waited for.

Cancellation: the caller's cancellation goes through (the group killed first).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from actors.core.errors import ToolFailed
from actors.hooks._table import HookCommand
from actors.tools.confined import confined_process

MAX_OUTPUT_BYTES = 256 * 1024
DRAIN_SECONDS = 1.0  # the rest of the output once bash has exited (a setsid'd child may hold it)


@dataclass(frozen=True)
class Ran:
    """How one command ended."""

    command: HookCommand
    exit_code: int | None = None  # None: timed out, or it could not start
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""  # it could not start (bash missing, the project directory gone)


async def _read(stream: anyio.abc.ByteReceiveStream | None, kept: bytearray,
                done: anyio.Event) -> None:
    try:
        if stream is not None:
            async for chunk in stream:
                room = MAX_OUTPUT_BYTES - len(kept)
                if room > 0:
                    kept.extend(chunk[:room])
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        done.set()


async def _write(stream: anyio.abc.ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        async with stream:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the hook did not read its stdin (it exited, or closed it)


async def run_command(command: HookCommand, payload: bytes, *, cwd: Path,
                      extra_env: Mapping[str, str]) -> Ran:
    """Run ``command`` with ``payload`` on its stdin; see the module doc."""
    out, err = bytearray(), bytearray()
    code: int | None = None
    with anyio.move_on_after(command.timeout) as deadline:
        try:
            async with confined_process(
                command.command, cwd=cwd, extra_env=extra_env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, name="harness-hook",
            ) as (process, group), anyio.create_task_group() as tg:
                read_out, read_err = anyio.Event(), anyio.Event()
                tg.start_soon(_write, process.stdin, payload)
                tg.start_soon(_read, process.stdout, out, read_out)
                tg.start_soon(_read, process.stderr, err, read_err)
                code = await process.wait()
                await group.stop()  # what it left running; their pipe ends close
                with anyio.move_on_after(DRAIN_SECONDS):
                    await read_out.wait()
                    await read_err.wait()
                tg.cancel_scope.cancel()
        except ToolFailed as exc:
            return Ran(command, error=str(exc))
    return Ran(command, None if deadline.cancelled_caught else code, _text(out), _text(err),
               timed_out=deadline.cancelled_caught)


def _text(data: bytearray) -> str:
    text = bytes(data).decode("utf-8", errors="replace")
    return text + ("\n[... output cut]" if len(data) >= MAX_OUTPUT_BYTES else "")
