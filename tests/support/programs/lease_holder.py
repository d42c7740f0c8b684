"""Holds a session's lease until stdin closes: python -m tests.support.programs.lease_holder DIR ID

The store is the one $AGENT_HARNESS_STORE names (SQLite in DIR when unset)."""

from __future__ import annotations

import os
import sys

from actors.core.config import STORE_ENV
from actors.store import open_store


def main() -> None:
    store = open_store(sys.argv[1], os.environ.get(STORE_ENV))
    with store.lease(sys.argv[2]):
        print("held", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
