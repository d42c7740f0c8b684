"""A command that survived the harness: found from its write-ahead record, stopped, and named.

A started ``run_bash`` call records its process group: the group id (the leader's pid), the
leader's start time (clock ticks since boot, from ``/proc/PID/stat``) and where it runs
(:func:`this_host`: the host name and the kernel's boot id). The guardian in the group kills
it when the harness dies, however it dies; should anything of it still run when the session
is recovered (the guardian itself killed, a kernel that never delivered the end-of-file),
:func:`stop_survivor` stops it, and recovery tells the model which happened.

The group is ours when its leader is alive with the recorded start time (a pid reused by
another process starts later), or when the leader is gone but members of the group remain
(the kernel does not hand out a pid while a process group still uses it as its id, so the
members belong to the recorded group). Nothing is done for a record of another host or
boot, whose pids mean nothing here.

Linux (``/proc``); elsewhere nothing can be told and nothing is done. Blocking (``/proc``
reads, a bounded wait for the group to empty): called from the store's recovery, in the
store's thread. Never cancellable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

STILL_RUNNING = "The command (process group {pgid}) was still running; stopped."
HAD_ENDED = "The command had ended."
_WAIT_SECONDS = 2.0
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def this_host() -> str:
    """Where this process runs: ``host/boot-id`` (a pid names a process on one boot only)."""
    boot = ""
    with contextlib.suppress(OSError), open(_BOOT_ID, encoding="ascii") as f:
        boot = f.read().strip()
    return f"{os.uname().nodename}/{boot}"  # gethostname(), without importing socket


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, start time) of a process, or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b") ", 1)[1].split()
        return fields[0].decode(), int(fields[2]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _members(pgid: int) -> list[int]:
    """The live (not zombie) processes of group ``pgid`` that this user may signal."""
    members: list[int] = []
    uid = os.getuid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[1] != pgid or stat[0] == "Z":
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid == uid:
                members.append(int(entry))
    return members


def stop_survivor(pgid: int, leader_start: int | None, host: str | None) -> str | None:
    """Stop what is left of a recorded process group; the line for the model (:data:`
    STILL_RUNNING` or :data:`HAD_ENDED`), or None when nothing can be told (another host,
    no ``/proc``)."""
    if host != this_host() or not os.path.isdir("/proc/self"):
        return None
    leader = _stat(pgid)
    if leader is not None and leader[0] != "Z" and leader[2] != leader_start:
        return HAD_ENDED  # the pid names another process now: ours, and its group, are gone
    if not _members(pgid):
        return HAD_ENDED
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + _WAIT_SECONDS
    while _members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _members(pgid):
        return (f"The command (process group {pgid}) was still running and could not be "
                "stopped; stop it by hand.")
    return STILL_RUNNING.format(pgid=pgid)
