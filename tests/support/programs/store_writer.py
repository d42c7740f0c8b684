"""A writer process for crash tests: checkpoints forever, printing ``ack N`` after each commit.

Usage: python -m tests.support.programs.store_writer MEMORY_DIR SESSION_ID
Each checkpoint appends two messages and sets state {"n": len(messages)} in one transaction.
The store is the one $AGENT_HARNESS_STORE names (SQLite in MEMORY_DIR when unset).
"""

from __future__ import annotations

import os
import sys
import time

from actors.core.config import STORE_ENV
from actors.core.errors import SessionLocked
from actors.store import open_store


def main() -> None:
    memory_dir, session_id = sys.argv[1], sys.argv[2]
    store = open_store(memory_dir, os.environ.get(STORE_ENV))
    if not store.exists(session_id):
        store.create_session(session_id, [{"role": "system", "content": "sys"}])
    deadline = time.monotonic() + 10
    while True:  # PostgreSQL frees a killed writer's lock when the server notices: soon
        try:
            messages = store.recover(session_id)
            break
        except SessionLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    payload = "x" * 2000
    while True:
        n = len(messages)
        messages = [
            *messages,
            {"role": "user", "content": f"msg {n} {payload}"},
            {"role": "assistant", "content": f"msg {n + 1} {payload}"},
        ]
        store.checkpoint(session_id, messages, state={"n": len(messages)})
        print(f"ack {len(messages)}", flush=True)


if __name__ == "__main__":
    main()
