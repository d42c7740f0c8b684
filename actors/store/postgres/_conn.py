"""psycopg plumbing of the PostgreSQL backend: connecting, ``?`` placeholders, error words.

The shared SQL of :mod:`actors.store._rows` uses sqlite3's ``?`` placeholders;
:class:`PgConn` is the one place that turns them into psycopg's ``%s``. Every psycopg error is
translated at one boundary, :func:`translated`, into :class:`StorageError` naming the cause in
words ("Lost the connection to the PostgreSQL session store …"), never a traceback.

Connections are opened in autocommit mode: the store writes ``BEGIN``/``COMMIT`` itself, like
the SQLite backend. Each one has ``synchronous_commit`` on (a COMMIT returns after the WAL is
flushed on the server), no idle timeouts (the lease connection sits idle for a whole run), and
server-side TCP keepalives, so the server drops, and unlocks, a holder whose machine vanished
within about a minute.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from actors.core.errors import CorruptSession, StorageError, UsageError
from actors.core.secrets import redact

# psycopg logs, at WARNING, errors it ignores while an error is already propagating (closing
# a pipeline on a lost connection); those reach the user through :func:`translated`, once.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

CONNECT_TIMEOUT_S = 10
_SESSION_SETTINGS = {
    "synchronous_commit": "on",
    "idle_in_transaction_session_timeout": "0",
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}


def display_url(url: str) -> str:
    """``postgresql://user@host:port/dbname`` of ``url``, without password or options."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://…"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"


def connect(url: str, where: str) -> psycopg.Connection[Any]:
    """An autocommit connection with the session settings above; :class:`StorageError` when
    the server cannot be reached (after at most :data:`CONNECT_TIMEOUT_S` seconds)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:  # libpq's message quotes the URL's parts, the password too
        detail = " ".join(redact(str(exc), url).split())
        raise UsageError(f"The session store URL is not valid: {detail}") from None
    extra: dict[str, Any] = {}
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    if "application_name" not in params:  # pg_stat_activity shows which process it is
        extra["application_name"] = f"agent-harness[{os.getpid()}]"
    with translated(where, connecting=True):
        conn = psycopg.connect(url, autocommit=True, **extra)
        try:
            settings = dict(_SESSION_SETTINGS)
            if conn.info.server_version >= 140000:
                settings["idle_session_timeout"] = "0"
            calls = ", ".join("set_config(%s, %s, false)" for _ in settings)
            conn.execute(f"SELECT {calls}", [v for kv in settings.items() for v in kv])
        except BaseException:
            conn.close()
            raise
    return conn


@functools.lru_cache(maxsize=1024)
def pg_sql(sql: str) -> str:
    """``sql`` with ``?`` placeholders as psycopg's ``%s`` (and literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConn:
    """A psycopg connection as the shared SQL sees it: ``execute``/``executemany`` with ``?``
    placeholders, like sqlite3's. Not thread-safe: the store uses it under its lock."""

    __slots__ = ("raw", "trace")

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self.trace: Callable[[str], object] | None = None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        if self.trace is not None:
            self.trace(sql)
        return self.raw.execute(pg_sql(sql), parameters)

    def executemany(
        self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /
    ) -> psycopg.Cursor[Any]:
        if self.trace is not None:
            self.trace(sql)
        cursor = self.raw.cursor()
        cursor.executemany(pg_sql(sql), seq_of_parameters)
        return cursor

    def set_trace_callback(self, trace: Callable[[str], object] | None) -> None:
        """Call ``trace(sql)`` for every statement, like sqlite3's (tests count them)."""
        self.trace = trace


def _cause(exc: psycopg.Error, connecting: bool) -> str:
    state = exc.sqlstate or ""
    if state == "53100":
        return "The PostgreSQL server is out of disk space"
    if state.startswith("53"):
        return "The PostgreSQL server is out of resources"
    if state == "25006":
        return "The PostgreSQL session store is read-only"
    if state == "42501":
        return "Permission denied in the PostgreSQL session store"
    if state == "57P03":
        return "The PostgreSQL server is starting up or shutting down"
    if state in ("40001", "40P01"):
        return "The PostgreSQL session store was busy (a conflicting transaction); try again"
    if connecting:
        return "Cannot connect to the PostgreSQL session store"
    if state.startswith(("08", "57P")) or isinstance(
        exc, (psycopg.OperationalError, psycopg.InterfaceError)
    ):
        return "Lost the connection to the PostgreSQL session store"
    return "PostgreSQL session store error"


@contextlib.contextmanager
def translated(
    where: str, session_id: str | None = None, *, connecting: bool = False
) -> Iterator[None]:
    """Turn psycopg errors into :class:`StorageError` naming the cause and the server.

    Damaged pages found while reading one session (SQLSTATE XX001/XX002) are reported as
    that session's damage (:class:`CorruptSession`).
    """
    try:
        yield
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if exc.sqlstate in ("XX001", "XX002") and session_id is not None:
            raise CorruptSession(session_id, detail) from exc
        raise StorageError(f"{_cause(exc, connecting)} ({where}): {detail}") from exc
