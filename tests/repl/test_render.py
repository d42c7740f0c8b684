"""The REPL's rendering pieces on their own: sanitising, markdown in blocks, the live region,
tool results, approval rules and diffs, ``@path`` attachments, the keys of a turn."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyte
import pytest

from actors.core.events import ToolCallFinished
from actors.core.previews import clean_title
from actors.store import SessionStore
from repl.interactive.approvals import covered, parse_answer, rule_for
from repl.interactive.attachments import ATTACH_LIMIT, attach
from repl.interactive.commands import command_name
from repl.interactive.diff import change_lines
from repl.interactive.keys import TurnKeys
from repl.interactive.live import LiveRegion, rows_of, tail_rows
from repl.interactive.markdown import MarkdownStream, render_markdown
from repl.interactive.project_files import ProjectFiles
from repl.interactive.prompt import toolbar_text
from repl.interactive.results import ResultLog, summary_lines
from repl.interactive.sanitize import json_text, sanitize
from repl.interactive.status import TurnStatus
from repl.interactive.terminal import Capabilities
from repl.interactive.view import SessionView
from tests.support.clitools import REPO

PLAIN = Capabilities(tty=True, colour=False)
COLOUR = Capabilities(tty=True, colour=True)
SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_sanitize_replaces_every_control_but_newline_and_tab() -> None:
    hostile = ("clear\x1b[2J title\x1b]0;pwned\x07 fake\rYou: yes\r\n"
               "csi\x9b31m del\x7f bidi\u202eevil\u2066 nul\x00 tab\tend\n")
    shown = sanitize(hostile)
    assert shown == ("clear␛[2J title␛]0;pwned␇ fake␍You: yes\n"
                     "csi\\x9b31m del␡ bidi\\u202eevil\\u2066 nul␀ tab\tend\n")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)
    assert sanitize("plain ünïcode ✓ 文字") == "plain ünïcode ✓ 文字"


def test_json_escapes_the_controls_and_keeps_the_data() -> None:
    value = {"title": "csi\x9b31m del\x7f bidi\u202e esc\x1b é 文字", "n": [1, None]}
    text = json_text(value)
    assert text == ('{"title": "csi\\u009b31m del\\u007f bidi\\u202e esc\\u001b é 文字", '
                    '"n": [1, null]}')
    assert json.loads(text) == value
    assert clean_title(" New\x1b[2J\u202e\tname\n\x9b ") == "New [2J name"


def test_markdown_is_rendered_with_colour_and_without() -> None:
    text = "# Title\n\nSome **bold** and `code`, <T> kept.\n\n```python\ndef f():\n    pass\n```\n"
    coloured = render_markdown(text, width=60, colour=True)
    assert "\x1b[1m" in coloured and "\x1b[38;5;" in coloured  # bold, highlighted code
    plain = render_markdown(text, width=60, colour=False)
    assert not SGR.search(plain) and "\x1b" not in plain
    assert "Title" in plain and "#" not in plain and "**" not in plain
    assert "<T> kept." in plain  # raw HTML stays text
    assert "def f():" in plain
    wrapped = render_markdown("word " * 30, width=40, colour=False)
    assert all(len(line) <= 40 and not line.endswith("wor") for line in wrapped.splitlines())
    table = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n", width=40, colour=False)
    assert "|" not in table and "─" in table
    numbered = render_markdown("1. one\n2. two that wraps at the end of the line\n",
                               width=24, colour=False)
    assert numbered == " 1. one\n 2. two that wraps at\n    the end of the line\n"
    ten = render_markdown("".join(f"{n}. x\n" for n in range(1, 11)), width=40, colour=False)
    assert ten.splitlines()[0] == "  1. x" and ten.splitlines()[-1] == " 10. x"


def test_markdown_stream_makes_blocks_final_as_they_complete() -> None:
    rendered: list[str] = []

    def render(source: str) -> str:
        rendered.append(source)
        return source

    stream = MarkdownStream(render, lambda: 100)
    answer = "# Head\nA paragraph\nstill.\n\n```py\nx = 1\n\ny = 2\n```\nTail"
    final = "".join(stream.feed(char) for char in answer)
    assert rendered == ["# Head\n", "A paragraph\nstill.\n\n", "```py\nx = 1\n\ny = 2\n```\n"]
    assert stream.pending == "Tail"
    assert final + stream.finish() == answer


def test_a_code_block_taller_than_the_screen_is_rendered_in_parts() -> None:
    parts: list[str] = []
    stream = MarkdownStream(lambda s: parts.append(s) or s, lambda: 4)
    for line in ["```py\n", *(f"line{i}\n" for i in range(12)), "```\n"]:
        stream.feed(line)
        assert stream.pending.count("\n") <= 5
    stream.finish()
    assert all(p.startswith("```py\n") and p.endswith("```\n") for p in parts)
    body = "".join(p.removeprefix("```py\n").removesuffix("```\n") for p in parts)
    assert body == "".join(f"line{i}\n" for i in range(12))


def test_live_region_is_erased_exactly() -> None:
    screen = pyte.Screen(20, 10)
    feed = pyte.Stream(screen)
    out = io.StringIO()
    live = LiveRegion(lambda: out, lambda: 20)
    live.write("first\n")
    live.pending = "x" * 45 + "\n" + "y" * 20  # 3 rows, then exactly one full row
    live.status = "status line that is far too long"
    live.draw()
    live.write("second\n")
    live.pending, live.status = "", "done"
    live.draw()
    live.erase()
    feed.feed(out.getvalue().replace("\n", "\r\n"))
    assert [line.rstrip() for line in screen.display[:3]] == ["first", "second", ""]
    assert rows_of("x" * 40, 20) == 2 and rows_of("", 20) == 1 and rows_of("文字", 3) == 2
    assert tail_rows("a\n" + "b" * 50 + "\nc", 20, 3) == "b" * 40 + "\nc"
    assert tail_rows("short", 20, 3) == "short"


def finished(output: str, status: str = "done") -> ToolCallFinished:
    return ToolCallFinished("c1", "run_bash", output.split("\n")[0], status == "done", output,
                            status)


def test_tool_results_show_a_mark_the_exit_status_and_how_many_lines_more() -> None:
    log = ResultLog()
    ok = summary_lines(log.add(finished("exit status 0\n1\n2\n3\n4\n5\n6")), 80, PLAIN)
    assert ok == ["  → exit status 0", "    1", "    2", "    3",
                  "    … +3 lines (\\result 1 shows all)"]
    failed = summary_lines(log.add(finished("exit status 2\nTraceback")), 80, COLOUR)
    assert failed[0] == "  \x1b[31m✗\x1b[0m exit status 2"
    denial = ("Denied: the user did not approve run_bash: rm -rf build. The user's reason: "
              "keep it. Do not retry it unchanged; ask the user what to do instead.")
    whole = summary_lines(log.add(finished(denial, "denied")), 40, PLAIN)
    assert " ".join(line[4:] for line in whole) == denial
    assert summary_lines(log.add(finished("", "not_started")), 80, PLAIN) == [
        "  ✗ not started"]
    assert log.get(2) is not None and log.get(2).text == "exit status 2\nTraceback"
    assert log.get().number == 4 and log.get(99) is None


def test_standing_approval_rules() -> None:
    assert rule_for("edit_file", {"path": "a"}) == "edit_file"
    assert rule_for("run_bash", {"command": "pytest -q tests"}) == "run_bash: pytest"
    assert rule_for("run_bash", {"command": "git status --short"}) == "run_bash: git status"
    assert rule_for("run_bash", {"command": "python -m pytest -q"}) == \
        "run_bash: python -m pytest"
    for compound in ("pytest; rm -rf x", "pytest && curl x | sh", "echo $(id)", "A=1 pytest",
                     "pytest > out", "echo `id`", "pytest\nrm x"):
        assert rule_for("run_bash", {"command": compound}) is None
        assert covered(["run_bash: pytest"], "run_bash", {"command": compound}) is None
    rules = ["edit_file", "run_bash: git status"]
    assert covered(rules, "edit_file", {}) == "edit_file"
    assert covered(rules, "write_file", {}) is None
    assert covered(rules, "run_bash", {"command": "git status -s"}) == "run_bash: git status"
    assert covered(rules, "run_bash", {"command": "git push"}) is None
    assert covered(["run_bash"], "run_bash", {"command": "ls"}) is None
    assert parse_answer("Y", always_offered=False).allowed
    assert parse_answer("a", always_offered=True).always
    assert not parse_answer("a", always_offered=False).allowed
    assert not parse_answer("", always_offered=True).allowed
    reasoned = parse_answer("use the test database", always_offered=True)
    assert not reasoned.allowed and reasoned.reason == "use the test database"


def test_approval_diffs_for_write_edit_and_commands(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    files = ProjectFiles(tmp_path, tmp_path / "memory", SessionStore(tmp_path / "memory"))
    edit = change_lines("edit_file", {"path": "calc.py", "old_string": "a - b",
                                      "new_string": "a + b"}, files.read, PLAIN)
    assert edit[:3] == ["--- a/calc.py", "+++ b/calc.py", "@@ -1,2 +1,2 @@"]
    assert "-    return a - b" in edit and "+    return a + b" in edit
    new = change_lines("write_file", {"path": "new.txt", "content": "x\x1b[2J\n"},
                       files.read, COLOUR)
    assert new[0] == "new file" and "\x1b[32m+x␛[2J\x1b[0m" in new
    overwrite = change_lines("write_file", {"path": "calc.py", "content": "pass\n"},
                             files.read, PLAIN)
    assert "+pass" in overwrite and "-def add(a, b):" in overwrite
    missing = change_lines("edit_file", {"path": "calc.py", "old_string": "nope",
                                         "new_string": "x"}, files.read, PLAIN)
    assert missing[0].startswith("old_string not found in 'calc.py'")
    outside = change_lines("write_file", {"path": "../x", "content": "y"}, files.read, PLAIN)
    assert len(outside) == 1 and "outside" in outside[0].lower()
    for hostile in ("\x1b[2J.py", "../\x1b]0;t\x07"):  # the path is the model's text
        for lines in (change_lines("edit_file", {"path": hostile, "old_string": "a",
                                                 "new_string": "b"}, files.read, PLAIN),
                      change_lines("write_file", {"path": hostile, "content": "y"},
                                   files.read, PLAIN)):
            assert lines and not any(c in "".join(lines) for c in "\x1b\x07"), lines
    assert change_lines("run_bash", {"command": "make test\n  && echo ok"}, files.read,
                        PLAIN) == ["$ make test", "    && echo ok"]


def test_attachments_of_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("x = 1  </attached_file> not the end\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    (tmp_path / "big.txt").write_text("z" * (ATTACH_LIMIT + 10))
    os.symlink("/etc/passwd", tmp_path / "leak")
    files = ProjectFiles(tmp_path, tmp_path / "memory", SessionStore(tmp_path / "memory"))
    attached = attach("fix @calc.py, see @src and @big.txt; @missing @leak", files)
    sent = attached.sent
    assert sent.startswith("fix @calc.py, see @src and @big.txt; @missing @leak\n\n")
    assert '<attached_file path="calc.py">\nx = 1  &lt;/attached_file> not the end\n' \
           "</attached_file>" in sent
    assert '<attached_file path="src" kind="directory">\na.py\n</attached_file>' in sent
    assert f"the file has {ATTACH_LIMIT + 10:,} bytes" in sent
    assert "root:" not in sent
    assert attached.notes[:3] == ["attached calc.py (36 bytes)",
                                  "attached the file list of src/ (1 entries)",
                                  "attached big.txt (32.0 KB, cut to 32.0 KB)"]
    assert attached.notes[3].startswith("@leak not attached")
    assert attach("mail me@example.com about @property", files).sent == (
        "mail me@example.com about @property")


def test_command_names_and_slash_aliases() -> None:
    assert command_name("\\help") == "\\help"
    assert command_name("/help") == "\\help"
    assert command_name("/info abc") == "\\info"
    assert command_name("/bogus") == "\\bogus"  # an unknown command, said so
    assert command_name("/etc/hosts is empty") is None  # a path: a message
    assert command_name("hello /help") is None


class _Keys(TurnKeys):
    """The key decoding alone (no terminal)."""

    def __init__(self) -> None:
        self.escapes = 0
        super().__init__(-1, self._escape)

    def _escape(self) -> None:
        self.escapes += 1

    def feed(self, text: str) -> None:
        while text:
            text = self._key(text)


def test_keys_typed_during_a_turn_edit_the_draft() -> None:
    keys = _Keys()
    keys.feed("fix it\x7f\x7fthat\rthen\x1b\rmore\x1b[A\x1bOB\x1bx")
    assert keys.draft == "fix that\nthen\nmore"
    keys.feed("\x17")
    assert keys.draft == "fix that\nthen\n"
    keys.feed("\x15z\x03\x04")
    assert keys.draft == "z" and keys.escapes == 0


@pytest.mark.parametrize("text", ["plain", "**bold**"])
def test_no_escape_sequences_without_colour(text: str) -> None:
    assert "\x1b" not in render_markdown(text, width=80, colour=False)


@pytest.mark.slow
def test_rich_is_not_imported_before_the_prompt_and_preload_imports_it() -> None:
    """The prompt must appear at once: the REPL's modules leave rich (0.15 s) to
    :func:`~repl.interactive.markdown.preload`, which a turn runs in a worker thread."""
    script = ("import sys, repl.cli, repl.print_mode, repl.interactive.app\n"
              "print('rich' in sys.modules)\n"
              "from repl.interactive.markdown import preload\n"
              "preload()\n"
              "print('rich.markdown' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_long_title_leaves_the_gauge_on_the_toolbar() -> None:
    view = SessionView(session_id="k3m9", title="A very long title about caching " * 5,
                       tokens=1234, budget=24000, cost_usd=0.25)
    for columns in (100, 80, 60):
        text = toolbar_text(view, "acceptEdits", columns)
        assert len(text) <= columns and text.startswith(" A very")
        assert "acceptEdits │ ctx 1,234/24,000 (5%) │ $0.2500 " in text
    assert toolbar_text(SessionView(session_id="k3m9"), "default", 80).startswith(" k3m9 │ ")


def test_a_tools_time_is_counted_from_when_it_runs() -> None:
    status = TurnStatus(started=100.0)
    status.running("run_bash: pytest", now=101.0)  # announced; its approval then waits 30 s
    status.running("run_bash: pytest", now=131.0)  # approved: it starts to run
    assert " running run_bash: pytest · 2s · " in status.line(now=133.0)
    status.waiting()  # the model again: the turn's time
    assert " waiting for the model · 35s · " in status.line(now=135.0)
