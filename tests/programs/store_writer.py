"""A writer process for crash tests: checkpoints forever, printing ``ack N`` after each commit.

Usage: python -m tests.programs.store_writer MEMORY_DIR SESSION_ID
Each checkpoint appends two messages and sets state {"n": len(messages)} in one transaction.
"""

from __future__ import annotations

import sys

from actors.store import SessionStore


def main() -> None:
    memory_dir, session_id = sys.argv[1], sys.argv[2]
    store = SessionStore(memory_dir)
    if not store.exists(session_id):
        store.create_session(session_id, [{"role": "system", "content": "sys"}])
    messages = store.recover(session_id)
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
