"""File tools: read_file, glob_files, grep, write_file, edit_file.

Every path is walked by file descriptor from the sandbox directory (:mod:`._sandbox`): nothing
outside the sandbox is read or written, whatever symlinks say or become during the call, and
the harness's own state directory is neither read nor written. Writes replace the file
atomically (a hard link to a file elsewhere keeps its old content). Writes to files that run
commands by themselves (``.git/``, shell rc files, ``.envrc``, ...; :mod:`._autorun`) and to
files with several hard links are asked for in every mode but dangerouslySkipPermissions.

Cancellation: Ctrl-C, Esc, SIGTERM and ``--tool-timeout`` stop every file tool at once.
read_file, glob_files, write_file and edit_file run in a worker thread that a cancellation
abandons (:mod:`._threads`); the thread stops at its next check, and every read is bounded
(:data:`READ_CAP_BYTES` shown, a line read in bounded pieces, at most :data:`MAX_SCAN_BYTES`
scanned). grep matches in a child process (:mod:`._grep_worker`) that is killed on
cancellation, because a regular-expression match cannot be interrupted in a thread, and that
dies with the harness however the harness dies (its stdin is its lifeline). Non-regular
files (FIFOs, devices, sockets) are never opened for reading.
"""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import IO, Any, TypeVar

import anyio
import anyio.abc

from actors.core.errors import ToolFailed
from actors.tools._autorun import autorun_reason
from actors.tools._base import Permission, Tool, ToolContext
from actors.tools._environment import tool_environment
from actors.tools._grep_worker import boot_code
from actors.tools._sandbox import Sandbox, Written
from actors.tools._threads import Stop, run_stoppable

T = TypeVar("T")

# read_file stops at this many UTF-8 bytes, under the executor's 32 KB output cap, and says
# where to read on (rather than letting the executor cut the middle out).
READ_CAP_BYTES = 30 * 1024
MAX_SCAN_BYTES = 256 * 1024 * 1024  # read_file reads at most this much looking for its offset
SKIP_PIECE_BYTES = 1024 * 1024  # lines skipped on the way to the offset are read in pieces
MAX_EDIT_BYTES = 16 * 1024 * 1024
MAX_GLOB_RESULTS = 500
MAX_GLOB_VISITS = 500_000  # entries a glob looks at before it stops with a note
MAX_GREP_MATCHES = 500
MAX_GREP_LINE = 300  # a matching line longer than this is shown cut, around the match
MAX_WORKER_OUTPUT = 4 * 1024 * 1024
KILL_WAIT_SECONDS = 2.0  # the grep worker is SIGKILLed; reaping it takes milliseconds


def _os_error(path: str, exc: OSError) -> ToolFailed:
    return ToolFailed(f"Cannot access '{path}': {exc.strerror or exc}.")


async def _confined(ctx: ToolContext, shown: str, work: Callable[[Sandbox, Stop], T]) -> T:
    """``work(sandbox, stop)`` in an abandonable worker thread, OS errors made one line."""

    def run(stop: Stop) -> T:
        return work(ctx.confined(), stop)

    try:
        return await run_stoppable(run)
    except OSError as exc:
        raise _os_error(shown, exc) from None


# -- read_file ----------------------------------------------------------------------------


def _read_lines(sandbox: Sandbox, stop: Stop, shown: str, offset: int, limit: int | None) -> str:
    with (
        sandbox.open_file(shown) as (fd, _st, _place),
        os.fdopen(fd, "rb", buffering=64 * 1024, closefd=False) as handle,
    ):
        return _numbered(handle, stop, offset, limit)


def _numbered(handle: IO[bytes], stop: Stop, offset: int, limit: int | None) -> str:
    out: list[str] = []
    size = 0
    number = 0  # lines seen so far
    scanned = 0  # bytes read
    not_utf8 = False
    more = False  # stopped before the end of the file
    cut_line = None  # a line too long to show whole
    gave_up = False  # MAX_SCAN_BYTES read before reaching the offset
    while True:
        stop.check()
        if number + 1 >= offset and (
            (limit is not None and number + 1 >= offset + limit) or size >= READ_CAP_BYTES
        ):
            more = bool(handle.peek(1))  # type: ignore[attr-defined]
            break
        skipping = number + 1 < offset
        raw = handle.readline(SKIP_PIECE_BYTES if skipping else READ_CAP_BYTES + 1)
        if not raw:
            break
        scanned += len(raw)
        number += 1
        complete = raw.endswith(b"\n")
        if skipping:
            while not complete and scanned <= MAX_SCAN_BYTES:  # the rest of a long line
                stop.check()
                raw = handle.readline(SKIP_PIECE_BYTES)
                scanned += len(raw)
                complete = not raw or raw.endswith(b"\n")
            if scanned > MAX_SCAN_BYTES:
                gave_up = True
                break
            continue
        if complete:
            text = raw.decode("utf-8", errors="replace")
        else:  # cut (or the last line, without a newline): keep a split character whole
            text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(raw)
        if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
            not_utf8 = True
        line = f"{number:6}\t{text.removesuffix(chr(10)).removesuffix(chr(13))}\n"
        data = line.encode("utf-8", errors="replace")
        if out and size + len(data) > READ_CAP_BYTES:
            more = True
            break
        if len(data) > READ_CAP_BYTES or (not complete and len(raw) > READ_CAP_BYTES):
            line = data[:READ_CAP_BYTES].decode("utf-8", errors="ignore").rstrip("\n") + "\n"
            out.append(line)
            cut_line = number
            more = True  # the rest of the line, and maybe more lines: read on after it
            break
        out.append(line)
        size += len(data)
    if gave_up:
        return (
            f"(read {MAX_SCAN_BYTES // (1024 * 1024)} MB, {number} lines, without reaching "
            f"line {offset}; use grep to find what you are looking for)"
        )
    if not out:
        if number == 0:
            return "(empty file)"
        return f"(the file has {number} lines; offset {offset} is past its end)"
    last = offset + len(out) - 1
    notes = []
    if not_utf8:
        notes.append("[Note: the file is not valid UTF-8; undecodable bytes are shown as U+FFFD.]")
    if cut_line is not None:
        notes.append(f"[Line {cut_line} is longer than {READ_CAP_BYTES} bytes and was cut.]")
    if more:
        notes.append(f"[Showing lines {offset}-{last}; read on with offset={last + 1}.]")
    return "".join(out) + "\n".join(notes)


async def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Numbered lines of a file (``cat -n`` style), from ``offset`` for ``limit`` lines."""
    shown = args["path"]
    offset, limit = args.get("offset", 1), args.get("limit")
    return await _confined(
        ctx, shown, lambda sandbox, stop: _read_lines(sandbox, stop, shown, offset, limit)
    )


# -- glob_files ---------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _compile_glob(pattern: str) -> tuple[re.Pattern[str] | None, ...]:
    """One compiled part per path component; None for ``**``."""
    if pattern.startswith("/") or pattern.startswith("~"):
        raise ToolFailed(
            f"Invalid glob pattern '{pattern}': it must be relative; give the directory as path."
        )
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if not parts:
        raise ToolFailed(f"Invalid glob pattern '{pattern}': it matches nothing.")
    if ".." in parts:
        raise ToolFailed(f"Invalid glob pattern '{pattern}': '..' is not allowed; use path.")
    return tuple(None if part == "**" else re.compile(fnmatch.translate(part)) for part in parts)


def _glob_match(pattern: tuple[re.Pattern[str] | None, ...], path: list[str]) -> bool:
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key not in memo:
            if i == len(pattern):
                result = j == len(path)
            elif pattern[i] is None:  # "**": zero or more components
                result = match(i + 1, j) or (j < len(path) and match(i, j + 1))
            else:
                part = pattern[i]
                result = (
                    j < len(path) and part is not None and part.match(path[j]) is not None
                    and match(i + 1, j + 1)
                )
            memo[key] = result
        return memo[key]

    return match(0, 0)


def _glob(sandbox: Sandbox, stop: Stop, base: str, pattern: str) -> str:
    compiled = _compile_glob(pattern)
    include_git = ".git" in pattern.lower()
    dirs_only = compiled[-1] is None  # a trailing "**" matches directories, as in pathlib
    depth = 0 if None in compiled else len(compiled)
    found: list[str] = []
    visited = 0
    stopped = False
    with sandbox.open_directory(base) as (dir_fd, place):
        prefix = place.parts

        def skip(parts: list[str]) -> bool:
            return not include_git and parts[-1].lower() == ".git"

        entries = sandbox.entries(dir_fd, prefix, skip=skip, check=stop.check,
                                  **({"max_depth": depth} if depth else {}))
        for _parent, name, parts, entry in entries:
            visited += 1
            if visited > MAX_GLOB_VISITS:
                stopped = True
                break
            if not include_git and name.lower() == ".git":
                continue
            relative = parts[len(prefix) :]
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.is_symlink():
                is_dir_target = _link_kind(sandbox, "/".join(parts))
                if is_dir_target is None:
                    continue  # leads outside the sandbox (or nowhere)
                is_dir = is_dir_target
            if dirs_only and not is_dir:
                continue
            if _glob_match(compiled, relative):
                found.append("/".join(parts) + ("/" if is_dir else ""))
    if not found:
        return "No files match." + (_visits_note() if stopped else "")
    found.sort()
    note = _visits_note() if stopped else ""
    if len(found) > MAX_GLOB_RESULTS:
        return "\n".join(found[:MAX_GLOB_RESULTS]) + (
            f"\n[Showing the first {MAX_GLOB_RESULTS} of {len(found)} matches; "
            "use a narrower pattern or path.]"
        ) + note
    return "\n".join(found) + note


def _visits_note() -> str:
    return f"\n[Stopped after looking at {MAX_GLOB_VISITS} entries; give a narrower path.]"


def _link_kind(sandbox: Sandbox, relative: str) -> bool | None:
    """Whether the symlink at ``relative`` leads to a directory (None: outside, or dangling)."""
    try:
        with sandbox.walk(relative) as place:
            if place.st is None:
                return None
            return stat.S_ISDIR(place.st.st_mode)
    except (ToolFailed, OSError):
        return None


async def glob_files(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Sorted paths (relative to the sandbox) matching a glob pattern under ``path``."""
    base = args.get("path", ".")
    pattern = args["pattern"]
    return await _confined(ctx, base, lambda sandbox, stop: _glob(sandbox, stop, base, pattern))


# -- grep ---------------------------------------------------------------------------------


async def grep(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Lines matching a Python regex in the files under ``path``, as ``file:line: text``.

    The search runs in a child process (see the module doc); cancellation kills it.
    """
    request = {
        "root": os.fspath(ctx.sandbox),
        "protected": [os.fspath(p) for p in ctx.protected_dirs()],
        "path": args.get("path", "."),
        "pattern": args["pattern"],
        "glob": args.get("glob"),
        "max_matches": MAX_GREP_MATCHES,
        "max_line": MAX_GREP_LINE,
    }
    answer = await _run_worker(json.dumps(request))
    if "error" in answer:
        raise ToolFailed(str(answer["error"]))
    return str(answer["text"])


async def _run_worker(request: str) -> dict[str, Any]:
    try:
        process = await anyio.open_process(
            [sys.executable, "-I", "-S", "-c", boot_code()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd="/", env=tool_environment(),
        )
    except OSError as exc:
        raise ToolFailed(f"Cannot start the search: {exc.strerror or exc}.") from None
    out = bytearray()
    err = bytearray()
    try:
        assert process.stdin is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(_collect, process.stdout, out, MAX_WORKER_OUTPUT)
            tg.start_soon(_collect, process.stderr, err, 64 * 1024)
            # One line, then nothing: the worker's stdin stays open as its lifeline until it
            # has answered (closing it, or dying, ends the worker; see _grep_worker).
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.send(request.encode("utf-8", errors="surrogateescape")
                                         + b"\n")
            code = await process.wait()
    finally:
        with anyio.move_on_after(KILL_WAIT_SECONDS, shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()
    try:
        answer = json.loads(bytes(out))
        if not isinstance(answer, dict):
            raise ValueError(answer)
        return answer
    except ValueError:
        lines = bytes(err).decode("utf-8", errors="replace").strip().splitlines()
        detail = lines[-1] if lines else f"exit status {code}"
        raise ToolFailed(f"The search failed ({detail[:300]}).") from None


async def _collect(stream: anyio.abc.ByteReceiveStream | None, into: bytearray, cap: int) -> None:
    if stream is None:
        return
    try:
        async for chunk in stream:
            if len(into) < cap:
                into.extend(chunk[: cap - len(into)])
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


# -- write_file and edit_file -------------------------------------------------------------


def _links_note(written: Written) -> str:
    if written.links > 1:
        return (
            f" It had {written.links} hard links: only this name has the new content; the "
            "other names keep the old file."
        )
    return ""


def _write(sandbox: Sandbox, shown: str, content: str) -> str:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailed(f"The content cannot be encoded as UTF-8: {exc}.") from None
    written = sandbox.write(shown, data)
    verb = "Created" if written.created else "Overwrote"
    return f"{verb} '{shown}': wrote {written.size} bytes." + _links_note(written)


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Write ``content`` to a file (replacing it atomically), creating parent directories."""
    shown = args["path"]
    content = args["content"]
    return await _confined(ctx, shown, lambda sandbox, _stop: _write(sandbox, shown, content))


def _edit(sandbox: Sandbox, shown: str, old: str, new: str) -> str:
    if not old:
        raise ToolFailed("old_string must not be empty; use write_file to create a file.")
    if old == new:
        raise ToolFailed("old_string and new_string are identical; nothing to change.")

    def change(data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailed(f"'{shown}' is not valid UTF-8; edit_file cannot edit it.") from None
        count = text.count(old)
        if count == 0:
            raise ToolFailed(f"old_string not found in {shown}.")
        if count > 1:
            raise ToolFailed(
                f"old_string occurs {count} times in {shown}; include more surrounding context "
                "so that it matches exactly one place."
            )
        try:
            return text.replace(old, new, 1).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolFailed(f"new_string cannot be encoded as UTF-8: {exc}.") from None

    written = sandbox.edit(shown, change, MAX_EDIT_BYTES)
    return f"Edited {shown}: replaced 1 occurrence." + _links_note(written)


async def edit_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replace the one exact occurrence of ``old_string`` in a file with ``new_string``."""
    shown = args["path"]
    old, new = args["old_string"], args["new_string"]
    return await _confined(ctx, shown, lambda sandbox, _stop: _edit(sandbox, shown, old, new))


def _write_reason(sandbox: Sandbox, shown: str) -> str | None:
    """Why a write to ``shown`` must be asked in every mode (None: the mode decides).

    Refuses (ToolFailed) what would be refused anyway: outside paths, the harness's state.
    """
    as_written = sandbox.components(shown)
    with sandbox.walk(shown, missing_ok=True) as place:
        reason = autorun_reason([*place.parts, *place.missing], as_written)
        if reason:
            return reason
        st = place.st
        if st is not None:
            sandbox.check_not_protected_file(st, shown)
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            return (
                f"'{shown}' has {st.st_nlink} hard links (the other names may be outside the "
                "project); the write replaces this name only, the others keep the old content"
            )
    return None


async def _ask_before_writing(ctx: ToolContext, args: dict[str, Any]) -> str | None:
    shown = args["path"]
    return await _confined(ctx, shown, lambda sandbox, _stop: _write_reason(sandbox, shown))


# -- the tools ----------------------------------------------------------------------------

_PATH = {"type": "string", "description": "File path, relative to the project directory."}

READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file. Returns its lines numbered like `cat -n` (number, tab, line). "
        "Arguments: path (relative to the project directory); offset (optional, 1-based line "
        "to start at); limit (optional, number of lines). Without them the whole file is "
        f"returned, up to about {READ_CAP_BYTES // 1024} KB, with a note telling the offset to "
        "continue from. Bytes that are not valid UTF-8 are shown as U+FFFD, with a note."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
        },
        "required": ["path"],
    },
    run=read_file,
    permission=Permission.READ,
    brief="Read a text file, lines numbered; offset and limit pick lines (from 1).",
)

GLOB_FILES = Tool(
    name="glob_files",
    description=(
        "List files and directories whose path matches a glob pattern, e.g. '**/*.py' "
        "(recursive) or 'src/*.ts'. Arguments: pattern; path (optional directory to search "
        "from, default the project directory). Returns sorted paths relative to the project "
        f"directory (directories end with '/'), at most {MAX_GLOB_RESULTS}. Entries inside "
        ".git are left out unless the pattern names .git."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. '**/*.py'."},
            "path": {"type": "string", "description": "Directory to search from (default '.')."},
        },
        "required": ["pattern"],
    },
    run=glob_files,
    permission=Permission.READ,
    brief="List the paths matching a glob pattern such as '**/*.py'.",
)

GREP = Tool(
    name="grep",
    description=(
        "Search file contents with a Python regular expression. Arguments: pattern (Python "
        "`re` syntax, matched against each line); path (optional file or directory, default "
        "the project directory); glob (optional filter on file names, e.g. '*.py', or on "
        "paths if it contains '/', e.g. 'src/*.js'). Returns matching lines as "
        f"'file:line: text', at most {MAX_GREP_MATCHES}. Binary files and .git directories "
        "are skipped."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Python regular expression."},
            "path": {"type": "string", "description": "File or directory (default '.')."},
            "glob": {"type": "string", "description": "Only files matching this, e.g. '*.py'."},
        },
        "required": ["pattern"],
    },
    run=grep,
    permission=Permission.READ,
    brief="Search files for a Python regex; glob filters names. Gives 'file:line: text'.",
)

WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create or overwrite a file with the given content (UTF-8), creating missing parent "
        "directories. Arguments: path (relative to the project directory); content (the whole "
        "new file). Returns how many bytes were written. To change part of an existing file, "
        "prefer edit_file."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
    },
    run=write_file,
    permission=Permission.EDIT,
    always_ask=_ask_before_writing,
    brief="Create or overwrite a file with its whole content.",
)

EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace one exact piece of text in a file. Arguments: path; old_string (text to "
        "replace, matched exactly, including whitespace and indentation; it must occur "
        "exactly once in the file, so include enough surrounding lines to make it unique); "
        "new_string (its replacement). Fails without changing anything if old_string is not "
        "found or occurs more than once. Read the file first."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "old_string": {"type": "string", "description": "Exact text to replace (unique)."},
            "new_string": {"type": "string", "description": "Replacement text."},
        },
        "required": ["path", "old_string", "new_string"],
    },
    run=edit_file,
    permission=Permission.EDIT,
    always_ask=_ask_before_writing,
    brief="Replace old_string, which must occur exactly once, with new_string.",
)

FILE_TOOLS = (READ_FILE, GLOB_FILES, GREP, WRITE_FILE, EDIT_FILE)
