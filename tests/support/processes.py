"""Processes as /proc shows them: the live members of a process group, the grep workers
below a process; and a pattern that keeps a grep worker busy."""

from __future__ import annotations

import os
import time
from pathlib import Path

CATASTROPHIC = "(a+)+$"  # exponential backtracking on "aaaa...b"


def live_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are still running (zombies do not count:
    orphans are reaped by init, which may be slow or absent in a container)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def wait_until_gone(pgid: int, timeout: float = 5) -> list[int]:
    """The live members of group ``pgid`` once it empties, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return live_members(pgid)


def descendants_running_grep(root: int) -> list[int]:
    """Live grep workers among the descendants of ``root``."""
    parents: dict[int, int] = {}
    workers = []
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
        if fields[0] == "Z":
            continue
        parents[int(entry)] = int(fields[1])
        if b"_grep_worker" in cmdline:
            workers.append(int(entry))

    def below_root(pid: int) -> bool:
        for _ in range(64):
            pid = parents.get(pid, 0)
            if pid == root:
                return True
            if pid <= 1:
                return False
        return False

    return [pid for pid in workers if below_root(pid)]
