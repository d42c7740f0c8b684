"""A command in a process group of its own that nothing outlives: run_bash's commands and the
user's hooks (:mod:`actors.hooks`) run through :func:`confined_process`.

``bash -c COMMAND`` runs in its own process group (``start_new_session=True``), in the given
directory, with the harness's environment minus its secrets (:mod:`._environment`) and the
caller's few additions. Its stdin, stdout and stderr are the caller's choice.

Nothing outlives the block:

- Leaving it, whatever the reason (the command ended, the caller's timeout, Ctrl-C, SIGTERM),
  the whole group gets SIGTERM, then SIGKILL after a grace of :data:`GRACE_SECONDS`, in a
  shielded cleanup bounded by :data:`CLEANUP_SECONDS`; bash is reaped. The caller may stop
  the group earlier (:meth:`ProcessGroup.stop`: background jobs left when bash exited).
- When the harness itself dies, however it dies (kill -9 included), a guardian in the group
  kills it: before the command starts, the group leader forks a small bash subshell that
  holds the read end of a pipe whose only write end is the harness's (:data:`WRAPPER`). The
  kernel closes that end when the harness dies; the guardian reads end-of-file and sends
  SIGKILL to its own process group, itself included. The guardian ignores nothing but
  SIGINT and SIGQUIT (as every background job of a script does) and dies with the group on
  the normal SIGTERM.

A grandchild that left the group itself (``setsid``) is out of reach and not handled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping

import anyio
import anyio.abc

from actors.core.errors import ToolFailed
from actors.tools._environment import tool_environment

GRACE_SECONDS = 0.3  # between SIGTERM and SIGKILL (Ctrl-C must return within 0.5 s)
CLEANUP_SECONDS = 3.0  # bound of the shielded cleanup after a cancellation

# Run as ``bash -c WRAPPER NAME LIFELINE_FD COMMAND``. The group leader starts the guardian (a
# subshell reading the lifeline until end-of-file, then killing the group), closes its own
# copy of the lifeline and becomes ``bash -c COMMAND``: the same pid, so the group and the
# exit status are the command's. The guardian's own stdin, stdout and stderr are /dev/null:
# it holds none of the command's pipes open.
WRAPPER = """\
( while read -r -u "$1" _; do :; done; kill -KILL 0 ) </dev/null >/dev/null 2>&1 &
eval "exec $1<&-"
exec bash -c "$2"
"""

Redirect = int | None  # subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT, a descriptor


class ProcessGroup:
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


def leader_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux; None elsewhere):
    with the pid, it names the process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.asynccontextmanager
async def confined_process(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    stdin: Redirect = subprocess.DEVNULL,
    stdout: Redirect = subprocess.PIPE,
    stderr: Redirect = subprocess.STDOUT,
    extra_env: Mapping[str, str] | None = None,
    name: str = "harness-command",
) -> AsyncIterator[tuple[anyio.abc.Process, ProcessGroup]]:
    """Run ``bash -c command`` under its guardian (see the module doc) and yield the process
    and its group; leaving the block stops the group, shielded and bounded, and reaps bash.

    ``extra_env``: variables added to the harness's environment minus its secrets; ``name``:
    ``$0`` of the wrapper, as ``ps`` shows it. A command that cannot start raises
    :class:`ToolFailed`. Cancellation: the block's body is cancelled like any other; the
    cleanup still kills the group."""
    lifeline_read, lifeline_write = os.pipe()  # both close-on-exec; only the read end passes
    try:
        process = await anyio.open_process(
            ["bash", "-c", WRAPPER, name, str(lifeline_read), command],
            cwd=cwd,
            env={**tool_environment(), **(extra_env or {})},
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            pass_fds=(lifeline_read,),
        )
    except OSError as exc:
        os.close(lifeline_write)
        raise ToolFailed(f"Cannot start bash: {exc.strerror or exc}.") from None
    finally:
        os.close(lifeline_read)
    group = ProcessGroup(process)
    try:
        yield process, group
    finally:
        with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
            await group.stop()
            await process.aclose()
        with contextlib.suppress(OSError):
            os.close(lifeline_write)  # the group is gone; were it not, the guardian would kill it
