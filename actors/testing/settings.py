"""Settings of a harness run against a scripted server, for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.core.config import Mode, Settings


def settings_for(workdir: Path, base_url: str, **overrides: Any) -> Settings:
    """Settings with the project at ``workdir/project`` (created) and the memory directory at
    ``workdir/memory``, talking to ``base_url``, asking no approvals, with generous timeouts;
    ``overrides`` replace any field."""
    sandbox = workdir / "project"
    sandbox.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {
        "memory_dir": workdir / "memory",
        "sandbox_dir": sandbox.resolve(),
        "base_url": base_url,
        "api_key": "test",
        "mode": Mode.SKIP_PERMISSIONS,
        "llm_timeout": 20.0,
        "tool_timeout": 20.0,
    }
    values.update(overrides)
    return Settings(**values)
