"""Running the real ``harness`` command in a subprocess for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def harness(
    *args: str,
    memory_dir: Path,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m repl ARGS`` with its own memory dir; never raises on a bad status."""
    full_env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir),
                "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "repl", *args],
        cwd=cwd or REPO, env=full_env, input=input, capture_output=True, text=True,
        timeout=timeout,
    )


def stopped_at(point: str, *args: str, memory_dir: Path, cwd: Path) -> subprocess.Popen[str]:
    """``python -m repl ARGS`` started with the crash point ``point``
    (``actors.workspace._crashpoints``); answered once it says it is there (it blocks then:
    the caller kills it, or signals it for a ``NAME#N~`` point)."""
    from actors.workspace._crashpoints import ENV
    from tests.support.children import READ_TIMEOUT, read_line, rest_of

    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir),
           "PYTHONPATH": str(REPO), ENV: point}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repl", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + READ_TIMEOUT
    said = []
    while True:
        line = read_line(proc.stderr, max(deadline - time.monotonic(), 0.1))
        if not line:
            raise AssertionError(f"it ended before {point}: {''.join(said)}{rest_of(proc)}")
        if line == f"at point {point.partition('#')[0]}\n":
            return proc
        said.append(line)


def killed_at(point: str, *args: str, memory_dir: Path, cwd: Path) -> None:
    """``python -m repl ARGS`` killed (SIGKILL) at the crash point ``point``."""
    with stopped_at(point, *args, memory_dir=memory_dir, cwd=cwd) as proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
