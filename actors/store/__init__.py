"""Durable sessions: ``from actors.store import SessionStore``.

The store is synchronous (usable from scripts); the async actors call it through a worker
thread. See docs/storage.md for the schema and why a checkpoint is crash-safe.
"""

from actors.store._records import FORMAT_VERSION, STATE_DEFAULTS, timestamp, to_markdown
from actors.store._sqlite import ImportResult, SessionInfo, SessionStore

__all__ = [
    "FORMAT_VERSION",
    "STATE_DEFAULTS",
    "ImportResult",
    "SessionInfo",
    "SessionStore",
    "timestamp",
    "to_markdown",
]
