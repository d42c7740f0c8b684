"""Choosing the backend: ``open_store(memory_dir, url)``, and :func:`is_sqlite_url`.

No URL (or ``sqlite``) is the embedded SQLite store in the memory directory; a
``postgresql://`` (or ``postgres://``) URL is the shared PostgreSQL store, imported only then
(psycopg is an optional dependency). The CLI takes the URL from ``--store`` or
``$AGENT_HARNESS_STORE``; its password never reaches a message (:mod:`actors.core.secrets`).
"""

from __future__ import annotations

import os

from actors.core.errors import UsageError
from actors.core.secrets import redact
from actors.store._store import Store
from actors.store.sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_sqlite_url(url: str | None) -> bool:
    """Whether the store setting ``url`` (``--store``, ``$AGENT_HARNESS_STORE``) names the
    embedded SQLite store in the memory directory: None, empty or blank, or "sqlite".
    Anything else is a PostgreSQL URL or names no store (:func:`open_store` says which)."""
    return url is None or url.strip() in ("", "sqlite")


def open_store(
    memory_dir: str | os.PathLike[str], url: str | None = None, *, import_legacy: bool = True
) -> Store:
    """Open the store ``url`` names (SQLite in ``memory_dir`` when None, empty or "sqlite").

    Raises :class:`UsageError` for a URL of another kind or when psycopg is not installed,
    :class:`StorageError` when the database cannot be reached.
    """
    if is_sqlite_url(url):
        return SqliteStore(memory_dir, import_legacy=import_legacy)
    assert url is not None  # None is SQLite
    if url.startswith(POSTGRES_SCHEMES):
        try:
            from actors.store.postgres import PostgresStore
        except ImportError as exc:
            raise UsageError(
                f"The PostgreSQL store needs psycopg ({exc}); install it with "
                "pip install 'agent-harness[postgresql]'."
            ) from None
        return PostgresStore(url, memory_dir, import_legacy=import_legacy)
    shown = redact(url, url)  # a keyword/value string may hold password=…
    scheme = shown.split("://", 1)[0] if "://" in shown else shown[:20]
    raise UsageError(
        f"Unknown session store {scheme!r}: give a postgresql://… URL, or leave --store out "
        "for SQLite in the memory directory."
    )
