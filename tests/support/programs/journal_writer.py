"""A writer process for the journal's crash tests: appends forever, as the supervisor does
(``Store.append`` under the session's lease), printing ``ack N`` after each commit.

Usage: python -m tests.support.programs.journal_writer MEMORY_DIR SESSION_ID EVERY
Each append adds two messages and sets state {"n": len(messages)}. The journal's entries
are applied every EVERY appends (0: never, so every one is left in the journal when the
process is killed), as the checkpoint writer applies them between writes.
"""

from __future__ import annotations

import sys

from actors.store import SessionStore


def main() -> None:
    memory_dir, session_id, every = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SessionStore(memory_dir)
    if not store.exists(session_id):
        store.create_session(session_id, [{"role": "system", "content": "sys"}])
    payload = "x" * 1500
    with store.lease(session_id):
        n = len(store.recover(session_id))
        k = 0
        while True:
            new = [{"role": "user", "content": f"msg {n} {payload}"},
                   {"role": "assistant", "content": f"msg {n + 1} {payload}"}]
            store.append(session_id, new, at=n, state={"n": n + 2})
            n += 2
            print(f"ack {n}", flush=True)
            k += 1
            if every and k % every == 0:
                store.apply_journal()


if __name__ == "__main__":
    main()
