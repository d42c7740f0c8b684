"""The grep tool's search, run in a process of its own so that it can always be stopped.

Python's ``re`` holds the GIL for the whole of one match, and a pattern such as ``(a+)+$`` on a
long line can take longer than the universe: in a thread of the harness it would freeze the
event loop, and Ctrl-C, Esc, SIGTERM and ``--tool-timeout`` with it. In a child process the
harness simply kills it. The child is started with ``python -I -S`` and imports only the
standard library, :mod:`actors.tools._sandbox` and :mod:`actors.core.errors` (see
:data:`BOOT`), so it starts in a few tens of milliseconds.

Protocol: one JSON request on stdin, one line (see :func:`search`), one JSON answer on
stdout: ``{"text": ...}`` or ``{"error": ...}`` (a one-line message for the model).

The worker dies with the harness, however the harness dies (kill -9 included): its stdin is
its lifeline. After the request the harness writes nothing more and keeps the pipe open until
it has the answer; the worker arms the pipe (``O_ASYNC``, owner itself), so when the pipe's
last writer goes (the harness is done, cancelled or dead) the kernel sends the worker
``SIGIO``, whose default action ends it, even in the middle of a match that holds the GIL
(:func:`tie_to_the_harness`). No thread, no extra process; see docs/decisions.md for why not
``PR_SET_PDEATHSIG`` or run_bash's guardian.

What it reads is bounded: only regular files (FIFOs, devices and sockets are skipped, and a
FIFO swapped in is opened non-blocking and refused), at most :data:`PIECE_BYTES` of a line at a
time (a longer line is searched piece by piece, never held whole), files sniffed as binary
are skipped, and the search stops after ``max_matches`` matches.
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import re
import signal
import stat
import sys

from actors.core.errors import ToolFailed
from actors.tools._sandbox import Sandbox

PIECE_BYTES = 1024 * 1024  # a line is searched in pieces of at most this many bytes
BINARY_SNIFF_BYTES = 8192
READ_BUFFER = 64 * 1024

BOOT = """\
import sys, types
sys.path.insert(0, {root!r})
tools = types.ModuleType("actors.tools")
tools.__path__ = [{tools!r}]
sys.modules["actors.tools"] = tools
from actors.tools._grep_worker import main
main()
"""


def boot_code() -> str:
    """The ``python -c`` code that runs :func:`main` without importing the tools package."""
    tools = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(tools))
    return BOOT.format(root=root, tools=tools)


def _glob_matches(relative: str, name_glob: str) -> bool:
    """Whether ``relative`` matches ``name_glob`` from the right, component by component (as
    ``PurePosixPath.match``, without importing pathlib at every start of the worker)."""
    path = relative.split("/")
    pattern = [part for part in name_glob.split("/") if part]
    if not pattern or len(pattern) > len(path):
        return False
    tail = path[len(path) - len(pattern) :]
    return all(fnmatch.fnmatchcase(name, part) for name, part in zip(tail, pattern, strict=True))


class _Search:
    def __init__(self, regex: re.Pattern[str], max_matches: int, max_line: int) -> None:
        self.regex = regex
        self.max_matches = max_matches
        self.max_line = max_line
        self.hits: list[str] = []
        self.long_lines = 0
        self.not_regular = 0

    @property
    def full(self) -> bool:
        return len(self.hits) > self.max_matches

    def show(self, line: str, match: re.Match[str]) -> str:
        if len(line) <= self.max_line:
            return line
        start = max(0, match.start() - self.max_line // 3)
        text = line[start : start + self.max_line]
        return ("…" if start else "") + text + ("…" if start + self.max_line < len(line) else "")

    def file(self, fd: int, shown: str) -> None:
        with os.fdopen(fd, "rb", buffering=READ_BUFFER, closefd=False) as handle:
            if b"\0" in handle.read(BINARY_SNIFF_BYTES):
                return  # binary
            handle.seek(0)
            number = 0
            complete = True  # the previous piece ended its line
            reported = 0  # the last line number reported (a long line matches once)
            while not self.full:
                raw = handle.readline(PIECE_BYTES)
                if not raw:
                    return
                if complete:
                    number += 1
                was_complete, complete = complete, raw.endswith(b"\n")
                if was_complete and not complete and len(raw) >= PIECE_BYTES:
                    self.long_lines += 1  # the first piece of a long line
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                match = self.regex.search(line)
                if match and reported != number:
                    reported = number
                    self.hits.append(f"{shown}:{number}: {self.show(line, match)}")


def search(request: dict[str, object]) -> str:
    """The grep result for ``request``: root, protected (directories), path, pattern, glob
    (or None), max_matches, max_line. (No ``typing`` import: it costs the worker 3 ms.)"""
    pattern, path, root = str(request["pattern"]), str(request["path"]), str(request["root"])
    glob, protected = request.get("glob"), request["protected"]
    name_glob = str(glob) if glob else None
    try:
        regex = re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        raise ToolFailed(f"Invalid regular expression {pattern!r}: {exc}.") from None
    max_matches = int(str(request["max_matches"]))
    sandbox = Sandbox(root, [str(p) for p in protected] if isinstance(protected, list) else [])
    found = _Search(regex, max_matches, int(str(request["max_line"])))
    with sandbox.walk(path) as place:
        if place.st is None:
            raise ToolFailed(f"No such file or directory: '{path}'.")
        if not stat.S_ISDIR(place.st.st_mode):
            fd, _st = sandbox.open_entry(place.parent_fd, place.name, path)
            try:
                found.file(fd, place.relative)
            finally:
                os.close(fd)
            return _answer(found)
    with sandbox.open_directory(path) as (dir_fd, place):
        entries = sandbox.entries(dir_fd, place.parts, skip=lambda parts: parts[-1] == ".git")
        for parent_fd, name, parts, entry in entries:
            if not entry.is_file(follow_symlinks=False):
                if not (entry.is_dir(follow_symlinks=False) or entry.is_symlink()):
                    found.not_regular += 1
                continue
            relative = "/".join(parts)
            if name_glob and not _glob_matches(relative, name_glob):
                continue
            try:
                fd, _st = sandbox.open_entry(parent_fd, name, relative)
            except (OSError, ToolFailed):
                continue  # unreadable, vanished or swapped: skipped like a binary file
            try:
                found.file(fd, relative)
            except OSError:
                pass
            finally:
                os.close(fd)
            if found.full:
                break
    return _answer(found)


def _answer(found: _Search) -> str:
    notes = []
    if found.long_lines:
        notes.append(
            f"[{found.long_lines} line(s) longer than {PIECE_BYTES // (1024 * 1024)} MB were "
            "searched piece by piece; a match across two pieces may be missed.]"
        )
    if found.not_regular:
        notes.append(
            f"[Skipped {found.not_regular} entries that are not regular files "
            "(FIFOs, sockets, devices).]"
        )
    if found.full:
        text = "\n".join(found.hits[: found.max_matches]) + (
            f"\n[Stopped after {found.max_matches} matches; narrow the pattern, path or glob.]"
        )
    else:
        text = "\n".join(found.hits) if found.hits else "No matches."
    return "\n".join([text, *notes])


def tie_to_the_harness(lifeline: int = 0) -> None:
    """End this process when the last writer of the pipe ``lifeline`` closes it (at once if
    it already has): ``SIGIO`` on the pipe's hang-up, with its default action (terminate),
    which needs no Python code to run. Nothing may be written to the pipe after this."""
    signal.signal(signal.SIGIO, signal.SIG_DFL)  # an ignored SIGIO would be inherited
    fcntl.fcntl(lifeline, fcntl.F_SETOWN, os.getpid())
    flags = fcntl.fcntl(lifeline, fcntl.F_GETFL)
    fcntl.fcntl(lifeline, fcntl.F_SETFL, flags | os.O_ASYNC | os.O_NONBLOCK)
    try:
        if not os.read(lifeline, 1):  # end-of-file: the harness went before the pipe was armed
            os._exit(1)
    except BlockingIOError:
        pass  # the harness holds the pipe open: armed


def main() -> None:
    """Answer one request from stdin on stdout (see the module doc)."""
    try:
        line = sys.stdin.buffer.readline()
        tie_to_the_harness()
        request = json.loads(line)
        answer = {"text": search(request)}
    except ToolFailed as exc:
        answer = {"error": str(exc)}
    except OSError as exc:
        answer = {"error": f"Cannot search: {exc.strerror or exc}."}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
