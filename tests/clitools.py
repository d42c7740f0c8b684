"""Running the real ``harness`` command in a subprocess for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
