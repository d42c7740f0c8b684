"""The REPL in a pseudo-terminal: the real ``harness`` (``python -m repl``) driven as a user
drives it, and what its screen shows (a pyte emulator fed the output)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pyte

from tests.support.clitools import REPO

PROMPT = "You:"
COLUMNS, LINES = 160, 40


class Terminal:
    """``harness ARGS`` (the REPL) in a pty. ``expect`` matches on the output (a failure
    shows what the terminal showed, escape codes removed); the log keeps everything;
    ``screen()`` is what a terminal shows after that output.

    With ``greeted`` (the default), the start waits for the greeting's end and the first
    prompt and knows :attr:`session_id`; without it (a picker, a start that fails), the test
    reads what comes itself (:meth:`session`, :meth:`ready`)."""

    def __init__(self, memory_dir: Path, cwd: Path, *args: str,
                 env: dict[str, str] | None = None, columns: int = COLUMNS,
                 greeted: bool = True) -> None:
        self.columns = columns
        inherited = {k: v for k, v in os.environ.items()
                     if k not in ("NO_COLOR", "PAGER", "AGENT_HARNESS_STORE")}
        env = {**inherited, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO),
               "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "test",
               "PAGER": "cat", **(env or {})}
        self.child = pexpect.spawn(sys.executable, ["-m", "repl", *args], env=env, cwd=str(cwd),
                                   encoding="utf-8", timeout=15, dimensions=(LINES, columns))
        self.log = io.StringIO()
        self.child.logfile_read = self.log
        self.session_id = ""
        if greeted:
            self.session()
            self.ready()

    def expect(self, pattern: Any, timeout: float = 15) -> re.Match[str]:
        try:
            self.child.expect(pattern, timeout=timeout)
        except pexpect.ExceptionPexpect:
            raw = self.log.getvalue()
            if os.environ.get("SCREEN_RAW"):
                print(repr(raw[-3000:]))
            tail = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)[-2500:]
            raise AssertionError(f"{pattern!r} not seen; the terminal showed:\n{tail}") from None
        match = self.child.match
        return match  # type: ignore[no-any-return]

    def expect_words(self, text: str, timeout: float = 15) -> re.Match[str]:
        """``text`` as a full-screen application draws it: its spaces may be cursor moves."""
        gap = r"(?:\s|\x1b\[\d*C)+"
        return self.expect(gap.join(re.escape(word) for word in text.split()), timeout)

    def send(self, text: str) -> None:
        self.child.send(text)

    def say(self, text: str) -> None:
        self.child.send(text + "\r")

    def session(self) -> str:
        """The id the greeting names (kept as :attr:`session_id`)."""
        self.session_id = self.expect(r"Session:\s+(\w+)").group(1)
        return self.session_id

    def ready(self) -> None:
        """The greeting (and a resume's replay, whose lines start ``You:`` too) is over:
        the prompt is up."""
        self.expect(r"Ctrl-D to exit\.")
        self.expect(PROMPT)

    def screen(self) -> list[str]:
        """The lines of the screen now (trailing spaces removed)."""
        screen = pyte.Screen(self.columns, LINES)
        pyte.Stream(screen).feed(self.log.getvalue())
        return [line.rstrip() for line in screen.display]

    def screen_text(self) -> str:
        return "\n".join(self.screen())

    def exit(self) -> int:
        self.child.sendcontrol("d")
        self.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus or 0)


def make_project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "README.md").write_text("hello")
    return path


@contextlib.contextmanager
def open_terminals() -> Iterator[list[Terminal]]:
    """The terminals a test starts, each ended at the end if still running."""
    opened: list[Terminal] = []
    try:
        yield opened
    finally:
        for terminal in opened:
            if terminal.child.isalive():
                terminal.child.terminate(force=True)


def start(terminals: list[Terminal], memory_dir: Path, project: Path, *args: str,
          env: dict[str, str] | None = None, columns: int = COLUMNS) -> Terminal:
    terminal = Terminal(memory_dir, project, *args, env=env, columns=columns)
    terminals.append(terminal)
    return terminal
