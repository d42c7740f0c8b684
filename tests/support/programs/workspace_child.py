"""A process for workspace crash tests, killed with SIGKILL by the test at a known point.

Usage: python -m tests.support.programs.workspace_child MODE PROJECT MEMORY_DIR [ARGS]

``snapshot``: takes snapshots of PROJECT forever, printing ``snap HEX`` after each; the
test changes files meanwhile and kills it at any moment.
``rewind SESSION TO [FSIZE]``: rewinds SESSION's files to its message TO through the whole
protocol (``actors.workspace.apply_rewind``); with FSIZE, no file may grow past FSIZE bytes
(``RLIMIT_FSIZE``, SIGXFSZ ignored: a write fails with EFBIG, as on a full disk). The test
stops it at a crash point (``AGENT_HARNESS_TEST_PAUSE_AT``) and kills it. Prints ``done N``
(paths changed) or ``failed ROLLED_BACK: MESSAGE``.
``look``: prints the interrupted rewind as JSON (``null``: none).
``finish`` / ``put-back``: takes the interrupted rewind up (``--finish``, ``--undo``) and
prints what it said (``none``: nothing was pending).
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from actors.core.errors import RestoreFailed
from actors.workspace import (
    Workspace,
    apply_rewind,
    finish,
    interrupted,
    open_objects,
    plan_rewind,
    put_back,
)


def main() -> None:
    mode, project, memory = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    workspace = Workspace(project, memory, open_objects(memory))
    if mode == "snapshot":
        while True:
            snap = workspace.snapshot()
            workspace.save_cache()
            print("snap", snap.root.hex(), flush=True)
    elif mode == "rewind":
        plan = plan_rewind(workspace, sys.argv[4], int(sys.argv[5]))
        if len(sys.argv) > 6:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            limit = int(sys.argv[6])
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            done = apply_rewind(workspace, plan)
        except RestoreFailed as exc:
            print(f"failed {exc.rolled_back}: {exc}", flush=True)
        else:
            print(f"done {done.changed}", flush=True)
    elif mode == "look":
        found = interrupted(workspace)
        print(json.dumps(None if found is None else {
            "recorded": found.pending.recorded, "changed": found.changed,
            "todo": [c.path for c in found.pending.standing.todo],
            "done": [c.path for c in found.pending.standing.done],
        }), flush=True)
    elif mode == "finish":
        finished = finish(workspace)
        print("none" if finished is None else str(finished), flush=True)
    else:
        back = put_back(workspace)
        print("none" if back is None else f"put back {back.changed}", flush=True)
    workspace.close()


if __name__ == "__main__":
    main()
