"""The shared PostgreSQL store: :class:`PostgresStore` (needs psycopg 3, the ``postgresql``
extra). Imported only when a ``postgresql://`` URL is opened."""

from __future__ import annotations

from actors.store.postgres._store import PostgresStore

__all__ = ["PostgresStore"]
