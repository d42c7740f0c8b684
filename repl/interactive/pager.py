"""Showing a long text whole: through a pager when it is taller than the screen.

The pager is ``$PAGER`` (as a shell would split it), else ``less -R`` (keeps the colours;
``q`` quits). Text that fits the screen, output that is not a terminal, or a pager that
cannot be started: the text is printed. The text is sanitised by the caller. The pager runs
in a worker thread between prompts (the terminal is the pager's until it exits); cancelling
the wait leaves it to the user to quit it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import anyio

from repl.interactive.terminal import size

DEFAULT_PAGER = ["less", "-R"]


def _command() -> list[str]:
    configured = os.environ.get("PAGER", "").strip()
    if configured:
        try:
            return shlex.split(configured)
        except ValueError:
            pass
    return DEFAULT_PAGER


def _page(text: str) -> bool:
    """Run the pager on ``text``; False if it could not be started."""
    try:
        subprocess.run(_command(), input=text.encode("utf-8", errors="replace"), check=False)
    except OSError:
        return False
    return True


async def show_long(text: str) -> None:
    """Show ``text`` (ending with a newline) whole, paged when taller than the screen."""
    if not text.endswith("\n"):
        text += "\n"
    if sys.stdout.isatty() and text.count("\n") > size().lines - 2 \
            and await anyio.to_thread.run_sync(_page, text):
        return
    sys.stdout.write(text)
    sys.stdout.flush()
