"""The file tools on real files in a temporary sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ToolFailed
from actors.tools import TOOLS, ToolContext
from actors.tools import files as file_tools
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(sandbox: Path, memory_dir: Path, session: ToolSession) -> ToolContext:
    return session.context(sandbox, memory_dir)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file in a directory next to the sandbox."""
    path = tmp_path / "elsewhere" / "secret.txt"
    path.parent.mkdir()
    path.write_text("top secret\n")
    return path


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    return await TOOLS[name].run(ctx, args)


def read_text(path: Path) -> str:
    return path.read_text()


# -- sandbox confinement ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("edit_file", {"old_string": "top", "new_string": "bottom"}),
        ("grep", {"pattern": "secret"}),
        ("glob_files", {"pattern": "*"}),
    ],
)
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
async def test_paths_outside_the_sandbox_are_refused(
    ctx: ToolContext, sandbox: Path, outside: Path, name: str, args: dict[str, Any], how: str
) -> None:
    if how == "dotdot":
        path = "../elsewhere/secret.txt" if name != "glob_files" else ".."
    elif how == "absolute":
        path = str(outside) if name != "glob_files" else str(outside.parent)
    else:
        target = outside if name != "glob_files" else outside.parent
        (sandbox / "link").symlink_to(target)
        path = "link"
    with pytest.raises(ToolFailed, match="outside the sandbox"):
        await call(ctx, name, path=path, **args)
    assert read_text(outside) == "top secret\n"


async def test_absolute_path_inside_the_sandbox_is_allowed(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.txt").write_text("hello\n")
    assert "hello" in await call(ctx, "read_file", path=str(sandbox / "a.txt"))


# -- read_file ----------------------------------------------------------------------------


async def test_read_file_numbers_lines_like_cat_n(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.txt").write_text("one\ntwo\r\nthree")
    assert await call(ctx, "read_file", path="a.txt") == (
        "     1\tone\n     2\ttwo\n     3\tthree\n"
    )


async def test_read_file_offset_and_limit(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call(ctx, "read_file", path="a.txt", offset=4, limit=2)
    assert out.startswith("     4\tline 4\n     5\tline 5\n")
    assert "line 6" not in out
    assert "offset=6" in out
    tail = await call(ctx, "read_file", path="a.txt", offset=9)
    assert tail == "     9\tline 9\n    10\tline 10\n"
    past = await call(ctx, "read_file", path="a.txt", offset=50)
    assert "has 10 lines" in past


async def test_read_file_stops_at_the_cap_and_says_where_to_go_on(
    ctx: ToolContext, sandbox: Path
) -> None:
    line = "x" * 99 + "\n"
    (sandbox / "big.txt").write_text(line * 2000)  # 200 KB
    out = await call(ctx, "read_file", path="big.txt")
    assert len(out.encode()) <= file_tools.READ_CAP_BYTES + 200
    shown = len(out.splitlines()) - 1  # the last line is the note
    assert f"read on with offset={shown + 1}" in out
    rest = await call(ctx, "read_file", path="big.txt", offset=shown + 1, limit=1)
    assert rest.startswith(f"{shown + 1:6}\t")


async def test_read_file_cuts_an_overlong_line(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "min.js").write_text("é" * 40_000 + "\nsecond\n")  # 80 KB on one line
    out = await call(ctx, "read_file", path="min.js")
    assert len(out.encode()) <= file_tools.READ_CAP_BYTES + 200
    assert "Line 1 is longer than" in out
    assert "read on with offset=2" in out


async def test_read_file_not_utf8(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    out = await call(ctx, "read_file", path="latin1.txt")
    assert "caf\ufffd" in out
    assert "not valid UTF-8" in out
    (sandbox / "utf8.txt").write_text("café\n", encoding="utf-8")
    assert "not valid UTF-8" not in await call(ctx, "read_file", path="utf8.txt")


async def test_read_file_refuses_directories_and_missing_files(
    ctx: ToolContext, sandbox: Path
) -> None:
    (sandbox / "sub").mkdir()
    with pytest.raises(ToolFailed, match="is a directory"):
        await call(ctx, "read_file", path="sub")
    with pytest.raises(ToolFailed, match=r"File not found: 'nope\.txt'"):
        await call(ctx, "read_file", path="nope.txt")


async def test_read_empty_file(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "empty").write_text("")
    assert await call(ctx, "read_file", path="empty") == "(empty file)"


# -- glob_files ---------------------------------------------------------------------------


async def test_glob_sorted_relative_and_skips_git(ctx: ToolContext, sandbox: Path) -> None:
    for rel in ["src/b.py", "src/a.py", "top.py", "src/data.txt", ".git/hooks/x.py"]:
        (sandbox / rel).parent.mkdir(parents=True, exist_ok=True)
        (sandbox / rel).write_text("")
    assert await call(ctx, "glob_files", pattern="**/*.py") == "src/a.py\nsrc/b.py\ntop.py"
    assert await call(ctx, "glob_files", pattern="*.py", path="src") == "src/a.py\nsrc/b.py"
    assert await call(ctx, "glob_files", pattern="*") == "src/\ntop.py"
    assert await call(ctx, "glob_files", pattern="*.rs") == "No files match."
    assert "x.py" in await call(ctx, "glob_files", pattern=".git/**/*.py")


async def test_glob_leaves_out_links_leading_outside(
    ctx: ToolContext, sandbox: Path, outside: Path
) -> None:
    (sandbox / "mine.txt").write_text("")
    (sandbox / "escape").symlink_to(outside.parent)
    assert await call(ctx, "glob_files", pattern="*") == "mine.txt"
    assert await call(ctx, "glob_files", pattern="escape/*") == "No files match."


async def test_glob_caps_results(ctx: ToolContext, sandbox: Path) -> None:
    for i in range(file_tools.MAX_GLOB_RESULTS + 5):
        (sandbox / f"f{i:04}.txt").write_text("")
    out = (await call(ctx, "glob_files", pattern="*.txt")).splitlines()
    assert len(out) == file_tools.MAX_GLOB_RESULTS + 1
    assert out[0] == "f0000.txt"
    assert "first 500 of 505" in out[-1]


async def test_glob_absolute_pattern_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="Invalid glob pattern"):
        await call(ctx, "glob_files", pattern="/etc/*")


# -- grep ---------------------------------------------------------------------------------


async def test_grep_reports_file_line_text(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "src").mkdir()
    (sandbox / "src" / "a.py").write_text("import os\ndef main():\n    os.exit(1)\n")
    (sandbox / "notes.md").write_text("os is an acronym\n")
    out = await call(ctx, "grep", pattern=r"\bos\b")
    assert out.splitlines() == [
        "notes.md:1: os is an acronym",
        "src/a.py:1: import os",
        "src/a.py:3:     os.exit(1)",
    ]
    assert await call(ctx, "grep", pattern="os", glob="*.py") == (
        "src/a.py:1: import os\nsrc/a.py:3:     os.exit(1)"
    )
    assert await call(ctx, "grep", pattern="def", path="src/a.py") == "src/a.py:2: def main():"
    assert await call(ctx, "grep", pattern="nothing here") == "No matches."


async def test_grep_invalid_regex(ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match=r"Invalid regular expression '\(unclosed'.*missing \)"):
        await call(ctx, "grep", pattern="(unclosed")


async def test_grep_skips_binary_files_and_git(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    (sandbox / ".git").mkdir()
    (sandbox / ".git" / "config").write_text("needle\n")
    (sandbox / "text.txt").write_text("a needle\n")
    assert await call(ctx, "grep", pattern="needle") == "text.txt:1: a needle"


async def test_grep_caps_matches(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "many.txt").write_text("hit\n" * 600)
    out = (await call(ctx, "grep", pattern="hit")).splitlines()
    assert len(out) == file_tools.MAX_GREP_MATCHES + 1
    assert out[-2] == "many.txt:500: hit"
    assert "Stopped after 500 matches" in out[-1]


# -- write_file ---------------------------------------------------------------------------


async def test_write_file_creates_parents_and_counts_bytes(ctx: ToolContext, sandbox: Path) -> None:
    out = await call(ctx, "write_file", path="new/dir/f.txt", content="héllo\n")
    assert (sandbox / "new/dir/f.txt").read_text(encoding="utf-8") == "héllo\n"
    assert "Created" in out
    assert "7 bytes" in out
    out = await call(ctx, "write_file", path="new/dir/f.txt", content="")
    assert "Overwrote" in out
    assert "0 bytes" in out
    assert (sandbox / "new/dir/f.txt").read_bytes() == b""


async def test_write_file_refuses_a_directory(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "d").mkdir()
    with pytest.raises(ToolFailed, match="is a directory"):
        await call(ctx, "write_file", path="d", content="x")


# -- edit_file ----------------------------------------------------------------------------


async def test_edit_file_replaces_the_unique_match(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.py").write_bytes(b"x = 1\r\ny = 2\r\n")
    out = await call(ctx, "edit_file", path="a.py", old_string="y = 2", new_string="y = 3")
    assert "replaced 1 occurrence" in out
    assert (sandbox / "a.py").read_bytes() == b"x = 1\r\ny = 3\r\n"  # line endings kept


async def test_edit_file_not_found(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.py").write_text("x = 1\n")
    with pytest.raises(ToolFailed, match=r"old_string not found in a\.py"):
        await call(ctx, "edit_file", path="a.py", old_string="x = 2", new_string="x = 3")
    assert (sandbox / "a.py").read_text() == "x = 1\n"


async def test_edit_file_non_unique(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "a.py").write_text("pass\npass\npass\n")
    with pytest.raises(ToolFailed, match=r"occurs 3 times in a\.py.*context"):
        await call(ctx, "edit_file", path="a.py", old_string="pass", new_string="return")
    assert (sandbox / "a.py").read_text() == "pass\npass\npass\n"


async def test_edit_file_missing_file_and_empty_old_string(ctx: ToolContext, sandbox: Path) -> None:
    with pytest.raises(ToolFailed, match="File not found"):
        await call(ctx, "edit_file", path="nope.py", old_string="a", new_string="b")
    (sandbox / "a.py").write_text("a\n")
    with pytest.raises(ToolFailed, match="must not be empty"):
        await call(ctx, "edit_file", path="a.py", old_string="", new_string="b")


async def test_edit_file_refuses_non_utf8(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "l1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolFailed, match="not valid UTF-8"):
        await call(ctx, "edit_file", path="l1.txt", old_string="caf", new_string="tea")
    assert (sandbox / "l1.txt").read_bytes() == "café\n".encode("latin-1")


async def test_glob_patterns_inside_the_tree(ctx: ToolContext, sandbox: Path) -> None:
    for rel in ["a/b/c.py", "a/d.py", "e.py", ".hidden.py"]:
        (sandbox / rel).parent.mkdir(parents=True, exist_ok=True)
        (sandbox / rel).write_text("")
    assert await call(ctx, "glob_files", pattern="a/**") == "a/\na/b/"  # directories, as pathlib
    assert await call(ctx, "glob_files", pattern="**/c.py") == "a/b/c.py"
    assert await call(ctx, "glob_files", pattern="a/*/*.py") == "a/b/c.py"
    assert await call(ctx, "glob_files", pattern="*.py") == ".hidden.py\ne.py"
    assert await call(ctx, "glob_files", pattern="./a/d.py") == "a/d.py"
    with pytest.raises(ToolFailed, match=r"'\.\.' is not allowed"):
        await call(ctx, "glob_files", pattern="../*")
    with pytest.raises(ToolFailed, match="is not a directory"):
        await call(ctx, "glob_files", pattern="*", path="e.py")


@pytest.mark.slow  # grep runs in a child process
async def test_grep_shows_a_long_line_around_the_match(ctx: ToolContext, sandbox: Path) -> None:
    (sandbox / "min.js").write_text("x" * 5000 + "NEEDLE" + "y" * 5000 + "\n")
    out = await call(ctx, "grep", pattern="NEEDLE")
    assert out.startswith("min.js:1: …x") and "NEEDLE" in out and out.endswith("…")
    assert len(out) < file_tools.MAX_GREP_LINE + 40
    (sandbox / "src").mkdir()
    (sandbox / "src" / "a.js").write_text("NEEDLE\n")
    assert await call(ctx, "grep", pattern="NEEDLE", glob="src/*.js") == "src/a.js:1: NEEDLE"
