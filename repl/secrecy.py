"""The harness's secrets out of its children's reach: the first thing the command does.

A tool's process (a run_bash command, and whatever it starts) runs as the user and is given
an environment without the harness's secrets (:mod:`actors.tools._environment`). But it could
still read them from the harness itself, through ``/proc/<harness pid>``: ``environ`` is the
environment the harness was started with (the kernel shows that memory, whatever Python's
``os.environ`` says later), ``mem`` its memory, ``fd`` its open files. :func:`hide_secrets`
(Linux; elsewhere nothing) closes both ways, once, before anything else runs:

- the values of the secret variables (:func:`actors.core.secrets.is_secret`) are overwritten
  with NUL bytes in that initial block, after each is set again (``setenv`` copies it to the
  heap), so ``os.environ``, ``getenv`` and the children of the harness see them unchanged and
  ``/proc/<harness>/environ`` shows ``OPENAI_API_KEY=`` and nothing after it;
- the process is made non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): its ``/proc`` entries
  that need ptrace access (``environ``, ``mem``, ``fd``, ``maps``...) belong to root, and no
  process of the user can attach to it or read its memory; it writes no core dump either.
  A child's ``exec`` makes the child dumpable again, so tools are not affected.

What this cannot do: a process with ``CAP_SYS_PTRACE`` (root, usually) reads any process's
memory, the key in the harness's heap included; and the harness's command line is shown to
everyone (``/proc/<pid>/cmdline``, ``ps``), which is why a password there is refused
(:func:`refuse_secret_arguments`). See docs/security.md and docs/decisions.md.
"""

from __future__ import annotations

import contextlib
import os

from actors.core.errors import UsageError
from actors.core.secrets import has_password, is_secret

PR_SET_DUMPABLE = 4
_STAT_ENV_START = 47  # env_start, env_end: fields 50 and 51 of /proc/PID/stat, counted here
# from field 3 (the state), the first after the command name's closing parenthesis

_hidden = False


def hide_secrets() -> None:
    """Blank the secret variables' values in this process's initial environment block and
    make it non-dumpable (once; Linux only). Failures are ignored: a kernel that refuses
    leaves the harness as it was, never stopped."""
    global _hidden
    if _hidden or not os.path.isdir("/proc/self"):
        return
    _hidden = True
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b") ", 1)[1].split()
        start, end = int(fields[_STAT_ENV_START]), int(fields[_STAT_ENV_START + 1])
    except (OSError, IndexError, ValueError):
        start = end = 0
    if 0 < start < end:
        _blank_secret_values(start, ctypes.string_at(start, end - start))
    with contextlib.suppress(OSError, AttributeError):  # no libc, or no prctl in it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _blank_secret_values(start: int, block: bytes) -> None:
    """Overwrite the value of each ``NAME=value`` entry of ``block`` (the memory at ``start``)
    whose name is secret, after setting the variable again so that nothing points there."""
    import ctypes

    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and value and is_secret(os.fsdecode(name)):
            key = os.fsdecode(name)
            if key in os.environ:
                os.environ[key] = os.environ[key]  # setenv: libc's copy on the heap
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1


def refuse_secret_arguments(store: str | None, base_url: str | None) -> None:
    """A password given on the command line (``--store``, ``--base-url``) is refused with a
    :class:`UsageError`: every process of the machine can read the command line."""
    shown = "can be read by every process on this machine (ps, /proc/PID/cmdline)"
    if store is not None and has_password(store):
        raise UsageError(
            f"--store: a password on the command line {shown}; give the URL in "
            "$AGENT_HARNESS_STORE instead, or keep the password in ~/.pgpass "
            "($PGPASSFILE)."
        )
    if base_url is not None and has_password(base_url):
        raise UsageError(
            f"--base-url: a password on the command line {shown}; give the URL in "
            "$OPENAI_BASE_URL instead, and the key in $OPENAI_API_KEY."
        )
