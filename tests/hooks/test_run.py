"""One hook command run confined (actors/hooks/_run.py): its stdin, stdout and stderr apart,
bounded, its exit code; a hook that reads nothing or floods its output is not a problem;
its timeout kills its process group. Real bash processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.hooks import HookCommand, Ran, run_command
from actors.hooks._run import MAX_OUTPUT_BYTES
from tests.support.runtime import pid_alive

pytestmark = pytest.mark.anyio


async def run(tmp_path: Path, command: str, payload: bytes = b"{}", seconds: float = 20
              ) -> Ran:
    return await run_command(HookCommand(command, seconds), payload, cwd=tmp_path,
                             extra_env={"HARNESS_PROJECT_DIR": str(tmp_path)})


async def test_stdin_stdout_stderr_and_the_exit_code(tmp_path: Path) -> None:
    ran = await run(tmp_path, 'read -r line; echo "got $line"; echo oops >&2; exit 3',
                    b'{"a": 1}')
    assert (ran.exit_code, ran.stdout, ran.stderr, ran.timed_out) == (
        3, 'got {"a": 1}\n', "oops\n", False)


async def test_a_hook_that_reads_nothing_and_a_flood_of_output(tmp_path: Path) -> None:
    payload = json.dumps({"tool_input": {"content": "x" * 4_000_000}}).encode()
    ran = await run(tmp_path, "head -c 5000000 /dev/zero | tr '\\0' a; exit 0", payload)
    assert ran.exit_code == 0
    assert len(ran.stdout) == MAX_OUTPUT_BYTES + len("\n[... output cut]")
    assert ran.stdout.endswith("\n[... output cut]")


async def test_the_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    ran = await run(tmp_path, f"sleep 300 & echo $$ $! > {pids}; sleep 300", seconds=0.3)
    assert (ran.exit_code, ran.timed_out) == (None, True)
    assert not [pid for pid in map(int, pids.read_text().split()) if pid_alive(pid)]


async def test_what_a_hook_leaves_running_is_stopped_when_it_exits(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    ran = await run(tmp_path, f"sleep 300 & echo $! > {pids}; exit 0")
    assert ran.exit_code == 0
    assert not pid_alive(int(pids.read_text()))


async def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    ran = await run(tmp_path / "gone", "true")
    assert ran.exit_code is None and ran.error.startswith("Cannot start bash")
