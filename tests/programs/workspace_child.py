"""A process for workspace crash tests, killed with SIGKILL by the test at a known point.

Usage: python -m tests.programs.workspace_child MODE PROJECT MEMORY_DIR [TARGET_HEX [WRITES]]

``snapshot``: takes snapshots of PROJECT forever, printing ``snap HEX`` after each; the
test changes files meanwhile and kills it at any moment.
``restore``: restores TARGET_HEX; after the journal is written and WRITES files (default 5)
have been written, prints ``halfway`` and sleeps until killed (a restore cut short).
``recover-done`` / ``recover-undone``: runs recovery, saying the rewind was (or was not)
recorded, and prints what recovery said (``none`` when there was nothing to recover).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from actors.workspace import Workspace, open_objects


def main() -> None:
    mode, project, memory = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    workspace = Workspace(project, memory, open_objects(memory))
    if mode == "snapshot":
        while True:
            snap = workspace.snapshot()
            workspace.save_cache()
            print("snap", snap.root.hex(), flush=True)
    elif mode == "restore":
        target = bytes.fromhex(sys.argv[4])
        pause_after = int(sys.argv[5]) if len(sys.argv) > 5 else 5
        written = 0
        put_file = workspace.sandbox.put_file

        def slow_put_file(path: str, data: bytes, *, executable: bool) -> Any:
            nonlocal written
            result = put_file(path, data, executable=executable)
            written += 1
            if written == pause_after:
                print("halfway", flush=True)
                time.sleep(3600)
            return result

        workspace.sandbox.put_file = slow_put_file  # type: ignore[method-assign]
        plan = workspace.plan_restore(target)
        entry, _plan = workspace.begin_restore(plan)
        workspace.finish_restore(entry)
        print("done", flush=True)
    else:
        recovered = workspace.recover(lambda entry: mode == "recover-done")
        print("none" if recovered is None else str(recovered), flush=True)
    workspace.close()


if __name__ == "__main__":
    main()
