"""The embedded SQLite store (the default): :class:`SqliteStore`, and ``--doctor``.

:mod:`actors.store.sqlite.doctor` checks and repairs this store's database; it
is SQLite's alone (PostgreSQL checks its own pages).
"""

from __future__ import annotations

from actors.store.sqlite._database import DB_NAME, DOCTOR_HINT
from actors.store.sqlite._store import SqliteStore

__all__ = ["DB_NAME", "DOCTOR_HINT", "SqliteStore"]
