"""Holds a session's lease until stdin closes: python -m tests.programs.lease_holder DIR ID"""

from __future__ import annotations

import sys

from actors.store import SessionStore


def main() -> None:
    store = SessionStore(sys.argv[1])
    with store.lease(sys.argv[2]):
        print("held", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
