#!/usr/bin/env python
"""What hooks cost a turn: the same turn without hooks and with them, in one run.

Run from the repository root::

    python benchmarks/hooks.py             # 10 runs of each (about half a minute)
    python benchmarks/hooks.py --runs 20 --calls 20

A turn of ``--calls`` run_bash calls (``true``, one batch) and its answer, run in process by a
real supervisor against the scripted server, in dangerouslySkipPermissions mode; the figure is
the turn's wall time, median of ``--runs``. Side by side:

- **no hooks** (no settings file: nothing is spawned);
- **PreToolUse + PostToolUse** ``true`` on ``run_bash``: two hook commands per call, each a
  confined bash with its guardian, reading the event's JSON;
- **every event** ``true`` (the two above, UserPromptSubmit and Stop: two more per turn).

The per-call figure is the difference with "no hooks", divided by the calls. Each run uses a
fresh session in a temporary directory (removed at the end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.testing.settings import settings_for

TRUE = [{"hooks": [{"type": "command", "command": "true"}]}]
CASES: dict[str, dict[str, Any]] = {
    "no hooks": {},
    "PreToolUse + PostToolUse": {"PreToolUse": TRUE, "PostToolUse": TRUE},
    "every event": {"PreToolUse": TRUE, "PostToolUse": TRUE, "UserPromptSubmit": TRUE,
                    "Stop": TRUE},
}


async def one_turn(workdir: Path, calls: int, hooks: dict[str, Any]) -> float:
    """The milliseconds of one turn of ``calls`` run_bash calls with ``hooks``."""
    if hooks:
        (workdir / "settings.json").write_text(json.dumps({"hooks": hooks}))
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "true"}, id=f"c{n}")
                                for n in range(calls)]),
              Reply("done")]
    with ScriptedServer(script) as server:
        settings = settings_for(workdir, server.base_url, workspace_snapshots=False)
        store = SessionStore(settings.memory_dir)
        async with Supervisor.open(settings, store) as sup:
            start = time.perf_counter()
            result = await sup.run_turn("go")
            took = (time.perf_counter() - start) * 1000
        store.close()
    assert result.ok, result.text
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs + 1):  # run 0 warms up
            for name, hooks in CASES.items():  # interleaved: the load falls on all alike
                workdir = Path(scratch) / f"{run}-{len(times[name])}-{name.split()[0]}"
                workdir.mkdir()
                took = anyio.run(one_turn, workdir, args.calls, hooks)
                if run:
                    times[name].append(took)
    base = statistics.median(times["no hooks"])
    print(f"| a turn of {args.calls} run_bash calls (median of {args.runs}) | turn | "
          "per call, over no hooks |")
    print("|---|---:|---:|")
    for name in CASES:
        median = statistics.median(times[name])
        extra = "" if name == "no hooks" else f"{(median - base) / args.calls:+.1f} ms"
        print(f"| {name} | {median:.0f} ms | {extra} |")


if __name__ == "__main__":
    main()
