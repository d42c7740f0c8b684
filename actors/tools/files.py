"""File tools: read_file, glob_files, grep, write_file, edit_file.

Every path goes through :meth:`ToolContext.resolve`, so nothing outside the sandbox is read or
written (symlinks pointing outside included). The blocking file I/O runs in a worker thread
(``anyio.to_thread.run_sync``). Cancellation: reads and writes of one file run to their end in
the thread (they are bounded); the directory walks of glob_files and grep check for
cancellation as they go (``anyio.from_thread.check_cancelled``) and stop promptly.
"""

from __future__ import annotations

import fnmatch
import os
import re
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from actors.core.errors import ToolFailed
from actors.tools._base import Permission, Tool, ToolContext

# read_file stops at this many UTF-8 bytes, under the executor's 32 KB output cap, and says
# where to read on (rather than letting the executor cut the middle out).
READ_CAP_BYTES = 30 * 1024
MAX_GLOB_RESULTS = 500
MAX_GREP_MATCHES = 500
MAX_GREP_LINE = 300  # a matching line longer than this is shown cut
BINARY_SNIFF_BYTES = 8192


def _os_error(path: str, exc: OSError) -> ToolFailed:
    return ToolFailed(f"Cannot access '{path}': {exc.strerror or exc}.")


def _relative(root: Path, path: Path) -> str:
    return "." if path == root else path.relative_to(root).as_posix()


# -- read_file ----------------------------------------------------------------------------


def _read_lines(target: Path, shown: str, offset: int, limit: int | None) -> str:
    if target.is_dir():
        raise ToolFailed(f"'{shown}' is a directory, not a file; use glob_files to list it.")
    if not target.exists():
        raise ToolFailed(f"File not found: '{shown}'.")
    if not target.is_file():
        raise ToolFailed(f"'{shown}' is not a regular file.")
    out: list[str] = []
    size = 0
    total = 0  # lines seen so far
    not_utf8 = False
    more = False  # stopped before the end of the file
    cut_line = None  # a line too long to show whole
    with target.open("rb") as handle:
        for total, raw in enumerate(handle, start=1):
            if total < offset:
                continue
            if (limit is not None and total >= offset + limit) or size >= READ_CAP_BYTES:
                more = True
                break
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                not_utf8 = True
                text = raw.decode("utf-8", errors="replace")
            line = f"{total:6}\t{text.removesuffix(chr(10)).removesuffix(chr(13))}\n"
            line_size = len(line.encode("utf-8", errors="replace"))
            if out and size + line_size > READ_CAP_BYTES:
                more = True
                break
            if line_size > READ_CAP_BYTES:
                cut = line.encode("utf-8", errors="replace")[:READ_CAP_BYTES]
                line, cut_line = cut.decode("utf-8", errors="ignore") + "\n", total
                line_size = READ_CAP_BYTES
            out.append(line)
            size += line_size
    if not out:
        if total == 0:
            return "(empty file)"
        return f"(the file has {total} lines; offset {offset} is past its end)"
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
    target = ctx.resolve(shown)
    offset = args.get("offset", 1)
    limit = args.get("limit")
    try:
        return await anyio.to_thread.run_sync(_read_lines, target, shown, offset, limit)
    except OSError as exc:
        raise _os_error(shown, exc) from None


# -- glob_files ---------------------------------------------------------------------------


def _glob(root: Path, base: Path, pattern: str) -> str:
    if not base.is_dir():
        raise ToolFailed(f"'{_relative(root, base)}' is not a directory.")
    include_git = ".git" in pattern
    found: list[str] = []
    try:
        for count, match in enumerate(base.glob(pattern)):
            if count % 500 == 0:
                anyio.from_thread.check_cancelled()
            real = Path(os.path.realpath(match))
            if real != root and root not in real.parents:
                continue  # through a symlink that leads outside the sandbox
            shown = os.path.relpath(match, root)
            if not include_git and ".git" in PurePosixPath(shown).parts:
                continue
            found.append(shown + ("/" if match.is_dir() else ""))
    except (NotImplementedError, ValueError) as exc:
        raise ToolFailed(f"Invalid glob pattern '{pattern}': {exc}.") from None
    if not found:
        return "No files match."
    found.sort()
    if len(found) > MAX_GLOB_RESULTS:
        return "\n".join(found[:MAX_GLOB_RESULTS]) + (
            f"\n[Showing the first {MAX_GLOB_RESULTS} of {len(found)} matches; "
            "use a narrower pattern or path.]"
        )
    return "\n".join(found)


async def glob_files(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Sorted paths (relative to the sandbox) matching a glob pattern under ``path``."""
    base = ctx.resolve(args.get("path", "."))
    root = ctx.resolve(".")
    try:
        return await anyio.to_thread.run_sync(_glob, root, base, args["pattern"])
    except OSError as exc:
        raise _os_error(args.get("path", "."), exc) from None


# -- grep ---------------------------------------------------------------------------------


def _files_under(root: Path, base: Path, name_glob: str | None) -> list[Path]:
    """Files to search: ``base`` itself, or every file below it (not in .git, no symlinked dirs)."""
    if base.is_file():
        return [base]
    if not base.is_dir():
        raise ToolFailed(f"No such file or directory: '{_relative(root, base)}'.")
    files = []
    for directory, subdirs, names in os.walk(base):
        anyio.from_thread.check_cancelled()
        subdirs[:] = sorted(d for d in subdirs if d != ".git")
        for name in sorted(names):
            path = Path(directory, name)
            if name_glob and not _glob_matches(_relative(root, path), name_glob):
                continue
            if path.is_symlink():
                real = Path(os.path.realpath(path))
                if root not in real.parents:
                    continue
            files.append(path)
    return files


def _glob_matches(relative: str, name_glob: str) -> bool:
    if "/" in name_glob:
        return PurePosixPath(relative).match(name_glob)
    return fnmatch.fnmatch(PurePosixPath(relative).name, name_glob)


def _search_file(path: Path, regex: re.Pattern[str], shown: str, budget: int) -> list[str]:
    hits: list[str] = []
    try:
        with path.open("rb") as handle:
            if b"\0" in handle.read(BINARY_SNIFF_BYTES):
                return hits  # binary
            handle.seek(0)
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if regex.search(line):
                    if len(line) > MAX_GREP_LINE:
                        line = line[:MAX_GREP_LINE] + "…"
                    hits.append(f"{shown}:{number}: {line}")
                    if len(hits) >= budget:
                        break
    except OSError:
        pass  # unreadable (permissions, vanished): skipped like a binary file
    return hits


def _grep(root: Path, base: Path, regex: re.Pattern[str], name_glob: str | None) -> str:
    matches: list[str] = []
    for path in _files_under(root, base, name_glob):
        anyio.from_thread.check_cancelled()
        budget = MAX_GREP_MATCHES + 1 - len(matches)
        matches.extend(_search_file(path, regex, _relative(root, path), budget))
        if len(matches) > MAX_GREP_MATCHES:
            return "\n".join(matches[:MAX_GREP_MATCHES]) + (
                f"\n[Stopped after {MAX_GREP_MATCHES} matches; narrow the pattern, path or glob.]"
            )
    return "\n".join(matches) if matches else "No matches."


async def grep(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Lines matching a Python regex in the files under ``path``, as ``file:line: text``."""
    try:
        regex = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolFailed(f"Invalid regular expression {args['pattern']!r}: {exc}.") from None
    base = ctx.resolve(args.get("path", "."))
    root = ctx.resolve(".")
    try:
        return await anyio.to_thread.run_sync(_grep, root, base, regex, args.get("glob"))
    except OSError as exc:
        raise _os_error(args.get("path", "."), exc) from None


# -- write_file and edit_file -------------------------------------------------------------


def _write(target: Path, shown: str, content: str) -> str:
    if target.is_dir():
        raise ToolFailed(f"'{shown}' is a directory; give a file path.")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailed(f"The content cannot be encoded as UTF-8: {exc}.") from None
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} '{shown}': wrote {len(data)} bytes."


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Write ``content`` to a file (replacing it), creating parent directories."""
    shown = args["path"]
    target = ctx.resolve(shown)
    try:
        return await anyio.to_thread.run_sync(_write, target, shown, args["content"])
    except OSError as exc:
        raise _os_error(shown, exc) from None


def _edit(target: Path, shown: str, old: str, new: str) -> str:
    if not old:
        raise ToolFailed("old_string must not be empty; use write_file to create a file.")
    if old == new:
        raise ToolFailed("old_string and new_string are identical; nothing to change.")
    if target.is_dir():
        raise ToolFailed(f"'{shown}' is a directory, not a file.")
    if not target.is_file():
        raise ToolFailed(f"File not found: '{shown}'.")
    try:
        text = target.read_bytes().decode("utf-8")
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
    target.write_bytes(text.replace(old, new, 1).encode("utf-8"))
    return f"Edited {shown}: replaced 1 occurrence."


async def edit_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replace the one exact occurrence of ``old_string`` in a file with ``new_string``."""
    shown = args["path"]
    target = ctx.resolve(shown)
    run = partial(_edit, target, shown, args["old_string"], args["new_string"])
    try:
        return await anyio.to_thread.run_sync(run)
    except OSError as exc:
        raise _os_error(shown, exc) from None
    except UnicodeEncodeError as exc:
        raise ToolFailed(f"new_string cannot be encoded as UTF-8: {exc}.") from None


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
)

FILE_TOOLS = (READ_FILE, GLOB_FILES, GREP, WRITE_FILE, EDIT_FILE)
