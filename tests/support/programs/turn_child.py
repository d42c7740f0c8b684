"""A harness turn killed with SIGKILL by the test while a read runs.

Usage: python -m tests.support.programs.turn_child WORKDIR BASE_URL BACKEND

Registers :data:`WAIT_TOOL` (a read: ``Permission.READ``, never asks), opens a new session
(printing ``session ID``) and runs one turn; the scripted model asks for the tool, which
prints ``running`` and waits until the process is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.settings import settings_for
from actors.tools import TOOLS, Permission, Tool, ToolContext


async def _wait_here(ctx: ToolContext, args: dict[str, Any]) -> str:
    print("running", flush=True)
    await anyio.sleep_forever()
    return "never"


WAIT_TOOL = Tool("wait_here", "Waits (a test tool).", {"type": "object", "properties": {}},
                 _wait_here, permission=Permission.READ)


async def _turn(workdir: Path, base_url: str) -> None:
    settings = settings_for(workdir, base_url)
    with SessionStore(settings.memory_dir) as store:
        async with Supervisor.open(settings, store) as supervisor:
            print("session", supervisor.session_id, flush=True)
            await supervisor.run_turn("Wait here")


def main() -> None:
    workdir, base_url, backend = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    TOOLS[WAIT_TOOL.name] = WAIT_TOOL
    anyio.run(_turn, workdir, base_url, backend=backend)


if __name__ == "__main__":
    main()
