"""Reading from child processes with a timeout: a child that hangs fails the test with what
it printed, instead of blocking the run."""

from __future__ import annotations

import subprocess
import threading
from typing import IO

READ_TIMEOUT = 30.0


def read_line(stream: IO[str], timeout: float = READ_TIMEOUT) -> str:
    """The next line from a child's pipe ("" at its end); AssertionError after ``timeout``."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():  # the thread ends when the child is killed and the pipe closes
        raise AssertionError(f"the child printed no line within {timeout:g} s")
    return lines[0]


def rest_of(proc: subprocess.Popen[str], timeout: float = READ_TIMEOUT) -> str:
    """Everything the child still prints on stderr (for a failure message); killed if it
    has not ended within ``timeout``."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=timeout)
    return err or ""
