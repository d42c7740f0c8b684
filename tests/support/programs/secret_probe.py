"""What a tool's process can read of the harness's secrets: run by a run_bash command.

``python -I secret_probe.py SECRETS_FILE`` (one secret a line, never printed) walks up its
ancestors (the harness, and whatever started it) and tries every way it knows to reach a
secret from there: each ancestor's command line and initial environment
(``/proc/PID/cmdline``, ``/proc/PID/environ``), the harness's memory (``/proc/PID/mem``, region
by region as ``maps`` lists them) and its open files (``/proc/PID/fd``), and its own
environment and inherited file descriptors. It prints one JSON report of what it could read
and where it found a secret; only names and outcomes, never a secret.
"""

from __future__ import annotations

import json
import os
import sys


def read(path: str) -> bytes | str:
    """The file's bytes, or the error's name (``PermissionError``...)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        return type(exc).__name__


def found_in(data: bytes | str, secrets: list[bytes]) -> bool:
    return isinstance(data, bytes) and any(secret in data for secret in secrets)


def scan_memory(pid: int, secrets: list[bytes]) -> str:
    """"found", "not found", or why the memory could not be read."""
    maps = read(f"/proc/{pid}/maps")
    if isinstance(maps, str):
        return maps
    try:
        mem = open(f"/proc/{pid}/mem", "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        return type(exc).__name__
    with mem:
        for line in maps.decode().splitlines():
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if not fields[1].startswith("r") or (len(fields) > 5 and fields[5] == "[vvar]"):
                continue
            try:
                mem.seek(start)
                if found_in(mem.read(end - start), secrets):
                    return "found"
            except (OSError, OverflowError, ValueError):
                continue
    return "not found"


def has_cap_sys_ptrace() -> bool:
    for line in read("/proc/self/status").decode().splitlines():  # type: ignore[union-attr]
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 19 & 1)
    return False


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        secrets = [line for line in f.read().splitlines() if line]
    own_fds = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}")}
    report: dict[str, object] = {
        "own_environment_has_secret": any(
            found_in(f"{k}={v}".encode(), secrets) for k, v in os.environ.items()),
        "own_fds": own_fds,
        "cap_sys_ptrace": has_cap_sys_ptrace(),
        "ancestors": [],
    }
    pid = os.getppid()
    while pid > 1:
        stat = read(f"/proc/{pid}/stat")
        if isinstance(stat, str):
            break
        cmdline, environ = read(f"/proc/{pid}/cmdline"), read(f"/proc/{pid}/environ")
        entry: dict[str, object] = {
            "pid": pid,
            "cmdline": cmdline.replace(b"\0", b" ").decode(errors="replace")
            if isinstance(cmdline, bytes) else cmdline,
            "cmdline_has_secret": found_in(cmdline, secrets),
            "environ": "read" if isinstance(environ, bytes) else environ,
            "environ_has_secret": found_in(environ, secrets),
        }
        is_harness = isinstance(cmdline, bytes) and b"repl" in cmdline.split(b"\0")[1:3]
        if is_harness:
            entry["memory"] = scan_memory(pid, secrets)
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError as exc:
                entry["fds"] = type(exc).__name__
            else:
                entry["fds"] = "listed"
                entry["fd_has_secret"] = any(
                    found_in(read(f"/proc/{pid}/fd/{fd}"), secrets) for fd in fds
                    if os.path.isfile(f"/proc/{pid}/fd/{fd}"))
        report["ancestors"].append(entry)  # type: ignore[attr-defined]
        pid = int(stat.rsplit(b") ", 1)[1].split()[1])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
